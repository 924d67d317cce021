/**
 * The SQL store's reads (SPEC §7.5 "Load", "`readFrom` seeks"): a cold read in one read
 * transaction, paged and classified (whole or streamed to a sink), `readFrom`'s seek over a log
 * this instance found good, and the listings of the stored sessions. Reads never mutate.
 */
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { FormatUnsupported, SessionHeaderInvalid, SessionNotFound, StoreCorrupt, StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import { type SessionHeader, validateSessionHeader } from "../../schema/SessionHeader.js"
import {
  type EventSink,
  lastOf,
  type LoadError,
  type LoadResult,
  type LoadSummary,
  type SessionEntry
} from "../../services/SessionStore.js"
import { EVENT_SELECT_COLUMNS, EVENT_TABLE, isEventRow, rowEnd, rowToEvents } from "./EventRows.js"
import { RowScan } from "./LoadScan.js"
import { LOWEST_SEQ } from "./OperationSteps.js"
import { headerFromRow, SessionRow } from "./SessionRows.js"
import { failures, inTransaction, queryFailure, type Store } from "./StoreContext.js"
import { onConnection } from "./Transaction.js"

/**
 * Every row of a session, classified page by page (rows as value arrays: 100,000 per resume). The
 * reads start below any seq: a row with a negative seq, written by something else, is a defect
 * like any other, never invisible.
 */
export const scanEvents = <E = never, R = never>(
  store: Store,
  conn: Connection,
  id: string,
  onEvents?: (events: ReadonlyArray<Event>) => Effect.Effect<void, E, R>
) =>
  Effect.gen(function*() {
    const { eventsByPosition, eventsPage } = store.statements
    const scan = new RowScan(0, store.location)
    const pageRows = store.dialect.pageRows
    let from: number | bigint = LOWEST_SEQ
    for (;;) {
      const page = yield* store.runValues(conn, "events-page", eventsPage, [id, from, pageRows])
      const bad = scan.feed(page)
      if (bad !== undefined) return yield* bad
      if (onEvents !== undefined) {
        const events = scan.drain()
        if (events.length > 0) yield* onEvents(events)
      }
      if (page.length < pageRows) return scan
      from = scan.end
      if (!Number.isSafeInteger(from)) {
        // a stored seq beyond 2^53 reads back rounded: take the rest by position instead
        const rest = yield* conn.executeValues(eventsByPosition, [id, Number.MAX_SAFE_INTEGER, scan.rows])
        const worse = scan.feed(rest)
        if (worse !== undefined) return yield* worse
        return scan
      }
    }
  })

/** Header of a stored row: version first (K1/K2 before any shape check), then J15/J16. */
export const storedHeader = (store: Store, row: SessionRow) =>
  Effect.gen(function*() {
    if (row.version !== 0 && row.version !== SESSION_FORMAT_VERSION) {
      const newer = row.version > SESSION_FORMAT_VERSION
      return yield* new FormatUnsupported({
        rule: newer ? "K1" : "K2",
        found: row.version,
        supported: SESSION_FORMAT_VERSION,
        direction: newer ? "newer" : "older",
        sessionId: row.id,
        location: store.location
      })
    }
    const header = validateSessionHeader(headerFromRow(row), { expectedId: row.id, checkVersion: false })
    if (header instanceof SessionHeaderInvalid) return yield* header
    return header
  })

/** A cold read in one read transaction (SPEC §7.5 "Load"); never mutates. */
export const load = (store: Store, id: string) => readSession(store, id, "load")

/** A streamed cold read (`SessionStore.loadEach`): `load` handing each page's events to `sink`. */
export const loadEach = <E, R>(store: Store, id: string, sink: EventSink<E, R>) =>
  Effect.map(readSession(store, id, "loadEach", sink), (read): LoadSummary | undefined => {
    if (read === undefined) return undefined
    const { events: _, ...summary } = read
    return summary
  })

/** `load` and `loadEach`: with a sink, the events are handed over page by page and not kept. */
const readSession = <E = never, R = never>(store: Store, id: string, method: string, sink?: EventSink<E, R>) =>
  inTransaction(store, false, (conn) => readWhole(store, conn, id, sink)).pipe(failures(store, method))

/**
 * The whole read of a session in the caller's read transaction (`undefined`: not stored). Its
 * verdict updates `Store.readClean`: every row good (version 1, no torn tail) puts the session in,
 * anything else (a torn tail, a failure, no session) takes it out; a read its sink ended or that
 * was interrupted leaves it as it was.
 */
const readWhole = <E = never, R = never>(store: Store, conn: Connection, id: string, given?: EventSink<E, R>) => {
  // a read its sink ended (or that was interrupted) learned nothing of the rows after it
  let ended = false
  const endedBy = <A>(effect: Effect.Effect<A, E, R>) =>
    Effect.onExit(effect, (exit) => Effect.sync(() => void (ended = ended || exit._tag === "Failure")))
  const sink: EventSink<E, R> | undefined = given === undefined ? undefined : {
    ...(given.onHeader === undefined ? {} : { onHeader: (header, version) => endedBy(given.onHeader!(header, version)) }),
    onEvents: (events) => endedBy(given.onEvents(events))
  }
  return Effect.gen(function*() {
    const found = yield* store.findSession(id)
    // not stored: `SessionStore.make` answers for a registered session, or L11
    if (Option.isNone(found)) return undefined
    const row = found.value
    // L6: the stored id must be the requested one
    if (row.id !== id) return yield* new SessionNotFound({ rule: "L6", sessionId: id, detail: `stored id is "${row.id}"` })
    const header = yield* storedHeader(store, row)
    if (sink?.onHeader !== undefined) yield* sink.onHeader(header, row.version)
    const scanned = (yield* scanEvents(store, conn, id, sink?.onEvents)).result(row.next_seq)
    if (scanned instanceof StoreCorrupt) return yield* scanned
    const result: LoadResult & { readonly count: number } = {
      header,
      storedVersion: row.version,
      events: scanned.events,
      tornTail: scanned.tornTail,
      revision: String(row.revision),
      count: scanned.count
    }
    return result
  }).pipe(Effect.onExit((exit) =>
    Effect.sync(() => {
      if (exit._tag === "Failure" && (ended || Cause.isInterruptedOnly(exit.cause))) return
      const clean = exit._tag === "Success" && exit.value !== undefined && exit.value.tornTail === undefined &&
        exit.value.storedVersion === SESSION_FORMAT_VERSION
      if (clean) store.readClean.add(id)
      else store.readClean.delete(id)
    })
  ))
}

/**
 * What `readFrom` read: the events from the row holding `fromSeq` on (a seek; not yet checked for
 * vocabulary), or the whole log (to go through the read pipeline), or nothing when the session is
 * not stored.
 */
export type FromRead =
  | { readonly _tag: "Sought"; readonly events: ReadonlyArray<Event> }
  | { readonly _tag: "Whole"; readonly loaded: LoadResult }
  | undefined

/**
 * `readFrom`'s backend read in one read transaction (SPEC §7.5 "`readFrom` seeks with
 * `seq >= ?`"; docs/follow.md "Mechanisms"). A session this store instance has read whole and
 * found good (`Store.readClean`), of version 1, seeks: its `sessions` row (the header checked as
 * `load` checks it), then the rows from the one holding `fromSeq` (a packed row may start before
 * it) classified as `load` classifies them, `next_seq` included. Anything the seek cannot answer
 * exactly as the whole read would (a first read of the session, another version, a gap at the
 * seek point, a defect or torn tail after it, a seq beyond 2^53) takes the whole read instead,
 * whose verdict decides. In-protocol writes (appends, replaceLog) never damage rows below
 * `next_seq`; damage written into them by hand after the read that found them good is seen by
 * `load` and `verify`, not by a seek from past it.
 */
export const readFrom = (store: Store, id: string, fromSeq: number): Effect.Effect<FromRead, LoadError> =>
  inTransaction(store, false, (conn) =>
    Effect.gen(function*() {
      if (store.readClean.has(id)) {
        const found = yield* store.findSession(id)
        const row = Option.isSome(found) ? found.value : undefined
        if (row !== undefined && row.id === id && row.version === SESSION_FORMAT_VERSION && row.next_seq > 0) {
          yield* storedHeader(store, row)
          const events = yield* seek(store, conn, id, fromSeq, row.next_seq)
          if (events !== undefined) return { _tag: "Sought", events } as const
        }
      }
      const loaded = yield* readWhole(store, conn, id)
      return loaded === undefined ? undefined : { _tag: "Whole", loaded } as const
    })).pipe(failures(store, "load"))

/**
 * The good events from `fromSeq` of a log whose rows below the seek point were found good, read
 * from the row holding `min(fromSeq, nextSeq - 1)`; `undefined` when only the whole read can tell.
 */
const seek = (store: Store, conn: Connection, id: string, fromSeq: number, nextSeq: number) =>
  Effect.gen(function*() {
    const start = Math.min(fromSeq, nextSeq - 1)
    const [first] = yield* conn.executeValues(store.statements.rowAt, [id, start])
    if (!isEventRow(first) || first[0] < 0 || !Number.isSafeInteger(first[0]) || rowEnd(first) <= start) return undefined
    const scan = new RowScan(first[0], store.location)
    const pageRows = store.dialect.pageRows
    let from = first[0]
    for (;;) {
      const page = yield* store.runValues(conn, "events-page", store.statements.eventsPage, [id, from, pageRows])
      if (scan.feed(page) !== undefined) return undefined
      if (page.length < pageRows) break
      from = scan.end
      if (!Number.isSafeInteger(from)) return undefined
    }
    const verdict = scan.result(nextSeq)
    if (verdict instanceof StoreCorrupt || verdict.tornTail !== undefined) return undefined
    // every row good and contiguous from first[0]: the event at index i has seq first[0] + i
    return verdict.events.slice(fromSeq - first[0])
  })

/**
 * A streamed read from `fromSeq` (`SessionStore.loadEach` with `fromSeq`, SPEC §7.5 "`readFrom`
 * seeks with `seq >= ?`"), in one read transaction: where this store instance found the session
 * good by a whole read (`Store.readClean`, version 1), its `sessions` row and then the rows from
 * the one holding `min(fromSeq, next_seq - 1)` page by page (`seq >= ?`), classified as `load`
 * classifies them, the events from `fromSeq` handed to `sink` as each page is read. `"whole"` when
 * only a read from the start can tell (nothing was handed over), `undefined` when not stored. A
 * defect or torn tail found after the seek point is the outcome, as it is a whole read's, and
 * takes the session out of `readClean` (the next read is whole).
 */
export const loadEachFrom = <E, R>(store: Store, id: string, sink: EventSink<E, R>, fromSeq: number) => {
  let damaged = false
  return inTransaction(store, false, (conn) =>
    Effect.gen(function*() {
      if (!store.readClean.has(id)) return "whole" as const
      const found = yield* store.findSession(id)
      if (Option.isNone(found)) return undefined
      const row = found.value
      if (row.id !== id || row.version !== SESSION_FORMAT_VERSION || row.next_seq === 0) return "whole" as const
      const header = yield* storedHeader(store, row)
      const start = Math.min(fromSeq, row.next_seq - 1)
      const [first] = yield* conn.executeValues(store.statements.rowAt, [id, start])
      if (!isEventRow(first) || first[0] < 0 || !Number.isSafeInteger(first[0]) || rowEnd(first) <= start) return "whole" as const
      if (sink.onHeader !== undefined) yield* sink.onHeader(header, row.version)
      const scan = new RowScan(first[0], store.location)
      const pageRows = store.dialect.pageRows
      // the events of the first row before fromSeq (a packed row may start before it)
      let skip = fromSeq - first[0]
      let from: number = first[0]
      const hand = (events: Array<Event>) => {
        const n = Math.min(skip, events.length)
        skip -= n
        return n === events.length ? Effect.void : sink.onEvents(n === 0 ? events : events.slice(n))
      }
      for (;;) {
        const page = yield* store.runValues(conn, "events-page", store.statements.eventsPage, [id, from, pageRows])
        const bad = scan.feed(page)
        if (bad !== undefined) {
          damaged = true
          return yield* bad
        }
        yield* hand(scan.drain())
        if (page.length < pageRows) break
        from = scan.end
        if (!Number.isSafeInteger(from)) {
          // a stored seq beyond 2^53 reads back rounded: take the rest by position, as a whole read does
          const { sql } = store
          const below = sql`SELECT count(*) FROM ${sql.literal(EVENT_TABLE[store.layout])} WHERE session_id = ${""} AND seq < ${0}`
            .compile()[0]
          const [counted] = yield* conn.executeValues(below, [id, first[0]])
          const before = Number((counted as ReadonlyArray<unknown> | undefined)?.[0] ?? 0)
          const rest = yield* conn.executeValues(store.statements.eventsByPosition, [id, Number.MAX_SAFE_INTEGER, before + scan.rows])
          const worse = scan.feed(rest)
          if (worse !== undefined) {
            damaged = true
            return yield* worse
          }
          yield* hand(scan.drain())
          break
        }
      }
      const verdict = scan.result(row.next_seq)
      if (verdict instanceof StoreCorrupt) {
        damaged = true
        return yield* verdict
      }
      if (verdict.tornTail !== undefined) damaged = true
      const summary: LoadSummary = {
        header,
        storedVersion: row.version,
        tornTail: verdict.tornTail,
        revision: String(row.revision),
        count: first[0] + verdict.count
      }
      return summary
    })).pipe(
      failures(store, "loadEach"),
      Effect.ensuring(Effect.sync(() => {
        if (damaged) store.readClean.delete(id)
      }))
    )
}

/** Headers of the stored sessions; a row whose header cannot be read is skipped with a warning. */
export const list = (store: Store) =>
  Effect.gen(function*() {
    const rows = yield* store.lease((conn) => onConnection(conn, store.listSessions)).pipe(
      Effect.mapError(queryFailure(store, "list"))
    )
    return (yield* sessionRows(store, rows)).map((r) => r.header)
  })

/**
 * The stored sessions with their last event (`SessionStore.listEntries`), in one read
 * transaction: the sessions rows, then of each session its one row that ends at `next_seq` (the
 * primary key's index: no other row is read). A session whose last row is not a committed one
 * (a torn tail) is read whole; one that cannot be read is left out.
 */
export const listEntries = (store: Store) =>
  inTransaction(store, false, (conn) =>
    Effect.gen(function*() {
      const { sql } = store
      const lastRow = sql`SELECT ${sql.literal(EVENT_SELECT_COLUMNS[store.layout])} FROM ${sql.literal(EVENT_TABLE[store.layout])}
        WHERE session_id = ${""} AND seq < ${0} ORDER BY seq DESC LIMIT 1`.compile()[0]
      const entries: Array<SessionEntry> = []
      for (const { header, nextSeq } of yield* sessionRows(store, yield* store.listSessions)) {
        if (nextSeq === 0) {
          entries.push({ header, last: undefined })
          continue
        }
        const [row] = yield* conn.executeValues(lastRow, [header.id, nextSeq])
        const events: Array<Event> = []
        if (isEventRow(row) && rowEnd(row) === nextSeq && typeof rowToEvents(row, row[0], store.location, events) === "number") {
          entries.push({ header, last: lastOf(events) })
          continue
        }
        const whole = yield* Effect.either(readSession(store, header.id, "listEntries"))
        if (whole._tag === "Right" && whole.right !== undefined) entries.push({ header, last: lastOf(whole.right.events) })
      }
      return entries
    })
  ).pipe(Effect.mapError((e) => e instanceof SqlError ? queryFailure(store, "listEntries")(e) : new StoreFailure({ method: "listEntries", cause: e })))

/** The sessions rows that decode to a valid header, with their `next_seq`; the others skipped with a warning. */
const sessionRows = (store: Store, rows: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const headers: Array<{ readonly header: SessionHeader; readonly nextSeq: number }> = []
    const decode = Schema.decodeUnknownEither(SessionRow)
    for (const raw of rows) {
      const row = decode(raw)
      const header = row._tag === "Right"
        ? validateSessionHeader(headerFromRow(row.right), { checkVersion: false })
        : undefined
      if (header === undefined || header instanceof SessionHeaderInvalid) {
        const id = typeof raw === "object" && raw !== null && "id" in raw ? String(raw.id) : "?"
        yield* Effect.logWarning("SqlStore.list: skipping a session row whose header cannot be read").pipe(
          Effect.annotateLogs({ location: store.location, id })
        )
        continue
      }
      headers.push({ header, nextSeq: row._tag === "Right" ? row.right.next_seq : 0 })
    }
    return headers
  })
