/**
 * What the operations of one SQL store share (`Store`): the client, the dialect, the lease, the
 * statements of the hot paths compiled once by the client, the `SqlSchema` queries of `sessions`
 * rows, the registry of created-but-unwritten sessions, and the mapping of driver and decode
 * errors to the store's errors.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import type * as Statement from "@effect/sql/Statement"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import * as Schema from "effect/Schema"
import { StoreCorrupt, StoreFailure } from "../../schema/Errors.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { makeRegistry, type Registry } from "../../services/SessionStore.js"
import { type SqlDialect, storeFailure } from "./Dialect.js"
import { EVENT_INSERT_COLUMNS, EVENT_SELECT_COLUMNS, EVENT_TABLE, type RowLayout } from "./EventRows.js"
import { NextSeqRow, SESSION_SELECT_COLUMNS, SessionRow } from "./SessionRows.js"
import { type Lease, onConnection, transaction } from "./Transaction.js"

/**
 * The statements of the hot paths as SQL text, compiled once by the client (so with its dialect's
 * placeholders) and run on the operation's connection with bound values: compiling the `sql`
 * template per call, with its span, costs ~10x the statement itself.
 */
export interface Statements {
  /** The expected-seq check and the counter update in one statement: no row changed = no match. */
  readonly advance: string
  /** Rows of a session from a seq on, a page at a time. */
  readonly eventsPage: string
  /** The last row of a session starting at or before a seq (the row holding it, unless there is a gap). */
  readonly rowAt: string
  /** Rows of a session from a position on (a limit, then an offset). */
  readonly eventsByPosition: string
  /** Every row of a session. */
  readonly allEvents: string
  /** The multi-row INSERT of `rows` rows (EVENT_INSERT_COLUMNS each). */
  readonly insertEvents: (rows: number) => string
  /** Delete the rows of a session from a seq on (every row starts at or after the seq: packed rows are never split). */
  readonly deleteFrom: string
}

const compileStatements = (sql: SqlClient.SqlClient, layout: RowLayout, advanceReturning: string | undefined): Statements => {
  const text = (statement: Statement.Statement<unknown>) => statement.compile()[0]
  const table = EVENT_TABLE[layout]
  const select = sql.unsafe(`SELECT ${EVENT_SELECT_COLUMNS[layout]} FROM ${table}`)
  const blankRow = Object.fromEntries(EVENT_INSERT_COLUMNS.map((column) => [column, null]))
  const insertText = (rows: number) =>
    text(sql`INSERT INTO ${sql.literal(table)} ${sql.insert(Array.from({ length: rows }, () => blankRow))}`)
  // batches up to 128 rows: the text is built once per size
  const insertCache: Array<string | undefined> = []
  return {
    advance: text(sql`UPDATE sessions SET next_seq = ${0}, revision = revision + 1 WHERE id = ${""} AND next_seq = ${0}`) +
      (advanceReturning === undefined ? "" : ` ${advanceReturning}`),
    eventsPage: text(sql`${select} WHERE session_id = ${""} AND seq >= ${0} ORDER BY seq LIMIT ${0}`),
    rowAt: text(sql`${select} WHERE session_id = ${""} AND seq <= ${0} ORDER BY seq DESC LIMIT 1`),
    eventsByPosition: text(sql`${select} WHERE session_id = ${""} ORDER BY seq LIMIT ${0} OFFSET ${0}`),
    allEvents: text(sql`${select} WHERE session_id = ${""} ORDER BY seq`),
    insertEvents: (rows) => rows > 128 ? insertText(rows) : (insertCache[rows] ??= insertText(rows)),
    deleteFrom: text(sql`DELETE FROM ${sql.literal(table)} WHERE session_id = ${""} AND seq >= ${0}`)
  }
}

type Query<A> = Effect.Effect<A, SqlError | ParseError, SqlClient.TransactionConnection>

