/**
 * Interrupting a turn at every stage (SPEC §1.6, §1.3.6, §1.3.9, §7.3) on the memory, JSONL and
 * SQLite stores with the invariants layer: while streaming, between tool calls, inside a tool body
 * and during a tool checkpoint. Each leaves a balanced log — `step/end` and `turn/end` aborted,
 * every tool-call block answered once — that needs no repair closers and reopens to the same messages.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import type { CallScript } from "../../src/layers/model/ScriptedLanguageModel.js"
import * as AgentLoop from "../../src/programs/agent/AgentLoop.js"
import type { Event } from "../../src/schema/Events.js"
import { REPAIR_TEXT_OUTCOME_UNKNOWN } from "../../src/services/Repair.js"
import { Session } from "../../src/services/Session.js"
import * as SessionApi from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { assertChunkCitations, assertPaired, backends, environment, route, shape, system, toolkit } from "./helpers.js"

type Rec = Record<string, any>

/** Run one turn in a fiber, wait for `reached`, interrupt it; then check the log is balanced and closed. */
const interruptAt = (
  id: string,
  reached: Deferred.Deferred<void>,
  options: { readonly beforeToolCall?: AgentLoop.AgentLoopOptions<any>["beforeToolCall"]; readonly wrap?: (s: SessionApi.SessionShape) => SessionApi.SessionShape } = {}
) =>
  Effect.gen(function*() {
    const inner = yield* SessionLive.create({ id })
    const session = options.wrap === undefined ? inner : options.wrap(inner)
    const loop = AgentLoop.make({
      toolkit,
      system,
      route,
      ...(options.beforeToolCall === undefined ? {} : { beforeToolCall: options.beforeToolCall })
    })
    const fiber = yield* loop.runTurn([{ type: "user", content: "do it" }]).pipe(
      Effect.provideService(Session, session),
      Effect.fork
    )
    yield* Deferred.await(reached)
    const exit = yield* Fiber.interrupt(fiber)
    // interrupted, not failed: no append was vetoed by the invariants layer
    assert.isTrue(Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause), String(exit))
    const events = yield* inner.events
    assert.deepStrictEqual(events[events.length - 1].data, { turn: 1, reason: { kind: "aborted", reason: { kind: "user" } } })
    assert.strictEqual(events[events.length - 2].type, "step/end")
    assertPaired(events)
    assertChunkCitations(events)
    // the stored log needs no repair
    const inspected = yield* SessionLive.inspect(id)
    assert.strictEqual(inspected.closers.length, 0)
    assert.strictEqual(inspected.events.length, events.length)
    // the loop goes on: a new turn on the same handle
    const next = yield* loop.runTurn([{ type: "user", content: "next" }]).pipe(Effect.provideService(Session, session))
    assert.deepStrictEqual(next, { turn: 2, reason: { kind: "completed" }, steps: 1 })
    const messages = yield* inner.messages
    yield* inner.close
    const reopened = yield* SessionLive.open(id)
    assert.deepStrictEqual(yield* reopened.messages, messages)
    return events
  })

const results = (events: ReadonlyArray<Event>) =>
  events.filter((e) => e.type === "tool/result").map((e) => ({
    callId: (e.data as Rec).message.source.callId,
    code: (e.data as Rec).error?.code,
    text: (e.data as Rec).message.content[0].content[0]?.text
  }))

const finalTurn: CallScript = [{ type: "text", text: "ok" }, { type: "finish", reason: "stop" }]

