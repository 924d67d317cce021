/**
 * A streamed prompt (`Fleet.promptStream`, docs/fleet.md "Streaming"), in one process against a
 * fresh PostgreSQL database: a runner (`FleetRunner.layerRunner`, a real socket) serves the entity
 * with the scripted model and a toolkit, and the client follows the session's log through a
 * store of the same database. The updates come as the turn stores them (a text delta
 * arrives while the model is still mid-answer), tool calls and results come in order, the stream
 * ends with the answer, and a prompt sent again streams only its stored answer. A prompt that timed
 * out with no runner alive (`FleetUnavailable`) stays stored: a runner started later runs it once,
 * and the same prompt sent again gets that answer. In `npm run test:slow` (each test starts a
 * runner: a few seconds).
 */
import { assert, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import { layerClient, layerRunner } from "../../src/layers/fleet/FleetRunner.js"
import * as ScriptedLanguageModel from "../../src/layers/model/ScriptedLanguageModel.js"
import * as HeaderSnapshotterLive from "../../src/layers/session/HeaderSnapshotterLive.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import * as PostgresStore from "../../src/layers/sql/postgres/PostgresStore.js"
import { behaviour, keylessFleetModel } from "../../src/programs/cli/FleetMain.js"
import * as Fleet from "../../src/programs/fleet/Fleet.js"
import { handlers, route, system, toolkit } from "../agent/helpers.js"
import { describePg } from "../postgres/helpers.js"
import { freePort, freshDatabase } from "./helpers.js"
import { verifyStored } from "./verify.js"

const fleet = (scripts: ReadonlyArray<ScriptedLanguageModel.CallScript>) =>
  Effect.gen(function*() {
    const url = yield* Effect.promise(freshDatabase)
    const port = yield* Effect.promise(freePort)
    const runner = layerRunner({ url, listen: { host: "127.0.0.1", port }, lockExpirationMs: 3_000 })
    const served = Fleet.layer({ toolkit, system, route }).pipe(
      Layer.provide(Fleet.layerSessionFactory({ create: SessionLive.create, open: SessionLive.open })),
      Layer.provide(PostgresStore.layer({ url })),
      Layer.provide(Layer.mergeAll(ScriptedLanguageModel.layer({ scripts, requireConsumed: false }), HeaderSnapshotterLive.layer, handlers()))
    )
    const context = yield* Layer.build(Layer.merge(Layer.provideMerge(served, runner), PostgresStore.layer({ url })))
    return { url, context }
  })

describePg("Fleet.promptStream: a prompt's updates as the turn stores them", () => {
  it.live("deltas while the model is mid-answer, tool calls and results, the answer last; a prompt sent again streams its answer", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<void>()
      const { context, url } = yield* fleet([
        [{ type: "tool-call", id: "c1", name: "list_files", params: { dir: "." } }, { type: "finish", reason: "tool-calls" }],
        [{ type: "text", text: "two files here" }, { type: "finish", reason: "stop" }],
        [{ type: "text", text: "Hello there " }, { type: "hang", reached }]
      ])
      const run = (promptId: string, text: string) =>
        Fleet.promptStream("streamed", new Fleet.PromptRequest({ promptId, text })).pipe(Stream.runCollect, Effect.provide(context))

      // a turn with a tool call: every update, in the log's order, the answer last
      const first = Array.from(yield* run("p1", "list them"))
      assert.deepStrictEqual(first.map((u) => u._tag), ["TurnStarted", "ToolCall", "ToolResult", "TextDelta", "TextDelta", "TextDelta", "TurnEnded", "Answered"])
      const [started, call, result] = first.map((u) => ({ ...u, seq: 0 }))
      assert.deepStrictEqual(started, { _tag: "TurnStarted", turn: 1, attempt: 1, seq: 0 })
      assert.deepStrictEqual(call, { _tag: "ToolCall", turn: 1, attempt: 1, seq: 0, callId: "c1", name: "list_files", arguments: "{\"dir\":\".\"}" })
      assert.deepStrictEqual(result, { _tag: "ToolResult", turn: 1, attempt: 1, seq: 0, callId: "c1", isError: false })
      const text = first.flatMap((u) => (u._tag === "TextDelta" ? [u.text] : [])).join("")
      assert.strictEqual(text, "two files here")
      const answer = first[first.length - 1]
      assert(answer._tag === "Answered")
      assert.deepStrictEqual([answer.answer.turn, answer.answer.reason, answer.answer.text], [1, "completed", "two files here"])
      // the updates' seqs increase: each is a committed event of the log, delivered once
      const seqs = first.flatMap((u) => ("seq" in u ? [u.seq] : []))
      assert.deepStrictEqual(seqs, [...seqs].sort((a, b) => a - b))
      assert.strictEqual(new Set(seqs).size, seqs.length)

      // sent again with its id: only the stored answer, no turn
      const again = Array.from(yield* run("p1", "list them"))
      assert.deepStrictEqual(again, [answer])

      // a text delta arrives while the model still holds its answer (it hangs after it): streamed,
      // not delivered at the turn's end; then cancel ends the turn `aborted`, the answer last
      const updates = yield* Queue.unbounded<Fleet.PromptUpdate>()
      const streaming = yield* Fleet.promptStream("streamed", new Fleet.PromptRequest({ promptId: "p2", text: "hang" })).pipe(
        Stream.runForEach((u) => Queue.offer(updates, u)),
        Effect.provide(context),
        Effect.fork
      )
      const seen: Array<Fleet.PromptUpdate> = []
      while (!seen.some((u) => u._tag === "TextDelta")) seen.push(yield* Queue.take(updates))
      yield* Deferred.await(reached)
      const client = yield* Effect.provide(Fleet.client, context)
      assert.isTrue((yield* client("streamed").status()).busy)
      assert.deepStrictEqual(seen.map((u) => u._tag), ["TurnStarted", "TextDelta"])
      assert.isTrue(yield* client("streamed").cancel())
      yield* Fiber.join(streaming)
      const rest = Array.from(yield* Queue.takeAll(updates))
      const all = [...seen, ...rest]
      assert.strictEqual(all.flatMap((u) => (u._tag === "TextDelta" ? [u.text] : [])).join(""), "Hello there ")
      assert.deepStrictEqual(all.slice(-2).map((u) => u._tag === "TurnEnded" ? [u._tag, u.reason] : u._tag === "Answered" ? [u._tag, u.answer.reason] : [u._tag]), [
        ["TurnEnded", "aborted"],
        ["Answered", "aborted"]
      ])
      yield* verifyStored(url, "streamed", [["p1", "completed"], ["p2", "aborted"]])
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("a prompt that timed out with no runner alive stays stored: a runner started later runs it once, and sending it again gets that answer", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(freshDatabase)
      const request = new Fleet.PromptRequest({ promptId: "q1", text: "anyone?" })
      const lonely = yield* Effect.scoped(Effect.gen(function*() {
        const client = yield* Layer.build(Layer.merge(layerClient({ url }), PostgresStore.layer({ url })))
        return yield* Fleet.promptStream("late", request, { timeoutMs: 500 }).pipe(Stream.runCollect, Effect.provide(client), Effect.exit)
      }))
      assert(Exit.isFailure(lonely))
      assert.strictEqual(lonely.cause._tag === "Fail" ? lonely.cause.error._tag : lonely.cause._tag, "FleetUnavailable")
      const port = yield* Effect.promise(freePort)
      const runner = layerRunner({ url, listen: { host: "127.0.0.1", port }, lockExpirationMs: 3_000 })
      const served = behaviour({ url, model: keylessFleetModel, route: { provider: "scripted", model: "keyless-fleet" } })
      const context = yield* Layer.build(Layer.merge(Layer.provideMerge(served, runner), PostgresStore.layer({ url })))
      const again = Array.from(yield* Fleet.promptStream("late", request).pipe(Stream.runCollect, Effect.provide(context)))
      const last = again[again.length - 1]
      assert(last._tag === "Answered")
      assert.deepStrictEqual([last.answer.turn, last.answer.reason, last.answer.text], [1, "completed", "You said: anyone?"])
      yield* verifyStored(url, "late", [["q1", "completed"]])
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
