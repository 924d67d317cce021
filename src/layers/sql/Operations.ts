/**
 * The operations of the SQL store (SPEC §7.1, §7.5), each a function of the shared `Store`: append
 * (the expected-seq check and the counter in one UPDATE, the first append materialising the
 * session row), create, load (paged and classified), list, truncateTornTail and replaceLog (both
 * checking the revision first). Writes run in one write transaction on a leased connection.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import * as Schema from "effect/Schema"
import {
  AppendConflict,
  FormatUnsupported,
  SessionExists,
  SessionHeaderInvalid,
  SessionNotFound,
  StoreCorrupt,
  StoreFailure
} from "../../schema/Errors.js"
import { encodeEvent } from "../../schema/EventCodec.js"
import type { Event } from "../../schema/Events.js"
import { SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import { encodeJson, type Json } from "../../schema/Json.js"
import { headerRecord, type SessionHeader, validateSessionHeader } from "../../schema/SessionHeader.js"
import {
  type EventSink,
  lastOf,
  type LoadError,
  type LoadResult,
  type LoadSummary,
  type SessionEntry,
  type StoreAppendError,
  type TornTail
} from "../../services/SessionStore.js"
import { failures, inTransaction, queryFailure, type Store } from "./StoreContext.js"
import {
  EVENT_INSERT_COLUMNS,
  EVENT_SELECT_COLUMNS,
  EVENT_TABLE,
  isEventRow,
  pushEventRows,
  rawLine,
  rowEnd,
  rowToEvents,
  undecodable
} from "./EventRows.js"
import { RowScan } from "./LoadScan.js"
import { headerFromRow, rowFromHeader, SessionRow } from "./SessionRows.js"
import { onConnection, transaction } from "./Transaction.js"

/** A batch that passed the pre-checks, with the events' JSONL texts. */
export interface CheckedBatch {
  readonly events: ReadonlyArray<Event>
  readonly lines: ReadonlyArray<string>
}

/** Events per multi-row INSERT: at most this many rows of 10 bound values, below SQLite's default 32,766 and PostgreSQL's 65,535. */
const ROWS_PER_INSERT = Math.floor(32_766 / EVENT_INSERT_COLUMNS.length)

/** The lower bound of a full read: below every seq a row can hold (64-bit integers). */
const LOWEST_SEQ = -9223372036854775808n

/**
 * S11 (this product's store rule, next to SPEC §7.7's S-rules): a SQL backend refuses text its
 * TEXT columns cannot hold verbatim (a lone surrogate in an id, a type or a header string; NUL on
 * PostgreSQL), before anything is written. JSON payloads are unaffected: they are stored escaped.
 */
const unrepresentable = (store: Store, method: string, field: string) =>
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
const olderLayout = (store: Store, method: string) =>
  new StoreFailure({
    method,
    cause: "schema version 1",
    detail: `${store.location} holds schema version 1, which this open reads only; open it for writing to migrate it to version 2`
  })

const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

const conflict = (id: string, expectedSeq: number, storedSeq: number) =>
  new AppendConflict({ rule: expectedSeq > storedSeq ? "C5" : "C7", sessionId: id, expectedSeq, storedSeq })

// C7 (SPEC §7.5): a row of the batch is already stored although `next_seq` matched
const rowTaken = (id: string, expectedSeq: number) =>
  new AppendConflict({
    rule: "C7",
    sessionId: id,
    expectedSeq,
    storedSeq: expectedSeq,
    detail: "a row of the batch is already stored"
  })

