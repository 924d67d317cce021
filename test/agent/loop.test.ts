/**
 * The agent loop end to end (SPEC §1.6, §5.3, §1.3.5–§1.3.9) on the memory, JSONL and SQLite
 * stores with the invariants layer: a scripted multi-turn session with tool calls, the request of
 * every model call against `requestAt`, reopen and replay, `resume` for a second loop instance,
 * and a provider error ending the turn `error`.
 */
import * as AiError from "@effect/ai/AiError"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import * as AgentLoop from "../../src/programs/agent/AgentLoop.js"
import { Session } from "../../src/services/Session.js"
import { StoreFailure } from "../../src/schema/Errors.js"
import * as SessionApi from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import {
  assertChunkCitations,
  assertPaired,
  assertRequestsMatch,
  backends,
  dispatchPoints,
  environment,
  route,
  shape,
  system,
  toolkit
} from "./helpers.js"

type Rec = Record<string, any>

const turn1Scripts = [
  [
    { type: "text", text: "Let me look at the files." },
    { type: "tool-call", id: "c1", name: "list_files", params: { dir: "." } },
    { type: "finish", reason: "tool-calls", usage: { inputTokens: 100, outputTokens: 12 } }
  ],
  [
    { type: "reasoning", text: "a.txt looks relevant; b is unknown." },
    { type: "tool-call", id: "c2", name: "read_file", params: { path: "a.txt" } },
    { type: "tool-call", id: "c3", name: "read_file", params: { path: "missing.txt" }, whole: true },
    { type: "finish", reason: "tool-calls", usage: { inputTokens: 140, outputTokens: 20 } }
  ],
  [
    { type: "text", text: "a.txt says hello." },
    { type: "finish", reason: "stop", usage: { inputTokens: 180, outputTokens: 5, cachedInputTokens: 100 } }
  ]
] as const

const turn2Scripts = [
  [{ type: "text", text: "You are welc" }, { type: "finish", reason: "length", usage: { inputTokens: 200, outputTokens: 3 } }]
] as const

const turn3Scripts = [[{ type: "text", text: "Back again." }, { type: "finish", reason: "stop" }]] as const

const loopOptions = { toolkit, system, route }

