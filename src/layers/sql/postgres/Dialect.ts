/**
 * The PostgreSQL dialect of the SQL store (SPEC §7.6): READ COMMITTED writes whose row locks and
 * unique keys decide between writers, REPEATABLE READ loads, SQLSTATEs told apart, hot statements
 * kept prepared per connection (the pool's `PreparingClient`, which also knows whether it is still
 * connected), and the open's connection checks. Internal to the PostgreSQL store: `PostgresStore`
 * re-exports `postgresDialect`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { Connection } from "@effect/sql/SqlConnection"
import type Pg from "pg"
import * as Effect from "effect/Effect"
import { StoreFailure } from "../../../schema/Errors.js"
import { CANONICAL_SCHEMA, ownership, stamp } from "./Schema.js"
import { type DriverFailure, LONE_SURROGATE, type SqlDialect, storeFailure } from "../Dialect.js"

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
const makePreparingClient = (Base: typeof Pg.Client): typeof Pg.Client =>
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

/**
 * `makePreparingClient` typed without node-postgres's types, which `pg` does not ship: a
 * consumer's declarations never need `@types/pg` (the consumer check type-checks them with
 * `skipLibCheck: false`).
 */
export const preparingClient: <Client>(Base: Client) => Client = makePreparingClient as never

/** TEXT holds no NUL character (SQLSTATE 22021) and stores a lone surrogate as U+FFFD. */
const UNSTORABLE_TEXT = new RegExp(`${LONE_SURROGATE.source}|\\u0000`)

export const openFailure = (detail: string, cause: unknown) => new StoreFailure({ method: "open", cause, detail })

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
