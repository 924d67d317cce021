/**
 * `session/cancel` through the SDK's in-process connection (ACP.md §1.2, §2.4): mid-stream,
 * mid-tool and during a pending permission request the prompt answers `cancelled` after its
 * updates, the log is balanced (`turn/end` aborted), an idle cancel does not affect the next
 * prompt, a cancelled prompt's late turn end never settles the next prompt, and a prompt sent while
 * a cancelled one is still settling waits for it (or is cancelled itself by a later cancel).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import { call, connect, CWD, environment, type Harness, rawEvents, say, storedEvents, waitFor } from "./helpers.js"

const start = (h: Harness) => Effect.map(h.request("session/new", { cwd: CWD, mcpServers: [] }), (r) => r.sessionId as string)
const prompt = (h: Harness, sessionId: string, text: string) =>
  h.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] })

/** The updates after the cancelled prompt's answer: none. */
const assertAnswerLast = (h: Harness) => {
  const answer = h.frames.findIndex((f) => f.kind === "response" && f.method === "session/prompt")
  assert.isFalse(h.frames.slice(answer + 1).some((f) => f.kind === "update"), "no update after the answer")
}

const turnEnds = (sessionId: string) =>
  Effect.map(storedEvents(sessionId), (events) => events.filter((e) => e.type === "turn/end").map((e) => (e.data as any).reason.kind))

