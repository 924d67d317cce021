/**
 * `--store jsonlz:<dir>` (docs/formats.md "Compressed JSONL", issue 16): the JSONL store whose new sessions
 * are written compressed. `import` writes only `<id>.jsonlz` files; every reading command shows
 * exactly what it shows on a plain `jsonl:` store of the same sessions and writes nothing;
 * `export` writes plain JSONL byte-identical to what was imported; the writing commands keep each
 * file's layout; a command on a missing directory creates nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { sample } from "../suites.js"
import { assistantLine, buildBundle, closedTurnLog, eventLine, json, line, removeBundle, type Run, runCli, userLine } from "./helpers.js"

// generous limits: these tests spawn many processes on a possibly loaded machine; nothing is timed
const SLOW = { timeout: 600_000 }

/** The first bytes of a compressed session file (`\x89JSONLZ\n`). */
const MAGIC = Buffer.from([0x89, 0x4a, 0x53, 0x4f, 0x4e, 0x4c, 0x5a, 0x0a])

let dir: string
let bundle: string
/** Two session logs to import: `a` (streamed chunks, a tool call with a long result, two turns) and `b`. */
let logA: string
let logB: string

const cli = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir)

const ev = eventLine
const user = userLine
const chunk = (seq: number, turn: number, text: string) =>
  ev(seq, "assistant/chunk", { turn, step: 1, chunk: { type: "text-delta", index: 0, text } })
const assistant = assistantLine

/** A closed two-turn log with streamed text deltas (packed rows) and a tool result long enough to prune. */
const streamedLog = (id: string): string =>
  [
    line({ type: "session", version: 1, id, createdAt: 1 }),
    ev(0, "turn/start", { turn: 1 }),
    ev(1, "step/start", { turn: 1, step: 1 }),
    user(2, "u1", "list the files"),
    ev(3, "request/header", { header: { config: { provider: "p", model: "m" }, system: "be brief" }, reason: "initial" }),
    ...["look", "ing", " at", " the", " files"].map((t, k) => chunk(4 + k, 1, t)),
    assistant(9, 1, "a1", [{ type: "text", text: "looking at the files" }, { type: "tool-call", id: "c1", name: "ls", arguments: "{}" }]),
    ev(10, "tool/call", { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{}" }),
    ev(11, "tool/result", {
      turn: 1,
      step: 1,
      message: {
        id: "r1",
        role: "user",
        content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "file.txt ".repeat(80) }] }],
        source: { kind: "tool", callId: "c1" }
      }
    }, { sourceEventSeqs: [10], surfaceOp: "append" }),
    ev(12, "step/end", { turn: 1, step: 1 }),
    ev(13, "turn/end", { turn: 1, reason: { kind: "completed" } }),
    ev(14, "turn/start", { turn: 2 }),
    ev(15, "step/start", { turn: 2, step: 1 }),
    user(16, "u2", "thanks, that is all I needed to know about these files. ".repeat(20)),
    ...["you", " are", " welcome", "!"].map((t, k) => chunk(17 + k, 2, t)),
    assistant(21, 2, "a2", [{ type: "text", text: "you are welcome!" }]),
    ev(22, "step/end", { turn: 2, step: 1 }),
    ev(23, "turn/end", { turn: 2, reason: { kind: "completed" } })
  ].join("\n") + "\n"

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-jsonlz-"))
  bundle = await buildBundle("jsonlz-test")
  logA = path.join(dir, "a.jsonl")
  fs.writeFileSync(logA, streamedLog("a"))
  logB = path.join(dir, "b.jsonl")
  fs.writeFileSync(logB, closedTurnLog("b", "hello from b"))
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** The files of a directory: bytes and mtime. */
const snapshot = (root: string): Record<string, { readonly bytes: string; readonly mtime: bigint }> => {
  const out: Record<string, { bytes: string; mtime: bigint }> = {}
  for (const name of fs.readdirSync(root).sort()) {
    const st = fs.statSync(path.join(root, name), { bigint: true })
    out[name] = { bytes: fs.readFileSync(path.join(root, name)).toString("base64"), mtime: st.mtimeNs }
  }
  return out
}