for (const backend of backends) {
  describe(`agent loop on ${backend.name}`, () => {
    it.scoped("§1.6 multi-turn session: canonical order, pairing, requests equal requestAt, reopen replays, resume", () =>
      Effect.gen(function*() {
        const id = `agent-${backend.name}`
        const first = yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* SessionLive.create({ id })
          const loop = AgentLoop.make(loopOptions)
          const r1 = yield* loop.runTurn([{ type: "user", content: "List the files and read a.txt" }]).pipe(
            Effect.provideService(Session, session)
          )
          assert.deepStrictEqual(r1, { turn: 1, reason: { kind: "completed" }, steps: 3 })
          const r2 = yield* loop.runTurn([
            { type: "user", content: "thanks" },
            { type: "context", content: "<clock>noon</clock>", source: { kind: "plugin", plugin: "clock" }, meta: { x: 1 } }
          ]).pipe(Effect.provideService(Session, session))
          // a step that hit the output ceiling makes the turn max-tokens (sticky)
          assert.deepStrictEqual(r2, { turn: 2, reason: { kind: "max-tokens" }, steps: 1 })
          const events = yield* session.events
          assert.deepStrictEqual(shape(events), [
            "turn/start",
            "step/start",
            "user/message",
            "request/header",
            "request/context",
            "assistant/chunk*",
            "assistant/message",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/chunk*",
            "assistant/message",
            "tool/call",
            "tool/result",
            "tool/call",
            "tool/result",
            "step/end",
            "step/start",
            "assistant/chunk*",
            "assistant/message",
            "step/end",
            "turn/end",
            "turn/start",
            "step/start",
            "user/message",
            "context/message",
            "assistant/chunk*",
            "assistant/message",
            "step/end",
            "turn/end"
          ])
          const header = events.find((e) => e.type === "request/header")!.data as Rec
          assert.strictEqual(header.reason, "initial")
          assert.deepStrictEqual(header.header.config, { provider: "scripted", model: "test-model", maxTokens: 1024 })
          assert.strictEqual(header.header.system, system)
          assert.deepStrictEqual(header.header.tools.map((t: Rec) => t.name), ["list_files", "read_file", "slow"])
          assert.deepStrictEqual(events.find((e) => e.type === "request/context")!.data, {
            provider: "scripted",
            model: "test-model",
            contextWindow: 8192
          })
          assertPaired(events)
          assertChunkCitations(events)
          // the tool results: success, a returned failure with its own code, both citing their tool/call
          const results = events.filter((e) => e.type === "tool/result").map((e) => e.data as Rec)
          assert.deepStrictEqual(results[0].message.content[0].content, [{ type: "text", text: "[\"a.txt\",\"b.txt\"]" }])
          assert.deepStrictEqual(results[1].message.content[0].content, [{ type: "text", text: "hello from a" }])
          assert.strictEqual(results[2].message.content[0].isError, true)
          assert.deepStrictEqual(results[2].error, { name: "NotFound", code: "ENOENT" })
          // the second assistant message: reasoning then two calls with their raw arguments
          const messages = events.filter((e) => e.type === "assistant/message").map((e) => e.data as Rec)
          assert.deepStrictEqual(messages[1].message.content, [
            { type: "reasoning", text: "a.txt looks relevant; b is unknown." },
            { type: "tool-call", id: "c2", name: "read_file", arguments: "{\"path\":\"a.txt\"}" },
            { type: "tool-call", id: "c3", name: "read_file", arguments: "{\"path\":\"missing.txt\"}" }
          ])
          assert.deepStrictEqual(messages[0].usage, { inputTokens: 100, outputTokens: 12 })
          assert.deepStrictEqual(messages[2].usage, { inputTokens: 80, outputTokens: 5, cacheReadTokens: 100 })
          assert.deepStrictEqual(messages[3].message.content, [{ type: "text", text: "You are welc" }])
          // chunk vocabulary of the first call
          const chunks = events.filter((e) => e.type === "assistant/chunk" && (e.data as Rec).step === 1 && (e.data as Rec).turn === 1)
            .map((e) => (e.data as Rec).chunk.type)
          assert.deepStrictEqual(chunks, [
            "block-start",
            ...Array(6).fill("text-delta"),
            "block-end",
            "block-start",
            "tool-call-delta",
            "block-end",
            "usage",
            "finish"
          ])
          // turn 2 inherited the header: no request/header, no request/context
          assert.strictEqual(events.filter((e) => e.type === "request/header").length, 1)
          yield* assertRequestsMatch(session, dispatchPoints(events))
          const requests = yield* (yield* ScriptedModel).requests
          // call 4's prompt: system, then everything so far incl. the injected context (meta hidden)
          const lastPrompt = requests[3].prompt.content
          assert.strictEqual(lastPrompt[0].role, "system")
          assert.deepStrictEqual(lastPrompt.map((m) => m.role), [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "user",
            "user"
          ])
          return { messages: yield* session.messages, length: events.length }
        }))

        // reopen: the replayed log derives identical messages, and requestAt still reproduces every request
        const reopened = yield* SessionLive.open(id)
        const replayed = yield* reopened.events
        assert.strictEqual(replayed.length, first.length + 1) // + session/end-seed
        assert.deepStrictEqual(yield* reopened.messages, first.messages)
        yield* assertRequestsMatch(reopened, dispatchPoints(replayed))
        const inspected = yield* SessionLive.inspect(id)
        assert.strictEqual(inspected.closers.length, 0)

        // a second loop instance writes `resume` even though the header is unchanged
        const loop2 = AgentLoop.make(loopOptions)
        const r3 = yield* loop2.runTurn([{ type: "user", content: "are you there?" }]).pipe(
          Effect.provideService(Session, reopened)
        )
        assert.deepStrictEqual(r3, { turn: 3, reason: { kind: "completed" }, steps: 1 })
        const after = yield* reopened.events
        const headers = after.filter((e) => e.type === "request/header").map((e) => (e.data as Rec).reason)
        assert.deepStrictEqual(headers, ["initial", "resume"])
        // the context did not change, so no second request/context
        assert.strictEqual(after.filter((e) => e.type === "request/context").length, 1)
        yield* assertRequestsMatch(reopened, dispatchPoints(after))
        assertPaired(after)
      }).pipe(Effect.provide(environment(backend.layer(), [...turn1Scripts, ...turn2Scripts, ...turn3Scripts] as never))))

    it.scoped("§1.3.2 a provider error ends the turn error with {message, code, status}; the next turn runs", () =>
      Effect.gen(function*() {
        const session = yield* SessionLive.create({ id: `agent-error-${backend.name}` })
        const loop = AgentLoop.make(loopOptions)
        const failure = new AiError.HttpResponseError({
          module: "Scripted",
          method: "streamText",
          reason: "StatusCode",
          request: { method: "POST", url: "https://example.invalid/v1", urlParams: [], hash: Option.none(), headers: {} },
          response: { status: 529, headers: { "retry-after": "2", "x-request-id": "req-1" } }
        })
        const r1 = yield* loop.runTurn([{ type: "user", content: "hi" }]).pipe(Effect.provideService(Session, session))
        assert.strictEqual(r1.reason.kind, "error")
        const error = (r1.reason as Rec).error
        assert.strictEqual(error.code, "HttpResponseError")
        assert.strictEqual(error.status, 529)
        assert.strictEqual(error.providerRetryAfterMs, 2000)
        assert.strictEqual(error.requestId, "req-1")
        assert.isString(error.message)
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
        assert.deepStrictEqual((events[events.length - 1].data as Rec).reason, r1.reason)
        // the failed attempt's chunks stay in the log; no assistant message was written
        const r2 = yield* loop.runTurn([{ type: "user", content: "again" }]).pipe(Effect.provideService(Session, session))
        assert.deepStrictEqual(r2.reason, { kind: "completed" })
        assertPaired(yield* session.events)
        const inspected = yield* SessionLive.inspect(session.id)
        assert.strictEqual(inspected.closers.length, 0)
      }).pipe(Effect.provide(environment(backend.layer(), [
        [{ type: "text", text: "partial" }, {
          type: "fail",
          error: new AiError.HttpResponseError({
            module: "Scripted",
            method: "streamText",
            reason: "StatusCode",
            request: {
              method: "POST",
              url: "https://example.invalid/v1",
              urlParams: [],
              hash: Option.none(),
              headers: {}
            },
            response: { status: 529, headers: { "retry-after": "2", "x-request-id": "req-1" } }
          })
        }],
        [{ type: "text", text: "ok" }, { type: "finish", reason: "stop" }]
      ]))))
  })
}

