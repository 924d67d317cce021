/**
 * The SQLite SessionStore (SPEC §7.5): the SQL store over an `@effect/sql-sqlite-node` client on
 * one database file. Owns the SQLite dialect: the canonical STRICT schema, the ownership check on
 * open (application_id, user_version, canonical schema objects; bump-and-reject, never modifying a
 * foreign file), BEGIN IMMEDIATE write transactions, and the pragmas with their read-backs; and
 * read-only opens (`readOnly`), which create, lock-file or modify nothing (SPEC §12, L8).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { StoreCorrupt, StoreFailure, StoreSchemaMismatch } from "../../../schema/Errors.js"
import { SessionStore, type SessionStoreShape } from "../../../services/SessionStore.js"
import {
  type DriverFailure,
  LONE_SURROGATE,
  type Ownership,
  prepareDatabase,
  type SqlDialect,
  storeFailure
} from "../Dialect.js"
import { changedUnderneath, type OpenTarget, sqliteClient } from "./Open.js"
import { makeSqlStore } from "../SqlStore.js"
import { onConnection, reservePerOperation, transaction } from "../Transaction.js"

/** Options of the SQLite store (one interface for `makeSqliteStore` and `layerSqliteStore`). */
export interface SqliteStoreOptions {
  /** A path or `:memory:`. */
  readonly filename: string
  /** How long a write waits for another connection's write lock (S6); default 5,000. */
  readonly busyTimeoutMs?: number
  readonly maxEventBytes?: number
  /**
   * Open for reading only (what the CLI's reading commands do): the file must exist and hold a
   * session-log database; nothing is created, locked by a file or modified (no schema on a pristine
   * file, no `-wal`/`-shm` pair, no WAL switch), so it works on read-only media and while another
   * process holds the write lock. Writes (`append`, `truncateTornTail`, `replaceLog`) fail with
   * `StoreFailure`. A version-1 database is read as it is (a writing open migrates it). Default
   * `false`.
   */
  readonly readOnly?: boolean
  /**
   * Runs of streamed delta chunks in an append, and in the migration of a version-1 database, as
   * packed rows (SPEC Appendix A, README "SQL schema version 2"); `false` writes one row per event.
   * Default `true`.
   */
  readonly packChunks?: boolean
}

/**
 * The schema version stamped into `user_version` (README "SQL schema version 2"); version 1 (SPEC
 * §7.5) is migrated by a writing open and read as it is by a read-only one; any other is refused
 * (bump-and-reject).
 */
export const SCHEMA_VERSION = 2

/** The `application_id` of a session-log database ("ESLG"). */
export const APPLICATION_ID = 0x45534c47

const SESSIONS_TABLE = {
  name: "sessions",
  sql: `CREATE TABLE sessions (
  id               TEXT    NOT NULL PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  next_seq         INTEGER NOT NULL,
  revision         INTEGER NOT NULL
) STRICT`
}

const BACKUPS_TABLE = {
  name: "session_backups",
  sql: `CREATE TABLE session_backups (
  id         INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  taken_at   INTEGER NOT NULL,
  reason     TEXT    NOT NULL,
  content    TEXT    NOT NULL
) STRICT`
}

/** The canonical schema objects of version 2, in `sqlite_schema` name order. */
export const CANONICAL_SCHEMA: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "event_rows",
    sql: `CREATE TABLE event_rows (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  members           INTEGER NOT NULL CHECK (members >= 1),
  type              TEXT    NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT,
  data_z            BLOB,
  source_event_seqs BLOB,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  CHECK ((data IS NULL) <> (data_z IS NULL)),
  PRIMARY KEY (session_id, seq)
) STRICT`
  },
  BACKUPS_TABLE,
  SESSIONS_TABLE
]

/** The canonical schema objects of version 1 (SPEC §7.5), in `sqlite_schema` name order. */
export const CANONICAL_SCHEMA_V1: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "events",
    sql: `CREATE TABLE events (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT    NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT    NOT NULL,
  source_event_seqs TEXT,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  PRIMARY KEY (session_id, seq)
) STRICT`
  },
  BACKUPS_TABLE,
  SESSIONS_TABLE
]

