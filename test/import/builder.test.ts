/**
 * The shared pieces of the transcript import: what `LogBuilder` writes is accepted by the seed
 * pipeline of `LogCursor`, and `LogCursor` refuses what the rules refuse (so the check before each
 * batch is written is not vacuous), with the rule id of SPEC §3.4.
 */
import { assert, describe, it } from "@effect/vitest"
import { LogBuilder } from "../../src/programs/import/LogBuilder.js"
import { LogCursor } from "../../src/programs/import/SessionWriter.js"
import { keepRest } from "../../src/programs/import/SourceLines.js"
import type { Event } from "../../src/schema/Events.js"

const text = (t: string) => [{ type: "text", text: t }]

describe("TranscriptImport: LogBuilder and LogCursor", () => {
  it("a built log with turns, calls, results and a compaction passes the seed pipeline", () => {
    const b = new LogBuilder()
    b.ignorable("import/origin", { tool: "test" })
    b.prompt("p1", text("hi"))
    b.assistant("a1", [...text("calling"), { type: "tool-call", id: "c1", name: "t", arguments: "{}" }], { provider: "x", model: "m" })
    assert.strictEqual(b.canAnswer("c1"), true)
    assert.strictEqual(b.canAnswer("c9"), "result-without-call")
    b.toolResult("r1", "c1", text("ok"), false)
    assert.strictEqual(b.canAnswer("c1"), "duplicate-result")
    b.assistant("a2", text("done"), { provider: "x", model: "m" })
    b.compaction("s1", text("summary"), "k1")
    b.prompt("p2", text("again"))
    b.finish()
    const events = b.take()
    const cursor = new LogCursor()
    assert.strictEqual(cursor.push(events).length, events.length)
    assert.strictEqual(cursor.error, undefined)
    // the surface is the summary and what followed it
    assert.deepStrictEqual(cursor.nodes.map((s) => events[s].type), ["user/message", "user/message"])
    assert.deepStrictEqual(
      events.filter((e) => e.type.startsWith("turn/") || e.type.startsWith("step/")).map((e) => `${e.type} ${JSON.stringify(e.data)}`),
      [
        "turn/start {\"turn\":1}",
        "step/start {\"turn\":1,\"step\":1}",
        "step/end {\"turn\":1,\"step\":1}",
        "step/start {\"turn\":1,\"step\":2}",
        "step/end {\"turn\":1,\"step\":2}",
        "turn/end {\"turn\":1,\"reason\":{\"kind\":\"completed\"}}",
        "turn/start {\"turn\":2}",
        "step/start {\"turn\":2,\"step\":1}",
        "step/end {\"turn\":2,\"step\":1}",
        "turn/end {\"turn\":2,\"reason\":{\"kind\":\"completed\"}}"
      ]
    )
    assert.strictEqual(events.at(-1)?.type, "import/end")
  })

  it("LogCursor refuses a surface event without its marker (D3) and a replace that misses a node (F4), then accepts nothing", () => {
    const ok: Event = { type: "user/message", seq: 0, time: 0, data: { id: "u", role: "user", content: [], source: { kind: "user" } }, surfaceOp: "append" }
    const unmarked: Event = { type: "user/message", seq: 1, time: 0, data: { id: "v", role: "user", content: [], source: { kind: "user" } } }
    const d3 = new LogCursor()
    assert.strictEqual(d3.push([ok, unmarked]).length, 1)
    assert.strictEqual(d3.error?._tag, "SurfaceMarkerInvalid")
    assert.strictEqual((d3.error as any).rule, "D3")
    assert.strictEqual(d3.push([{ ...unmarked, surfaceOp: "append" }]).length, 0)
    const second: Event = { ...ok, seq: 1, data: { id: "w", role: "user", content: [], source: { kind: "user" } } }
    const replace: Event = { ...ok, seq: 2, sourceEventSeqs: [1], surfaceOp: { op: "replace", start: 0, end: 1 } }
    const f4 = new LogCursor()
    assert.strictEqual(f4.push([ok, second, replace]).length, 2)
    assert.strictEqual(f4.error?._tag, "ReplaceRangeInvalid")
    assert.strictEqual((f4.error as any).rule, "F4")
  })

  it("keepRest keeps a source block's other keys beside the mapped block", () => {
    const source = { type: "text", text: "see [1]", citations: [{ url: "https://example.org" }] }
    assert.deepStrictEqual(keepRest({ type: "text", text: "see [1]" }, source, ["type", "text"], "claudeCode"), {
      type: "text",
      text: "see [1]",
      claudeCode: { citations: [{ url: "https://example.org" }] }
    })
    assert.deepStrictEqual(keepRest({ type: "text", text: "x" }, { type: "text", text: "x" }, ["type", "text"], "claudeCode"), {
      type: "text",
      text: "x"
    })
  })
})
