/**
 * What people reach for next when inspecting sessions (issue 14): `show` filters (`--type`,
 * `--turn`, `--from`/`--to`, `--tail`) in `--json` and people's output, `list` with last activity,
 * message count, first-message preview and the parent of a fork, and the one-line summary after a
 * store-wide `verify`. Observed through the binary: stdout, stderr and exit codes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { assistantLine, buildBundle, closedTurnLog, eventLine, json, line, removeBundle, type Run, runCli, userLine } from "./helpers.js"

// generous limits: these tests spawn many processes on a possibly loaded machine; nothing is timed
const SLOW = { timeout: 600_000 }

let dir: string
let bundle: string
let file: string

const cli = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir)

const ev = eventLine
const user = userLine
const assistant = assistantLine

/** Two closed turns: the first with a tool call and its result, the second a plain answer. */
const twoTurns = (id: string, firstPrompt = "list the files") =>
  [
    line({ type: "session", version: 1, id, createdAt: 1 }),
    ev(0, "turn/start", { turn: 1 }),
    ev(1, "step/start", { turn: 1, step: 1 }),
    user(2, "u1", firstPrompt),
    assistant(3, 1, "a1", [{ type: "tool-call", id: "c1", name: "ls", arguments: "{}" }]),
    ev(4, "tool/call", { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{}" }),
    ev(5, "tool/result", {
      turn: 1,
      step: 1,
      message: {
        id: "r1",
        role: "user",
        content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "a b" }] }],
        source: { kind: "tool", callId: "c1" }
      }
    }, { sourceEventSeqs: [4], surfaceOp: "append" }),
    ev(6, "step/end", { turn: 1, step: 1 }),
    ev(7, "turn/end", { turn: 1, reason: { kind: "completed" } }),
    ev(8, "turn/start", { turn: 2 }),
    ev(9, "step/start", { turn: 2, step: 1 }),
    user(10, "u2", "and the tests?"),
    assistant(11, 2, "a2", [{ type: "text", text: "there are none" }]),
    ev(12, "step/end", { turn: 2, step: 1 }),
    ev(13, "turn/end", { turn: 2, reason: { kind: "completed" } })
  ].join("\n") + "\n"

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-inspect-"))
  bundle = await buildBundle("inspect-test")
  file = path.join(dir, "two.jsonl")
  fs.writeFileSync(file, twoTurns("two"))
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** The seqs `show --json` prints for a filter. */
const shown = async (...filter: ReadonlyArray<string>) => {
  const r = await cli(["show", "--json", ...filter, file])
  assert.strictEqual(r.code, 0, `${filter.join(" ")}: ${r.stdout}${r.stderr}`)
  return json(r).map((e: { seq: number }) => e.seq)
}

/** The seqs of people's `show` table for a filter. */
const shownToPeople = async (...filter: ReadonlyArray<string>) => {
  const r = await cli(["show", ...filter, file])
  assert.strictEqual(r.code, 0, r.stderr)
  const [head, ...rows] = r.stdout.trimEnd().split("\n")
  assert.match(head, /^SEQ\s+TIME\s+TYPE\s+SURFACE\s+SUMMARY$/)
  return rows.map((row) => Number(row.split(/\s+/)[0]))
}

