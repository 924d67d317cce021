/**
 * Crash repair closers (SPEC §6): every row of the expected-sequence table, with seqs, times,
 * ids, error codes, citations and the exact texts byte for byte; the scan's bookkeeping
 * (re-registration order, last tool/call wins, unmatched tool/call ignored); and, over random
 * valid logs cut at every position, closers that validate and close everything.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { validateSeed } from "../../src/services/Seed.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { closers, REPAIR_TEXT_NOT_STARTED, REPAIR_TEXT_OUTCOME_UNKNOWN } from "../../src/services/Repair.js"
import { anyValidLog, asEvents } from "../arbitraries.js"
import { textContent as text } from "../helpers/events.js"
import { runs } from "../suites.js"

// SPEC §6, copied byte for byte (each is the single line inside its block)
const SPEC_OUTCOME_UNKNOWN =
  "This tool call was interrupted after it was recorded as started, so its outcome is unknown: it may or may not have taken effect. Retry it only if it is read-only or idempotent. Otherwise check the current state first, or ask the user. Do not retry blindly."
const SPEC_NOT_STARTED =
  "This tool call was interrupted before it was recorded as started, so it did not run. Retry it if it is still needed."

type Rec = Record<string, unknown>

/** Build a log from [type, data, extra?] with seq = index and a distinct time per event. */
const log = (...specs: ReadonlyArray<readonly [string, Rec, Rec?]>): Array<Event> =>
  specs.map(([type, data, extra], seq) => ({ type, seq, time: 5000 + seq * 7, data, ...extra }) as unknown as Event)

const turnStart = (turn = 1) => ["turn/start", { turn }] as const
const turnEnd = (turn = 1) => ["turn/end", { turn, reason: { kind: "completed" } }] as const
const stepStart = (step = 1, turn = 1) => ["step/start", { turn, step }] as const
const stepEnd = (step = 1, turn = 1) => ["step/end", { turn, step }] as const
const user = (id: string) =>
  ["user/message", { id, role: "user", content: text(id), source: { kind: "user" } }, { surfaceOp: "append" }] as const
const assistant = (id: string, callIds: ReadonlyArray<string>, step = 1, turn = 1) =>
  [
    "assistant/message",
    {
      turn,
      step,
      message: {
        id,
        role: "assistant",
        content: [...text(id), ...callIds.map((c) => ({ type: "tool-call", id: c, name: "run", arguments: "{}" }))],
        source: { kind: "model", provider: "p", model: "m" }
      }
    },
    { surfaceOp: "append" }
  ] as const
const toolCall = (callId: string, step = 1, turn = 1) =>
  ["tool/call", { turn, step, callId, name: "run", arguments: "{}" }] as const
const toolResult = (callId: string, callSeq: number, step = 1, turn = 1) =>
  [
    "tool/result",
    {
      turn,
      step,
      message: {
        id: `r-${callId}`,
        role: "user",
        content: [{ type: "tool-result", toolCallId: callId, content: text("ok") }],
        source: { kind: "tool", callId }
      }
    },
    { surfaceOp: "append", sourceEventSeqs: [callSeq] }
  ] as const

const closerTypes = (events: ReadonlyArray<Event>) => closers(events).map((e) => e.type)

/** The closers validate on top of the log (SPEC §6: valid under every rule of §3). */
const validates = (events: ReadonlyArray<Event>) =>
  Effect.gen(function*() {
    const all = [...events, ...closers(events)].map((e) => JSON.parse(encodeEvent(e)))
    yield* validateSeed(all)
  })

