/**
 * The context-overflow retry of the agent loop (SPEC §9.7, §5.3 R5, §1.6) in a scripted loop with
 * the deterministic summariser and the invariants layer: an overflow error runs prune + compaction
 * and retries the same step's request with a `series` header and smaller messages; at most
 * `maxOverflowRetries` retries between successful assistant messages; no retry when nothing could
 * be compacted or when the predicate says no; a successful message resets the counter.
 */
import * as AiError from "@effect/ai/AiError"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { type CallScript, ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import { layerSummarizerDeterministic } from "../../src/layers/model/SummarizerLive.js"
import * as AgentLoop from "../../src/programs/agent/AgentLoop.js"
import * as Compact from "../../src/programs/compaction/Compact.js"
import { aiErrorFailure, encodePrompt } from "../../src/services/PromptConversion.js"
import type { Event } from "../../src/schema/Events.js"
import { Session } from "../../src/services/Session.js"
import * as SessionApi from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { Summarizer } from "../../src/services/Summarizer.js"
import {
  assertChunkCitations,
  assertPaired,
  assertRequestsMatch,
  backends,
  environment,
  route,
  shape,
  system,
  toolkit
} from "./helpers.js"

type Rec = Record<string, any>

const words = (n: number, word: string): string => Array.from({ length: n }, (_, i) => `${word}${i}`).join(" ")

const overflowError = (text = "prompt is too long: 9100 tokens > 8192 maximum") =>
  new AiError.UnknownError({ module: "Scripted", method: "streamText", description: text })

const httpError = (status: number) =>
  new AiError.HttpResponseError({
    module: "Scripted",
    method: "streamText",
    reason: "StatusCode",
    request: { method: "POST", url: "https://example.invalid/v1", urlParams: [], hash: Option.none(), headers: {} },
    response: { status, headers: {} }
  })

/** An attempt that streams some text, then fails with `error`. */
const failing = (error: AiError.AiError, text = "partial answer"): CallScript => [{ type: "text", text }, {
  type: "fail",
  error
}]
const answer = (text: string): CallScript => [{ type: "text", text }, { type: "finish", reason: "stop" }]
const callTool = (id: string): CallScript => [
  { type: "tool-call", id, name: "list_files", params: { dir: "." } },
  { type: "finish", reason: "tool-calls" }
]

const env = (store: Parameters<typeof environment>[0], scripts: ReadonlyArray<CallScript>) =>
  Layer.merge(environment(store, scripts), layerSummarizerDeterministic)

const memory = () => backends[0].layer()

/** The dispatch point of every model-call attempt (failed ones too): the event before its first chunk. */
const attemptPoints = (events: ReadonlyArray<Event>): Array<number> => {
  const out: Array<number> = []
  for (const e of events) {
    if (e.type === "assistant/chunk" && events[e.seq - 1]?.type !== "assistant/chunk") out.push(e.seq - 1)
  }
  return out
}

const headerReasons = (events: ReadonlyArray<Event>) =>
  events.filter((e) => e.type === "request/header").map((e) => (e.data as Rec).reason as string)

const ofType = (events: ReadonlyArray<Event>, type: string) => events.filter((e) => e.type === type)

/** Turn 1: a long user message answered briefly (something worth compacting). */
const firstTurn = (loop: { readonly runTurn: AgentLoop.AgentLoop<any>["runTurn"] }, session: SessionApi.SessionShape) =>
  loop.runTurn([{ type: "user", content: words(400, "background") }]).pipe(Effect.provideService(Session, session))

const loopOptions = { toolkit, system, route }

for (const backend of backends) {
  describe(`overflow retry on ${backend.name}`, () => {
    it.scoped("§9.7 an overflow runs the compaction and retries the step's request with a series header (R5) and smaller messages", () =>
      Effect.gen(function*() {
        const id = `overflow-${backend.name}`
        const session = yield* SessionLive.create({ id })
        const handler = Compact.onOverflow({ maxOverflowRetries: 1 })
        const loop = AgentLoop.make({ ...loopOptions, overflow: handler })
        const r1 = yield* firstTurn(loop, session)
        assert.deepStrictEqual(r1.reason, { kind: "completed" })
        const n = (yield* session.events).length
        const r2 = yield* loop.runTurn([{ type: "user", content: "continue" }]).pipe(Effect.provideService(Session, session))
        assert.deepStrictEqual(r2, { turn: 2, reason: { kind: "completed" }, steps: 1 })
        const events = yield* session.events
        assert.deepStrictEqual(shape(events.slice(n)), [
          "turn/start",
          "step/start",
          "user/message",
          "assistant/chunk*", // the failed attempt: its chunks stay in the log
          "compaction/start",
          "compaction/summary",
          "user/message",
          "compaction/end",
          "request/header",
          "assistant/chunk*",
          "assistant/message",
          "step/end",
          "turn/end"
        ])
        // turn 2's first attempt inherited the header; the retry after the compaction is `series`
        assert.deepStrictEqual(headerReasons(events), ["initial", "series"])
        assert.strictEqual(ofType(events, "request/context").length, 1)
        // the compaction is owned by the open turn and shadows everything but the new user message
        const start = ofType(events, "compaction/start")[0]
        assert.strictEqual((start.data as Rec).turn, 2)
        const summary = ofType(events, "compaction/summary")[0].data as Rec
        const turn2User = events[n + 2]
        assert.deepStrictEqual(summary.shadowedSeqs, [ofType(events, "user/message")[0].seq, ofType(events, "assistant/message")[0].seq])
        const checkpoint = ofType(events, "user/message")[2]
        assert.deepStrictEqual(checkpoint.sourceEventSeqs, [start.seq, start.seq + 1, ...summary.shadowedSeqs])
        assert.strictEqual((checkpoint.data as Rec).source.plugin, "compact")
        // the assistant message cites the retry's chunks only
        assertChunkCitations(events)
        const message = ofType(events, "assistant/message")[1]
        const retryChunks = ofType(events, "assistant/chunk").filter((e) => e.seq > ofType(events, "request/header")[1].seq)
        assert.deepStrictEqual(message.sourceEventSeqs, retryChunks.map((e) => e.seq))
        assert.deepStrictEqual(yield* session.surface.nodes, [checkpoint.seq, turn2User.seq, message.seq])
        assert.deepStrictEqual((message.data as Rec).message.content, [{ type: "text", text: "Continuing from the checkpoint." }])
        // every attempt's request (the failed one too) equals requestAt at its dispatch point
        const points = attemptPoints(events)
        assert.strictEqual(points.length, 3)
        assert.strictEqual(points[2], ofType(events, "request/header")[1].seq)
        yield* assertRequestsMatch(session, points)
        const requests = yield* (yield* ScriptedModel).requests
        const failed = requests[1].prompt.content
        const retried = requests[2].prompt.content
        assert.deepStrictEqual(failed.map((m) => m.role), ["system", "user", "assistant", "user"])
        assert.deepStrictEqual(retried.map((m) => m.role), ["system", "user", "user"])
        assert.isBelow(JSON.stringify(encodePrompt(requests[2].prompt)).length, JSON.stringify(encodePrompt(requests[1].prompt)).length / 3)
        // a successful assistant message reset the counter
        assert.strictEqual(yield* handler.attempts, 0)
        // reopening derives the same messages and needs no closers
        const messages = yield* session.messages
        const inspected = yield* SessionLive.inspect(id)
        assert.strictEqual(inspected.closers.length, 0)
        yield* session.close
        const reopened = yield* SessionLive.open(id)
        assert.deepStrictEqual(yield* reopened.messages, messages)
        yield* assertRequestsMatch(reopened, points)
      }).pipe(Effect.provide(env(backend.layer(), [
        answer("Noted."),
        failing(overflowError()),
        answer("Continuing from the checkpoint.")
      ]))))
  })
}

describe("overflow retry limits", () => {
  it.scoped("§9.7 at most maxOverflowRetries: a second overflow in the same run ends the turn error; the next turn may retry again", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "overflow-twice" })
      const loop = AgentLoop.make({ ...loopOptions, overflow: { maxOverflowRetries: 1 } })
      yield* firstTurn(loop, session)
      const n = (yield* session.events).length
      const second = overflowError("context_length_exceeded (second time)")
      const r2 = yield* loop.runTurn([{ type: "user", content: words(300, "details") }]).pipe(
        Effect.provideService(Session, session)
      )
      assert.deepStrictEqual(r2.reason, { kind: "error", error: aiErrorFailure(second) })
      const events = yield* session.events
      assert.deepStrictEqual(shape(events.slice(n)), [
        "turn/start",
        "step/start",
        "user/message",
        "assistant/chunk*",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
        "request/header",
        "assistant/chunk*",
        "step/end",
        "turn/end"
      ])
      assert.strictEqual(ofType(events, "compaction/start").length, 1)
      assert.strictEqual((yield* (yield* ScriptedModel).requests).length, 3)
      // a new turn starts with a fresh budget: its overflow is retried after a compaction
      const m = events.length
      const r3 = yield* loop.runTurn([{ type: "user", content: "try again" }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r3.reason, { kind: "completed" })
      const after = yield* session.events
      assert.deepStrictEqual(shape(after.slice(m)), [
        "turn/start",
        "step/start",
        "user/message",
        "assistant/chunk*",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
        "request/header",
        "assistant/chunk*",
        "assistant/message",
        "step/end",
        "turn/end"
      ])
      assert.deepStrictEqual(headerReasons(after), ["initial", "series", "series"])
      yield* assertRequestsMatch(session, attemptPoints(after))
      assertPaired(after)
      assert.strictEqual((yield* SessionLive.inspect(session.id)).closers.length, 0)
    }).pipe(Effect.provide(env(memory(), [
      answer("Noted."),
      failing(overflowError()),
      failing(overflowError("context_length_exceeded (second time)")),
      failing(overflowError()),
      answer("ok")
    ]))))

  it.scoped("§9.7 maxOverflowRetries 0: the overflow ends the turn error and nothing is compacted", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "overflow-zero" })
      const loop = AgentLoop.make({ ...loopOptions, overflow: { maxOverflowRetries: 0 } })
      yield* firstTurn(loop, session)
      const r2 = yield* loop.runTurn([{ type: "user", content: "go" }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r2.reason, { kind: "error", error: aiErrorFailure(overflowError()) })
      const events = yield* session.events
      assert.strictEqual(ofType(events, "compaction/start").length, 0)
      assert.strictEqual(yield* session.surface.replaceGeneration, 0)
    }).pipe(Effect.provide(env(memory(), [answer("Noted."), failing(overflowError())]))))

  it.scoped("§9.7 no retry when replaceGeneration did not advance (nothing to prune or compact)", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "overflow-nothing" })
      const handler = Compact.onOverflow({})
      const loop = AgentLoop.make({ ...loopOptions, overflow: handler })
      // the surface holds one message: the retained tail covers it all (P4)
      const r = yield* loop.runTurn([{ type: "user", content: words(50, "only") }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r, { turn: 1, reason: { kind: "error", error: aiErrorFailure(overflowError()) }, steps: 1 })
      const events = yield* session.events
      assert.deepStrictEqual(shape(events), [
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
        "assistant/chunk*",
        "step/end",
        "turn/end"
      ])
      assert.strictEqual(yield* session.surface.replaceGeneration, 0)
      // the handler was consulted once (and found nothing to compact)
      assert.strictEqual(yield* handler.attempts, 1)
      assert.strictEqual((yield* (yield* ScriptedModel).requests).length, 1)
    }).pipe(Effect.provide(env(memory(), [failing(overflowError())]))))

  it.scoped("§9.7 an error the predicate does not classify as overflow ends the turn error without compaction", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "overflow-not" })
      // a custom predicate: only HTTP 413 is an overflow
      const loop = AgentLoop.make({
        ...loopOptions,
        overflow: { isContextOverflow: (e: unknown) => e instanceof AiError.HttpResponseError && e.response.status === 413 }
      })
      yield* firstTurn(loop, session)
      const r2 = yield* loop.runTurn([{ type: "user", content: "a" }]).pipe(Effect.provideService(Session, session))
      assert.strictEqual(r2.reason.kind, "error")
      assert.strictEqual((r2.reason as Rec).error.status, 529)
      assert.strictEqual(ofType(yield* session.events, "compaction/start").length, 0)
      // the default text classifier is replaced: an overflow-sounding message is not an overflow here
      const r3 = yield* loop.runTurn([{ type: "user", content: "b" }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r3.reason, { kind: "error", error: aiErrorFailure(overflowError()) })
      assert.strictEqual(ofType(yield* session.events, "compaction/start").length, 0)
      // a 413 is retried after a compaction
      const r4 = yield* loop.runTurn([{ type: "user", content: "c" }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r4.reason, { kind: "completed" })
      const events = yield* session.events
      assert.strictEqual(ofType(events, "compaction/end").length, 1)
      assert.deepStrictEqual(headerReasons(events), ["initial", "series"])
      yield* assertRequestsMatch(session, attemptPoints(events))
    }).pipe(Effect.provide(env(memory(), [
      answer("Noted."),
      failing(httpError(529)),
      failing(overflowError()),
      failing(httpError(413)),
      answer("ok")
    ]))))

  it.scoped("§9.7 a successful assistant message resets the counter: a later overflow in the same turn retries again", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "overflow-reset" })
      const handler = Compact.onOverflow({ maxOverflowRetries: 1 })
      const loop = AgentLoop.make({ ...loopOptions, overflow: handler })
      yield* firstTurn(loop, session)
      const n = (yield* session.events).length
      const r2 = yield* loop.runTurn([{ type: "user", content: words(300, "details") }]).pipe(
        Effect.provideService(Session, session)
      )
      assert.deepStrictEqual(r2, { turn: 2, reason: { kind: "completed" }, steps: 2 })
      const events = yield* session.events
      assert.deepStrictEqual(shape(events.slice(n)), [
        "turn/start",
        "step/start",
        "user/message",
        "assistant/chunk*",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
        "request/header",
        "assistant/chunk*",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/chunk*",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
        "request/header",
        "assistant/chunk*",
        "assistant/message",
        "step/end",
        "turn/end"
      ])
      assert.deepStrictEqual(headerReasons(events), ["initial", "series", "series"])
      // the second compaction keeps the open call/result pair together (balanced cut)
      const second = ofType(events, "compaction/summary")[1].data as Rec
      const call = ofType(events, "assistant/message")[1]
      assert.isFalse(second.shadowedSeqs.includes(call.seq))
      assert.deepStrictEqual((yield* session.messages).map((m) => m.role), ["user", "assistant", "user", "assistant"])
      assertPaired(events)
      assertChunkCitations(events)
      yield* assertRequestsMatch(session, attemptPoints(events))
      assert.strictEqual(yield* handler.attempts, 0)
    }).pipe(Effect.provide(env(memory(), [
      answer("Noted."),
      failing(overflowError()),
      callTool("t1"),
      failing(overflowError()),
      answer("done")
    ]))))

  it.scoped("§9.7 a compaction failure while handling the overflow ends the turn error (UNKNOWN)", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "overflow-p13" })
      // an invalid policy: handle fails with P13
      const loop = AgentLoop.make({ ...loopOptions, overflow: { retainTokens: 1, retainRatio: 0.1 } })
      yield* firstTurn(loop, session)
      const r2 = yield* loop.runTurn([{ type: "user", content: "go" }]).pipe(Effect.provideService(Session, session))
      assert.strictEqual(r2.reason.kind, "error")
      assert.strictEqual((r2.reason as Rec).error.code, "UNKNOWN")
      assert.match((r2.reason as Rec).error.message, /mutually exclusive/)
      assertPaired(yield* session.events)
    }).pipe(Effect.provide(env(memory(), [answer("Noted."), failing(overflowError())]))))

  it.scoped("§9.7 interrupted while the overflow compaction runs: the turn ends aborted, the bracket is closed, no closers", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<void>()
      const session = yield* SessionLive.create({ id: "overflow-interrupt" })
      const loop = AgentLoop.make({ ...loopOptions, overflow: {} })
      const hanging = Layer.succeed(Summarizer, {
        summarize: () => Deferred.succeed(reached, undefined).pipe(Effect.zipRight(Effect.never))
      })
      yield* firstTurn(loop, session).pipe(Effect.provide(layerSummarizerDeterministic))
      const fiber = yield* loop.runTurn([{ type: "user", content: "go" }]).pipe(
        Effect.provideService(Session, session),
        Effect.provide(hanging),
        Effect.fork
      )
      yield* Deferred.await(reached)
      yield* Fiber.interrupt(fiber)
      const events = yield* session.events
      assert.deepStrictEqual(shape(events).slice(-6), [
        "user/message",
        "assistant/chunk*",
        "compaction/start",
        "compaction/end",
        "step/end",
        "turn/end"
      ])
      assert.isString((ofType(events, "compaction/end")[0].data as Rec).error)
      assert.deepStrictEqual((events[events.length - 1].data as Rec).reason, { kind: "aborted", reason: { kind: "user" } })
      // the failed attempt's chunks are not turned into an interrupted assistant message
      assert.strictEqual(ofType(events, "assistant/message").length, 1)
      assert.strictEqual((yield* SessionLive.inspect(session.id)).closers.length, 0)
    }).pipe(Effect.provide(environment(memory(), [answer("Noted."), failing(overflowError())]))))
})
