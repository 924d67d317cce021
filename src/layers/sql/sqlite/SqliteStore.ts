/**
 * The SQLite SessionStore (SPEC §7.5): the SQL store over an `@effect/sql-sqlite-node` client on
 * one database file, with the SQLite dialect (`Dialect.ts`: BEGIN IMMEDIATE writes, pragmas with
 * their read-backs) and schema (`Schema.ts`: the canonical STRICT tables and the ownership check,
 * bump-and-reject); and read-only opens (`readOnly`), which create, lock-file or modify nothing
 * (SPEC §12, L8).
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import { StoreCorrupt, StoreFailure, StoreSchemaMismatch } from "../../../schema/Errors.js"
import { checkFromSeq, pollWakeups, SessionStore, type SessionStoreShape } from "../../../services/SessionStore.js"
import { followOver, makeWatchers } from "../../../services/StoreFollow.js"
import { prepareDatabase, type SqlDialect } from "../Dialect.js"
import { makeSqlStore } from "../SqlStore.js"
import { onConnection, reservePerOperation, transaction } from "../Transaction.js"
import { busyTimeoutOf, databaseWakeups, sqliteDialect, type SqliteDialectOptions } from "./Dialect.js"
import { changedUnderneath, type OpenTarget, sqliteClient } from "./Open.js"

export {
  /**
   * The SQLite dialect of the SQL store for `options`.
   *
   * @since 0.1.0
   * @category utils
   */
  sqliteDialect
} from "./Dialect.js"
export {
  /**
   * The `application_id` of a session-log database ("ESLG").
   *
   * @since 0.1.0
   * @category constants
   */
  APPLICATION_ID,
  /**
   * The canonical schema objects of version 2, in `sqlite_schema` name order.
   *
   * @since 0.1.0
   * @category constants
   */
  CANONICAL_SCHEMA,
  /**
   * The canonical schema objects of version 1 (SPEC §7.5), in `sqlite_schema` name order.
   *
   * @since 0.1.0
   * @category constants
   */
  CANONICAL_SCHEMA_V1,
  /**
   * The schema version stamped into `user_version` (docs/formats.md "SQL schema version 2"); version 1 (SPEC
   * §7.5) is migrated by a writing open and read as it is by a read-only one; any other is refused
   * (bump-and-reject).
   *
   * @since 0.1.0
   * @category constants
   */
  SCHEMA_VERSION
} from "./Schema.js"

/**
 * Options of the SQLite store (one interface for `make` and `layer`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqliteStoreOptions extends SqliteDialectOptions {
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
   * packed rows (SPEC Appendix A, docs/formats.md "SQL schema version 2"); `false` writes one row per event.
   * Default `true`.
   */
  readonly packChunks?: boolean
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
    loadEach: (id, sink, options) => checked("loadEach", store.loadEach(id, sink, options)),
    readFrom: (id, fromSeq) => checked("readFrom", store.readFrom(id, fromSeq)),
    list: () => checked("list", store.list()),
    listEntries: () => checked("listEntries", store.listEntries()),
    truncateTornTail: () => Effect.fail(readOnlyRefusal(filename, "truncateTornTail")),
    replaceLog: () => Effect.fail(readOnlyRefusal(filename, "replaceLog")),
    discard: () => Effect.fail(readOnlyRefusal(filename, "discard"))
  }
}

/**
 * Open `options.filename` and run the open sequence of SPEC §7.5 (pragmas, the ownership check or
 * the creation in one BEGIN IMMEDIATE transaction, then WAL and synchronous=FULL with read-back;
 * read-only: the ownership check in a read transaction and nothing else). Returns the client; the
 * connection closes with the scope.
 *
 * @since 0.1.0
 * @category utils
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

/** Open the database as `options` say and build the store over it (SPEC §7.5). */
const openStore = (options: SqliteStoreOptions, dialect: SqlDialect) =>
  Effect.gen(function*() {
    const { sql, target } = yield* sqliteClient(options)
    const store = yield* makeSqlStore({
      dialect,
      location: options.filename,
      readOnly: options.readOnly === true,
      packChunks: options.packChunks !== false,
      ...(options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes })
    }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return { store, target }
  })

/**
 * A read-only store opened while nobody had the database open for writing (immutable: it reads
 * the file alone and would never see a writer's commits, which go to the `-wal` file): once a
 * `-wal` file exists, its next read opens the database again, through the shared-memory protocol,
 * and reads there from then on; a file written or replaced meanwhile without one is opened again
 * alone (docs/follow.md "SQLite"). Its followers read through it.
 */