const ok = (r: Run, what: string): Run => {
  assert.strictEqual(r.code, 0, `${what}: ${r.stdout}\n${r.stderr}`)
  return r
}

/** Import `a` and `b` into a new store `<scheme>:<dir>/<name>`; its directory and --store value. */
const imported = async (scheme: "jsonl" | "jsonlz", name: string) => {
  const root = path.join(dir, name)
  const store = `${scheme}:${root}`
  assert.deepStrictEqual(json(ok(await cli(["import", "--json", "--store", store, logA, logB]), "import")), { sessions: 2, events: 27 })
  return { root, store }
}

const isCompressed = (file: string): boolean => fs.readFileSync(file).subarray(0, MAGIC.length).equals(MAGIC)

describe("session-log --store jsonlz:<dir>", () => {
  it("import writes only <id>.jsonlz files, in the compressed layout, into a directory it creates", SLOW, async () => {
    const { root } = await imported("jsonlz", "new/store")
    assert.deepStrictEqual(fs.readdirSync(root).sort(), ["a.jsonlz", "b.jsonlz"])
    assert.isTrue(isCompressed(path.join(root, "a.jsonlz")))
    assert.isTrue(isCompressed(path.join(root, "b.jsonlz")))
    assert.isBelow(fs.statSync(path.join(root, "a.jsonlz")).size, fs.statSync(logA).size)
    // a plain store of the same sessions: one .jsonl file each, starting with the header line
    const plain = await imported("jsonl", "plain-import")
    assert.deepStrictEqual(fs.readdirSync(plain.root).sort(), ["a.jsonl", "b.jsonl"])
    assert.isFalse(isCompressed(path.join(plain.root, "a.jsonl")))
  })

  it("list, show, verify and every other reading command print the same on jsonlz: as on jsonl:, and write nothing", SLOW, async () => {
    const z = await imported("jsonlz", "reads-z")
    const p = await imported("jsonl", "reads-p")
    const before = snapshot(z.root)
    const commands: ReadonlyArray<ReadonlyArray<string>> = [
      ["list", "--json"],
      ["verify", "--json"],
      ["list"],
      ["verify"],
      // npm test: the per-session commands on a (24 events); test:slow: on b too
      ...sample(["a", "b"], 1).flatMap((id) => [
        ["show", "--json", "--session", id],
        ["show", "--session", id],
        ["show", "--json", "--session", id, "--type", "assistant", "--turn", "1"],
        ["verify", "--json", "--session", id],
        ["messages", "--json", "--session", id],
        ["transcript", "--json", "--session", id],
        ["surface", "--json", "--session", id],
        ["request", "--json", "--session", id],
        ["repair", "--json", "--dry-run", "--session", id]
      ])
    ]
    for (const args of commands) {
      const onZ = await cli([...args, "--store", z.store])
      const onP = await cli([...args, "--store", p.store])
      ok(onZ, args.join(" "))
      assert.strictEqual(onZ.stdout, onP.stdout, args.join(" "))
      if (args.includes("--json")) json(onZ)
    }
    assert.deepStrictEqual(json(await cli(["verify", "--json", "--store", z.store])), [
      { id: "a", ok: true, events: 24, surface: [2, 9, 11, 16, 21] },
      { id: "b", ok: true, events: 3, surface: [1] }
    ])
    assert.deepStrictEqual(
      json(await cli(["show", "--json", "--store", z.store, "--session", "a"])).map((e: any) => e.seq),
      Array.from({ length: 24 }, (_, i) => i)
    )
    assert.deepStrictEqual(snapshot(z.root), before, "reading commands leave every file's bytes and mtime")
  })

  it("export writes plain JSONL byte-identical to the imported files: one session to a file or stdout, a whole store to a directory", SLOW, async () => {
    const z = await imported("jsonlz", "export-z")
    const before = snapshot(z.root)
    const one = path.join(dir, "exported-a.jsonl")
    assert.deepStrictEqual(json(ok(await cli(["export", "--json", "--store", z.store, "--session", "a", "--out", one]), "export a")), {
      sessions: 1,
      events: 24
    })
    assert.isTrue(fs.readFileSync(one).equals(fs.readFileSync(logA)))
    const stdout = ok(await cli(["export", "--store", z.store, "--session", "b"]), "export b")
    assert.strictEqual(stdout.stdout, fs.readFileSync(logB, "utf8"))
    const all = path.join(dir, "exported-all")
    assert.deepStrictEqual(json(ok(await cli(["export", "--json", "--store", z.store, "--out", all]), "export all")), { sessions: 2, events: 27 })
    assert.deepStrictEqual(fs.readdirSync(all).sort(), ["a.jsonl", "b.jsonl"])
    assert.isTrue(fs.readFileSync(path.join(all, "a.jsonl")).equals(fs.readFileSync(logA)))
    assert.isTrue(fs.readFileSync(path.join(all, "b.jsonl")).equals(fs.readFileSync(logB)))
    assert.deepStrictEqual(snapshot(z.root), before)
  })

  it("every command but import on a missing jsonlz:<dir> fails with exit 2 and creates nothing", SLOW, async () => {
    const parent = path.join(dir, "missing-parent")
    fs.mkdirSync(parent)
    const store = `jsonlz:${path.join(parent, "nothing", "here")}`
    const commands: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
      [["list"], "UsageError"],
      [["verify"], "UsageError"],
      [["export", "--out", path.join(parent, "out")], "UsageError"],
      [["show", "--session", "a"], "SessionNotFound"],
      [["verify", "--session", "a"], "SessionNotFound"],
      [["messages", "--session", "a"], "SessionNotFound"],
      [["export", "--session", "a", "--out", path.join(parent, "a.jsonl")], "SessionNotFound"],
      [["repair", "--dry-run", "--session", "a"], "SessionNotFound"],
      [["repair", "--session", "a"], "SessionNotFound"],
      [["compact", "--session", "a"], "SessionNotFound"],
      [["prune", "--session", "a"], "SessionNotFound"],
      [["fork", "--session", "a"], "SessionNotFound"]
    ]
    for (const [args, tag] of commands) {
      const r = await cli([...args, "--json", "--store", store])
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`)
      assert.strictEqual(json(r).error._tag, tag, args.join(" "))
    }
    const listed = json(await cli(["list", "--json", "--store", store]))
    assert.match(listed.error.message, /no store at jsonlz:.*nothing\/here: not found \(nothing was created\)/)
    const migrate = await cli(["migrate", "--json", "--store", store])
    assert.strictEqual(migrate.code, 2)
    assert.deepStrictEqual(json(migrate).map((r: any) => [r.status, r.error._tag]), [["failed", "UsageError"]])
    assert.deepStrictEqual(fs.readdirSync(parent), [])
  })

  it("writing commands keep each file's layout: repair and migrate with nothing to do write nothing; prune, compact and fork append", SLOW, async () => {
    const z = await imported("jsonlz", "writes-z")
    // a plain session already in the directory keeps its layout
    const logC = path.join(dir, "c.jsonl")
    fs.writeFileSync(logC, streamedLog("c"))
    fs.copyFileSync(logC, path.join(z.root, "c.jsonl"))
    const at = (name: string) => path.join(z.root, name)
    const before = snapshot(z.root)
    assert.deepStrictEqual(json(ok(await cli(["repair", "--json", "--store", z.store, "--session", "a"]), "repair")), [])
    assert.deepStrictEqual(json(ok(await cli(["migrate", "--json", "--store", z.store]), "migrate")), [
      { id: "a", status: "current" },
      { id: "b", status: "current" },
      { id: "c", status: "current" }
    ])
    assert.deepStrictEqual(snapshot(z.root), before, "nothing to do writes nothing")

    const pruned = json(ok(await cli(["prune", "--json", "--store", z.store, "--session", "a", "--threshold", "100", "--head", "10", "--tail", "10"]), "prune"))
    assert.isAbove(pruned.length, 0)
    const compacted = json(ok(await cli(["compact", "--json", "--store", z.store, "--session", "a"]), "compact a"))
    assert.isAbove(compacted.length, 0)
    const compactedC = json(ok(await cli(["compact", "--json", "--store", z.store, "--session", "c"]), "compact c"))
    assert.isAbove(compactedC.length, 0)
    const child = json(ok(await cli(["fork", "--json", "--store", z.store, "--session", "a", "--at", "13", "--child", "kid"]), "fork"))
    assert.deepStrictEqual([child.id, child.parentSession, child.seedLength], ["kid", "a", 14])

    assert.deepStrictEqual(fs.readdirSync(z.root).sort(), ["a.jsonlz", "b.jsonlz", "c.jsonl", "kid.jsonlz"], "no other file is left behind")
    assert.isTrue(isCompressed(at("a.jsonlz")))
    assert.isTrue(isCompressed(at("kid.jsonlz")))
    assert.isFalse(isCompressed(at("c.jsonl")))
    assert.isAbove(fs.statSync(at("c.jsonl")).size, fs.statSync(logC).size)
    assert.isTrue(fs.readFileSync(at("c.jsonl")).subarray(0, fs.statSync(logC).size).equals(fs.readFileSync(logC)), "c was appended to")
    assert.deepStrictEqual(json(ok(await cli(["verify", "--json", "--store", z.store]), "verify")).map((r: any) => [r.id, r.ok]), [
      ["a", true],
      ["b", true],
      ["c", true],
      ["kid", true]
    ])
    // the appended events read back from the compressed file as they were reported (an open
    // also appends its session/end-seed marker)
    const showA = json(ok(await cli(["show", "--json", "--store", z.store, "--session", "a"]), "show a"))
    const bySeq = new Map(showA.map((e: any) => [e.seq, e]))
    for (const e of [...pruned, ...compacted]) assert.deepStrictEqual(bySeq.get(e.seq), e)
    assert.deepStrictEqual(showA.slice(0, 24), fs.readFileSync(logA, "utf8").trim().split("\n").slice(1).map((l) => JSON.parse(l)))
    const showKid = json(ok(await cli(["show", "--json", "--store", z.store, "--session", "kid"]), "show kid"))
    assert.deepStrictEqual(showKid.slice(0, 14), showA.slice(0, 14))
    const showC = json(ok(await cli(["show", "--json", "--store", z.store, "--session", "c"]), "show c"))
    assert.deepStrictEqual(showC.slice(-compactedC.length), compactedC)
  })

  it("usage errors: jsonlz: without a directory, and a file named as the directory", SLOW, async () => {
    const empty = await cli(["list", "--json", "--store", "jsonlz:"])
    assert.strictEqual(empty.code, 2)
    assert.deepStrictEqual([json(empty).error._tag, json(empty).error.message], ["UsageError", "jsonlz: needs a directory, e.g. jsonlz:./sessions"])
    const asFile = await cli(["list", "--json", "--store", `jsonlz:${logA}`])
    assert.strictEqual(asFile.code, 2)
    assert.match(json(asFile).error.message, /^jsonlz:.*a\.jsonl: .*a\.jsonl is not a directory/)
    const imp = await cli(["import", "--json", "--store", `jsonlz:${logA}`, logB])
    assert.strictEqual(imp.code, 2)
    assert.strictEqual(fs.readFileSync(logB, "utf8"), closedTurnLog("b", "hello from b"))
  })
})
