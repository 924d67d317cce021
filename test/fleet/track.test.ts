/**
 * How a streamed prompt reads the session's log (`Fleet.trackPrompt`, docs/fleet.md "Streaming"),
 * on generated logs of turns of several prompts and attempts: the updates name only the tracked
 * prompt's turns, with the attempt its message id names (`<id>`, `<id>#<n>`); each turn's text
 * deltas join to its streamed text, its tool calls and results come in order, and its end carries
 * the turn's reason. Followed from any seq (a client starts at the log's length when it sends), the
 * updates are those of the whole log for the turns whose `turn/start` is at or after that seq.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import * as Fleet from "../../src/programs/fleet/Fleet.js"

interface GenTurn {
  readonly prompt: "p" | "q"
  readonly attempt: number
  readonly deltas: ReadonlyArray<string>
  readonly tools: ReadonlyArray<string>
  readonly end: "completed" | "interrupted" | "aborted" | "error" | undefined
}

const genTurn: fc.Arbitrary<GenTurn> = fc.record({
  prompt: fc.constantFrom("p" as const, "q" as const),
  attempt: fc.integer({ min: 1, max: 3 }),
  deltas: fc.array(fc.string({ minLength: 1, maxLength: 6 }), { maxLength: 4 }),
  tools: fc.array(fc.constantFrom("list_files", "read_file"), { maxLength: 2 }),
  end: fc.constantFrom("completed" as const, "interrupted" as const, "aborted" as const, "error" as const, undefined)
})

/** The log of `turns` (the last may be open: no end); events as `follow` delivers them. */
const logOf = (turns: ReadonlyArray<GenTurn>) => {
  const events: Array<{ seq: number; type: string; data: Record<string, unknown> }> = []
  const add = (type: string, data: Record<string, unknown>) => events.push({ seq: events.length, type, data })
  add("request/header", {})
  turns.forEach((t, i) => {
    const turn = i + 1
    add("turn/start", { turn })
    add("user/message", { id: t.attempt === 1 ? t.prompt : `${t.prompt}#${t.attempt}`, role: "user", content: [{ type: "text", text: "hi" }] })
    add("step/start", { turn, step: 1 })
    add("assistant/chunk", { turn, step: 1, chunk: { type: "block-start", index: 0, blockType: "text" } })
    for (const d of t.deltas) add("assistant/chunk", { turn, step: 1, chunk: { type: "text-delta", index: 0, text: d } })
    t.tools.forEach((name, n) => {
      add("tool/call", { turn, step: 1, callId: `c${turn}-${n}`, name, arguments: "{}" })
      add("tool/result", {
        turn,
        step: 1,
        message: { id: `r${turn}-${n}`, role: "user", content: [{ type: "tool-result", toolCallId: `c${turn}-${n}`, content: [], isError: n === 1 }] }
      })
    })
    add("step/end", { turn, step: 1 })
    if (t.end !== undefined || i < turns.length - 1) add("turn/end", { turn, reason: { kind: t.end ?? "interrupted" } })
  })
  return events
}

const track = (events: ReadonlyArray<unknown>, promptId = "p") => {
  const tracker = Fleet.makePromptTracker(promptId)
  return events.flatMap((e) => Fleet.trackPrompt(tracker, e))
}

const genLog = fc.array(genTurn, { minLength: 1, maxLength: 6 })

describe("Fleet.trackPrompt", () => {
  it.prop("updates only for the tracked prompt's turns, each turn's deltas, tools and end in order", [genLog], ([turns]) => {
    const updates = track(logOf(turns))
    turns.forEach((t, i) => {
      const turn = i + 1
      const mine = updates.filter((u) => u._tag !== "Answered" && u.turn === turn)
      if (t.prompt !== "p") return assert.deepStrictEqual(mine, [])
      const expected = [
        "TurnStarted",
        ...t.deltas.map(() => "TextDelta"),
        ...t.tools.flatMap(() => ["ToolCall", "ToolResult"]),
        ...(t.end !== undefined || i < turns.length - 1 ? ["TurnEnded"] : [])
      ]
      assert.deepStrictEqual(mine.map((u) => u._tag), expected)
      for (const u of mine) assert(u._tag !== "Answered" && u.attempt === t.attempt)
      assert.strictEqual(mine.flatMap((u) => (u._tag === "TextDelta" ? [u.text] : [])).join(""), t.deltas.join(""))
      assert.deepStrictEqual(mine.flatMap((u) => (u._tag === "ToolResult" ? [u.isError] : [])), t.tools.map((_, n) => n === 1))
      const end = mine.find((u) => u._tag === "TurnEnded")
      if (end?._tag === "TurnEnded") assert.strictEqual(end.reason, t.end ?? "interrupted")
    })
    // every update is one event's, in seq order
    const seqs = updates.flatMap((u) => ("seq" in u ? [u.seq] : []))
    assert.deepStrictEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b))
  })

  it.prop("followed from any seq: the whole log's updates of the turns that start there or later", [
    genLog.chain((turns) => fc.tuple(fc.constant(turns), fc.nat({ max: logOf(turns).length })))
  ], ([[turns, from]]) => {
    const events = logOf(turns)
    const whole = track(events)
    const startedFrom = new Set(events.flatMap((e) => (e.type === "turn/start" && e.seq >= from ? [e.data.turn] : [])))
    assert.deepStrictEqual(track(events.slice(from)), whole.filter((u) => u._tag !== "Answered" && startedFrom.has(u.turn)))
  })

  it("a message id names its attempt: <id> is 1, <id>#<n> is n, anything else none", () => {
    assert.deepStrictEqual(
      ["p", "p#2", "p#17", "p#1", "p#", "p#x", "p2", "q", "pp#2", 7, undefined].map((id) => Fleet.attemptOf(id, "p")),
      [1, 2, 17, undefined, undefined, undefined, undefined, undefined, undefined, undefined, undefined]
    )
  })
})
