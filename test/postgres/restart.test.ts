/**
 * A PostgreSQL server that goes away mid-append (SPEC §7.1 atomic batches, §7.6): on a cluster of
 * its own (the shared one serves other test files), a server stopped in crash mode while a batch
 * is half inserted, then restarted. The batch is held half-way by a row lock another connection
 * holds (a condition the server reports), so the stop always lands inside the transaction.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { afterAll, beforeAll } from "vitest"
import { makePostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { type Cluster, findBinaries, startCluster } from "../helpers/postgres.js"
import { blockedBy, describePg, query, rawClient } from "./helpers.js"

const ev = (seq: number) => ({ type: "test/plugin", seq, time: 1_000 + seq, data: { n: seq }, ignorable: true }) as unknown as Event

const events = (from: number, count: number) => Array.from({ length: count }, (_, i) => ev(from + i))

const lines = (es: ReadonlyArray<unknown>) => es.map((e) => encodeEvent(e as Event))

const binaries = findBinaries()

describePg("PostgreSQL server restart", () => {
  let cluster: Cluster | undefined
  beforeAll(async () => {
    if ("dir" in binaries) cluster = await startCluster({ fsync: true })
  })
  afterAll(() => cluster?.remove())

  it.scopedLive(
    "§7.1 a server crash during a batch: StoreFailure with the cause; after the restart nothing of the batch is visible, earlier batches are",
    () =>
      Effect.gen(function*() {
        if (cluster === undefined) {
          // binaries are needed to stop and start a server: an external SESSION_LOG_PG_URL cannot be restarted
          console.warn(`[postgres] SKIPPING the restart test: ${"missing" in binaries ? binaries.missing : ""}`)
          return
        }
        const { url } = cluster
        const store = yield* makePostgresStore({ url })
        yield* store.create({ version: 1, id: "s", createdAt: 1 })
        yield* store.append("s", events(0, 1), { expectedSeq: 0 })
        yield* store.append("s", events(1, 100), { expectedSeq: 1 })
        // an uncommitted row at seq 6,101: the batch's second INSERT (3,276 rows each: seqs 3,377..6,652) waits on it
        const blocker = yield* rawClient(url)
        yield* query(blocker, "BEGIN")
        yield* query(blocker, "INSERT INTO event_rows (session_id, seq, members, type, time, data) VALUES ('s', 6101, 1, 'x/y', 0, '{}')")
        const append = yield* Effect.fork(Effect.flip(store.append("s", events(101, 10_000), { expectedSeq: 101 })))
        yield* blockedBy(blocker)
        yield* Effect.promise(() => cluster!.stop("immediate"))
        const error = yield* Fiber.join(append)
        assert.strictEqual(error._tag, "StoreFailure")
        assert.isDefined((error as { cause?: unknown }).cause)
        yield* Effect.promise(() => cluster!.start())

        // a new store instance (another agent, or this one restarted)
        const reopened = yield* Effect.scoped(Effect.flatMap(makePostgresStore({ url }), (s) => s.load("s")))
        assert.strictEqual(reopened.tornTail, undefined)
        assert.deepStrictEqual(lines(reopened.events), lines(events(0, 101)))
        const raw = yield* rawClient(url)
        assert.deepStrictEqual(yield* query(raw, "SELECT count(*)::int AS n FROM event_rows"), [{ n: 101 }])
        assert.deepStrictEqual(yield* query(raw, "SELECT next_seq::int AS n FROM sessions"), [{ n: 101 }])

        // the old instance carries on: its pool replaced the connections the server dropped
        yield* store.append("s", events(101, 10_000), { expectedSeq: 101 })
        assert.strictEqual((yield* store.load("s")).events.length, 10_101)
      }),
    120_000
  )
})