/** Creation order: `event_rows` references `sessions`. */
const CREATION_ORDER = [SESSIONS_TABLE, CANONICAL_SCHEMA[0], BACKUPS_TABLE]

const DEFAULT_BUSY_TIMEOUT_MS = 5_000

// ---------------------------------------------------------------------------------------------
// Ownership (S1–S4)

/** A user object of `sqlite_schema`. */
const SchemaObject = Schema.Struct({
  type: Schema.String,
  name: Schema.String,
  tbl_name: Schema.String,
  sql: Schema.NullOr(Schema.String)
})
type SchemaObject = typeof SchemaObject.Type

/** Whitespace-normalised SQL text for the schema comparison (S3). */
const normaliseSql = (text: string): string =>
  text.replace(/\s+/g, " ").replace(/ ?([(),]) ?/g, "$1").replace(/;$/, "").trim()

const hex = (n: number): string => "0x" + (n >>> 0).toString(16).padStart(8, "0")

const EXPECTED_IDS = `user_version=1 or ${SCHEMA_VERSION}, application_id=${hex(APPLICATION_ID)}`

const mismatch = (rule: string, found: string, expected = EXPECTED_IDS) => new StoreSchemaMismatch({ rule, found, expected })

/** S1–S3 verdict on what the file holds. */
const ownershipOf = (userVersion: number, applicationId: number, objects: ReadonlyArray<SchemaObject>): Ownership => {
  const found = `user_version=${userVersion}, application_id=${hex(applicationId)}, ${objects.length} schema objects`
  if (userVersion !== 0 && userVersion !== 1 && userVersion !== SCHEMA_VERSION) return mismatch("S1", found)
  if (applicationId !== 0 && applicationId !== APPLICATION_ID) return mismatch("S2", found)
  if (userVersion === 0 && applicationId === 0 && objects.length === 0) return "pristine"
  if (applicationId === 0) return mismatch("S2", found)
  if (userVersion === 0) return mismatch("S1", found)
  const differences: Array<string> = []
  const schema = userVersion === 1 ? CANONICAL_SCHEMA_V1 : CANONICAL_SCHEMA
  const canonical = new Map(schema.map((o) => [o.name, normaliseSql(o.sql)]))
  for (const o of objects) {
    const want = canonical.get(o.name)
    if (o.type !== "table" || want === undefined) differences.push(`${o.type} ${o.name} (extra)`)
    else if (o.tbl_name !== o.name || o.sql === null || normaliseSql(o.sql) !== want) {
      differences.push(`table ${o.name} (differs)`)
    }
    canonical.delete(o.name)
  }
  for (const name of canonical.keys()) differences.push(`table ${name} (missing)`)
  if (differences.length > 0) {
    return mismatch("S3", `schema objects: ${differences.join(", ")}`, `the canonical schema of version ${userVersion}`)
  }
  return userVersion === 1 ? "older" : "owned"
}

// ---------------------------------------------------------------------------------------------
// The dialect

/** The better-sqlite3 error code inside a `SqlError`. */
const driverCode = (e: SqlError): string | undefined => {
  const cause = e.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

const classify = (e: SqlError): DriverFailure | undefined => {
  const code = driverCode(e)
  if (code === undefined) return undefined
  if (code === "SQLITE_CONSTRAINT_PRIMARYKEY") return "unique"
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED") ? "busy" : undefined
}

/** `changes` of a better-sqlite3 run result. */
const changedRows = (result: unknown): number => {
  const changes = (result as { readonly changes?: unknown } | null)?.changes
  return typeof changes === "number" ? changes : 0
}

const pragmaNumber = (name: "trusted_schema" | "user_version" | "application_id" | "synchronous") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Record<string, unknown>>`PRAGMA ${sql.literal(name)}`.pipe(
      Effect.flatMap((rows) => Schema.decodeUnknown(Schema.Struct({ [name]: Schema.Number }))(rows[0])),
      Effect.map((row) => row[name] as number)
    ))

const ownership = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const readSchemaObjects = SqlSchema.findAll({
    Request: Schema.Void,
    Result: SchemaObject,
    execute: () =>
      sql`SELECT type, name, tbl_name, sql FROM sqlite_schema
          WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`
  })
  const userVersion = yield* pragmaNumber("user_version")
  const applicationId = yield* pragmaNumber("application_id")
  return ownershipOf(userVersion, applicationId, yield* readSchemaObjects(undefined))
})

