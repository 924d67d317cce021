/**
 * The follow contract (issue 31) on PostgreSQL (a fresh schema of the shared test server per test),
 * and the one `LISTEN` connection a store instance's followers share, whatever sessions they follow.
 */
import { assert, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import { FOLLOW_CHANNEL } from "../../src/layers/sql/postgres/PostgresStore.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { describePg, freshUrl, query, rawClient } from "../postgres/helpers.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"
import { followContract } from "./contract.js"
import { freshStore, storeAt } from "./stores.js"

describePg("PostgreSQL", () => {
  followContract("postgres", () => freshStore("postgres"), { numRuns: 2 })

  it.scopedLive("the followers of two sessions share one LISTEN connection, closed with the last of them", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = Context.get(yield* Layer.build(storeAt("postgres", url)), SessionStore)
      const raw = yield* rawClient(url)
      const listening = Effect.map(
        query<{ n: string }>(raw, `SELECT count(*) AS n FROM pg_stat_activity WHERE query = $1`, [`LISTEN ${FOLLOW_CHANNEL}`]),
        (rows) => Number(rows[0].n)
      )
      const before = yield* listening
      const ids = ["pg-a", "pg-b"]
      for (const id of ids) {
        yield* store.create(headerFor(id))
        yield* store.append(id, pluginEvents(0, 1), { expectedSeq: 0 })
      }
      // two followers per session, each done once it has seq 1
      const followers = yield* Effect.forEach([...ids, ...ids], (id) =>
        Effect.gen(function*() {
          const first = yield* Deferred.make<void>()
          const fiber = yield* Effect.fork(Stream.runCollect(store.follow(id).pipe(
            Stream.tap(() => Deferred.succeed(first, undefined)),
            Stream.take(2)
          )))
          return { first, fiber }
        }))
      yield* Effect.forEach(followers, (f) => Deferred.await(f.first))
      // seq 1 reaches them only through a notification naming their session
      for (const id of ids) yield* store.append(id, pluginEvents(1, 1, id), { expectedSeq: 1 })
      yield* Effect.forEach(followers, (f) => Fiber.join(f.fiber))
      // all have ended: the connection is closed (its backend leaves pg_stat_activity soon after)
      let after = yield* listening
      while (after > before) {
        yield* Effect.sleep("20 millis")
        after = yield* listening
      }
      assert.strictEqual(after, before)
    }))

  it.scopedLive("changes: a wake-up once armed, then after a commit of another store instance, to any session", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const watching = Context.get(yield* Layer.build(storeAt("postgres", url)), SessionStore)
      const writer = Context.get(yield* Layer.build(storeAt("postgres", url)), SessionStore)
      assert.isDefined(watching.changes)
      const woken = yield* Queue.unbounded<void>()
      yield* Effect.forkScoped(Stream.runForEach(watching.changes!(), () => Queue.offer(woken, undefined)))
      yield* Queue.take(woken)
      yield* writer.create(headerFor("pg-any"))
      yield* writer.append("pg-any", pluginEvents(0, 1), { expectedSeq: 0 })
      yield* Queue.take(woken)
      assert.deepStrictEqual((yield* watching.list()).map((h) => h.id), ["pg-any"])
    }))

  it.scopedLive("while followers of three sessions wait, the store holds one LISTEN connection", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = Context.get(yield* Layer.build(storeAt("postgres", url)), SessionStore)
      const raw = yield* rawClient(url)
      const listening = Effect.map(
        query<{ n: string }>(raw, `SELECT count(*) AS n FROM pg_stat_activity WHERE query = $1`, [`LISTEN ${FOLLOW_CHANNEL}`]),
        (rows) => Number(rows[0].n)
      )
      const before = yield* listening
      const ids = ["pg-c", "pg-d", "pg-e"]
      const delivered = yield* Effect.forEach(ids, (id) =>
        Effect.gen(function*() {
          yield* store.create(headerFor(id))
          yield* store.append(id, pluginEvents(0, 1), { expectedSeq: 0 })
          const got = yield* Deferred.make<void>()
          yield* Effect.fork(Stream.runDrain(store.follow(id).pipe(Stream.tap((e) => (e as { seq: number }).seq === 1 ? Deferred.succeed(got, undefined) : Effect.void))))
          return got
        }))
      // an append to each after its follower started: delivered through the one connection
      for (const id of ids) yield* store.append(id, pluginEvents(1, 1, id), { expectedSeq: 1 })
      yield* Effect.forEach(delivered, Deferred.await)
      assert.strictEqual((yield* listening) - before, 1)
    }))
})