describe("closers (SPEC 6)", () => {
  it("the two texts are the SPEC's, byte for byte", () => {
    assert.strictEqual(REPAIR_TEXT_OUTCOME_UNKNOWN, SPEC_OUTCOME_UNKNOWN)
    assert.strictEqual(REPAIR_TEXT_NOT_STARTED, SPEC_NOT_STARTED)
    assert.notInclude(REPAIR_TEXT_OUTCOME_UNKNOWN, "\n")
    assert.notInclude(REPAIR_TEXT_NOT_STARTED, "\n")
  })

  it("an empty log and a log not inside an open turn need no closers", () => {
    assert.deepStrictEqual(closers([]), [])
    assert.deepStrictEqual(closers(log(turnStart(), user("u"), turnEnd())), [])
    assert.deepStrictEqual(closers(log(turnStart(), turnEnd(), ["todo/write", { todos: [] }])), [])
    // messages outside any turn: nothing is open
    assert.deepStrictEqual(closers(log(user("u"), assistant("a", ["c1"]))), [])
  })

  it.effect("an open turn only: [turn/end interrupted] at the next seq with the last real event's time", () =>
    Effect.gen(function*() {
      const events = log(turnStart(), turnEnd(), turnStart(2), user("u"))
      const out = closers(events)
      assert.deepStrictEqual(out, [
        { type: "turn/end", seq: 4, time: 5021, data: { turn: 2, reason: { kind: "interrupted" } } } as unknown as Event
      ])
      assert.strictEqual(encodeEvent(out[0]), `{"type":"turn/end","seq":4,"time":5021,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`)
      yield* validates(events)
    }))

  it.effect("an open step: [step/end, turn/end]", () =>
    Effect.gen(function*() {
      const events = log(turnStart(3), stepStart(1, 3), stepEnd(1, 3), stepStart(2, 3), user("u"))
      const out = closers(events)
      assert.deepStrictEqual(out.map(encodeEvent), [
        `{"type":"step/end","seq":5,"time":5028,"data":{"turn":3,"step":2}}`,
        `{"type":"turn/end","seq":6,"time":5028,"data":{"turn":3,"reason":{"kind":"interrupted"}}}`
      ])
      yield* validates(events)
    }))

  it.effect("an assistant tool request without tool/call: TOOL_NOT_STARTED, no sourceEventSeqs, exact bytes", () =>
    Effect.gen(function*() {
      const events = log(turnStart(), stepStart(), user("u"), assistant("a", ["call_1"]))
      const out = closers(events)
      assert.deepStrictEqual(out.map((e) => e.type), ["tool/result", "step/end", "turn/end"])
      assert.strictEqual(
        encodeEvent(out[0]),
        `{"type":"tool/result","seq":4,"time":5021,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call_1-4","role":"user","content":[{"type":"tool-result","toolCallId":"call_1","content":[{"type":"text","text":${
          JSON.stringify(SPEC_NOT_STARTED)
        }}],"isError":true}],"source":{"kind":"tool","callId":"call_1"}},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`
      )
      assert.isFalse("sourceEventSeqs" in out[0])
      assert.deepStrictEqual(out.map((e) => [e.seq, e.time]), [[4, 5021], [5, 5021], [6, 5021]])
      yield* validates(events)
    }))

  it.effect("an assistant tool request with its tool/call: TOOL_OUTCOME_UNKNOWN citing the tool/call, exact bytes", () =>
    Effect.gen(function*() {
      const events = log(turnStart(), stepStart(), user("u"), assistant("a", ["call_1"]), toolCall("call_1"))
      const out = closers(events)
      assert.strictEqual(
        encodeEvent(out[0]),
        `{"type":"tool/result","seq":5,"time":5028,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call_1-5","role":"user","content":[{"type":"tool-result","toolCallId":"call_1","content":[{"type":"text","text":${
          JSON.stringify(SPEC_OUTCOME_UNKNOWN)
        }}],"isError":true}],"source":{"kind":"tool","callId":"call_1"}},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"sourceEventSeqs":[4],"surfaceOp":"append"}`
      )
      assert.deepStrictEqual(out.slice(1).map(encodeEvent), [
        `{"type":"step/end","seq":6,"time":5028,"data":{"turn":1,"step":1}}`,
        `{"type":"turn/end","seq":7,"time":5028,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`
      ])
      yield* validates(events)
    }))

  it.effect("two calls, one answered: one result, for the other call; each id carries its closer's own seq", () =>
    Effect.gen(function*() {
      const events = log(
        turnStart(),
        stepStart(),
        assistant("a", ["c1", "c2", "c3"]),
        toolCall("c1"), // 3
        toolResult("c1", 3), // 4
        toolCall("c2") // 5
      )
      const out = closers(events)
      assert.deepStrictEqual(out.map((e) => e.type), ["tool/result", "tool/result", "step/end", "turn/end"])
      const d = out.map((e) => e.data as any)
      assert.deepStrictEqual(d[0].message.source, { kind: "tool", callId: "c2" })
      assert.strictEqual(d[0].message.id, "interrupted-tool-result-c2-6")
      assert.strictEqual(d[0].error.code, "TOOL_OUTCOME_UNKNOWN")
      assert.deepStrictEqual(out[0].sourceEventSeqs, [5])
      assert.deepStrictEqual(d[1].message.source, { kind: "tool", callId: "c3" })
      assert.strictEqual(d[1].message.id, "interrupted-tool-result-c3-7")
      assert.strictEqual(d[1].error.code, "TOOL_NOT_STARTED")
      assert.isUndefined(out[1].sourceEventSeqs)
      yield* validates(events)
    }))

  it.effect("calls of an earlier, closed turn are never answered", () =>
    Effect.gen(function*() {
      const events = log(turnStart(), stepStart(), assistant("a", ["old"]), toolCall("old"), turnEnd(), turnStart(2))
      assert.deepStrictEqual(closerTypes(events), ["turn/end"])
      yield* validates(events)
    }))

  it.effect("a call whose step was closed by step/end is not answered: [turn/end]", () =>
    Effect.gen(function*() {
      const events = log(turnStart(), stepStart(), assistant("a", ["c1", "c2"]), toolCall("c1"), stepEnd())
      const out = closers(events)
      assert.deepStrictEqual(out.map((e) => e.type), ["turn/end"])
      assert.strictEqual(out[0].seq, 5)
      yield* validates(events)
    }))

  it.effect("a later step's calls carry their registering step; calls of the closed earlier step stay unanswered", () =>
    Effect.gen(function*() {
      const events = log(
        turnStart(),
        stepStart(1),
        assistant("a1", ["c1"], 1),
        stepEnd(1),
        stepStart(2),
        assistant("a2", ["c2"], 2)
      )
      const out = closers(events)
      assert.deepStrictEqual(out.map((e) => e.type), ["tool/result", "step/end", "turn/end"])
      assert.strictEqual((out[0].data as any).step, 2)
      assert.strictEqual((out[0].data as any).message.source.callId, "c2")
      assert.deepStrictEqual(out[1].data, { turn: 1, step: 2 })
      yield* validates(events)
    }))

  it("re-registering a call keeps its map position; the registering step is the latest", () => {
    const events = log(
      turnStart(),
      stepStart(1),
      assistant("a1", ["c1", "c2"], 1),
      assistant("a2", ["c2", "c1"], 1)
    )
    const out = closers(events)
    assert.deepStrictEqual(out.slice(0, 2).map((e) => (e.data as any).message.source.callId), ["c1", "c2"])
    assert.deepStrictEqual(out.slice(0, 2).map((e) => e.seq), [4, 5])
  })

  it("the last tool/call of a pending call wins; a tool/call without a pending assistant block is ignored", () => {
    const events = log(
      turnStart(),
      stepStart(),
      toolCall("stray"), // 2: no assistant block registered it
      assistant("a", ["c1"]), // 3
      toolCall("c1"), // 4
      toolCall("c1") // 5
    )
    const out = closers(events)
    assert.deepStrictEqual(out.map((e) => e.type), ["tool/result", "step/end", "turn/end"])
    assert.deepStrictEqual(out[0].sourceEventSeqs, [5])
    assert.strictEqual((out[0].data as any).message.source.callId, "c1")
  })

  it("a turn/start inside an open turn restarts the bookkeeping (pending calls of the older one are dropped)", () => {
    const events = log(turnStart(1), stepStart(), assistant("a", ["c1"]), turnStart(2))
    assert.deepStrictEqual(closers(events).map((e) => encodeEvent(e)), [
      `{"type":"turn/end","seq":4,"time":5021,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`
    ])
  })

  it.effect.prop("every prefix of a random valid log: closers validate, and the closed log needs no more", [anyValidLog], ([built]) =>
    Effect.gen(function*() {
      const events = asEvents(built.events)
      for (let cut = 0; cut <= events.length; cut++) {
        const prefix = events.slice(0, cut)
        const out = closers(prefix)
        if (out.length > 0) {
          assert.strictEqual(out[out.length - 1].type, "turn/end")
          for (const e of out) assert.strictEqual(e.time, prefix[prefix.length - 1].time)
          assert.deepStrictEqual(out.map((e) => e.seq), out.map((_, k) => cut + k))
        }
        yield* validates(prefix)
        assert.deepStrictEqual(closers([...prefix, ...out]), [])
      }
    }), { fastCheck: { numRuns: runs(40) } })
})