// S4: set in the transaction that created (or migrated) the schema
const stamp = () =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`PRAGMA application_id = ${sql.literal(String(APPLICATION_ID))}`
    yield* sql`PRAGMA user_version = ${sql.literal(String(SCHEMA_VERSION))}`
  })

/** `options.busyTimeoutMs` or its default, checked before anything is opened. */
const busyTimeoutOf = (options: SqliteStoreOptions): Effect.Effect<number, StoreFailure> => {
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS
  return Number.isSafeInteger(busyTimeoutMs) && busyTimeoutMs >= 0 && busyTimeoutMs <= 2_147_483_647
    ? Effect.succeed(busyTimeoutMs)
    : new StoreFailure({ method: "open", cause: busyTimeoutMs, detail: "busyTimeoutMs must be an integer from 0 to 2147483647" })
}

const readBack = (name: string, found: unknown, wanted: string) =>
  new StoreFailure({ rule: "S5", method: "open", cause: `${name} is ${String(found)}`, detail: `${name} must read back ${wanted}` })

/** The SQLite dialect of the SQL store for `options`. */
export const sqliteDialect = (options: SqliteStoreOptions): SqlDialect => {
  const dialect: SqlDialect = {
    name: "SQLite",
    // SPEC §7.5: never the client's deferred BEGIN for a write (SQLITE_BUSY_SNAPSHOT, no busy wait)
    beginWrite: "BEGIN IMMEDIATE",
    beginRead: "BEGIN",
    sharedConnection: true,
    pageRows: 1_000,
    lockSessionRow: "",
    unstorableText: LONE_SURROGATE,
    classify,
    changedRows,
    tables: CREATION_ORDER,
    ownership,
    stamp,
    open: (schema) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const busyTimeoutMs = yield* busyTimeoutOf(options)
        yield* sql`PRAGMA busy_timeout = ${sql.literal(String(busyTimeoutMs))}`
        yield* sql`PRAGMA foreign_keys = ON`
        yield* sql`PRAGMA trusted_schema = OFF`
        const trusted = yield* pragmaNumber("trusted_schema")
        if (trusted !== 0) return yield* readBack("trusted_schema", trusted, "0")
        if (options.readOnly === true) {
          // no schema, no migration, no WAL switch, no synchronous: nothing to write, and the
          // connection refuses writes
          yield* sql`PRAGMA query_only = ON`
          return yield* schema
        }
        const layout = yield* schema
        // only now, after the ownership check: WAL persists in the file
        const journal = yield* sql<{ readonly journal_mode: unknown }>`PRAGMA journal_mode = WAL`
        const mode = journal[0]?.journal_mode
        const wantMode = options.filename === ":memory:" ? "memory" : "wal"
        if (mode !== wantMode) return yield* readBack("journal_mode", mode, wantMode)
        yield* sql`PRAGMA synchronous = FULL`
        const synchronous = yield* pragmaNumber("synchronous")
        if (synchronous !== 2) return yield* readBack("synchronous", synchronous, "2")
        if (process.platform === "darwin") {
          yield* sql`PRAGMA fullfsync = ON`
          yield* sql`PRAGMA checkpoint_fullfsync = ON`
        }
        return layout
      }).pipe(Effect.mapError((e) => {
        if (e instanceof SqlError) {
          // S2: a file that is not a SQLite database at all (nothing was written to it)
          return driverCode(e) === "SQLITE_NOTADB" ? mismatch("S2", "not a SQLite database") : storeFailure(dialect, "open", e)
        }
        return e._tag === "ParseError" ? new StoreFailure({ method: "open", cause: e }) : e
      }))
  }
  return dialect
}

// ---------------------------------------------------------------------------------------------
// Client and store

