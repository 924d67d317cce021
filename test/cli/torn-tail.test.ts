/**
 * Torn tails are visible (issue 13, SPEC §7.4.4 L1/L3, §12): `verify` reports the torn tail it left
 * out of its count (`tornTail`: from seq, reason, first line, complete lines, bytes; people get one
 * line), and `migrate` of a v0 log never drops complete lines silently: it refuses with
 * `TornTailRefused` (L3) naming the first dropped line and changes nothing, unless
 * `--drop-torn-tail` accepts the loss (the original is kept as the backup either way).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { buildBundle, json, line, removeBundle, type Run, runCli } from "./helpers.js"

// generous limits: these tests spawn processes on a possibly loaded machine; nothing is timed
const SLOW = { timeout: 600_000 }

let dir: string
let bundle: string

const cli = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir)

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-torn-tail-"))
  bundle = await buildBundle("torn-tail-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

const v0Header = (id: string) => line({ type: "session", version: 0, id, createdAt: 1700000000000, delegationDepth: 0 }) + "\n"

/** A reference-design log whose event lines lack `seq`: five complete lines, no turn/end. */
const seqless = (id: string) => {
  const events = [
    { type: "turn/start", time: 1, data: { turn: 1 } },
    { type: "user/message", time: 2, data: { content: [{ type: "text", text: "hi" }], source: { kind: "user" } }, surfaceOp: "append" },
    { type: "session/title", time: 3, data: { title: "Greeting" } },
    { type: "assistant/chunk", time: 4, data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: "he" } } },
    { type: "assistant/chunk", time: 5, data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: "llo" } } }
  ]
  const body = events.map((e) => line(e) + "\n").join("")
  return { text: v0Header(id) + body, bodyBytes: Buffer.byteLength(body) }
}

const write = (name: string, text: string) => {
  const file = path.join(dir, name)
  fs.writeFileSync(file, text)
  return file
}

describe("verify reports the torn tail it leaves out", () => {
  it("L3 a log whose event lines lack seq: ok, 0 events, and a tornTail naming line 2 and its 5 complete lines", async () => {
    const { bodyBytes, text } = seqless("seqless")
    const file = write("seqless-verify.jsonl", text)
    const r = await cli(["verify", "--json", file])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(json(r), {
      ok: true,
      events: 0,
      surface: [],
      tornTail: { fromSeq: 0, reason: "seq-gap", line: 2, completeLines: 5, bytes: bodyBytes }
    })
    const people = await cli(["verify", file])
    assert.strictEqual(people.code, 0)
    assert.match(people.stdout, /torn tail ignored from line 2 \(seq 0\), seq-gap: 5 complete lines, \d+ bytes/)
    assert.strictEqual(fs.readFileSync(file, "utf8"), text, "verify never writes")
  }, SLOW)

  it("L1 a torn final fragment after two committed events: 0 complete lines, its bytes", async () => {
    const head = v0Header("frag") + line({ type: "turn/start", seq: 0, time: 1, data: { turn: 1 } }) + "\n" +
      line({ type: "turn/end", seq: 1, time: 2, data: { turn: 1, reason: { kind: "completed" } } }) + "\n"
    const fragment = `{"type":"turn/start","seq":2,"ti`
    const file = write("frag-verify.jsonl", head + fragment)
    const r = await cli(["verify", "--json", file])
    assert.strictEqual(r.code, 0, r.stderr)
    const doc = json(r)
    assert.strictEqual(doc.events, 2)
    assert.deepStrictEqual(doc.tornTail, { fromSeq: 2, reason: "fragment", line: 4, completeLines: 0, bytes: fragment.length })
  }, SLOW)

  it("a log without a torn tail has no tornTail field", async () => {
    const file = write("clean.jsonl", v0Header("clean") + line({ type: "turn/start", seq: 0, time: 1, data: { turn: 1 } }) + "\n")
    assert.notProperty(json(await cli(["verify", "--json", file])), "tornTail")
  }, SLOW)
})

describe("migrate never drops complete lines silently", () => {
  it("L3 refuses a v0 log whose torn tail holds complete lines, naming the first dropped line; nothing written", async () => {
    const { bodyBytes, text } = seqless("seqless")
    const sub = fs.mkdtempSync(path.join(dir, "refuse-"))
    const file = path.join(sub, "seqless.jsonl")
    fs.writeFileSync(file, text)
    const r = await runCli(bundle, ["migrate", "--json", file], sub)
    assert.strictEqual(r.code, 1, r.stderr)
    const [report] = json(r)
    assert.strictEqual(report.status, "failed")
    assert.deepInclude(report.error, { _tag: "TornTailRefused", rule: "L3", seq: 0 })
    assert.include(report.error.message, "line 2")
    assert.include(report.error.message, "5 complete lines")
    assert.include(report.error.message, `${bodyBytes} bytes`)
    assert.strictEqual(fs.readFileSync(file, "utf8"), text)
    assert.deepStrictEqual(fs.readdirSync(sub), ["seqless.jsonl"], "no backup, no temp file")
    const people = await runCli(bundle, ["migrate", file], sub)
    assert.strictEqual(people.code, 1)
    assert.include(people.stdout + people.stderr, "TornTailRefused")
  }, SLOW)

  it("--drop-torn-tail accepts the loss: upgraded, the original kept as the backup", async () => {
    const { text } = seqless("seqless")
    const sub = fs.mkdtempSync(path.join(dir, "drop-"))
    const file = path.join(sub, "seqless.jsonl")
    fs.writeFileSync(file, text)
    const r = await runCli(bundle, ["migrate", "--json", "--drop-torn-tail", file], sub)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(json(r), [{ id: "seqless", status: "upgraded" }])
    assert.deepStrictEqual(fs.readdirSync(sub).sort(), ["seqless.jsonl", "seqless.jsonl.v0.bak"])
    assert.strictEqual(fs.readFileSync(path.join(sub, "seqless.jsonl.v0.bak"), "utf8"), text)
    const migrated = fs.readFileSync(file, "utf8").trimEnd().split("\n")
    assert.strictEqual(JSON.parse(migrated[0]).version, 1)
    assert.strictEqual(migrated.length, 1, "the five lines were dropped, as accepted")
  }, SLOW)

  it("L1 a torn final fragment (no complete line) is dropped by migrate without the flag, the original kept", async () => {
    const sub = fs.mkdtempSync(path.join(dir, "fragment-"))
    const file = path.join(sub, "frag.jsonl")
    const text = v0Header("frag") + line({ type: "turn/start", seq: 0, time: 1, data: { turn: 1 } }) + "\n" +
      line({ type: "turn/end", seq: 1, time: 2, data: { turn: 1, reason: { kind: "completed" } } }) + "\n" + `{"type":"tu`
    fs.writeFileSync(file, text)
    const r = await runCli(bundle, ["migrate", "--json", file], sub)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(json(r), [{ id: "frag", status: "upgraded" }])
    assert.strictEqual(fs.readFileSync(path.join(sub, "frag.jsonl.v0.bak"), "utf8"), text)
    assert.strictEqual(fs.readFileSync(file, "utf8").trimEnd().split("\n").length, 3)
  }, SLOW)
})