/** What the operations of one store share. */
export interface Store {
  readonly sql: SqlClient.SqlClient
  readonly dialect: SqlDialect
  readonly location: string
  readonly lease: Lease
  /**
   * The layout of the event rows: 2, or 1 for a version-1 database opened without migrating it
   * (read-only), whose writes are refused.
   */
  readonly layout: RowLayout
  /** Whether appends write runs of delta chunks as packed rows (Appendix A). */
  readonly pack: boolean
  readonly statements: Statements
  /** Run a hot statement named `name` (`SqlDialect.runPrepared`): the driver's raw result. */
  readonly runRaw: (conn: Connection, name: string, sql: string, params: ReadonlyArray<unknown>) => Effect.Effect<unknown, SqlError>
  /** The same, the rows as value arrays. */
  readonly runValues: (
    conn: Connection,
    name: string,
    sql: string,
    params: ReadonlyArray<unknown>
  ) => Effect.Effect<ReadonlyArray<unknown>, SqlError>
  /** Sessions registered in this store instance and not yet materialised by it. */
  readonly registry: Registry
  /**
   * The sessions whose last whole read by this store instance found every row good (version 1,
   * no torn tail, no defect): `readFrom` of those seeks (`Operations.readFrom`). A read that finds
   * a defect, and this instance's own rewrites of a log, take the session out again.
   */
  readonly readClean: Set<string>
  readonly findSession: (id: string) => Query<Option.Option<SessionRow>>
  /** `findSession` in a write transaction: the row stays locked until COMMIT (`SqlDialect.lockSessionRow`). */
  readonly lockSession: (id: string) => Query<Option.Option<SessionRow>>
  readonly findNextSeq: (id: string) => Query<Option.Option<typeof NextSeqRow.Type>>
  /** Every `sessions` row, undecoded (`list` skips a row that does not decode). */
  readonly listSessions: Query<ReadonlyArray<unknown>>
}

/** `Store.runRaw` and `Store.runValues` of a dialect. */
const runners = (dialect: SqlDialect): Pick<Store, "runRaw" | "runValues"> => {
  const prepared = dialect.runPrepared
  if (prepared === undefined) {
    return {
      runRaw: (conn, _name, text, params) => conn.executeRaw(text, params),
      runValues: (conn, _name, text, params) => conn.executeValues(text, params)
    }
  }
  return {
    runRaw: (conn, name, text, params) => prepared(conn, name, text, params, "raw"),
    runValues: (conn, name, text, params) =>
      prepared(conn, name, text, params, "values") as Effect.Effect<ReadonlyArray<unknown>, SqlError>
  }
}

/** The shared parts of a store over `sql` (a client without name transforms: rows keep snake_case). */
export const makeStore = (
  sql: SqlClient.SqlClient,
  dialect: SqlDialect,
  location: string,
  lease: Lease,
  layout: RowLayout,
  pack: boolean
): Store => ({
  sql,
  dialect,
  location,
  lease,
  layout,
  pack,
  statements: compileStatements(sql, layout, dialect.advanceReturning),
  ...runners(dialect),
  registry: makeRegistry(),
  readClean: new Set(),
  findSession: SqlSchema.findOne({
    Request: Schema.String,
    Result: SessionRow,
    execute: (id) => sql`SELECT ${sql.literal(SESSION_SELECT_COLUMNS)} FROM sessions WHERE id = ${id}`
  }),
  lockSession: SqlSchema.findOne({
    Request: Schema.String,
    Result: SessionRow,
    execute: (id) =>
      sql`SELECT ${sql.literal(SESSION_SELECT_COLUMNS)} FROM sessions WHERE id = ${id} ${sql.literal(dialect.lockSessionRow)}`
  }),
  findNextSeq: SqlSchema.findOne({
    Request: Schema.String,
    Result: NextSeqRow,
    execute: (id) => sql`SELECT next_seq FROM sessions WHERE id = ${id}`
  }),
  listSessions: sql`SELECT ${sql.literal(SESSION_SELECT_COLUMNS)} FROM sessions`
})

/**
 * Run `body` in one transaction on a leased connection, which is also the connection of the `sql`
 * template; a write transaction holds the write lock from its start.
 */
export const inTransaction = <A, E, R>(
  store: Store,
  write: boolean,
  body: (conn: Connection) => Effect.Effect<A, E, R>
): Effect.Effect<A, E | SqlError, Exclude<R, SqlClient.TransactionConnection>> =>
  store.lease((conn) =>
    transaction(conn, write ? store.dialect.beginWrite : store.dialect.beginRead, onConnection(conn, body(conn)))
  )

const isParseError = (e: unknown): e is ParseError =>
  typeof e === "object" && e !== null && (e as { readonly _tag?: unknown })._tag === "ParseError"

/** Map the driver and decode errors of one store method (L9 for a row that does not decode); rule errors pass through. */
export const failures = (store: Store, method: string) =>
<A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, SqlError | ParseError> | StoreFailure | StoreCorrupt, R> =>
  Effect.mapError(self, (e) => {
    if (e instanceof SqlError) return storeFailure(store.dialect, method, e)
    if (isParseError(e)) {
      return new StoreCorrupt({ rule: "L9", location: store.location, detail: "a stored row does not decode", cause: e })
    }
    return e as Exclude<E, SqlError | ParseError>
  })

/** The errors of a query outside a transaction (`create`, `list`): every one a `StoreFailure`. */
export const queryFailure = (store: Store, method: string) => (e: SqlError | ParseError): StoreFailure =>
  e instanceof SqlError ? storeFailure(store.dialect, method, e) : new StoreFailure({ method, cause: e })