const staleRevision = (id: string, revision: string, stored: SessionRow, detail?: string) =>
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
const insertEvents = (
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

/** `insertEvents` of an append: a unique violation means a row of the batch is already stored (C7). */
const insertBatch = (store: Store, conn: Connection, id: string, batch: CheckedBatch, expectedSeq: number) =>
  insertEvents(store, conn, id, batch.events, batch.lines).pipe(
    Effect.catchIf((e) => store.dialect.classify(e) === "unique", () => rowTaken(id, expectedSeq))
  )

/**
 * Every row of a session, classified page by page (rows as value arrays: 100,000 per resume). The
 * reads start below any seq: a row with a negative seq, written by something else, is a defect
 * like any other, never invisible.
 */
const scanEvents = <E = never, R = never>(
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
const storedHeader = (store: Store, row: SessionRow) =>
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

/** The session row, locked until COMMIT, if it is still at `revision` (L11, L8). */
const atRevision = (
  store: Store,
  id: string,
  revision: string
): Effect.Effect<SessionRow, SessionNotFound | AppendConflict | SqlError | ParseError, SqlClient.TransactionConnection> =>
  Effect.flatMap(store.lockSession(id), (found): Effect.Effect<SessionRow, SessionNotFound | AppendConflict> => {
    if (Option.isNone(found)) return Effect.fail(notFound(id))
    const row = found.value
    return String(row.revision) === revision ? Effect.succeed(row) : Effect.fail(staleRevision(id, revision, row))
  })

// ---------------------------------------------------------------------------------------------
// Append

/** Advance `next_seq` from `expectedSeq` and insert the batch (a materialised session). */
const advance = (store: Store, conn: Connection, id: string, batch: CheckedBatch, expectedSeq: number) =>
  Effect.flatMap(
    // C5/C7 and the counter in one statement; on no match, tell L11 and C5/C7 apart
    store.runRaw(conn, "advance", store.statements.advance, [expectedSeq + batch.events.length, id, expectedSeq]),
    (advanced): Effect.Effect<false, SessionNotFound | AppendConflict | SqlError | ParseError> =>
      store.dialect.changedRows(advanced) === 1
        ? Effect.as(insertBatch(store, conn, id, batch, expectedSeq), false as const)
        : Effect.flatMap(onConnection(conn, store.findNextSeq(id)), (found) =>
          Effect.fail(Option.isNone(found) ? notFound(id) : conflict(id, expectedSeq, found.value.next_seq)))
  )

/** The first append of a session registered here: the `sessions` row and the batch, atomically. */
const materialise = (
  store: Store,
  conn: Connection,
  pending: SessionHeader,
  batch: CheckedBatch,
  expectedSeq: number
) =>
  Effect.gen(function*() {
    const { sql } = store
    const id = pending.id
    if (Option.isSome(yield* store.findNextSeq(id))) {
      // materialised by another writer meanwhile: the registration is stale
      store.registry.materialised(id)
      return yield* new SessionExists({ rule: "J14", sessionId: id })
    }
    // nothing stored yet: the stored next seq is 0
    if (expectedSeq !== 0) return yield* conflict(id, expectedSeq, 0)
    // J14: the primary key decides between writers materialising the same id
    yield* sql`INSERT INTO sessions ${sql.insert(rowFromHeader(pending))}`.pipe(
      Effect.catchIf((e) => store.dialect.classify(e) === "unique", () => new SessionExists({ rule: "J14", sessionId: id }))
    )
    yield* insertBatch(store, conn, id, batch, expectedSeq)
    yield* sql`UPDATE sessions SET next_seq = ${batch.events.length}, revision = revision + 1 WHERE id = ${id}`
    return true as const
  })

/**
 * Append a pre-checked, non-empty batch in one write transaction (SPEC §7.5 "Append"). The hot
 * path: static statements on the leased connection, no generator on a materialised session.
 */
export const append = (
  store: Store,
  id: string,
  batch: CheckedBatch,
  expectedSeq: number
): Effect.Effect<void, StoreAppendError> => {
  if (store.layout !== 2) return Effect.fail(olderLayout(store, "append"))
  for (const e of batch.events) {
    if (store.dialect.unstorableText.test(e.type)) return Effect.fail(unrepresentable(store, "append", `type of seq ${e.seq}`))
  }
  return store.lease((conn) => {
    // the `sql` template (and its context copy) only for the first append of a session
    const body = Effect.suspend((): Effect.Effect<boolean, StoreAppendError | SqlError | ParseError> => {
      const pending = store.registry.get(id)
      const written: Effect.Effect<boolean, StoreAppendError | SqlError | ParseError> = pending === undefined
        ? advance(store, conn, id, batch, expectedSeq)
        : onConnection(conn, materialise(store, conn, pending, batch, expectedSeq))
      // a stored session's advance notifies itself (`advanceReturning`): no statement of its own
      return pending === undefined && store.dialect.advanceReturning !== undefined ? written : notifying(store, conn, id, written)
    })
    return transaction(conn, store.dialect.beginWrite, body, (materialised) => {
      if (materialised) store.registry.materialised(id)
    })
  }).pipe(failures(store, "append"), Effect.asVoid)
}

/** `written`, then the dialect's wake-up of followers in the same transaction (delivered on COMMIT only). */
const notifying = <A, E, R>(store: Store, conn: Connection, id: string, written: Effect.Effect<A, E, R>) => {
  const statement = store.dialect.notifyStatement
  return statement === undefined ? written : Effect.tap(written, () => store.runRaw(conn, "notify", statement, [id]))
}

// ---------------------------------------------------------------------------------------------
// The other operations

/** `create`'s check of a valid header: text the database cannot store is refused (J13 happens first). */
export const checkHeader = (store: Store, header: SessionHeader) =>
  Effect.suspend(() => {
    for (const key of ["id", "cwd", "parentSession", "agentPreset"] as const) {
      const value = header[key]
      if (value !== undefined && store.dialect.unstorableText.test(value)) return Effect.fail(unrepresentable(store, "create", `header.${key}`))
    }
    return Effect.void
  })

/** J14: whether a session row with this id exists. */
export const isStored = (store: Store, id: string) =>
  store.lease((conn) => onConnection(conn, store.findNextSeq(id))).pipe(
    Effect.map(Option.isSome),
    Effect.mapError(queryFailure(store, "create"))
  )

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
 * anything else (a torn tail, a failure, no session) takes it out.
 */
const readWhole = <E = never, R = never>(store: Store, conn: Connection, id: string, sink?: EventSink<E, R>) =>
  Effect.gen(function*() {
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
      const clean = exit._tag === "Success" && exit.value !== undefined && exit.value.tornTail === undefined &&
        exit.value.storedVersion === SESSION_FORMAT_VERSION
      if (clean) store.readClean.add(id)
      else store.readClean.delete(id)
    })
  ))

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

