/**
 * The PostgreSQL SessionStore (SPEC §7.6): the SQL store over an `@effect/sql-pg` pool, for many
 * writers on many machines. Owns the PostgreSQL dialect (its schema and ownership check, S10, are
 * in Schema.ts): READ COMMITTED writes whose row locks and unique keys decide between
 * writers, REPEATABLE READ loads, hot statements kept prepared per connection, SQLSTATEs told
 * apart; and the client (BIGINT read as numbers, the durability check) behind `make`. Followers
 * are woken by a `NOTIFY` sent in each write transaction and a `LISTEN` on a dedicated connection
 * per store instance (docs/follow.md "PostgreSQL").
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { Connection } from "@effect/sql/SqlConnection"
import type Pg from "pg"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { StoreFailure, type StoreSchemaMismatch } from "../../../schema/Errors.js"
import { SessionStore, type SessionStoreShape } from "../../../services/SessionStore.js"
import { APPLICATION, CANONICAL_SCHEMA, ownership, stamp } from "./Schema.js"
import { type DriverFailure, LONE_SURROGATE, type SqlDialect, storeFailure } from "../Dialect.js"
import { makeSqlStore } from "../SqlStore.js"

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
// The dialect

/** The SQLSTATE of a driver error inside a `SqlError`. */
const sqlState = (e: SqlError): string | undefined => {
  const cause = e.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

const classify = (e: SqlError): DriverFailure | undefined => {
  const code = sqlState(e)
  // 23505 unique_violation; 55P03 lock_not_available (lock_timeout)
  return code === "23505" ? "unique" : code === "55P03" ? "busy" : undefined
}

/** `rowCount` of a node-postgres result. */
const changedRows = (result: unknown): number => {
  const count = (result as { readonly rowCount?: unknown } | null)?.rowCount
  return typeof count === "number" ? count : 0
}

/**
 * The hot statements' texts and their prepared-statement names (`session-log-<name>`): one text per
 * name and one name per text, the same for every store (the client's compiler makes the same
 * text); at most a few hundred entries (the insert of 1 to 128 rows, the advance, the page read).
 */
const preparedNames = new Map<string, string>()

/**
 * A hot statement, registered by its text: the store's pool uses `PreparingClient`s, which run a
 * registered text as a named prepared statement (parsed and planned once per connection:
 * unnamed, each call pays both, ~0.3 ms of a ~1 ms append). On a client built elsewhere the
 * statement simply runs unnamed.
 */
const runPrepared: NonNullable<SqlDialect["runPrepared"]> = (conn, name, text, params, result) => {
  if (!preparedNames.has(text)) preparedNames.set(text, `session-log-${name}`)
  return result === "values" ? conn.executeValues(text, params) : conn.executeRaw(text, params)
}

/** A node-postgres query config (text form; the other forms pass through untouched). */
interface QueryConfig {
  readonly text: string
  readonly name?: string
}

const isQueryConfig = (config: unknown): config is QueryConfig =>
  typeof config === "object" && config !== null && typeof (config as { readonly text?: unknown }).text === "string"

/** Where a `PreparingClient` says whether it is still connected (set false on `error` or `end`). */
const CONNECTED = Symbol.for("effect-session-log/PostgresStore/connected")

/**
 * Whether the driver client under a connection of the store's pool is still connected: the
 * store keeps connections between operations only while it is (`SqlDialect.alive`). The client
 * is read from `@effect/sql-pg`'s connection (its `pg` field); a connection whose client cannot be
 * found or is not a `PreparingClient` counts as dead, so it is never kept.
 */
const alive = (conn: Connection): boolean => {
  const client = (conn as { readonly pg?: { readonly [CONNECTED]?: unknown } }).pg
  return client?.[CONNECTED] === true
}

/**
 * The node-postgres `Client` subclass of the store's pool (through the pool's documented `Client`
 * option): a query whose text is a registered hot statement is sent with its name, so the server
 * keeps it prepared on that connection; and the client knows whether it is still connected
 * (`alive`). Nothing else changes.
 */
const preparingClient = (Base: typeof Pg.Client): typeof Pg.Client =>
  class PreparingClient extends Base {
    [CONNECTED] = true

    constructor(...args: ConstructorParameters<typeof Pg.Client>) {
      super(...args)
      const lost = () => {
        this[CONNECTED] = false
      }
      this.on("error", lost)
      this.on("end", lost)
    }

    // the overloads of `Client.query` are many; this one forwards them all
    override query(config: unknown, values?: unknown, callback?: unknown): never {
      const query = (super.query as (...args: Array<unknown>) => never).bind(this)
      if (typeof config === "string") {
        const name = preparedNames.get(config)
        if (name !== undefined) {
          return typeof values === "function"
            ? query({ name, text: config }, values)
            : query({ name, text: config, values }, callback)
        }
      } else if (isQueryConfig(config) && config.name === undefined) {
        const name = preparedNames.get(config.text)
        if (name !== undefined) return query({ ...config, name }, values, callback)
      }
      return query(config, values, callback)
    }
  } as unknown as typeof Pg.Client

/** TEXT holds no NUL character (SQLSTATE 22021) and stores a lone surrogate as U+FFFD. */
const UNSTORABLE_TEXT = new RegExp(`${LONE_SURROGATE.source}|\\u0000`)

const openFailure = (detail: string, cause: unknown) => new StoreFailure({ method: "open", cause, detail })

/**
 * The connection checks of the open: BIGINT read as numbers (a client not built here must use
 * `clientTypes`), and commits that wait for the flush (SPEC §7.1 durability point).
 */
const checkConnection = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ readonly n: unknown; readonly sync: unknown }>`
    SELECT 9007199254740991::int8 AS n, current_setting('synchronous_commit') AS sync`
  if (row?.n !== Number.MAX_SAFE_INTEGER) {
    return yield* openFailure("the client must read BIGINT as numbers (build it with PostgresStore.clientTypes)", row?.n)
  }
  if (row.sync === "off") {
    return yield* openFailure("synchronous_commit must not be off: an acknowledged append could be lost", row.sync)
  }
})

