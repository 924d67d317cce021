/**
 * The PostgreSQL SessionStore (SPEC §7.6): the SQL store over an `@effect/sql-pg` pool, for many
 * writers on many machines. Owns the client (BIGINT read as numbers, the pool of
 * `PreparingClient`s) behind `make`, over the PostgreSQL dialect (Dialect.ts: READ COMMITTED
 * writes whose row locks and unique keys decide between writers, REPEATABLE READ loads, hot
 * statements kept prepared per connection, SQLSTATEs told apart, the durability check; its schema
 * and ownership check, S10, are in Schema.ts). Followers are woken by a `NOTIFY` sent in each
 * write transaction and a `LISTEN` on a dedicated connection per store instance (Listen.ts;
 * docs/follow.md "PostgreSQL").
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type Pg from "pg"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { StoreFailure, type StoreSchemaMismatch } from "../../../schema/Errors.js"
import { SessionStore, type SessionStoreShape } from "../../../services/SessionStore.js"
import { APPLICATION } from "./Schema.js"
import { storeFailure } from "../Dialect.js"
import { makeSqlStore } from "../SqlStore.js"
import { openFailure, postgresDialect, preparingClient } from "./Dialect.js"
import { ADVANCE_RETURNING, listenAll, listenWakeups, NOTIFY_STATEMENT } from "./Listen.js"

export {
  /**
   * The application named in the meta row.
   *
   * @since 0.1.0
   * @category constants
   */
  APPLICATION,
  /**
   * The canonical tables of version 2 in creation order: `event_rows` references `sessions`.
   *
   * @since 0.1.0
   * @category constants
   */
  CANONICAL_SCHEMA,
  /**
   * The schema version in the meta row (docs/formats.md "SQL schema version 2"); version 1 is migrated by a
   * writing open and read as it is by a read-only one; any other is refused (bump-and-reject).
   *
   * @since 0.1.0
   * @category constants
   */
  SCHEMA_VERSION
} from "./Schema.js"

export {
  /**
   * The PostgreSQL dialect of the SQL store (for a client built with `clientTypes`).
   *
   * @since 0.1.0
   * @category utils
   */
  postgresDialect
} from "./Dialect.js"

export {
  /**
   * The channel of the followers' wake-ups; a payload is `<current_schema()>/<session id>`.
   *
   * @since 0.2.0
   * @category constants
   */
  FOLLOW_CHANNEL
} from "./Listen.js"

/**
 * Options of the PostgreSQL store (one interface for `make` and `layer`).
 *
 * @since 0.1.0
 * @category models
 */
export interface PostgresStoreOptions {
  /**
   * `postgres://user@host:port/database` (or `postgresql://`). Query parameters go to the driver
   * (`?options=-c statement_timeout=5000`, `sslmode=require`); a password is better kept in
   * `PGPASSWORD` or `~/.pgpass` than in the URL. It is never shown in errors.
   */
  readonly url: string | Redacted.Redacted<string>
  /** Connections of the pool (default 10): how many operations of this store run at once. */
  readonly maxConnections?: number
  /** How long connecting may take (default 5,000). */
  readonly connectTimeoutMs?: number
  readonly maxEventBytes?: number
  /**
   * Open without writing anything (what the CLI's reading commands do): no schema in an empty
   * database, no migration of a version-1 one, which is read as it is and refuses writes.
   * Default `false`.
   */
  readonly readOnly?: boolean
  /**
   * Runs of streamed delta chunks, in appends and in the migration of a version-1 schema, as packed
   * rows (SPEC Appendix A); `false`: one row per event. Default `true`.
   */
  readonly packChunks?: boolean
}

// ---------------------------------------------------------------------------------------------
// Client and store

const toNumber = (text: string): number => Number(text)
const toBoolean = (text: string): boolean => text === "t"
const asText = (text: string): string => text
/** BYTEA in the server's default `hex` output (`\x…`); any other form stays text (and fails the row check). */
const toBytes = (text: string): Uint8Array | string =>
  text.startsWith("\\x") ? Buffer.from(text.slice(2), "hex") : text

/**
 * The text parsers of the store's client: integers (BIGINT included: all stored values are safe
 * integers, SPEC §7.6) and floats as numbers, booleans as booleans, BYTEA as bytes, everything
 * else as text.
 *
 * @since 0.1.0
 * @category utils
 */
export const clientTypes = {
  getTypeParser: (oid: number): (text: string) => unknown => {
    switch (oid) {
      case 16: // bool
        return toBoolean
      case 17: // bytea
        return toBytes
      case 20: // int8
      case 21: // int2
      case 23: // int4
      case 26: // oid
      case 700: // float4
      case 701: // float8
        return toNumber
      default:
        return asText
    }
  }
}

const DEFAULT_MAX_CONNECTIONS = 10
const DEFAULT_CONNECT_TIMEOUT_MS = 5_000

const urlOf = (options: PostgresStoreOptions): string =>
  typeof options.url === "string" ? options.url : Redacted.value(options.url)

