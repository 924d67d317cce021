/**
 * The PostgreSQL store keeps the connections of its own pool between operations (Transaction.ts
 * `reserveReusing`): what a user can see of that is that nothing changes — a connection the
 * server dropped while the store kept it is replaced by the next operation, concurrent operations
 * still run at once, and closing the store leaves no connection behind on the server.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type pg from "pg"
import { makePostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import type { Event } from "../../src/schema/Events.js"
import { describePg, freshUrl, query, rawClient } from "./helpers.js"

const ev = (seq: number): Event => ({ type: "test/plugin", seq, time: 1_000 + seq, data: { n: seq }, ignorable: true }) as Event

let counter = 0

/** A fresh schema's URL whose connections carry an application name of their own (to count them). */
const taggedUrl = Effect.gen(function*() {
  const name = `esl-connections-${process.pid}-${++counter}`
  const plain = yield* freshUrl
  const url = new URL(plain)
  url.searchParams.set("application_name", name)
  return { url: url.toString(), name, plain }
})

/** The server's backends of connections named `name`. */
const backends = (admin: pg.Client, name: string) =>
  Effect.map(
    query<{ pid: number }>(admin, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", [name]),
    (rows) => rows.map((r) => r.pid)
  )

/** Polls until the backends named `name` are `wanted` many (waits on a condition, not for a time). */
const backendsUntil = (admin: pg.Client, name: string, wanted: (n: number) => boolean) =>
  query(admin, "SELECT pg_stat_clear_snapshot()").pipe(
    Effect.zipRight(backends(admin, name)),
    Effect.tap((pids) => (wanted(pids.length) ? Effect.void : Effect.sleep("20 millis"))),
    Effect.repeat({ until: (pids) => wanted(pids.length) })
  )

describePg("PostgresStore connections", () => {
  it.scopedLive("§7.6 a kept connection the server dropped while idle is replaced: the next operation succeeds", () =>
    Effect.gen(function*() {
      const { name, plain, url } = yield* taggedUrl
      const admin = yield* rawClient(plain)
      const store = yield* makePostgresStore({ url })
      yield* store.create({ version: 1, id: "s", createdAt: 1 })
      yield* store.append("s", [ev(0)], { expectedSeq: 0 })
      const [kept] = yield* backendsUntil(admin, name, (n) => n >= 1)
      yield* query(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [name])
      yield* backendsUntil(admin, name, (n) => n === 0)
      // the termination reaches the store's client with the next turn of the event loop
      yield* Effect.sleep("1 millis")
      yield* store.append("s", [ev(1), ev(2)], { expectedSeq: 1 })
      const loaded = yield* store.load("s")
      assert.deepStrictEqual(loaded.events.map((e) => (e as Event).seq), [0, 1, 2])
      const now = yield* backends(admin, name)
      assert.notInclude(now, kept)
      assert.strictEqual(now.length, 1)
    }))

  it.scopedLive("§7.6 operations of several sessions still run at once; closing the store leaves no connection on the server", () =>
    Effect.gen(function*() {
      const { name, plain, url } = yield* taggedUrl
      const admin = yield* rawClient(plain)
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* makePostgresStore({ url, maxConnections: 3 })
        const ids = ["a", "b", "c", "d", "e"]
        for (const id of ids) yield* store.create({ version: 1, id, createdAt: 1 })
        yield* Effect.forEach(ids, (id) =>
          Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => store.append(id, [ev(i)], { expectedSeq: i }), {
            discard: true
          }), { concurrency: "unbounded", discard: true })
        for (const id of ids) assert.strictEqual((yield* store.load(id)).events.length, 10)
        // never more than the pool's connections
        assert.isAtMost((yield* backends(admin, name)).length, 3)
      }))
      yield* backendsUntil(admin, name, (n) => n === 0)
    }))
})
