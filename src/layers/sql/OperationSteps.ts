/**
 * What the SQL store's operations share (SPEC §7.5): their refusals (S11's unstorable text, a
 * write to an older layout, L11, C5/C7, L8's stale revision), the batched INSERT of events, the
 * followers' wake-up inside a write and the lowest seq a full read starts below.
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { AppendConflict, SessionNotFound, StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { EVENT_INSERT_COLUMNS, pushEventRows } from "./EventRows.js"
import type { SessionRow } from "./SessionRows.js"
import type { Store } from "./StoreContext.js"

/** Events per multi-row INSERT: at most this many rows of 10 bound values, below SQLite's default 32,766 and PostgreSQL's 65,535. */
const ROWS_PER_INSERT = Math.floor(32_766 / EVENT_INSERT_COLUMNS.length)

/** The lower bound of a full read: below every seq a row can hold (64-bit integers). */
export const LOWEST_SEQ = -9223372036854775808n

/**
 * S11 (this product's store rule, next to SPEC §7.7's S-rules): a SQL backend refuses text its
 * TEXT columns cannot hold verbatim (a lone surrogate in an id, a type or a header string; NUL on
 * PostgreSQL), before anything is written. JSON payloads are unaffected: they are stored escaped.
 */
export const unrepresentable = (store: Store, method: string, field: string) =>
  new StoreFailure({
    rule: "S11",
    method,
    cause: `${field} contains a lone surrogate or a character ${store.dialect.name} cannot store`,
    detail: `${field} cannot be stored verbatim in a ${store.dialect.name} TEXT column`
  })

/**
 * A write to a version-1 database opened without migrating it (a read-only open): refused before
 * any statement runs; a writing open migrates the database to version 2 first.
 */
export const olderLayout = (store: Store, method: string) =>
  new StoreFailure({
    method,
    cause: "schema version 1",
    detail: `${store.location} holds schema version 1, which this open reads only; open it for writing to migrate it to version 2`
  })

export const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

export const conflict = (id: string, expectedSeq: number, storedSeq: number) =>
  new AppendConflict({ rule: expectedSeq > storedSeq ? "C5" : "C7", sessionId: id, expectedSeq, storedSeq })

export const staleRevision = (id: string, revision: string, stored: SessionRow, detail?: string) =>
  new AppendConflict({
    rule: "L8",
    sessionId: id,
    expectedSeq: stored.next_seq,
    storedSeq: stored.next_seq,
    detail: detail ?? `the stored log changed since it was read (revision ${revision}, now ${stored.revision})`
  })

/**
 * Insert a batch with one multi-row INSERT per chunk of ROWS_PER_INSERT rows (none for an empty
 * batch); `lines` (optional) are the events' JSONL texts.
 */
export const insertEvents = (
  store: Store,
  conn: Connection,
  sessionId: string,
  events: ReadonlyArray<Event>,
  lines?: ReadonlyArray<string>
): Effect.Effect<void, SqlError> => {
  if (events.length === 0) return Effect.void
  if (events.length > ROWS_PER_INSERT) {
    return Effect.gen(function*() {
      for (let start = 0; start < events.length; start += ROWS_PER_INSERT) {
        const end = start + ROWS_PER_INSERT
        yield* insertEvents(store, conn, sessionId, events.slice(start, end), lines?.slice(start, end))
      }
    })
  }
  const params: Array<unknown> = []
  const rows = pushEventRows(params, sessionId, events, lines, store.pack)
  const text = store.statements.insertEvents(rows)
  // the texts of up to 128 rows are cached (Statements.insertEvents): those are kept prepared
  const run = rows <= 128 ? store.runRaw(conn, `insert-${rows}`, text, params) : conn.executeRaw(text, params)
  return Effect.asVoid(run)
}

/** `written`, then the dialect's wake-up of followers in the same transaction (delivered on COMMIT only). */
export const notifying = <A, E, R>(store: Store, conn: Connection, id: string, written: Effect.Effect<A, E, R>) => {
  const statement = store.dialect.notifyStatement
  return statement === undefined ? written : Effect.tap(written, () => store.runRaw(conn, "notify", statement, [id]))
}