/** After this instance rewrites a log (whatever the outcome), its next `readFrom` reads it whole again. */
const forgetClean = (store: Store, id: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.ensuring(self, Effect.sync(() => void store.readClean.delete(id)))

/** Delete a whole session (its rows, then its sessions row) if it is still at `revision` (L8). */
export const discard = (store: Store, id: string, revision: string) =>
  inTransaction(store, true, (conn) =>
    notifying(
      store,
      conn,
      id,
      Effect.gen(function*() {
        yield* atRevision(store, id, revision)
        yield* store.runRaw(conn, "delete-from", store.statements.deleteFrom, [id, LOWEST_SEQ])
        yield* store.sql`DELETE FROM sessions WHERE id = ${id}`
      })
    )).pipe(failures(store, "discard"), Effect.asVoid, forgetClean(store, id))

/** Delete the torn tail `load` reported, if the log is still at `revision` and still torn there (L8). */
export const truncateTornTail = (store: Store, id: string, tornTail: TornTail, revision: string) =>
  store.layout !== 2 ? Effect.fail(olderLayout(store, "truncateTornTail")) : inTransaction(store, true, (conn) =>
    Effect.gen(function*() {
      const { sql } = store
      const row = yield* atRevision(store, id, revision)
      // recompute the torn point under the write lock
      const scanned = (yield* scanEvents(store, conn, id)).result(row.next_seq)
      if (scanned instanceof StoreCorrupt) return yield* scanned
      const now = scanned.tornTail
      if (now === undefined || now.fromSeq !== tornTail.fromSeq || now.reason !== tornTail.reason) {
        return yield* staleRevision(id, revision, row, "the torn tail differs from the one load reported")
      }
      yield* conn.executeRaw(store.statements.deleteFrom, [id, now.fromSeq])
      yield* notifying(store, conn, id, sql`UPDATE sessions SET next_seq = ${now.fromSeq}, revision = revision + 1 WHERE id = ${id}`)
    })).pipe(failures(store, "truncateTornTail"), forgetClean(store, id))

/** The stored content of a session as JSONL text (§7.4.2); a defective row is kept as stored. */
const backupContent = (store: Store, conn: Connection, row: SessionRow) =>
  Effect.gen(function*() {
    const rows = yield* conn.executeValues(store.statements.allEvents, [row.id])
    let content = encodeJson(headerRecord(headerFromRow(row) as SessionHeader) as Json) + "\n"
    let next = 0
    const events: Array<Event> = []
    for (const r of rows) {
      if (!isEventRow(r)) return yield* undecodable(store.location, r)
      events.length = 0
      const verdict = rowToEvents(r, next, store.location, events)
      if (typeof verdict === "number") for (const e of events) content += encodeEvent(e) + "\n"
      else content += rawLine(r) + "\n"
      next = rowEnd(r)
    }
    return content
  })

/**
 * Replace header and events if the log is still at `revision` (L8), keeping the previous content
 * as JSONL text in `session_backups` (SPEC §7.5 "replaceLog").
 */
export const replaceLog = (
  store: Store,
  id: string,
  header: SessionHeader,
  batch: CheckedBatch,
  options: { readonly revision: string; readonly backup: string; readonly takenAt: number }
) =>
  store.layout !== 2 ? Effect.fail(olderLayout(store, "replaceLog")) : inTransaction(store, true, (conn) =>
    Effect.gen(function*() {
      const { sql } = store
      const row = yield* atRevision(store, id, options.revision)
      const content = yield* backupContent(store, conn, row)
      yield* sql`INSERT INTO session_backups ${
        sql.insert({ session_id: id, taken_at: options.takenAt, reason: options.backup, content })
      }`
      yield* conn.executeRaw(store.statements.deleteFrom, [id, LOWEST_SEQ])
      yield* sql`UPDATE sessions SET
                   version = ${header.version},
                   created_at = ${header.createdAt},
                   cwd = ${header.cwd ?? null},
                   parent_session = ${header.parentSession ?? null},
                   seed_length = ${header.seedLength ?? null},
                   origin = ${header.origin ?? null},
                   delegation_depth = ${header.delegationDepth ?? null},
                   agent_preset = ${header.agentPreset ?? null},
                   next_seq = ${batch.events.length},
                   revision = revision + 1
                 WHERE id = ${id}`
      yield* notifying(store, conn, id, insertEvents(store, conn, id, batch.events, batch.lines))
    })).pipe(failures(store, "replaceLog"), forgetClean(store, id))
