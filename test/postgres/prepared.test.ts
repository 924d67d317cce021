/**
 * The PostgreSQL store's hot statements run as named prepared statements on its own pool's
 * connections (through the pool's `Client` option, not a connection's internals), and as plain
 * statements on a client built elsewhere.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { makeClient, postgresDialect } from "../../src/layers/sql/postgres/PostgresStore.js"
import { makeSqlStore } from "../../src/layers/sql/SqlStore.js"
import type { Event } from "../../src/schema/Events.js"
import { prepareValidated } from "../../src/services/PrepareEvent.js"
import { describePg, freshUrl } from "./helpers.js"

const event = (seq: number): Event => ({ type: "test/plugin", seq, time: 1_000 + seq, data: { n: seq }, ignorable: true }) as Event

const prepared = (events: ReadonlyArray<Event>) => {
  const p = prepareValidated(events, 1_048_576)
  if ("_tag" in p) throw new Error(p.message)
  return p
}

/** The names of the prepared statements of the pool's one connection. */
const preparedNames = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly name: string }>`SELECT name FROM pg_prepared_statements ORDER BY name`,
    (rows) => rows.map((r) => r.name)
  )

describePg("PostgresStore prepared statements", () => {
  it.scoped("§7.6 appends and loads run the store's hot statements prepared on its pool's connection", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      // one connection: the store's statements and the check below share it
      const sql = yield* makeClient({ url, maxConnections: 1 })
      const store = yield* makeSqlStore({ dialect: postgresDialect, location: "test" }).pipe(
        Effect.provideService(SqlClient.SqlClient, sql)
      )
      assert.deepStrictEqual(yield* preparedNames(sql), [])
      yield* store.create({ version: 1, id: "p", createdAt: 1 })
      yield* store.append("p", prepared([event(0)]), { expectedSeq: 0 })
      yield* store.append("p", prepared([event(1)]), { expectedSeq: 1 })
      yield* store.append("p", prepared([event(2), event(3)]), { expectedSeq: 2 })
      const loaded = yield* store.load("p")
      assert.strictEqual(loaded.events.length, 4)
      assert.deepStrictEqual(yield* preparedNames(sql), [
        "session-log-advance",
        "session-log-events-page",
        "session-log-insert-1",
        "session-log-insert-2"
      ])
    }))
})