const reopening = (
  options: SqliteStoreOptions,
  dialect: SqlDialect,
  first: { readonly store: SessionStoreShape; readonly target: OpenTarget }
) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const viewOf = (opened: typeof first) => ({ ...opened, view: readOnlyStore(opened.store, opened.target, options.filename) })
    let current = viewOf(first)
    const lock = Effect.unsafeMakeSemaphore(1)
    const now = (method: string): Effect.Effect<SessionStoreShape, StoreFailure> =>
      lock.withPermits(1)(Effect.suspend(() => {
        const target = current.target
        const stale = target._tag === "immutable" &&
          (NodeFs.existsSync(`${options.filename}-wal`) || changedUnderneath(target, method) !== undefined)
        if (!stale) return Effect.succeed(current.view)
        return openStore(options, dialect).pipe(
          Scope.extend(scope),
          Effect.mapError((cause) => cause instanceof StoreFailure ? cause : new StoreFailure({ method, cause, detail: "reopening" })),
          Effect.map((next) => {
            current = viewOf(next)
            return current.view
          })
        )
      }))
    // a read during which a writer changed the file alone (no -wal yet) fails; it is read again
    // (reopened first), a few times, before its failure stands
    const again = <A, E>(read: Effect.Effect<A, E>) =>
      Effect.retry(read, { times: 3, while: (e) => e instanceof StoreFailure && e.cause === "database changed" })
    const store: SessionStoreShape = {
      ...current.view,
      create: (header) => Effect.flatMap(now("create"), (s) => s.create(header)),
      append: (id, events, options) => current.view.append(id, events, options),
      load: (id) => again(Effect.flatMap(now("load"), (s) => s.load(id))),
      // not again: the sink may have been handed events already
      loadEach: (id, sink, options) => Effect.flatMap(now("loadEach"), (s) => s.loadEach(id, sink, options)),
      readFrom: (id, fromSeq) => again(Effect.flatMap(now("readFrom"), (s) => s.readFrom(id, fromSeq))),
      follow: (id, followOptions) => follow(id, followOptions),
      list: () => again(Effect.flatMap(now("list"), (s) => s.list())),
      listEntries: () => again(Effect.flatMap(now("listEntries"), (s) => s.listEntries())),
      truncateTornTail: (id, tornTail, options) => current.view.truncateTornTail(id, tornTail, options),
      replaceLog: (id, header, events, options) => current.view.replaceLog(id, header, events, options)
    }
    const follow = followOver({
      readFrom: store.readFrom,
      subscribe: makeWatchers("SqliteStore", dialect.wakeups ?? (() => pollWakeups())),
      checkFromSeq
    })
    return store
  })

/** Build a SQLite store over `options.filename`; opens and checks the database now (SPEC §7.5).
 * A truncated or otherwise malformed database file is `StoreCorrupt` (L7), refused untouched.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: SqliteStoreOptions
): Effect.Effect<SessionStoreShape, StoreSchemaMismatch | StoreCorrupt | StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    yield* busyTimeoutOf(options)
    const dialect = sqliteDialect(options)
    const opened = yield* openStore(options, dialect)
    const { store, target } = opened
    const built = target._tag === "write"
      ? store
      : target._tag === "immutable"
      ? yield* reopening(options, dialect, opened)
      : readOnlyStore(store, target, options.filename)
    // the store-wide wake-ups: the database's watch (a file only; an in-memory database has no other writer)
    return options.filename === ":memory:" || options.filename === ""
      ? built
      : { ...built, changes: () => databaseWakeups(options.filename) }
  }).pipe(Effect.mapError(corruptOr(options.filename)))

/**
 * A SQLite SessionStore layer (SPEC §7.5); bind it to a const (each build opens its own
 * connection). A database of another application or schema version is refused untouched.
 *
 * @example
 * ```ts
 * import { SqliteStore } from "effect-session-log"
 *
 * const store = SqliteStore.layer({ filename: "./sessions.db" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqliteStoreOptions
): Layer.Layer<SessionStore, StoreSchemaMismatch | StoreCorrupt | StoreFailure> =>
  Layer.scoped(SessionStore, make(options))

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SqliteStore.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makeSqliteStore = make

/**
 * `layer` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SqliteStore.layer`.
 * @since 0.1.0
 * @category layers
 */
export const layerSqliteStore = layer
