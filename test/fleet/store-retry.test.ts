/**
 * A transient store failure is not a prompt's answer (issue 34): a runner in process
 * (`FleetRunner.layerRunner`, a fresh PostgreSQL database) whose sessions are opened from the real
 * PostgreSQL store through a factory that fails the opens of a session while the test says so,
 * with `StoreFailure` "timeout exceeded when trying to connect" (fault injection on our own store,
 * as a database that cannot be reached fails). A prompt whose opens fail a few times is answered
 * once, by its first attempt; a store that stays down through the entity's retries leaves no reply
 * in the cluster's message storage (the prompt stays stored) and the cluster delivers the prompt
 * again until the store is back, then it is answered once; a `StoreFailure` with a rule id is a
 * verdict, answered as the prompt's error without a retry.
 */
import { assert, it } from "@effect/vitest"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Schedule from "effect/Schedule"
import { layerRunner } from "../../src/layers/fleet/FleetRunner.js"
import * as HeaderSnapshotterLive from "../../src/layers/session/HeaderSnapshotterLive.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import * as PostgresStore from "../../src/layers/sql/postgres/PostgresStore.js"
import { keylessFleetModel } from "../../src/programs/cli/FleetMain.js"
import * as Fleet from "../../src/programs/fleet/Fleet.js"
import { StoreFailure } from "../../src/schema/Errors.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { withClient } from "../helpers/postgres.js"
import { describePg } from "../postgres/helpers.js"
import { freePort, freshDatabase } from "./helpers.js"
import { verifyStored } from "./verify.js"

/** Per session: opens that fail (a count, or every one while `down`), and how many were tried. */
interface Faults {
  failures: number
  down: boolean
  rule: string | undefined
  opens: number
  /** Appends (batches written) of the session that fail next. */
  appendFailures: number
}

const faults = new Map<string, Faults>()
const faultsOf = (id: string): Faults => {
  let f = faults.get(id)
  if (f === undefined) faults.set(id, f = { failures: 0, down: false, rule: undefined, opens: 0, appendFailures: 0 })
  return f
}

const unreachable = (rule: string | undefined) =>
  new StoreFailure({
    method: "load",
    cause: new Error("timeout exceeded when trying to connect"),
    ...(rule === undefined ? {} : { rule })
  })

/** The real factory, whose opens fail as `faults` says. */
const flakyFactory = Layer.effect(
  Fleet.SessionFactory,
  Effect.map(Fleet.SessionFactory, (factory): Fleet.SessionFactoryShape => ({
    create: factory.create,
    open: (id, persistence) =>
      Effect.suspend(() => {
        const f = faultsOf(id)
        f.opens++
        if (f.down || f.failures > 0) {
          f.failures = Math.max(0, f.failures - 1)
          return Effect.fail(unreachable(f.rule))
        }
        if (f.rule !== undefined) return Effect.fail(unreachable(f.rule))
        return factory.open(id, persistence)
      })
  }))
)

/** The real store, whose appends fail as `faults` says. */
const flakyStore = Layer.effect(
  SessionStore,
  Effect.map(SessionStore, (store): SessionStoreShape => ({
    ...store,
    append: (id, events, options) =>
      Effect.suspend(() => {
        const f = faultsOf(id)
        if (f.appendFailures === 0) return store.append(id, events, options)
        f.appendFailures--
        return Effect.fail(new StoreFailure({ method: "append", cause: new Error("timeout exceeded when trying to connect") }))
      })
  }))
)

const fleet = Effect.gen(function*() {
  const url = yield* Effect.promise(freshDatabase)
  const port = yield* Effect.promise(freePort)
  const runner = layerRunner({ url, listen: { host: "127.0.0.1", port }, lockExpirationMs: 3_000 })
  const served = Fleet.layer({
    toolkit: Toolkit.empty,
    system: "You are an agent of a session-log fleet.",
    route: { provider: "scripted", model: "keyless-fleet" },
    // two tries per delivery: no waiting on timers here
    storeRetry: Schedule.recurs(1)
  }).pipe(
    Layer.provide(flakyFactory),
    Layer.provide(Fleet.layerSessionFactory({ create: SessionLive.create, open: SessionLive.open })),
    Layer.provide(flakyStore),
    Layer.provide(PostgresStore.layer({ url })),
    Layer.provide(Layer.merge(keylessFleetModel, HeaderSnapshotterLive.layer)),
    Layer.provide(Toolkit.empty.toLayer({}))
  )
  const context = yield* Layer.build(Layer.provideMerge(served, runner))
  const client = yield* Fleet.client.pipe(Effect.provide(context))
  return { url, client, runner: `127.0.0.1:${port}` }
})

