/**
 * The seam between the SQL store and a database (SPEC §7.5 SQLite, §7.6 PostgreSQL): the canonical
 * DDL, the ownership check that refuses a foreign database (pragmas or a meta row, bump-and-reject),
 * how transactions begin and hold a session row, what text a column cannot store, how hot
 * statements run, and what a driver failure means (unique violation, lock wait exhausted).
 * `prepareDatabase` runs the dialect's open around the one schema transaction.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { ParseError } from "effect/ParseResult"
import type * as Stream from "effect/Stream"
import { StoreFailure, type StoreSchemaMismatch } from "../../schema/Errors.js"
import type { RowLayout } from "./EventRows.js"
import { migrateToVersion2 } from "./MigrateV2.js"
import { onConnection, reservePerOperation, transaction } from "./Transaction.js"

/** TEXT columns hold UTF-8: a lone surrogate would be stored as U+FFFD, not verbatim. */
export const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

/** A driver failure the store tells apart from others. */
export type DriverFailure =
  /** a unique or primary-key violation: the row exists (C7 `AppendConflict`, J14 `SessionExists`) */
  | "unique"
  /** the wait for a lock ran out (S6) */
  | "busy"

/** What a store's hot statement returns: the driver's raw result, or the rows as value arrays. */
export type StatementResult = "raw" | "values"

/**
 * What the open's ownership check found (S1–S4, S10): `owned` is the current schema version (2),
 * `older` this product's version 1, exactly as its build created it.
 */
export type Ownership = "pristine" | "owned" | "older" | StoreSchemaMismatch

/**
 * The schema step of an open: the ownership check, on a pristine database the creation, on a
 * version-1 database the migration (unless read-only); the layout of the event rows after it.
 */
export type SchemaStep = Effect.Effect<RowLayout, StoreSchemaMismatch | StoreFailure | SqlError | ParseError, SqlClient.SqlClient>

/** One database dialect of the SQL store. */
export interface SqlDialect {
  /** The database's name in messages ("SQLite"). */
  readonly name: string
  /** Opens a write transaction that holds the write lock from its first statement on. */
  readonly beginWrite: string
  /** Opens a read transaction that sees one snapshot of the database. */
  readonly beginRead: string
  /**
   * Whether the store keeps one connection reserved for its lifetime (a client with a single
   * connection, SQLite) instead of reserving one per operation (a pool).
   */
  readonly sharedConnection: boolean
  /**
   * Rows per page of a load: few enough that short-lived rows stay in the young generation, many
   * enough that a page's round trip to a server is small beside reading it.
   */
  readonly pageRows: number
  /**
   * What a write transaction adds to its read of a `sessions` row to hold the row until COMMIT:
   * "" where BEGIN takes the database's write lock (SQLite), `FOR UPDATE` under row locking.
   */
  readonly lockSessionRow: string
  /**
   * Text a TEXT column cannot hold verbatim (in an event type or a header field; JSON columns hold
   * escaped text): refused with `StoreFailure` before anything is written.
   */
  readonly unstorableText: RegExp
  /** The driver failures the store tells apart; undefined for any other. */
  readonly classify: (error: SqlError) => DriverFailure | undefined
  /**
   * The number of rows a write changed, from the driver's result of `Connection.executeRaw`
   * (cheaper than `RETURNING`: ~1 µs of a ~22 µs single-event append on SQLite).
   */
  readonly changedRows: (result: unknown) => number
  /**
   * Runs one of the store's hot statements on `conn`, kept prepared on the connection where the
   * driver must be asked to (PostgreSQL: a named statement, parsed and planned once per connection
   * instead of per call); `name` stands for `sql` (one name, one text). Undefined: `executeRaw` /
   * `executeValues` (better-sqlite3 caches its prepared statements itself).
   */
  readonly runPrepared?: (
    conn: Connection,
    name: string,
    sql: string,
    params: ReadonlyArray<unknown>,
    result: StatementResult
  ) => Effect.Effect<unknown, SqlError>
  /**
   * Whether a connection the store kept reserved after an operation can serve another one (it is
   * still connected). Defined where a store may keep connections between operations
   * (`SqlStoreOptions.keepConnections`); a connection it cannot tell about is never kept.
   */
  readonly alive?: (conn: Connection) => boolean
  /**
   * The wake-ups of a follower of session `id` (`SessionStoreImpl.wakeups`, docs/follow.md
   * "Mechanisms"): one once armed, then at least one after each commit that may have changed the
   * session, by any connection. Undefined: the store's default poll.
   */
  readonly wakeups?: (id: string) => Stream.Stream<void, StoreFailure>
  /**
   * A statement every write transaction of a session runs last, with the session id as its one
   * parameter, to wake followers elsewhere when (and only if) it commits (PostgreSQL: `pg_notify`).
   */
  readonly notifyStatement?: string
  /**
   * A `RETURNING` clause for the expected-seq advance of an append that does what
   * `notifyStatement` does, in that statement's round trip (PostgreSQL:
   * `RETURNING pg_notify(...)`); an append of a stored session then runs no `notifyStatement`.
   */
  readonly advanceReturning?: string
  /** The canonical tables of the current schema version in creation order. */
  readonly tables: ReadonlyArray<{ readonly name: string; readonly sql: string }>
  /** In the schema transaction, first: what the database holds (and any lock the check needs). */
  readonly ownership: Effect.Effect<Ownership, SqlError | ParseError, SqlClient.SqlClient>
  /**
   * In the schema transaction, after creating the tables (or migrating them): mark the database as
   * ours, of the current version.
   */
  readonly stamp: (created: boolean) => Effect.Effect<void, SqlError, SqlClient.SqlClient>
  /**
   * The whole open of a new client around the schema step (connection settings before and
   * after it), with every failure mapped to the store's errors.
   */
  readonly open: (schema: SchemaStep) => Effect.Effect<RowLayout, StoreSchemaMismatch | StoreFailure, SqlClient.SqlClient>
}