/**
 * The channel of the followers' wake-ups; a payload is `<current_schema()>/<session id>`.
 *
 * @since 0.2.0
 * @category constants
 */
export const FOLLOW_CHANNEL = "effect_session_log"

const NOTIFY_STATEMENT = `SELECT pg_notify('${FOLLOW_CHANNEL}', current_schema() || '/' || $1)`

/** The notification of an append, in its advance statement (no round trip of its own). */
const ADVANCE_RETURNING = `RETURNING pg_notify('${FOLLOW_CHANNEL}', current_schema() || '/' || id)`

/**
 * The notifications of this schema on a `LISTEN` connection of its own: `undefined` once the
 * LISTEN is in place, then the session id of each committed write (its `NOTIFY`). A dropped
 * connection fails the stream.
 */
const listenAll = (options: PostgresStoreOptions): Stream.Stream<string | undefined, StoreFailure> =>
  Stream.asyncScoped<string | undefined, StoreFailure>((emit) =>
    Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const pg = await import("pg")
          const client = new pg.default.Client({
            connectionString: urlOf(options),
            connectionTimeoutMillis: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
            application_name: APPLICATION
          })
          const dropped = (cause: unknown) =>
            void emit.fail(new StoreFailure({ method: "follow", cause, detail: "the LISTEN connection was lost" }))
          client.on("error", dropped)
          client.on("end", () => dropped("connection ended"))
          await client.connect()
          const rows = await client.query<{ readonly s: string }>("SELECT current_schema() AS s")
          const prefix = `${rows.rows[0]?.s ?? ""}/`
          client.on("notification", (msg) => {
            const payload = msg.payload
            if (msg.channel === FOLLOW_CHANNEL && payload?.startsWith(prefix) === true) void emit.single(payload.slice(prefix.length))
          })
          await client.query(`LISTEN ${FOLLOW_CHANNEL}`)
          // armed: every follower reads once more now
          void emit.single(undefined)
          return client
        },
        catch: (cause) => new StoreFailure({ method: "follow", cause, detail: "LISTEN failed" })
      }),
      (client) =>
        Effect.promise(() => {
          client.removeAllListeners("end")
          client.removeAllListeners("error")
          client.on("error", () => undefined)
          return client.end()
        }).pipe(Effect.interruptible, Effect.timeoutOption(1_000))
    ), "unbounded")