/** The cluster's stored messages and replies of a session's prompts. */
const storedPrompts = (url: string, session: string) =>
  Effect.promise(() =>
    withClient(url, async (c) => {
      const messages = await c.query(
        `SELECT id FROM session_log_fleet.cluster_messages WHERE entity_id = $1 AND tag = 'prompt'`,
        [session]
      )
      const replies = await c.query(
        `SELECT r.payload FROM session_log_fleet.cluster_replies r
           JOIN session_log_fleet.cluster_messages m ON m.id = r.request_id
          WHERE m.entity_id = $1 AND m.tag = 'prompt'`,
        [session]
      )
      return { messages: messages.rowCount ?? 0, replies: replies.rows.map((r) => String(r.payload)) }
    })
  )

describePg("Fleet: a transient store failure is not a prompt's answer", () => {
  it.live("retried opens, a store down through redeliveries, a rule-id failure, a failed checkpoint", () =>
    Effect.gen(function*() {
      const { client, runner, url } = yield* fleet

      // one failed open: the entity's retry opens the session, the prompt is answered once
      faultsOf("s-retry").failures = 1
      const first = yield* client("s-retry").prompt(new Fleet.PromptRequest({ promptId: "p1", text: "hello" }))
      assert.deepStrictEqual(first, {
        sessionId: "s-retry",
        promptId: "p1",
        turn: 1,
        reason: "completed",
        text: "You said: hello",
        attempt: 1,
        runner,
        replayed: false
      })
      assert.strictEqual(faultsOf("s-retry").opens, 2)
      assert.deepStrictEqual(yield* client("s-retry").prompt(new Fleet.PromptRequest({ promptId: "p1", text: "hello" })), first)
      yield* verifyStored(url, "s-retry", [["p1", "completed"]])

      // the store down through more than one delivery: the handler's defect is no reply; the
      // cluster delivers the prompt again (each delivery tries twice: four opens are two)
      const down = faultsOf("s-11")
      down.down = true
      const waiting = yield* Effect.fork(client("s-11").prompt(new Fleet.PromptRequest({ promptId: "p-11", text: "still here?" })))
      yield* Effect.sync(() => down.opens).pipe(Effect.repeat({ schedule: Schedule.spaced("20 millis"), until: (n) => n >= 4 }))
      assert.deepStrictEqual(yield* storedPrompts(url, "s-11"), { messages: 1, replies: [] })
      assert.isUndefined(yield* Fiber.poll(waiting).pipe(Effect.map((o) => o._tag === "Some" ? o.value : undefined)))
      down.down = false
      const answer = yield* Fiber.join(waiting)
      assert.deepStrictEqual([answer.turn, answer.reason, answer.text, answer.attempt], [1, "completed", "You said: still here?", 1])
      const stored = yield* storedPrompts(url, "s-11")
      assert.strictEqual(stored.replies.length, 1)
      assert.include(stored.replies[0], "You said: still here?")
      assert.notInclude(stored.replies[0], "timeout exceeded")
      // sent again: the stored answer, no second turn
      assert.deepStrictEqual(yield* client("s-11").prompt(new Fleet.PromptRequest({ promptId: "p-11", text: "still here?" })), answer)
      yield* verifyStored(url, "s-11", [["p-11", "completed"]])

      // a StoreFailure carrying a rule id is the store's verdict: the prompt's answer, not retried
      const ruled = faultsOf("s-ruled")
      ruled.rule = "S10"
      const refused = yield* Effect.exit(client("s-ruled").prompt(new Fleet.PromptRequest({ promptId: "p-r", text: "no" })))
      assert.isTrue(Exit.isFailure(refused))
      if (Exit.isFailure(refused)) {
        const error = refused.cause._tag === "Fail" ? refused.cause.error : undefined
        assert.strictEqual(error?._tag, "StoreFailure")
        assert.strictEqual(error?._tag === "StoreFailure" ? error.rule : undefined, "S10")
      }
      assert.strictEqual(ruled.opens, 1)
      assert.strictEqual((yield* storedPrompts(url, "s-ruled")).replies.length, 1)

      // an append that fails mid-turn: the checkpoint before the first model call (before the
      // prompt's user message) fails, the turn ends `error` (CHECKPOINT_FAILED, stored once the
      // store answers again): not an answer, the prompt runs again in the next turn, answered once
      const p1 = yield* client("s-append").prompt(new Fleet.PromptRequest({ promptId: "a1", text: "first" }))
      assert.strictEqual(p1.reason, "completed")
      faultsOf("s-append").appendFailures = 1
      const p2 = yield* client("s-append").prompt(new Fleet.PromptRequest({ promptId: "a2", text: "second" }))
      assert.deepStrictEqual([p2.turn, p2.reason, p2.text, p2.attempt, p2.replayed], [3, "completed", "You said: second", 1, false])
      assert.deepStrictEqual(yield* client("s-append").prompt(new Fleet.PromptRequest({ promptId: "a2", text: "second" })), p2)
      yield* verifyStored(url, "s-append", [["a1", "completed"], ["", "error"], ["a2", "completed"]])
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
