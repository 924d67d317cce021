/**
 * The SQL SessionStore (SPEC §7.1, §7.5, §7.6) over the `SqlClient` in context, for any dialect
 * (`SqlDialect`): three tables, every write one transaction that begins with the write lock and
 * checks the expected seq or the revision, every load one read transaction paged by seq. No
 * `SqlError` leaves it: driver failures are `StoreFailure { method, cause }`, undecodable rows L9.
 *
 * @since 0.1.0
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { StoreCorrupt, type StoreFailure, type StoreSchemaMismatch } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { checkVocabulary } from "../../schema/Validation.js"
import { DEFAULT_MAX_EVENT_BYTES, SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import { prepareBatch } from "../../services/PrepareEvent.js"
import {
  type LoadResult,
  make as makeSessionStore,
  type ReadError,
  readPipeline,
  SessionStore,
  type SessionStoreShape
} from "../../services/SessionStore.js"
import { prepareDatabase, type SqlDialect, storeFailure } from "./Dialect.js"
import { makeStore } from "./StoreContext.js"
import * as Operations from "./Operations.js"
import { loadEachFrom } from "./Read.js"
import { reserveForScope, reservePerOperation, reserveReusing } from "./Transaction.js"

/**
 * Options of the SQL store (one interface for `make` and `layer`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SqlStoreOptions {
  /** The database dialect (DDL, ownership check, transactions, driver failures). */
  readonly dialect: SqlDialect
  /** Where the database is, for errors and logs (a file name; never credentials). */
  readonly location: string
  readonly maxEventBytes?: number
  /**
   * Open without writing anything (no schema on a pristine database, no migration of a version-1
   * one, which is then read as it is and refuses writes). Default `false`.
   */
  readonly readOnly?: boolean
  /**
   * Runs of streamed delta chunks in an append, and in the migration of a version-1 database, as
   * packed rows (SPEC Appendix A); `false` writes one row per event. Either layout reads back as
   * the same events. Default `true`.
   */
  readonly packChunks?: boolean
  /**
   * The size of a pool the store owns, whose connections it then keeps reserved between
   * operations instead of reserving one per operation (`SqlDialect.alive` tells whether a kept one
   * still serves); at most that many operations run at once. A kept connection serves no one
   * else: leave it undefined for a client shared with other code (one reservation per operation).
   */
  readonly keepConnections?: number
}

/**
 * Build a SQL store over the `SqlClient` in context. Opens the database through the dialect now
 * (connection settings, ownership check, the schema on a pristine database); the store's
 * connection (or, for a pool, each operation's) is released with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: SqlStoreOptions
): Effect.Effect<SessionStoreShape, StoreSchemaMismatch | StoreFailure, SqlClient.SqlClient | Scope.Scope> =>
  Effect.gen(function*() {
    const { dialect, location } = options
    const batchOptions = options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes }
    const layout = yield* prepareDatabase(dialect, options.readOnly === true ? "read-only" : "write", location, options.packChunks !== false)
    // rows keep their snake_case column names whatever transforms the client was built with
    const sql = (yield* SqlClient.SqlClient).withoutTransforms()
    const lease = dialect.sharedConnection
      ? yield* reserveForScope(sql).pipe(Effect.mapError((e) => storeFailure(dialect, "open", e)))
      : dialect.alive !== undefined && (options.keepConnections ?? 0) > 0
      ? yield* reserveReusing(sql, options.keepConnections ?? 0, dialect.alive)
      : reservePerOperation(sql)
    const store = makeStore(sql, dialect, location, lease, layout, options.packChunks !== false)
    // K7 checks the returned suffix (SPEC §8.2 "seek reads")
    const vocabulary = (suffix: ReadonlyArray<Event>) =>
      Effect.suspend(() => {
        for (const e of suffix) {
          const unknown = checkVocabulary(e.type, e.ignorable, e.seq, "K7")
          if (unknown !== undefined) return Effect.fail(unknown)
        }
        return Effect.succeed(suffix)
      })
    // a log of another version takes the sequential pipeline (v0: converted whole, then sliced)
    const suffix = (loaded: LoadResult, fromSeq: number) =>
      loaded.storedVersion !== SESSION_FORMAT_VERSION
        ? Effect.map(readPipeline(loaded), ({ events }) => events.slice(fromSeq))
        // a version-1 load of this store yields envelopes (rowToEvents) only
        : vocabulary(loaded.events.slice(fromSeq) as ReadonlyArray<Event>)

    return makeSessionStore({
      name: "SqlStore",
      spanAttributes: { "db.system.name": dialect.name },
      registry: store.registry,
      ...batchOptions,
      checkHeader: (header) => Operations.checkHeader(store, header),
      isStored: (id) => Operations.isStored(store, id),
      // The hot path: untraced (a span costs about a third of a single-event append).
      appendBatch: (id, batch, expectedSeq) => Operations.append(store, id, batch, expectedSeq),
      load: (id) => Operations.load(store, id),
      loadEach: (id, sink) => Operations.loadEach(store, id, sink),
      // a seek where the rows below fromSeq are known good, as readFrom's
      loadEachFrom: (id, sink, fromSeq) => loadEachFrom(store, id, sink, fromSeq),
      // The suffix of the whole read (§7.1): the rows below fromSeq are classified too (a defect
      // there means a torn tail or L2, never a suffix read past it). The path of a session this
      // instance has not read (only registered, or the race of a first append).
      suffix,
      // A seek where the rows below fromSeq are known good (Operations.readFrom), else the whole
      // read and its suffix: the same events and errors either way.
      readFrom: (id, fromSeq) =>
        Effect.flatMap(Operations.readFrom(store, id, fromSeq), (read): Effect.Effect<ReadonlyArray<unknown> | undefined, ReadError> =>
          read === undefined
            ? Effect.succeed(undefined)
            : read._tag === "Whole"
            ? suffix(read.loaded, fromSeq)
            : vocabulary(read.events)),
      list: () => Operations.list(store),
      listEntries: () => Operations.listEntries(store),
      ...(dialect.wakeups === undefined ? {} : { wakeups: dialect.wakeups }),
      truncateTornTail: (id, tornTail, { revision }) => Operations.truncateTornTail(store, id, tornTail, revision),
      discard: (id, { revision }) => Operations.discard(store, id, revision),
      replaceLog: (id, header, events, { backup, revision }) =>
        Effect.gen(function*() {
          const checked = prepareBatch(events, 0, options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES)
          if ("_tag" in checked) {
            return yield* new StoreCorrupt({
              rule: "L9",
              location,
              detail: "the replacement events fail the batch pre-checks",
              cause: checked
            })
          }
          const takenAt = yield* Clock.currentTimeMillis
          yield* Operations.replaceLog(store, id, header, checked, { revision, backup, takenAt })
        })
    })
  })

/**
 * The SQL store as a layer over the `SqlClient` in context; bind it to a const (each build is its own store).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: SqlStoreOptions
): Layer.Layer<SessionStore, StoreSchemaMismatch | StoreFailure, SqlClient.SqlClient> =>
  Layer.scoped(SessionStore, make(options))

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SqlStore.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makeSqlStore = make

/**
 * `layer` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SqlStore.layer`.
 * @since 0.1.0
 * @category layers
 */
export const layerSqlStore = layer
