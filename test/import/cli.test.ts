/**
 * `session-log import --from claude-code|codex` as people run it (the bundled CLI in child
 * processes): the per-file report for people and in `--json`, exit codes, re-import, `--force`
 * only with `--from`, `verify` on every imported session (many.test.ts: a folder of 1,000).
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildBundle, json, removeBundle, runCli } from "../cli/helpers.js"
import { fixtures } from "./helpers.js"

const SESSION = "7f3c2a10-4b5e-4c1d-9a8e-2f6b1c0d9e11"
const MAIN = `claude-code:${SESSION}`
const project = `${fixtures}/claude-code/project`
const codexTree = `${fixtures}/codex/sessions`

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-import-"))
  bundle = await buildBundle("import-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

const cli = (...args: Array<string>) => runCli(bundle, args, dir)

describe("session-log import --from", () => {
  it("claude-code: a report per file in --json, every session verifies, re-import writes nothing", async () => {
    const store = path.join(dir, "claude.db")
    const first = await cli("import", "--from", "claude-code", "--store", store, "--json", project)
    assert.strictEqual(first.code, 0, first.stderr)
    const doc = json(first)
    assert.deepStrictEqual(doc.files.map((f: any) => path.relative(project, f.file)), [
      `${SESSION}.jsonl`,
      `${SESSION}/subagents/agent-a1b2c3d4.jsonl`
    ])
    assert.deepStrictEqual(doc.files[0].records, { read: 28, mapped: 19, kept: 9, refused: 0 })
    assert.deepStrictEqual(doc.files.flatMap((f: any) => f.sessions.map((s: any) => [s.id, s.status])), [
      [MAIN, "imported"],
      [`${MAIN}/sidechain-sc1`, "imported"],
      [`${MAIN}/agent-a1b2c3d4`, "imported"]
    ])
    const verified = await cli("verify", "--store", store, "--json")
    assert.strictEqual(verified.code, 0, verified.stdout)
    assert.deepStrictEqual(json(verified).map((r: any) => [r.id, r.ok]), [
      [MAIN, true],
      [`${MAIN}/sidechain-sc1`, true],
      [`${MAIN}/agent-a1b2c3d4`, true]
    ])
    const messages = await cli("messages", "--store", store, "--session", MAIN, "--json")
    assert.strictEqual(messages.code, 0, messages.stderr)
    assert.strictEqual(json(messages).at(-1).content[0].text, "src holds one file, main.ts.")
    const again = await cli("import", "--from", "claude-code", "--store", store, project)
    assert.strictEqual(again.code, 0, again.stderr)
    assert.include(again.stdout, `already imported ${MAIN} `)
    assert.include(again.stdout, "done 2 files, 0 sessions written")
  })

  it("people's report names what was kept aside and refused", async () => {
    const store = path.join(dir, "people.db")
    const big = path.join(dir, "long-line.jsonl")
    fs.writeFileSync(
      big,
      fs.readFileSync(`${project}/${SESSION}.jsonl`, "utf8").replace(SESSION, "other") + "\u00ff".repeat(10) + "\n"
    )
    const r = await cli("import", "--from", "claude-code", "--store", store, `${project}/${SESSION}.jsonl`)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, "28 records, 19 mapped, 9 kept as source records, 0 refused")
    assert.include(r.stdout, "kept aside: file-history-snapshot 1, duplicate 1")
    assert.include(r.stdout, `imported ${MAIN} (`)
    assert.include(r.stdout, "3 tool calls, 3 results")
  })

  it("control characters of a transcript never reach the terminal", async () => {
    const store = path.join(dir, "hostile.db")
    const file = path.join(dir, "hostile.jsonl")
    const evil = "\u001b]0;owned\u0007\u001b[2J"
    fs.writeFileSync(
      file,
      [
        JSON.stringify({ parentUuid: null, sessionId: `s${evil}`, type: "user", uuid: "u1", message: { role: "user", content: "hi" } }),
        JSON.stringify({ type: `t${evil}`, uuid: "x1", parentUuid: "u1" })
      ].join("\n") + "\n"
    )
    const r = await cli("import", "--from", "claude-code", "--store", store, file)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.notInclude(r.stdout, "\u001b")
    assert.notInclude(r.stdout, "\u0007")
    assert.include(r.stdout, "imported claude-code:s\ufffd]0;owned\ufffd\ufffd[2J")
    // the id itself is stored as written
    const listed = await cli("list", "--store", store, "--json")
    assert.strictEqual(json(listed)[0].id, `claude-code:s${evil}`)
  })

  it("codex: a date tree imports in one command", async () => {
    const store = path.join(dir, "codex.db")
    const r = await cli("import", "--from", "codex", "--store", store, "--json", codexTree)
    assert.strictEqual(r.code, 0, r.stderr)
    const doc = json(r)
    assert.strictEqual(doc.files.length, 1)
    assert.strictEqual(doc.files[0].format, "codex")
    assert.deepStrictEqual(doc.files[0].sessions.map((s: any) => s.status), ["imported"])
    const verified = await cli("verify", "--store", store, "--session", "codex:019a4b2c-7d8e-7f00-a1b2-c3d4e5f60718")
    assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
  })

  it("--force without --from is a usage error and writes nothing", async () => {
    const store = path.join(dir, "force.db")
    const r = await cli("import", "--force", "--store", store, "--json", path.join(dir, "x.jsonl"))
    assert.strictEqual(r.code, 2)
    assert.strictEqual(json(r).error._tag, "UsageError")
    assert.isFalse(fs.existsSync(store))
  })
})