describe("show filters", () => {
  it("the log is valid and unfiltered show prints all of it", SLOW, async () => {
    const v = await cli(["verify", "--json", file])
    assert.deepStrictEqual(json(v), { ok: true, events: 14, surface: [2, 3, 5, 10, 11] })
    assert.deepStrictEqual(await shown(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
  })

  it("--type: exact types and families, repeated or as a comma list", SLOW, async () => {
    assert.deepStrictEqual(await shown("--type", "user/message"), [2, 10])
    assert.deepStrictEqual(await shown("--type", "tool/call,tool/result"), [4, 5])
    assert.deepStrictEqual(await shown("--type", "tool"), [4, 5])
    assert.deepStrictEqual(await shown("--type", "turn", "--type", "assistant/message"), [0, 3, 7, 8, 11, 13])
    assert.deepStrictEqual(await shownToPeople("--type", "tool"), [4, 5])
  })

  it("--turn: from the turn's turn/start through its turn/end", SLOW, async () => {
    assert.deepStrictEqual(await shown("--turn", "1"), [0, 1, 2, 3, 4, 5, 6, 7])
    assert.deepStrictEqual(await shown("--turn", "2"), [8, 9, 10, 11, 12, 13])
    assert.deepStrictEqual(await shownToPeople("--turn", "2"), [8, 9, 10, 11, 12, 13])
    assert.deepStrictEqual(await shown("--turn", "3"), [])
  })

  it("show --tail n reads the log once (one open of the file fewer than a whole show, which validates first)", SLOW, async () => {
    // a preload counting how often the process opens the file (Node's own fs, patched for ESM too)
    const preload = path.join(dir, "count-opens.cjs")
    fs.writeFileSync(preload, [
      "const fs = require('node:fs')",
      "const open = fs.open",
      "let n = 0",
      "fs.open = function (p, ...rest) { if (String(p) === process.env.COUNT_OPENS_OF) n++; return open.call(this, p, ...rest) }",
      "require('node:module').syncBuiltinESMExports()",
      "process.on('exit', () => fs.writeFileSync(process.env.COUNT_OPENS_TO, String(n)))"
    ].join("\n"))
    const opens = async (args: ReadonlyArray<string>) => {
      const counted = path.join(dir, "opens.txt")
      const r = await runCli(bundle, ["show", ...args, file], dir, {
        NO_COLOR: "1",
        NODE_OPTIONS: `--require ${preload}`,
        COUNT_OPENS_OF: file,
        COUNT_OPENS_TO: counted
      })
      assert.strictEqual(r.code, 0, r.stdout + r.stderr)
      return { count: Number(fs.readFileSync(counted, "utf8")), stdout: r.stdout }
    }
    const whole = await opens(["--json"])
    assert.isAbove(whole.count, 1, "a whole show reads twice (validate, then print)")
    const tail = await opens(["--json", "--tail", "3"])
    assert.deepStrictEqual(JSON.parse(tail.stdout).map((e: any) => e.seq), [11, 12, 13])
    assert.strictEqual(tail.count, whole.count - 1, "--tail: one read fewer")
    const people = await opens(["--tail", "3"])
    assert.strictEqual(people.count, whole.count - 1, "--tail for people: no read for the column widths either")
    assert.match(people.stdout, /^SEQ/)
  })

  it("--from / --to: an inclusive seq range; --tail: the last n of what the other filters keep", SLOW, async () => {
    assert.deepStrictEqual(await shown("--from", "5", "--to", "8"), [5, 6, 7, 8])
    assert.deepStrictEqual(await shown("--from", "12"), [12, 13])
    assert.deepStrictEqual(await shown("--to", "1"), [0, 1])
    assert.deepStrictEqual(await shown("--tail", "3"), [11, 12, 13])
    assert.deepStrictEqual(await shown("--tail", "0"), [])
    assert.deepStrictEqual(await shown("--tail", "99"), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13])
    assert.deepStrictEqual(await shown("--turn", "1", "--type", "user/message,tool", "--tail", "2"), [4, 5])
    assert.deepStrictEqual(await shownToPeople("--type", "user/message", "--tail", "1"), [10])
  })

  it("the filtered events are the stored events, unchanged", SLOW, async () => {
    const all = json(await cli(["show", "--json", file]))
    const some = json(await cli(["show", "--json", "--type", "tool", file]))
    assert.deepStrictEqual(some, all.filter((e: { type: string }) => e.type.startsWith("tool/")))
  })

  it("nothing matching: [] with --json, a sentence for people (naming a type no event has)", SLOW, async () => {
    const none = await cli(["show", "--from", "50", file])
    assert.strictEqual(none.code, 0)
    assert.strictEqual(none.stdout.trim(), "no events match")
    const typo = await cli(["show", "--type", "user/mesage", file])
    assert.strictEqual(typo.code, 0)
    assert.strictEqual(typo.stdout.trim(), "no events match (not a known event type: user/mesage)")
    assert.deepStrictEqual(await shown("--type", "user/mesage"), [])
  })

  it("bad filter values are usage errors (exit 2, one UsageError document with --json)", SLOW, async () => {
    for (const args of [["--tail", "-1"], ["--type", ","], ["--turn", "one"]]) {
      const r = await cli(["show", "--json", ...args, file])
      assert.strictEqual(r.code, 2, args.join(" "))
      assert.strictEqual(json(r).error._tag, "UsageError", args.join(" "))
    }
    const people = await cli(["show", "--tail", "-1", file])
    assert.strictEqual(people.code, 2)
    assert.strictEqual(people.stdout, "")
    assert.match(people.stderr, /--tail needs a count of 0 or more/)
  })
})

describe("list", () => {
  it("adds last activity, message count, first-message preview; a fork shows its parent", SLOW, async () => {
    for (const store of [path.join(dir, "list.db"), `jsonl:${path.join(dir, "list-root")}`]) {
      const long = "x".repeat(150)
      const source = path.join(dir, "long.jsonl")
      fs.writeFileSync(source, twoTurns("long", long))
      assert.strictEqual((await cli(["import", "--json", "--store", store, file, source])).code, 0)
      const fork = await cli(["fork", "--json", "--store", store, "--session", "two", "--at", "7", "--child", "kid"])
      assert.strictEqual(fork.code, 0, fork.stderr)
      const rows = json(await cli(["list", "--json", "--store", store]))
      const byId = Object.fromEntries(rows.map((r: { id: string }) => [r.id, r]))
      // the fields that were there keep their names and values; the new ones follow them
      assert.deepStrictEqual(byId.two, {
        version: 1,
        id: "two",
        createdAt: 1,
        events: 14,
        lastActivity: 113,
        messages: 5,
        preview: "list the files"
      })
      assert.strictEqual(byId.long.preview, "x".repeat(99) + "…", "a long first message is clipped")
      const kid = byId.kid
      assert.strictEqual(kid.parentSession, "two")
      assert.strictEqual(kid.seedLength, 8)
      assert.strictEqual(kid.events, 9, "8 inherited events and the end-seed marker")
      assert.strictEqual(kid.messages, 3)
      assert.strictEqual(kid.preview, "list the files")
      // inherited events keep their (older) times: the child's last activity is its own, not theirs
      assert.isAtLeast(kid.lastActivity, kid.createdAt)

      const people = await cli(["list", "--store", store])
      assert.strictEqual(people.code, 0, people.stderr)
      const [head, ...lines] = people.stdout.trimEnd().split("\n")
      assert.match(head, /^ID\s+CREATED\s+LAST ACTIVITY\s+EVENTS\s+MESSAGES\s+PARENT\s+FIRST MESSAGE$/)
      assert.match(lines.find((l) => l.startsWith("two "))!, /^two\s+1970-01-01T00:00:00\.001Z\s+1970-01-01T00:00:00\.113Z\s+14\s+5\s+list the files$/)
      assert.match(lines.find((l) => l.startsWith("kid "))!, /^kid\s+\S+\s+\S+\s+9\s+3\s+two\s+list the files$/)
    }
  })
})

describe("verify of a whole store", () => {
  it("people get a one-line summary after the per-session lines; --json stays the documented array", SLOW, async () => {
    const root = path.join(dir, "verify-root")
    fs.mkdirSync(root)
    fs.writeFileSync(path.join(root, "a.jsonl"), closedTurnLog("a"))
    fs.writeFileSync(path.join(root, "b.jsonl"), closedTurnLog("b"))
    const store = `jsonl:${root}`
    const ok = await cli(["verify", "--store", store])
    assert.strictEqual(ok.code, 0, ok.stderr)
    assert.deepStrictEqual(ok.stdout.trimEnd().split("\n"), [
      "valid a: 3 events, 1 surface nodes",
      "valid b: 3 events, 1 surface nodes",
      "2 sessions: 2 valid, 0 invalid"
    ])

    // an invalid session (a message without its surface marker: exit 1) ...
    fs.writeFileSync(path.join(root, "c.jsonl"), closedTurnLog("c").replace(`,"surfaceOp":"append"`, ""))
    const invalid = await cli(["verify", "--store", store])
    assert.strictEqual(invalid.code, 1)
    assert.strictEqual(invalid.stdout.trimEnd().split("\n").at(-1), "3 sessions: 2 valid, 1 invalid")
    // ... and one that cannot be read at all (a newer format: exit 2, the worst code wins)
    fs.writeFileSync(path.join(root, "d.jsonl"), line({ type: "session", version: 7, id: "d", createdAt: 1 }) + "\n")
    const unreadable = await cli(["verify", "--store", store])
    assert.strictEqual(unreadable.code, 2)
    assert.strictEqual(unreadable.stdout.trimEnd().split("\n").at(-1), "4 sessions: 2 valid, 1 invalid, 1 unreadable")

    const doc = await cli(["verify", "--json", "--store", store])
    assert.strictEqual(doc.code, 2)
    const reports = json(doc)
    assert.deepStrictEqual(reports.map((r: { id: string; ok: boolean }) => [r.id, r.ok]), [["a", true], ["b", true], ["c", false], [
      "d.jsonl",
      false
    ]])
    for (const r of reports) assert.deepStrictEqual(Object.keys(r), r.ok ? ["id", "ok", "events", "surface"] : ["id", "ok", "error"])
  })

  it("L6: a file whose header names another session than its file name is reported SessionNotFound (exit 2), not valid", SLOW, async () => {
    const root = path.join(dir, "verify-l6")
    fs.mkdirSync(root)
    fs.writeFileSync(path.join(root, "a.jsonl"), closedTurnLog("a"))
    // a renamed file, and a Windows reserved name stored without its encoding (CON is ~0043ON.jsonl)
    fs.writeFileSync(path.join(root, "abc.jsonl"), closedTurnLog("ABC"))
    fs.writeFileSync(path.join(root, "CON.jsonl"), closedTurnLog("CON"))
    const store = `jsonl:${root}`
    const doc = await cli(["verify", "--json", "--store", store])
    assert.strictEqual(doc.code, 2, doc.stderr)
    const reports = json(doc)
    assert.deepStrictEqual(reports.map((r: any) => [r.id, r.ok, r.error?._tag, r.error?.rule]), [
      ["a", true, undefined, undefined],
      ["CON.jsonl", false, "SessionNotFound", "L6"],
      ["abc.jsonl", false, "SessionNotFound", "L6"]
    ])
    // the same verdict as naming the session
    const named = json(await cli(["verify", "--json", "--store", store, "--session", "abc"]))
    assert.deepStrictEqual([named.ok, named.error._tag, named.error.rule], [false, "SessionNotFound", "L6"])
    const people = await cli(["verify", "--store", store])
    assert.strictEqual(people.stdout.trimEnd().split("\n").at(-1), "3 sessions: 1 valid, 0 invalid, 2 unreadable")
  })

  it("an empty store: no summary, just no sessions", SLOW, async () => {
    const root = path.join(dir, "empty-root")
    fs.mkdirSync(root)
    const r = await cli(["verify", "--store", `jsonl:${root}`])
    assert.strictEqual(r.code, 0)
    assert.strictEqual(r.stdout.trim(), "no sessions")
  })
})
