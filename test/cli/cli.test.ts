/**
 * The `session-log` binary as a subprocess (SPEC §12, DESIGN.md §6): people's and `--json`
 * output, exit codes 0/1/2, reading commands that never write, and bad input.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { buildBundle, json, removeBundle, type Run, runCli } from "./helpers.js"

/** Run the binary on this file's bundle. */
const cli = (args: ReadonlyArray<string>, cwd: string): Promise<Run> => runCli(bundle, args, cwd)

const line = (v: unknown) => JSON.stringify(v)
const header = (id: string, extra: Record<string, unknown> = {}) => line({ type: "session", version: 1, id, createdAt: 1, ...extra })
const user = (seq: number, id: string, text: string, extra: Record<string, unknown> = { surfaceOp: "append" }) =>
  line({
    type: "user/message",
    seq,
    time: 10 + seq,
    data: { id, role: "user", content: [{ type: "text", text }], source: { kind: "user" } },
    ...extra
  })
const assistant = (seq: number, id: string, content: ReadonlyArray<unknown>, cites: ReadonlyArray<number> = []) =>
  line({
    type: "assistant/message",
    seq,
    time: 10 + seq,
    data: { turn: 1, step: 1, message: { id, role: "assistant", content, source: { kind: "model", provider: "p", model: "m" } } },
    sourceEventSeqs: cites,
    surfaceOp: "append"
  })
const ev = (seq: number, type: string, data: unknown) => line({ type, seq, time: 10 + seq, data })

