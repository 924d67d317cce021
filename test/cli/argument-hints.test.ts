/**
 * Errors that help (issue 27): a mistyped option is named with the closest option the command
 * has, a value that is not a whole number names its option, an unknown session id lists the near
 * ids of the store, and a rule id appears once per line —
 * for people on stderr and in the `--json` UsageError document alike (exit 2).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { closest, distance, explainNumber, unknownOption } from "../../src/programs/cli/ArgumentHints.js"
import { buildBundle, json, removeBundle, runCli } from "./helpers.js"

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-hints-"))
  bundle = await buildBundle("hints-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

describe("argument hints", () => {
  it("edit distance counts a transposition as one edit", () => {
    assert.strictEqual(distance("--sesion", "--session"), 1)
    assert.strictEqual(distance("--sotre", "--store"), 1)
    assert.strictEqual(distance("--json", "--json"), 0)
    assert.strictEqual(closest("--sesion", ["--json", "--store", "--session"]), "--session")
    assert.isUndefined(closest("--frobnicate", ["--json", "--store", "--session"]))
  })

  it("names the first option the command does not have, and the close one", () => {
    const known = ["--json", "--store", "--session"]
    assert.include(unknownOption(["--sesion", "x"], known)!, "unknown option --sesion; did you mean --session?")
    assert.include(unknownOption(["--sotre=a.db"], known)!, "unknown option --sotre; did you mean --store?")
    assert.include(unknownOption(["--frobnicate"], known)!, "unknown option --frobnicate (options: --json, --store, --session)")
    assert.isUndefined(unknownOption(["--store", "a.db", "--json", "--help"], known))
    assert.isUndefined(unknownOption(["--", "--sesion"], known), "after -- nothing is an option")
  })

  it("says which option wanted a whole number", () => {
    assert.strictEqual(explainNumber("'abc' is not a integer", ["--at", "abc"]), "--at takes a whole number (0, 1, 2, …), not 'abc'")
    assert.strictEqual(explainNumber("'x' is not a integer", ["--tail=x"]), "--tail takes a whole number (0, 1, 2, …), not 'x'")
    assert.strictEqual(explainNumber("something else", []), "something else")
  })

  it("session-log: a mistyped option, a bad number and a rule id, for people and in --json", { timeout: 600_000 }, async () => {
    const typo = await runCli(bundle, ["verify", "--sesion", "s1", "--store", "x.db"], dir)
    assert.strictEqual(typo.code, 2)
    assert.include(typo.stderr, "unknown option --sesion; did you mean --session?")
    const typoJson = await runCli(bundle, ["verify", "--json", "--sesion", "s1"], dir)
    assert.strictEqual(typoJson.code, 2)
    assert.include(json(typoJson).error.message, "did you mean --session?")
    assert.strictEqual(json(typoJson).error._tag, "UsageError")

    const number = await runCli(bundle, ["request", "--store", "x.db", "--session", "s", "--at", "abc"], dir)
    assert.strictEqual(number.code, 2)
    assert.include(number.stderr, "--at takes a whole number")
    assert.notInclude(number.stderr, "is not a integer")
    const numberJson = await runCli(bundle, ["request", "--json", "--store", "x.db", "--session", "s", "--at", "abc"], dir)
    assert.include(json(numberJson).error.message, "--at takes a whole number")

    const store = path.join(dir, "store")
    fs.mkdirSync(store)
    for (const id of ["demo-session", "demo-session-2", "other"]) {
      fs.writeFileSync(path.join(store, `${id}.jsonl`), [
        { type: "session", version: 1, id, createdAt: 0 },
        { type: "turn/start", seq: 0, time: 0, data: { turn: 1 } },
        { type: "turn/end", seq: 1, time: 0, data: { turn: 1, reason: { kind: "completed" } } }
      ].map((l) => JSON.stringify(l) + "\n").join(""))
    }
    const near = await runCli(bundle, ["show", "--store", "jsonl:" + store, "--session", "demo-sesion"], dir)
    assert.strictEqual(near.code, 2)
    assert.include(near.stderr, 'did you mean "demo-session" or "demo-session-2"?')
    const nearJson = await runCli(bundle, ["verify", "--json", "--store", "jsonl:" + store, "--session", "demo-sesion"], dir)
    assert.strictEqual(nearJson.code, 2)
    assert.include(json(nearJson).error.message, 'did you mean "demo-session"')
    const far = await runCli(bundle, ["show", "--store", "jsonl:" + store, "--session", "zzzzzz"], dir)
    assert.notInclude(far.stderr, "did you mean")
    const missing = await runCli(bundle, ["show", "--store", "jsonl:" + dir, "--session", "nope"], dir)
    assert.strictEqual(missing.code, 2)
    const line = missing.stderr.split("\n").find((l) => l.includes("SessionNotFound"))!
    assert.strictEqual(line.match(/L11/g)?.length, 1, line)
  })
})