/** What the shared listener hands its subscribers: a session id, "armed" (`undefined`), or its end. */
type Heard = string | undefined | StoreFailure

interface Listener {
  readonly pubsub: PubSub.PubSub<Heard>
  readonly fiber: Fiber.RuntimeFiber<void>
  refs: number
}

/**
 * The wake-ups of the followers of one store instance (docs/follow.md "PostgreSQL"): one `LISTEN`
 * connection for all the sessions they follow, opened with the first follower and closed with the
 * last; a session's wake-ups are one element at once (and again once the LISTEN is in place),
 * then one per notification naming it. A dropped connection fails every session's wake-ups (the
 * store then polls); the next follower opens a new one.
 */
const listenWakeups = (options: PostgresStoreOptions) => {
  let current: Listener | undefined
  const lock = Effect.unsafeMakeSemaphore(1)
  const acquire = lock.withPermits(1)(Effect.gen(function*() {
    if (current === undefined) {
      const pubsub = yield* PubSub.unbounded<Heard>()
      const fiber = yield* listenAll(options).pipe(
        Stream.runForEach((heard) => PubSub.publish(pubsub, heard)),
        Effect.catchAll((failure) => Effect.zipRight(Effect.sync(() => void (current === listener ? current = undefined : undefined)), PubSub.publish(pubsub, failure))),
        Effect.asVoid,
        Effect.interruptible,
        Effect.forkDaemon
      )
      const listener: Listener = { pubsub, fiber, refs: 0 }
      current = listener
    }
    const listener = current
    listener.refs++
    return listener
  }))
  const release = (listener: Listener) =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (--listener.refs > 0) return Effect.void
      if (current === listener) current = undefined
      return Effect.zipRight(Fiber.interrupt(listener.fiber), PubSub.shutdown(listener.pubsub))
    }))
  return (id: string): Stream.Stream<void, StoreFailure> =>
    Stream.unwrapScoped(Effect.map(
      Effect.flatMap(Effect.acquireRelease(acquire, release), (listener) => PubSub.subscribe(listener.pubsub)),
      (heard) =>
        Stream.concat(
          Stream.make(undefined),
          Stream.fromQueue(heard).pipe(
            Stream.mapEffect((h): Effect.Effect<boolean, StoreFailure> => h instanceof StoreFailure ? Effect.fail(h) : Effect.succeed(h === undefined || h === id)),
            Stream.filter((wake) => wake),
            Stream.as(undefined)
          )
        )
    ))
}

/**
 * The PostgreSQL dialect of the SQL store (for a client built with `clientTypes`).
 *
 * @since 0.1.0
 * @category utils
 */
export const postgresDialect: SqlDialect = {
  name: "PostgreSQL",
  // SPEC §7.6: READ COMMITTED suffices; the UPDATE's row lock and the unique keys decide
  beginWrite: "BEGIN ISOLATION LEVEL READ COMMITTED",
  beginRead: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
  sharedConnection: false,
  // a page is a round trip: 10,000 rows read ~25% faster than 1,000 (100,000-event sessions)
  pageRows: 10_000,
  lockSessionRow: "FOR UPDATE",
  unstorableText: UNSTORABLE_TEXT,
  classify,
  changedRows,
  runPrepared,
  alive,
  tables: CANONICAL_SCHEMA,
  ownership,
  stamp,
  open: (schema) =>
    Effect.zipRight(checkConnection, schema).pipe(Effect.mapError((e) => {
      if (e instanceof SqlError) return storeFailure(postgresDialect, "open", e)
      return e._tag === "ParseError" ? new StoreFailure({ method: "open", cause: e }) : e
    }))
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
      dialect: { ...postgresDialect, notifyStatement: NOTIFY_STATEMENT, advanceReturning: ADVANCE_RETURNING, wakeups: listenWakeups(options) },
      location: displayLocation(urlOf(options)),
      readOnly: options.readOnly === true,
      packChunks: options.packChunks !== false,
      // the pool is the store's own: it may keep every connection between operations
      keepConnections: options.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
      ...(options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes })
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    // the store-wide wake-ups: every notification of the schema, on a LISTEN connection of their own
    const changes = (): Stream.Stream<void, StoreFailure> => Stream.as(listenAll(options), undefined)
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