/** The store's view of a failure: a malformed database file is corruption (L7), not an I/O failure. */
const corruptOr = (filename: string) => <E>(e: E): E | StoreCorrupt => {
  if (!(e instanceof StoreFailure)) return e
  const code = (e.cause as { readonly code?: unknown } | null)?.code
  if (typeof code !== "string" || !code.startsWith("SQLITE_CORRUPT")) return e
  return new StoreCorrupt({
    rule: "L7",
    location: filename,
    detail: `the SQLite database is malformed (${code}): ${e.cause instanceof Error ? e.cause.message : String(e.cause)}; nothing was modified`,
    cause: e.cause
  })
}

const readOnlyRefusal = (filename: string, method: string) =>
  new StoreFailure({
    method,
    cause: "read-only",
    detail: `${filename} is open read-only (readOnly: true): nothing was written`
  })

/**
 * The store over a read-only open: writes refused before any statement runs, and for an immutable
 * read every operation checked against the file's identity at open.
 */
const readOnlyStore = (store: SessionStoreShape, target: OpenTarget, filename: string): SessionStoreShape => {
  const checked = <A, E, R>(method: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | StoreFailure, R> =>
    Effect.flatMap(Effect.exit(effect), (exit): Effect.Effect<A, E | StoreFailure> => {
      const changed = changedUnderneath(target, method)
      return changed === undefined ? exit : Effect.fail(changed)
    })
  return {
    ...store,
    create: (header) => checked("create", store.create(header)),
    append: (id, events, options) => events.length === 0 ? store.append(id, events, options) : Effect.fail(readOnlyRefusal(filename, "append")),
    load: (id) => checked("load", store.load(id)),
    loadEach: (id, sink) => checked("loadEach", store.loadEach(id, sink)),
    readFrom: (id, fromSeq) => checked("readFrom", store.readFrom(id, fromSeq)),
    list: () => checked("list", store.list()),
    truncateTornTail: () => Effect.fail(readOnlyRefusal(filename, "truncateTornTail")),
    replaceLog: () => Effect.fail(readOnlyRefusal(filename, "replaceLog"))
  }
}

/**
 * Open `options.filename` and run the open sequence of SPEC §7.5 (pragmas, the ownership check or
 * the creation in one BEGIN IMMEDIATE transaction, then WAL and synchronous=FULL with read-back;
 * read-only: the ownership check in a read transaction and nothing else). Returns the client; the
 * connection closes with the scope.
 */
export const openDatabase = (
  options: SqliteStoreOptions
): Effect.Effect<SqlClient.SqlClient, StoreSchemaMismatch | StoreCorrupt | StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    yield* busyTimeoutOf(options)
    const { sql } = yield* sqliteClient(options)
    yield* prepareDatabase(
      sqliteDialect(options),
      options.readOnly === true ? "read-only" : "write",
      options.filename,
      options.packChunks !== false
    ).pipe(
      Effect.provideService(SqlClient.SqlClient, sql)
    )
    return sql
  }).pipe(Effect.mapError(corruptOr(options.filename)))

/** Build a SQLite store over `options.filename`; opens and checks the database now (SPEC §7.5).
 * A truncated or otherwise malformed database file is `StoreCorrupt` (L7), refused untouched.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeSqliteStore = (
  options: SqliteStoreOptions
): Effect.Effect<SessionStoreShape, StoreSchemaMismatch | StoreCorrupt | StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    yield* busyTimeoutOf(options)
    const { sql, target } = yield* sqliteClient(options)
    const store = yield* makeSqlStore({
      dialect: sqliteDialect(options),
      location: options.filename,
      readOnly: options.readOnly === true,
      packChunks: options.packChunks !== false,
      ...(options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes })
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return target._tag === "write" ? store : readOnlyStore(store, target, options.filename)
  }).pipe(Effect.mapError(corruptOr(options.filename)))

/**
 * A SQLite SessionStore layer (SPEC §7.5); bind it to a const (each build opens its own
 * connection). A database of another application or schema version is refused untouched.
 *
 * @example
 * ```ts
 * import { SqliteStore } from "effect-session-log"
 *
 * const store = SqliteStore.layerSqliteStore({ filename: "./sessions.db" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerSqliteStore = (
  options: SqliteStoreOptions
): Layer.Layer<SessionStore, StoreSchemaMismatch | StoreCorrupt | StoreFailure> =>
  Layer.scoped(SessionStore, makeSqliteStore(options))