/** Where the store's LISTEN connections go. */
const listenTarget = (options: PostgresStoreOptions) => ({
  url: urlOf(options),
  connectTimeoutMs: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS
})

/**
 * The URL as shown in errors and logs: no password, no query parameters.
 *
 * @since 0.1.0
 * @category utils
 */
export const displayLocation = (url: string): string => {
  try {
    const u = new URL(url)
    const user = u.username === "" ? "" : `${decodeURIComponent(u.username)}@`
    return `${u.protocol}//${user}${u.host}${u.pathname}`
  } catch {
    return "postgres://(unparsable URL)"
  }
}

/**
 * A pool on `options.url` with `clientTypes` and `PreparingClient`s, after one successful
 * `SELECT 1`; closed with the scope. `@effect/sql-pg` (and its `pg`) are imported here, on first
 * use: they are optional peer dependencies.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeClient = (options: PostgresStoreOptions): Effect.Effect<SqlClient.SqlClient, StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const [PgClient, pg] = yield* Effect.tryPromise({
      try: () => Promise.all([import("@effect/sql-pg/PgClient"), import("pg")]),
      catch: (cause) => openFailure("the PostgreSQL store needs the packages @effect/sql-pg and pg", cause)
    })
    const connectTimeoutMs = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS
    const acquire = Effect.acquireRelease(
      Effect.suspend(() => {
        const pool = new pg.default.Pool({
          connectionString: urlOf(options),
          max: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
          connectionTimeoutMillis: connectTimeoutMs,
          application_name: APPLICATION,
          types: clientTypes as Pg.CustomTypesConfig,
          Client: preparingClient(pg.default.Client)
        })
        // an idle connection's failure is reported on the pool: the next operation sees it
        pool.on("error", () => undefined)
        return Effect.tryPromise({
          try: () => pool.query("SELECT 1"),
          catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
        }).pipe(
          Effect.timeoutFail({
            duration: connectTimeoutMs,
            onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
          }),
          Effect.as(pool),
          Effect.tapError(() => Effect.promise(() => pool.end()))
        )
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1_000))
    )
    const context = yield* Layer.build(PgClient.layerFromPool({ acquire, applicationName: APPLICATION })).pipe(
      Effect.mapError((e) => storeFailure(postgresDialect, "open", e)),
      Effect.catchAllDefect((cause) => new StoreFailure({ method: "open", cause }))
    )
    return Context.get(context, SqlClient.SqlClient)
  })

/**
 * Whether the database at `options.url` holds a session-log schema (a `session_log_meta` table in
 * its current schema), read without writing anything: a reading command finds no store in a
 * database that has none, and creates none.
 *
 * @since 0.1.0
 * @category utils
 */
export const hasSchema = (options: PostgresStoreOptions): Effect.Effect<boolean, StoreFailure> =>
  Effect.scoped(Effect.gen(function*() {
    const sql = yield* makeClient(options)
    const rows = yield* sql<{ readonly present: unknown }>`
      SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = current_schema() AND c.relname = 'session_log_meta') AS present`.pipe(
        Effect.mapError((e) => storeFailure(postgresDialect, "open", e))
      )
    return rows[0]?.present === true
  }))

/**
 * Build a PostgreSQL store on `options.url`; connects and checks the database now (SPEC §7.6: the
 * schema on an empty one, S10 on a foreign one). The pool closes with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: PostgresStoreOptions
): Effect.Effect<SessionStoreShape, StoreSchemaMismatch | StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* makeClient(options)
    const store = yield* makeSqlStore({
      dialect: { ...postgresDialect, notifyStatement: NOTIFY_STATEMENT, advanceReturning: ADVANCE_RETURNING, wakeups: listenWakeups(listenTarget(options)) },
      location: displayLocation(urlOf(options)),
      readOnly: options.readOnly === true,
      packChunks: options.packChunks !== false,
      // the pool is the store's own: it may keep every connection between operations
      keepConnections: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
      ...(options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes })
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    // the store-wide wake-ups: every notification of the schema, on a LISTEN connection of their own
    const changes = (): Stream.Stream<void, StoreFailure> => Stream.as(listenAll(listenTarget(options)), undefined)
    return { ...store, changes }
  })

/**
 * A PostgreSQL SessionStore layer (SPEC §7.6); bind it to a const (each build opens its own pool).
 *
 * @example
 * ```ts
 * import { PostgresStore } from "effect-session-log"
 *
 * const store = PostgresStore.layer({ url: "postgres://agent@db.internal:5432/sessions" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: PostgresStoreOptions
): Layer.Layer<SessionStore, StoreSchemaMismatch | StoreFailure> =>
  Layer.scoped(SessionStore, make(options))

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `PostgresStore.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makePostgresStore = make

/**
 * `layer` under its earlier name.
 *
 * @deprecated since 0.2.0: use `PostgresStore.layer`.
 * @since 0.1.0
 * @category layers
 */
export const layerPostgresStore = layer