/** A valid log: a turn with a tool call and its result, a compaction-style replacement and a header. */
const validLog = (id: string) =>
  [
    header(id),
    ev(0, "turn/start", { turn: 1 }),
    ev(1, "step/start", { turn: 1, step: 1 }),
    user(2, "u1", "list the files"),
    ev(3, "request/header", { header: { config: { provider: "p", model: "m" }, system: "be brief" }, reason: "initial" }),
    assistant(4, "a1", [{ type: "text", text: "looking" }, { type: "tool-call", id: "c1", name: "ls", arguments: "{}" }]),
    ev(5, "tool/call", { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{}" }),
    line({
      type: "tool/result",
      seq: 6,
      time: 16,
      data: {
        turn: 1,
        step: 1,
        message: { id: "r1", role: "user", content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "a b c" }] }], source: { kind: "tool", callId: "c1" } }
      },
      sourceEventSeqs: [5],
      surfaceOp: "append"
    }),
    ev(7, "step/end", { turn: 1, step: 1 }),
    ev(8, "turn/end", { turn: 1, reason: { kind: "completed" } }),
    user(9, "sum", "summary of turn 1", { sourceEventSeqs: [2, 4, 6], surfaceOp: { op: "replace", start: 2, end: 6 } })
  ].join("\n") + "\n"

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-cli-"))
  // the current sources bundled once, so each subprocess starts fast (bin/session-log.js runs it)
  bundle = await buildBundle("cli-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

const write = (name: string, text: string) => {
  const p = path.join(dir, name)
  fs.writeFileSync(p, text)
  return p
}

describe.concurrent("session-log on .jsonl files", () => {
  it("verify --json: a valid file reports events and surface, exit 0", async () => {
    const file = write("valid.jsonl", validLog("valid"))
    const r = await cli(["verify", "--json", file], dir)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(json(r), { ok: true, events: 10, surface: [9] })
  })

  it("verify --json reports the first rejection as {_tag, rule, seq, message} (L9 unwrapped), exit 1", async () => {
    const text = validLog("bad").replace(`,"surfaceOp":"append"}\n${ev(5, "tool/call", { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{}" })}`, `}\n${ev(5, "tool/call", { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{}" })}`)
    const file = write("bad.jsonl", text)
    const r = await cli(["verify", "--json", file], dir)
    assert.strictEqual(r.code, 1)
    const doc = json(r)
    assert.strictEqual(doc.ok, false)
    assert.strictEqual(doc.error._tag, "SurfaceMarkerInvalid")
    assert.strictEqual(doc.error.rule, "D3")
    assert.strictEqual(doc.error.seq, 4)
    assert.match(doc.error.message, /surfaceOp/)
  })

  it("verify: a newer format is unreadable (FormatUnsupported K1, checked first as K4), exit 2; a missing file exit 2", async () => {
    const file = write("newer.jsonl", line({ type: "session", version: 7, id: "n", createdAt: 1 }) + "\nnot json at all\n")
    const r = await cli(["verify", "--json", file], dir)
    assert.strictEqual(r.code, 2)
    assert.strictEqual(json(r).error._tag, "FormatUnsupported")
    assert.strictEqual(json(r).error.rule, "K1") // refused by the JSONL first-line check (K4) before the header shape
    const missing = await cli(["verify", "--json", path.join(dir, "nope.jsonl")], dir)
    assert.strictEqual(missing.code, 2)
    assert.strictEqual(json(missing).ok, false)
  })

  it("verify: A4/A5 values in a stored line are reported as NotLosslessJson with the JSON pointer (L9 unwrapped)", async () => {
    const file = write("neg0.jsonl", header("n0") + "\n" + ev(0, "turn/start", { turn: 1 }) + "\n" +
      `{"type":"todo/write","seq":1,"time":11,"data":{"todos":[],"n":-0}}\n` + ev(2, "turn/end", { turn: 1, reason: { kind: "completed" } }) + "\n")
    const r = await cli(["verify", "--json", file], dir)
    assert.strictEqual(r.code, 1)
    assert.deepStrictEqual({ ...json(r).error, message: undefined }, { _tag: "NotLosslessJson", rule: "A5", seq: 1, message: undefined })
    assert.match(json(r).error.message, /\/data\/n/)
    const inf = write("inf.jsonl", header("inf") + "\n" + `{"type":"todo/write","seq":0,"time":1e400,"data":{"todos":[]}}\n`)
    const i = await cli(["verify", "--json", inf], dir)
    assert.strictEqual(json(i).error.rule, "A4")
    assert.strictEqual(json(i).error.seq, 0)
  })

  it("verify: a corrupt committed region is StoreCorrupt L2, exit 1; a torn tail is not counted", async () => {
    const lines = validLog("c").split("\n")
    lines[3] = "{broken"
    const corrupt = write("corrupt.jsonl", lines.join("\n"))
    const r = await cli(["verify", "--json", corrupt], dir)
    assert.strictEqual(r.code, 1)
    assert.strictEqual(json(r).error._tag, "StoreCorrupt")
    assert.strictEqual(json(r).error.rule, "L2")
    const fragment = `{"type":"turn/start","seq":10,"ti`
    const torn = write("torn.jsonl", validLog("t") + fragment)
    const t = await cli(["verify", "--json", torn], dir)
    assert.strictEqual(t.code, 0)
    // the torn tail is not counted and not an error, but reported (issue 13)
    assert.deepStrictEqual(json(t), {
      ok: true,
      events: 10,
      surface: [9],
      tornTail: { fromSeq: 10, reason: "fragment", line: 12, completeLines: 0, bytes: fragment.length }
    })
  })

  it("show, messages, transcript, surface and request --json print the documented shapes", async () => {
    const file = write("shapes.jsonl", validLog("shapes"))
    const show = json(await cli(["show", "--json", file], dir))
    assert.strictEqual(show.length, 10)
    assert.deepStrictEqual(show[9].surfaceOp, { op: "replace", start: 2, end: 6 })
    const messages = json(await cli(["messages", "--json", file], dir))
    assert.deepStrictEqual(messages.map((m: any) => m.id), ["sum"])
    const transcript = json(await cli(["transcript", "--json", file], dir))
    assert.deepStrictEqual(transcript.map((e: any) => e.seq), [2, 4, 6])
    const surface = json(await cli(["surface", "--json", file], dir))
    assert.deepStrictEqual(surface, { nodes: [9], replacements: [{ seq: 9, start: 2, end: 6, shadowedSeqs: [2, 4, 6] }] })
    const at6 = json(await cli(["request", "--json", "--at", "6", file], dir))
    assert.deepStrictEqual(at6.header, { config: { provider: "p", model: "m" }, system: "be brief" })
    assert.deepStrictEqual(at6.messages.map((m: any) => m.id), ["u1", "a1", "r1"])
    const at2 = json(await cli(["request", "--json", "--at", "2", file], dir))
    assert.strictEqual(at2.header, null)
    const out = await cli(["request", "--json", "--at", "99", file], dir)
    assert.strictEqual(out.code, 2) // a seq outside the log: not found (SPEC §12, issue 14)
    assert.strictEqual(json(out).error.rule, "L10")
  })

  it("people's output: an aligned table and a plain explanation with the rule id", async () => {
    const file = write("people.jsonl", validLog("people"))
    const show = await cli(["show", file], dir)
    assert.strictEqual(show.code, 0)
    assert.match(show.stdout.split("\n")[0], /^SEQ\s+TIME\s+TYPE\s+SURFACE\s+SUMMARY$/)
    assert.notMatch(show.stdout, /\u001b\[/, "no colour when not a TTY")
    const bad = write("people-bad.jsonl", header("pb") + "\n" + ev(0, "mode/set", { mode: "plan" }) + "\n" + ev(1, "turn/end", { turn: 1, reason: { kind: "completed" } }) + "\n")
    const v = await cli(["verify", bad], dir)
    assert.strictEqual(v.code, 2)
    assert.match(v.stdout, /K10/)
  })

  it("repair --dry-run prints the closers without writing; repair appends them", async () => {
    const open = [header("crash"), ev(0, "turn/start", { turn: 1 }), ev(1, "step/start", { turn: 1, step: 1 }), user(2, "u", "go"), assistant(3, "a", [{ type: "tool-call", id: "c9", name: "run", arguments: "{}" }]), ev(4, "tool/call", { turn: 1, step: 1, callId: "c9", name: "run", arguments: "{}" })].join("\n") + "\n"
    const root = path.join(dir, "repair-root")
    fs.mkdirSync(root)
    const file = path.join(root, "crash.jsonl")
    fs.writeFileSync(file, open)
    const before = fs.readFileSync(file)
    const dry = await cli(["repair", "--json", "--dry-run", file], dir)
    assert.strictEqual(dry.code, 0, dry.stderr)
    assert.deepStrictEqual(json(dry).map((e: any) => e.type), ["tool/result", "step/end", "turn/end"])
    assert.deepStrictEqual(json(dry)[0].sourceEventSeqs, [4])
    assert.deepStrictEqual(fs.readFileSync(file), before, "dry run writes nothing")
    const real = await cli(["repair", "--json", file], dir)
    assert.strictEqual(real.code, 0, real.stderr)
    assert.deepStrictEqual(json(real).map((e: any) => e.seq), [5, 6, 7])
    const again = await cli(["repair", "--json", file], dir)
    assert.deepStrictEqual(json(again), [])
    assert.strictEqual(json(await cli(["verify", "--json", file], dir)).ok, true)
  })
})

describe.concurrent("session-log on stores", () => {
  for (const kind of ["sqlite", "jsonl"] as const) {
  it(`import -> list -> export round trip on ${kind} is byte-identical; reads never write`, async () => {
    const file = write(`round-${kind}.jsonl`, validLog("round"))
    {
      const store = kind === "sqlite" ? path.join(dir, "rt.db") : `jsonl:${path.join(dir, "rt-jsonl")}`
      const imp = await cli(["import", "--json", "--store", store, file], dir)
      assert.strictEqual(imp.code, 0, imp.stderr)
      assert.deepStrictEqual(json(imp), { sessions: 1, events: 10 })
      const again = await cli(["import", "--json", "--store", store, file], dir)
      assert.strictEqual(again.code, 2)
      assert.strictEqual(json(again).error._tag, "SessionExists")
      const list = json(await cli(["list", "--json", "--store", store], dir))
      // the header and event count, then what list adds: last activity, messages, first-message preview
      assert.deepStrictEqual(list, [{ version: 1, id: "round", createdAt: 1, events: 10, lastActivity: 19, messages: 3, preview: "list the files" }])
      const location = store.startsWith("jsonl:") ? path.join(dir, "rt-jsonl", "round.jsonl") : store
      const bytes = fs.readFileSync(location)
      for (const cmd of ["show", "messages", "transcript", "surface", "request", "verify"]) {
        const r = await cli([cmd, "--json", "--store", store, "--session", "round"], dir)
        assert.strictEqual(r.code, 0, `${cmd}: ${r.stderr}`)
      }
      assert.deepStrictEqual(fs.readFileSync(location), bytes, "reading commands leave the store unchanged")
      const out = path.join(dir, `export-${store.startsWith("jsonl:") ? "j" : "s"}.jsonl`)
      const exp = await cli(["export", "--json", "--store", store, "--session", "round", "--out", out], dir)
      assert.strictEqual(exp.code, 0, exp.stderr)
      assert.strictEqual(fs.readFileSync(out, "utf8"), fs.readFileSync(file, "utf8"))
      const whole = json(await cli(["verify", "--json", "--store", store], dir))
      assert.deepStrictEqual(whole, [{ id: "round", ok: true, events: 10, surface: [9] }])
    }
  })
  }

  it("bad input: unknown store scheme, missing session, a path that escapes the store root", async () => {
    const scheme = await cli(["list", "--json", "--store", "ftp://x"], dir)
    assert.strictEqual(scheme.code, 2)
    assert.strictEqual(json(scheme).error._tag, "UsageError")
    fs.mkdirSync(path.join(dir, "esc"))
    const missing = await cli(["show", "--json", "--store", `jsonl:${path.join(dir, "esc")}`, "--session", "nobody"], dir)
    assert.strictEqual(missing.code, 2)
    assert.strictEqual(json(missing).error._tag, "SessionNotFound")
    const escape = await cli(["show", "--json", "--store", `jsonl:${path.join(dir, "esc")}`, "--session", "../round"], dir)
    assert.strictEqual(escape.code, 2)
    assert.strictEqual(json(escape).error._tag, "SessionNotFound")
    const nosession = await cli(["show", "--json", "--store", path.join(dir, "none.db")], dir)
    assert.strictEqual(nosession.code, 2)
    assert.isFalse(fs.existsSync(path.join(dir, "none.db")), "a reading command creates no store")
  })

  it("demo --json runs the whole scenario; fork, prune, compact and migrate work on its store", async () => {
    const demoDir = path.join(dir, "demo")
    fs.mkdirSync(demoDir)
    const demo = await cli(["demo", "--json"], demoDir)
    assert.strictEqual(demo.code, 0, demo.stderr)
    const r = json(demo)
    assert.isAbove(r.prunes.length, 0, "pruning fired")
    assert.isAbove(r.compactions.length, 0, "compaction fired")
    assert.deepStrictEqual(r.crash.closers.map((e: any) => e.type), ["tool/result", "tool/result", "step/end", "turn/end"])
    assert.deepStrictEqual(r.crash.closers.map((e: any) => e.data.error?.code ?? null), [
      "TOOL_OUTCOME_UNKNOWN",
      "TOOL_NOT_STARTED",
      null,
      null
    ])
    assert.strictEqual(r.lastRequest.header.config.model, "demo-model")
    const store = path.join(demoDir, ".demo", "demo.db")
    assert.deepStrictEqual(json(await cli(["verify", "--json", "--store", store, "--session", "demo-session"], demoDir)).ok, true)
    // issue 27 item 8: every command the demo suggests next works on its store
    assert.deepStrictEqual(r.next.map((c: any) => c.args[0]), ["messages", "request", "surface", "show", "verify"])
    for (const c of r.next) {
      const ran = await cli(c.args, demoDir)
      assert.strictEqual(ran.code, 0, `${c.args.join(" ")}: ${ran.stderr}`)
      assert.isAbove(ran.stdout.trim().length, 0, c.args.join(" "))
    }
    // it runs again cleanly, adding a session of its own
    const again = await cli(["demo", "--json"], demoDir)
    assert.strictEqual(again.code, 0, again.stderr)
    assert.deepStrictEqual(json(again).events, r.events)
    assert.strictEqual(json(again).sessionId, "demo-session-2")

    const turnEnds = json(await cli(["show", "--json", "--store", store, "--session", "demo-session"], demoDir))
      .filter((e: any) => e.type === "turn/end").map((e: any) => e.seq)
    const forked = await cli(["fork", "--json", "--store", store, "--session", "demo-session", "--at", String(turnEnds[0]), "--child", "kid"], demoDir)
    assert.strictEqual(forked.code, 0, forked.stderr)
    assert.deepStrictEqual(json(forked).parentSession, "demo-session")
    assert.strictEqual(json(forked).seedLength, turnEnds[0] + 1)
    const open = await cli(["fork", "--json", "--store", store, "--session", "demo-session", "--at", String(turnEnds[0] - 1)], demoDir)
    assert.strictEqual(open.code, 1)
    assert.strictEqual(json(open).error.rule, "M7")
    const taken = await cli(["fork", "--json", "--store", store, "--session", "demo-session", "--child", "kid"], demoDir)
    assert.strictEqual(json(taken).error.rule, "M1")

    const compacted = await cli(["compact", "--json", "--store", store, "--session", "kid"], demoDir)
    assert.strictEqual(compacted.code, 0, compacted.stderr)
    assert.deepStrictEqual(json(compacted).map((e: any) => e.type), ["compaction/start", "compaction/summary", "user/message", "compaction/end"])
    const pruned = await cli(["prune", "--json", "--store", store, "--session", "demo-session", "--threshold", "100", "--head", "20", "--tail", "20"], demoDir)
    assert.strictEqual(pruned.code, 0, pruned.stderr)
    const migrated = await cli(["migrate", "--json", "--store", store], demoDir)
    assert.deepStrictEqual(json(migrated).map((m: any) => m.status), ["current", "current", "current"])
  })

  it("people's output of every reading command: a table or a sentence on stdout, exit 0, nothing on stdout parses as JSON", async () => {
    const file = write("people-all.jsonl", validLog("people-all"))
    const expectations: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
      [["show", file], /^SEQ\s+TIME\s+TYPE/],
      [["verify", file], /valid .*10 events, 1 surface nodes/],
      [["messages", file], /^ROLE\s+ID\s+CONTENT\nuser\s+sum\s+summary of turn 1/],
      [["transcript", file], /^SEQ\s+TYPE\s+CONTENT/],
      [["surface", file], /^surface 9\nSEQ\s+RANGE\s+SHADOWED\n9\s+2\.\.6\s+2, 4, 6/],
      [["request", "--at", "6", file], /^request at seq 6\np\/m\nsystem: be brief/],
      [["repair", "--dry-run", file], /nothing to repair/]
    ]
    for (const [args, pattern] of expectations) {
      const r = await cli(args, dir)
      assert.strictEqual(r.code, 0, `${args[0]}: ${r.stderr}`)
      assert.match(r.stdout, pattern, args[0])
      assert.throws(() => JSON.parse(r.stdout), undefined, undefined, `${args[0]} prints text for people`)
    }
  })

  it("people's output of the writing commands: import, export, migrate, fork, compact, prune, repair, list", async () => {
    const root = path.join(dir, "people-write")
    fs.mkdirSync(root)
    const file = write("people-write.jsonl", validLog("pw"))
    const store = `jsonl:${root}`
    const expectations: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
      [["import", "--store", store, file], /imported 1 session\(s\), 10 events/],
      [
        ["list", "--store", store],
        /^ID\s+CREATED\s+LAST ACTIVITY\s+EVENTS\s+MESSAGES\s+PARENT\s+FIRST MESSAGE\npw\s+1970-01-01T00:00:00\.001Z\s+1970-01-01T00:00:00\.019Z\s+10\s+3\s+list the files$/m
      ],
      [["export", "--store", store, "--session", "pw", "--out", path.join(dir, "pw-out.jsonl")], /exported 1 session\(s\), 10 events/],
      [["migrate", "--store", store], /^ID\s+STATUS\s+DETAIL\npw\s+current/],
      [["fork", "--store", store, "--session", "pw", "--at", "8", "--child", "pw-kid"], /forked pw → pw-kid \(9 inherited events\)/],
      [["prune", "--store", store, "--session", "pw", "--threshold", "60", "--head", "4", "--tail", "4"], /nothing to prune/],
      [["repair", "--store", store, "--session", "pw"], /nothing to repair/]
    ]
    for (const [args, pattern] of expectations) {
      const r = await cli(args, dir)
      assert.strictEqual(r.code, 0, `${args.join(" ")}: ${r.stdout}${r.stderr}`)
      assert.match(r.stdout, pattern, args.join(" "))
    }
    assert.strictEqual(fs.readFileSync(path.join(dir, "pw-out.jsonl"), "utf8"), validLog("pw"))
    const failing = await cli(["fork", "--store", store, "--session", "pw", "--at", "3"], dir)
    assert.strictEqual(failing.code, 1)
    assert.match(failing.stderr, /M7 ForkRejected/)
    // a summary that would not be smaller than what it replaces is refused (P7), with the rule id
    const tooSmall = await cli(["compact", "--store", store, "--session", "pw-kid"], dir)
    assert.strictEqual(tooSmall.code, 1)
    assert.match(tooSmall.stderr, /P7 CompactionRejected: .*not smaller/)
  })

  it("verify of a JSONL store also reports files whose header cannot be read; warnings stay off stdout", async () => {
    const root = path.join(dir, "verify-store")
    fs.mkdirSync(root)
    fs.writeFileSync(path.join(root, "good.jsonl"), validLog("good"))
    fs.writeFileSync(path.join(root, "bad-header.jsonl"), line({ type: "session", version: 1, id: "bad-header", createdAt: "x" }) + "\n")
    fs.writeFileSync(path.join(root, "garbage.jsonl"), "garbage\n")
    const r = await cli(["verify", "--json", "--store", `jsonl:${root}`], dir)
    assert.strictEqual(r.code, 1)
    const reports = json(r)
    assert.deepStrictEqual(reports.map((x: any) => [x.id, x.ok, x.error?.rule ?? null]), [
      ["good", true, null],
      ["bad-header.jsonl", false, "J4"],
      ["garbage.jsonl", false, "L5"]
    ])
    assert.match(r.stderr, /skipping/)
  })
})