/** What an open may write: everything it needs (`write`), or nothing at all (`read-only`). */
export type OpenMode = "write" | "read-only"

/**
 * The schema step: the ownership check in a read transaction (an open of a database that is ours
 * never waits for, nor takes, the write lock: a reader opens while a writer holds its transaction);
 * only a pristine or a version-1 database gets one write transaction that checks again, then
 * creates the tables and the stamp (S4: an interrupted first open leaves the database pristine) or
 * migrates the rows to version 2 (atomically: an interrupted migration leaves version 1). A foreign
 * database is refused and nothing in it is modified. A read-only open writes nothing: it reads a
 * version-1 database as it is and refuses a pristine one. `pack`: the migration writes chunk runs
 * as packed rows, as the store's appends do (`MigrateV2`).
 */
export const ensureSchema = (dialect: SqlDialect, mode: OpenMode, location: string, pack: boolean): SchemaStep =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const run = <A, E>(begin: string, step: Effect.Effect<A, E, SqlClient.SqlClient>) =>
      reservePerOperation(sql)((conn) => transaction(conn, begin, onConnection(conn, step)))
    const read = yield* run(dialect.beginRead, dialect.ownership)
    if (read === "owned") return 2 as const
    if (read !== "pristine" && read !== "older") return yield* read
    if (mode === "read-only") {
      if (read === "older") return 1 as const
      return yield* new StoreFailure({
        rule: "S4",
        method: "open",
        cause: "pristine database",
        detail: `${location} holds no session-log schema, and a read-only open creates none (nothing was written)`
      })
    }
    return yield* run(
      dialect.beginWrite,
      Effect.gen(function*() {
        // checked again under the write lock: another process may have created or migrated it meanwhile
        const found = yield* dialect.ownership
        if (found === "owned") return 2 as const
        if (found === "pristine") {
          for (const table of dialect.tables) yield* sql.unsafe(table.sql)
        } else if (found === "older") {
          yield* migrateToVersion2(dialect, pack)
        } else {
          return yield* found
        }
        yield* dialect.stamp(found === "pristine")
        return 2 as const
      })
    )
  })

/**
 * Open a database for the store: the dialect's open around `ensureSchema`, on the client without
 * name transforms (pragma and catalogue rows keep their names whatever the client was built with);
 * the layout of its event rows. `pack` as in `ensureSchema`.
 */
export const prepareDatabase = (
  dialect: SqlDialect,
  mode: OpenMode,
  location: string,
  pack: boolean
): Effect.Effect<RowLayout, StoreSchemaMismatch | StoreFailure, SqlClient.SqlClient> =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    dialect.open(ensureSchema(dialect, mode, location, pack)).pipe(
      Effect.provideService(SqlClient.SqlClient, sql.withoutTransforms())
    ))

/** `SqlError` → `StoreFailure { method, cause }`; an exhausted lock wait is S6. */
export const storeFailure = (dialect: SqlDialect, method: string, e: SqlError): StoreFailure =>
  dialect.classify(e) === "busy"
    ? new StoreFailure({ rule: "S6", method, cause: e.cause ?? e, detail: "write lock not obtained in time" })
    : new StoreFailure({ method, cause: e.cause ?? e })