describe("ACP session/cancel", () => {
  it.scoped("cancel mid-stream: the delivered prefix stays, the answer is cancelled, the turn ends aborted", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* start(h)
      const running = yield* Effect.fork(prompt(h, id, "go"))
      yield* waitFor(() => h.updates(id).length > 0)
      yield* h.notify("session/cancel", { sessionId: id })
      const answer = yield* running.await.pipe(Effect.flatten)
      assert.deepStrictEqual(answer, { stopReason: "cancelled" })
      assertAnswerLast(h)
      const events = yield* storedEvents(id)
      const message = events.find((e) => e.type === "assistant/message")!
      assert.strictEqual((message.data as any).interrupted, true)
      assert.deepStrictEqual(yield* turnEnds(id), ["aborted"])
    }).pipe(Effect.provide(environment([[{ type: "text", text: "partial answer " }, { type: "hang" }]]).layer)))

  it.scoped("cancel mid-tool: the running call is settled failed before the answer", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<void>()
      return yield* Effect.gen(function*() {
        const h = yield* connect()
        const id = yield* start(h)
        const running = yield* Effect.fork(prompt(h, id, "wait"))
        yield* Deferred.await(reached)
        yield* h.notify("session/cancel", { sessionId: id })
        assert.strictEqual((yield* running.await.pipe(Effect.flatten)).stopReason, "cancelled")
        assertAnswerLast(h)
        const tools = h.updates(id).filter((u) => u.sessionUpdate !== "agent_message_chunk").map((u: any) => [u.sessionUpdate, u.status])
        assert.deepStrictEqual(tools, [["tool_call", "pending"], ["tool_call_update", "in_progress"], ["tool_call_update", "failed"]])
        const codes = (yield* storedEvents(id)).filter((e) => e.type === "tool/result").map((e) => (e.data as any).error.code)
        assert.deepStrictEqual(codes, ["TOOL_OUTCOME_UNKNOWN"])
      }).pipe(Effect.provide(environment([call("s1", "slow", {})], { reached }).layer))
    }))

  it.scoped("cancel during a pending permission request: the client's request is cancelled, the tool never runs", () =>
    Effect.gen(function*() {
      const env = environment([call("w1", "write_file", { path: "x", text: "y" })])
      return yield* Effect.gen(function*() {
        let aborted = false
        const h = yield* connect({
          permission: (_request, signal) =>
            new Promise((resolve) =>
              signal.addEventListener("abort", () => {
                aborted = true
                resolve({ outcome: { outcome: "cancelled" } })
              })
            )
        })
        const id = yield* start(h)
        const running = yield* Effect.fork(prompt(h, id, "write"))
        yield* waitFor(() => h.frames.some((f) => f.kind === "permission"))
        yield* h.notify("session/cancel", { sessionId: id })
        assert.strictEqual((yield* running.await.pipe(Effect.flatten)).stopReason, "cancelled")
        yield* waitFor(() => aborted)
        assert.deepStrictEqual(env.written, [])
        const results = (yield* storedEvents(id)).filter((e) => e.type === "tool/result").map((e) => (e.data as any).error.code)
        assert.deepStrictEqual(results, ["ABORTED_BEFORE_DISPATCH"])
        assert.deepStrictEqual(yield* turnEnds(id), ["aborted"])
      }).pipe(Effect.provide(env.layer))
    }))

  it.scoped("an idle cancel does not affect the next prompt; a late turn end cannot settle the next prompt", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* start(h)
      yield* h.notify("session/cancel", { sessionId: id })
      assert.strictEqual((yield* prompt(h, id, "first")).stopReason, "end_turn")
      const running = yield* Effect.fork(prompt(h, id, "hang"))
      yield* waitFor(() => h.updates(id).some((u) => u.sessionUpdate === "agent_message_chunk" && (u.content as any).text === "slow "))
      yield* h.notify("session/cancel", { sessionId: id })
      yield* h.notify("session/cancel", { sessionId: id }) // a repeated cancel is harmless
      assert.strictEqual((yield* running.await.pipe(Effect.flatten)).stopReason, "cancelled")
      assert.strictEqual((yield* prompt(h, id, "third")).stopReason, "end_turn")
      const answers = h.frames.flatMap((f) => f.kind === "response" && f.method === "session/prompt" ? [(f.result as any).stopReason] : [])
      assert.deepStrictEqual(answers, ["end_turn", "cancelled", "end_turn"])
      assert.deepStrictEqual(yield* turnEnds(id), ["completed", "aborted", "completed"])
    }).pipe(Effect.provide(environment([say("one"), [{ type: "text", text: "slow " }, { type: "hang" }], say("three")]).layer)))

  it.scoped("a prompt sent while a cancelled one is still settling waits for it; each is answered by its own turn", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<void>()
      const cleanup = { begun: yield* Deferred.make<void>(), done: yield* Deferred.make<void>() }
      return yield* Effect.gen(function*() {
        const h = yield* connect()
        const id = yield* start(h)
        const other = yield* start(h)
        const first = yield* Effect.fork(prompt(h, id, "wait"))
        yield* Deferred.await(reached)
        yield* h.notify("session/cancel", { sessionId: id })
        yield* Deferred.await(cleanup.begun) // the cancel was taken: the tool winds down, the turn has not ended
        const second = yield* Effect.fork(prompt(h, id, "next"))
        // a later request answered: the agent has taken up the second prompt (requests start in order)
        yield* h.request("session/set_mode", { sessionId: other, modeId: "plan" })
        const answers = () => h.frames.flatMap((f) => f.kind === "response" && f.method === "session/prompt" ? [f] : [])
        assert.deepStrictEqual(answers(), [], "the cancelled prompt is still settling, the next one waits")
        yield* Deferred.succeed(cleanup.done, undefined)
        assert.deepStrictEqual(yield* first.await.pipe(Effect.flatten), { stopReason: "cancelled" })
        assert.deepStrictEqual(yield* second.await.pipe(Effect.flatten), { stopReason: "end_turn" })
        // the client saw: the cancelled call settled, its answer, then the next turn's output, its answer
        const seen = h.frames.flatMap((f) =>
          f.kind === "response" && f.method === "session/prompt" ? [`answer ${(f.result as any).stopReason}`] :
          f.kind === "update" && f.sessionId === id && f.update.sessionUpdate === "tool_call_update" ? [`tool ${f.update.status}`] :
          f.kind === "update" && f.sessionId === id && f.update.sessionUpdate === "agent_message_chunk" ? [`text ${(f.update.content as any).text}`] :
          []
        )
        assert.deepStrictEqual(seen, ["tool in_progress", "tool failed", "answer cancelled", "text afterwards", "answer end_turn"])
        assert.deepStrictEqual(yield* turnEnds(id), ["aborted", "completed"])
      }).pipe(Effect.provide(environment([call("s1", "slow", {}), say("afterwards")], { reached, cleanup }).layer))
    }))

  it.scoped("a cancel received while a prompt waits for a cancelled one to settle cancels the waiting prompt: it never runs", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<void>()
      const cleanup = { begun: yield* Deferred.make<void>(), done: yield* Deferred.make<void>() }
      return yield* Effect.gen(function*() {
        const h = yield* connect()
        const id = yield* start(h)
        const other = yield* start(h)
        const first = yield* Effect.fork(prompt(h, id, "wait"))
        yield* Deferred.await(reached)
        yield* h.notify("session/cancel", { sessionId: id })
        yield* Deferred.await(cleanup.begun)
        const second = yield* Effect.fork(prompt(h, id, "next"))
        yield* h.request("session/set_mode", { sessionId: other, modeId: "plan" })
        yield* h.notify("session/cancel", { sessionId: id })
        yield* h.request("session/set_mode", { sessionId: other, modeId: "code" }) // the cancel was taken
        yield* Deferred.succeed(cleanup.done, undefined)
        assert.deepStrictEqual(yield* first.await.pipe(Effect.flatten), { stopReason: "cancelled" })
        assert.deepStrictEqual(yield* second.await.pipe(Effect.flatten), { stopReason: "cancelled" })
        assert.deepStrictEqual(yield* turnEnds(id), ["aborted"])
        const users = (yield* storedEvents(id)).filter((e) => e.type === "user/message").map((e) => (e.data as any).content[0].text)
        assert.deepStrictEqual(users, ["wait"])
      }).pipe(Effect.provide(environment([call("s1", "slow", {})], { reached, cleanup }).layer))
    }))

  it.scoped("disconnect tears the sessions down: the running turn ends and is flushed", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* start(h)
      yield* Effect.fork(Effect.exit(prompt(h, id, "go")))
      yield* waitFor(() => h.updates(id).length > 0)
      yield* h.close
      yield* Effect.promise(() => h.connection.closed.catch(() => undefined))
      // the teardown runs after the close: poll the stored log (no repair) until the turn ended
      let ends: Array<string> = []
      while (ends.length === 0) {
        const events = yield* rawEvents(id)
        ends = events.filter((e) => e.type === "turn/end").map((e) => (e.data as any).reason.kind)
        if (ends.length === 0) yield* Effect.promise(() => new Promise((r) => setTimeout(r, 2)))
      }
      assert.deepStrictEqual(ends, ["aborted"])
    }).pipe(Effect.provide(environment([[{ type: "text", text: "x " }, { type: "hang" }]]).layer)))
})