for (const backend of backends) {
  describe(`interruption on ${backend.name}`, () => {
    it.scoped("§1.3.6 while streaming: the delivered text and reasoning become an interrupted message; calls are dropped", () => {
      const reached = Deferred.unsafeMake<void>(FiberId.none)
      return Effect.gen(function*() {
        const events = yield* interruptAt(`stream-${backend.name}`, reached)
        assert.deepStrictEqual(shape(events).slice(0, 9), [
          "turn/start",
          "step/start",
          "user/message",
          "request/header",
          "request/context",
          "assistant/chunk*",
          "assistant/message",
          "step/end",
          "turn/end"
        ])
        const message = events.find((e) => e.type === "assistant/message")!
        const data = message.data as Rec
        assert.strictEqual(data.interrupted, true)
        assert.deepStrictEqual(data.message.content, [
          { type: "reasoning", text: "thinking it over" },
          { type: "text", text: "Hello wor" }
        ])
        // it cites every chunk of the attempt, including those of the dropped tool call
        const chunkSeqs = events.filter((e) => e.type === "assistant/chunk" && (e.data as Rec).turn === 1).map((e) => e.seq)
        assert.deepStrictEqual(message.sourceEventSeqs, chunkSeqs)
        assert.isTrue(chunkSeqs.length >= 6)
        assert.strictEqual(events.filter((e) => e.type === "tool/call").length, 0)
      }).pipe(Effect.provide(environment(backend.layer(), [
        [
          { type: "reasoning", text: "thinking it over" },
          { type: "raw", part: { type: "text-start", id: "t" } },
          { type: "raw", part: { type: "text-delta", id: "t", delta: "Hello " } },
          { type: "raw", part: { type: "text-delta", id: "t", delta: "wor" } },
          { type: "tool-call", id: "dropped", name: "list_files", params: { dir: "." } },
          { type: "hang", reached }
        ],
        finalTurn
      ])))
    })

    it.scoped("§1.3.6 interrupted before any chunk: no assistant message, the turn still closes", () => {
      const reached = Deferred.unsafeMake<void>(FiberId.none)
      return Effect.gen(function*() {
        const events = yield* interruptAt(`nochunk-${backend.name}`, reached)
        assert.deepStrictEqual(shape(events).slice(0, 7), [
          "turn/start",
          "step/start",
          "user/message",
          "request/header",
          "request/context",
          "step/end",
          "turn/end"
        ])
      }).pipe(Effect.provide(environment(backend.layer(), [[{ type: "hang", reached }], finalTurn])))
    })

    it.scoped("§1.6 between tool calls: undispatched calls get tool/call + ABORTED_BEFORE_DISPATCH results", () => {
      const reached = Deferred.unsafeMake<void>(FiberId.none)
      return Effect.gen(function*() {
        const events = yield* interruptAt(`between-${backend.name}`, reached, {
          // the pre-execution policy of the second call waits (e.g. for approval) until interrupted
          beforeToolCall: (call) =>
            call.callId === "b2" ? Deferred.succeed(reached, undefined).pipe(Effect.zipRight(Effect.never)) : Effect.void
        })
        assert.deepStrictEqual(results(events).map(({ callId, code }) => [callId, code]), [
          ["b1", undefined],
          ["b2", "ABORTED_BEFORE_DISPATCH"],
          ["b3", "ABORTED_BEFORE_DISPATCH"]
        ])
        assert.deepStrictEqual(shape(events).slice(6), [
          "assistant/message",
          "tool/call",
          "tool/result",
          "tool/call",
          "tool/result",
          "tool/call",
          "tool/result",
          "step/end",
          "turn/end"
        ])
        const aborted = events.filter((e) => (e.data as Rec).error?.code === "ABORTED_BEFORE_DISPATCH")
        for (const e of aborted) assert.strictEqual((e.data as Rec).message.content[0].isError, true)
      }).pipe(Effect.provide(environment(backend.layer(), [
        [
          { type: "tool-call", id: "b1", name: "list_files", params: { dir: "." } },
          { type: "tool-call", id: "b2", name: "read_file", params: { path: "a.txt" } },
          { type: "tool-call", id: "b3", name: "read_file", params: { path: "b.txt" } },
          { type: "finish", reason: "tool-calls" }
        ],
        finalTurn
      ])))
    })

    it.scoped("§1.6 inside a tool body: the running call's outcome is unknown, later calls are aborted before dispatch", () => {
      const reached = Deferred.unsafeMake<void>(FiberId.none)
      return Effect.gen(function*() {
        const events = yield* interruptAt(`body-${backend.name}`, reached)
        assert.deepStrictEqual(results(events), [
          { callId: "s1", code: "TOOL_OUTCOME_UNKNOWN", text: REPAIR_TEXT_OUTCOME_UNKNOWN },
          { callId: "s2", code: "ABORTED_BEFORE_DISPATCH", text: results(events)[1].text }
        ])
        assert.strictEqual(events.filter((e) => e.type === "tool/call").length, 2)
      }).pipe(Effect.provide(environment(backend.layer(), [
        [
          { type: "text", text: "Running the slow tool." },
          { type: "tool-call", id: "s1", name: "slow", params: {} },
          { type: "tool-call", id: "s2", name: "list_files", params: { dir: "." } },
          { type: "finish", reason: "tool-calls" }
        ],
        finalTurn
      ], reached)))
    })
  })
}

describe("interruption during a checkpoint", () => {
  it.scoped("§7.3 (b) interruption during the tool checkpoint answers the call ABORTED_BEFORE_DISPATCH; its body never runs", () => {
    const reached = Deferred.unsafeMake<void>(FiberId.none)
    return Effect.gen(function*() {
      let flushes = 0
      const events = yield* interruptAt("checkpoint-interrupt", reached, {
        wrap: (inner) => ({
          ...inner,
          // the third flush is the tool checkpoint (after pre-step and model request): it hangs
          flush: Effect.suspend(() =>
            ++flushes === 3 ? Deferred.succeed(reached, undefined).pipe(Effect.zipRight(Effect.never)) : Effect.void
          )
        })
      })
      assert.deepStrictEqual(results(events).map(({ callId, code }) => [callId, code]), [["k1", "ABORTED_BEFORE_DISPATCH"]])
      // the call was recorded as started (tool/call) before the checkpoint; the result cites it
      assert.deepStrictEqual(shape(events).slice(5, 11), [
        "assistant/chunk*",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "turn/end"
      ])
    }).pipe(Effect.provide(environment(backends[0].layer(), [
      [{ type: "tool-call", id: "k1", name: "slow", params: {} }, { type: "finish", reason: "tool-calls" }],
      finalTurn
    ])))
  })
})