describe("agent loop details", () => {
  const env = (scripts: Parameters<typeof environment>[1]) =>
    environment(backends[0].layer(), scripts)

  it.scoped("runTurn and the header snapshotter never copy the log: turns are numbered from the handle's counts", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "no-log-copies" })
      // the real handle, counting the reads of its whole log (each copies it after an append)
      let copies = 0
      const counted: SessionApi.SessionShape = {
        ...session,
        events: Effect.zipRight(Effect.sync(() => void copies++), session.events)
      }
      const loop = AgentLoop.make(loopOptions)
      const first = yield* loop.runTurn([{ type: "user", content: "one" }]).pipe(Effect.provideService(Session, counted))
      const second = yield* loop.runTurn([{ type: "user", content: "two" }]).pipe(Effect.provideService(Session, counted))
      assert.deepStrictEqual([first.turn, second.turn], [1, 2])
      assert.strictEqual(copies, 0, "no copy of the log per turn or per model call")
      const events = yield* session.events
      assert.deepStrictEqual(yield* session.counts, {
        events: events.length,
        turnStarts: events.filter((e) => e.type === "turn/start").length,
        replacedSinceHeader: false
      })
    }).pipe(Effect.provide(env([
      [{ type: "text", text: "a" }, { type: "finish", reason: "stop" }],
      [{ type: "text", text: "b" }, { type: "finish", reason: "stop" }]
    ]))))

  it.scoped("§1.6 an empty first batch ends the turn completed with no step and no model call", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "empty-batch" })
      const r = yield* AgentLoop.make(loopOptions).runTurn([]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r, { turn: 1, reason: { kind: "completed" }, steps: 0 })
      assert.deepStrictEqual(shape(yield* session.events), ["turn/start", "turn/end"])
    }).pipe(Effect.provide(env([]))))

  it.scoped("§1.3.6 an empty stream writes an assistant message citing [] (empty content, no projection)", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "empty-stream" })
      const r = yield* AgentLoop.make(loopOptions).runTurn([{ type: "user", content: "x" }]).pipe(
        Effect.provideService(Session, session)
      )
      assert.deepStrictEqual(r.reason, { kind: "completed" })
      const events = yield* session.events
      const message = events.find((e) => e.type === "assistant/message")!
      assert.deepStrictEqual(message.sourceEventSeqs, [])
      assert.deepStrictEqual((message.data as Rec).message.content, [])
      assert.strictEqual((message.data as Rec).usage, undefined)
      assert.deepStrictEqual((yield* session.messages).map((m) => m.role), ["user"])
    }).pipe(Effect.provide(env([[]]))))

  it.scoped("§1.3.5 a text block the provider never ends is ended at finish: the message holds the streamed text", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "unended" })
      const r = yield* AgentLoop.make(loopOptions).runTurn([{ type: "user", content: "x" }]).pipe(
        Effect.provideService(Session, session)
      )
      assert.deepStrictEqual(r.reason, { kind: "completed" })
      const events = yield* session.events
      const message = events.find((e) => e.type === "assistant/message")!
      assert.deepStrictEqual((message.data as Rec).message.content, [{ type: "text", text: "hello there" }])
      const chunks = events.filter((e) => e.type === "assistant/chunk").map((e) => (e.data as Rec).chunk.type)
      assert.deepStrictEqual(chunks, ["block-start", "text-delta", "text-delta", "block-end", "finish"])
      assert.deepStrictEqual(message.sourceEventSeqs, events.filter((e) => e.type === "assistant/chunk").map((e) => e.seq))
      assert.deepStrictEqual((yield* session.messages).at(-1)!.content, [{ type: "text", text: "hello there" }])
    }).pipe(Effect.provide(env([[
      { type: "raw", part: { type: "text-start", id: "t" } },
      { type: "raw", part: { type: "text-delta", id: "t", delta: "hello " } },
      { type: "raw", part: { type: "text-delta", id: "t", delta: "there" } },
      { type: "finish", reason: "stop" }
    ]]))))

  it.scoped("§5.3 newSeries on a later turn writes a series header; turn numbers continue from the log", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "series" })
      const loop = AgentLoop.make(loopOptions)
      yield* loop.runTurn([{ type: "user", content: "1" }]).pipe(Effect.provideService(Session, session))
      const r = yield* loop.runTurn([{ type: "user", content: "2" }], { newSeries: true }).pipe(
        Effect.provideService(Session, session)
      )
      assert.strictEqual(r.turn, 2)
      const reasons = (yield* session.events).filter((e) => e.type === "request/header").map((e) => (e.data as Rec).reason)
      assert.deepStrictEqual(reasons, ["initial", "series"])
    }).pipe(Effect.provide(env([
      [{ type: "text", text: "a" }, { type: "finish", reason: "stop" }],
      [{ type: "text", text: "b" }, { type: "finish", reason: "stop" }]
    ]))))

  it.scoped("§1.6 the pre-step hook runs inside the turn before each step/start; a failing hook ends the turn error", () =>
    Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "prestep" })
      const seen: Array<readonly [number, number, string | undefined]> = []
      const loop = AgentLoop.make({
        ...loopOptions,
        preStep: ({ session, step, turn }) =>
          Effect.flatMap(session.events, (events) =>
            step === 2 && turn === 2
              ? Effect.fail("compaction broke")
              : Effect.sync(() => void seen.push([turn, step, events[events.length - 1]?.type])))
      })
      const r1 = yield* loop.runTurn([{ type: "user", content: "go" }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r1.reason, { kind: "completed" })
      assert.deepStrictEqual(seen, [[1, 1, "turn/start"], [1, 2, "step/end"]])
      const r2 = yield* loop.runTurn([{ type: "user", content: "go" }]).pipe(Effect.provideService(Session, session))
      assert.deepStrictEqual(r2.reason, { kind: "error", error: { message: "compaction broke", code: "UNKNOWN" } })
      assertPaired(yield* session.events)
    }).pipe(Effect.provide(env([
      [{ type: "tool-call", id: "k1", name: "list_files", params: { dir: "." } }, { type: "finish", reason: "tool-calls" }],
      [{ type: "text", text: "done" }, { type: "finish", reason: "stop" }],
      [{ type: "tool-call", id: "k2", name: "list_files", params: { dir: "." } }, { type: "finish", reason: "tool-calls" }]
    ]))))

  it.scoped("§7.3 the checkpoint flushes at every pre-step boundary, before each model request, before each tool body and at the turn's end", () =>
    Effect.gen(function*() {
      const inner = yield* SessionLive.create({ id: "checkpoint" })
      // every flush records how long the log was when it ran
      const flushedAt: Array<number> = []
      const session: SessionApi.SessionShape = {
        ...inner,
        flush: Effect.flatMap(inner.events, (es) => Effect.sync(() => void flushedAt.push(es.length)))
      }
      const bodyAt: Array<number> = []
      yield* AgentLoop.make(loopOptions).runTurn([{ type: "user", content: "go" }]).pipe(
        Effect.provideService(Session, session),
        Effect.provide(toolkit.toLayer({
          list_files: () => Effect.flatMap(inner.events, (es) => Effect.sync(() => void bodyAt.push(es.length))).pipe(Effect.as([])),
          read_file: () => Effect.succeed(""),
          slow: () => Effect.succeed("")
        }))
      )
      const events = yield* inner.events
      const seqOf = (type: string, n = 0) => events.filter((e) => e.type === type)[n].seq
      assert.deepStrictEqual(flushedAt, [
        1, // (c) pre-step 1: after turn/start
        seqOf("request/context") + 1, // (a) after the header events, before the stream
        seqOf("tool/call") + 1, // (b) before the body of p1
        seqOf("tool/call", 1) + 1, // (b) before the body of p2
        seqOf("step/end") + 1, // (c) pre-step 2
        seqOf("step/start", 1) + 1, // (a) step 2 inherits the header
        events.length // (d) after turn/end: a finished turn is stored before runTurn returns
      ])
      // the bodies ran right after their checkpoints
      assert.deepStrictEqual(bodyAt, [seqOf("tool/call") + 1, seqOf("tool/call", 1) + 1])
      assert.deepStrictEqual(shape(events).slice(-3), ["assistant/message", "step/end", "turn/end"])
    }).pipe(Effect.provide(env([
      [
        { type: "tool-call", id: "p1", name: "list_files", params: { dir: "." } },
        { type: "tool-call", id: "p2", name: "list_files", params: { dir: "src" } },
        { type: "finish", reason: "tool-calls" }
      ],
      [{ type: "text", text: "done" }, { type: "finish", reason: "stop" }]
    ]))))

  it.scoped("§7.3 a failed checkpoint is fail-closed: the model is not called and the turn ends error", () =>
    Effect.gen(function*() {
      const inner = yield* SessionLive.create({ id: "checkpoint-fail" })
      let flushes = 0
      const session: SessionApi.SessionShape = {
        ...inner,
        flush: Effect.suspend(() =>
          ++flushes === 2
            ? Effect.fail(new StoreFailure({ method: "append", cause: "disk full" }))
            : Effect.void
        )
      }
      const r = yield* AgentLoop.make(loopOptions).runTurn([{ type: "user", content: "go" }]).pipe(
        Effect.provideService(Session, session)
      )
      assert.strictEqual(r.reason.kind, "error")
      assert.strictEqual((r.reason as Rec).error.code, "CHECKPOINT_FAILED")
      assert.strictEqual((yield* (yield* ScriptedModel).requests).length, 0)
      assert.deepStrictEqual(shape(yield* inner.events), [
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "request/context",
        "step/end",
        "turn/end"
      ])
    }).pipe(Effect.provide(environment(backends[0].layer(), [[{ type: "text", text: "never" }]], undefined, false))))
})
