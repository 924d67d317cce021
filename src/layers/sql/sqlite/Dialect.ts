/**
 * The SQLite dialect of the SQL store (SPEC §7.5): BEGIN IMMEDIATE write transactions, how a
 * better-sqlite3 failure is classified (busy, unique), and the open sequence — busy timeout,
 * foreign keys, `trusted_schema` off, then the ownership check of `Schema.ts`, and for a writing
 * open WAL and `synchronous = FULL`, each read back (S5); a read-only open sets `query_only` and
 * writes nothing. Followers are woken by `PRAGMA data_version` polled on a read-only connection of
 * the store instance's watch, or while no process writes the database by a watch for a writer
 * (docs/follow.md "SQLite").
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import { StoreFailure } from "../../../schema/Errors.js"
import { makeWatchers } from "../../../services/StoreFollow.js"
import { type DriverFailure, LONE_SURROGATE, type SqlDialect, storeFailure } from "../Dialect.js"
import { sqliteClient } from "./Open.js"
import { CREATION_ORDER, mismatch, ownership, pragmaNumber, stamp } from "./Schema.js"

/** What the dialect needs of the store's options. */
export interface SqliteDialectOptions {
  /** A path or `:memory:`. */
  readonly filename: string
  /** How long a write waits for another connection's write lock (S6); default 5,000. */
  readonly busyTimeoutMs?: number
  /** Open for reading only: `query_only`, no schema, no WAL switch. Default `false`. */
  readonly readOnly?: boolean
}

const DEFAULT_BUSY_TIMEOUT_MS = 5_000

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

/** `options.busyTimeoutMs` or its default, checked before anything is opened. */
export const busyTimeoutOf = (options: SqliteDialectOptions): Effect.Effect<number, StoreFailure> => {
  const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS
  return Number.isSafeInteger(busyTimeoutMs) && busyTimeoutMs >= 0 && busyTimeoutMs <= 2_147_483_647
    ? Effect.succeed(busyTimeoutMs)
    : new StoreFailure({ method: "open", cause: busyTimeoutMs, detail: "busyTimeoutMs must be an integer from 0 to 2147483647" })
}

const readBack = (name: string, found: unknown, wanted: string) =>
  new StoreFailure({ rule: "S5", method: "open", cause: `${name} is ${String(found)}`, detail: `${name} must read back ${wanted}` })

/**
 * How often a follower's watch reads `PRAGMA data_version` (docs/follow.md "SQLite"): the value
 * changes on that connection whenever another connection, of any process, commits to the file.
 */
export const DATA_VERSION_POLL_MILLIS = 20

/**
 * How often the watch of a database that nobody has open for writing (no `-wal` file) looks for
 * a writer: a `stat` of the file and of its `-wal`.
 */
export const WRITER_POLL_MILLIS = 100

/** What identifies the file's content while it is read alone (no `-wal`). */
const fileIdentity = (filename: string): string => {
  try {
    const st = NodeFs.statSync(filename, { bigint: true })
    return `${st.ino}:${st.size}:${st.mtimeNs}`
  } catch {
    return "-"
  }
}

const hasWal = (filename: string): boolean => NodeFs.existsSync(`${filename}-wal`)

/**
 * While no `-wal` file exists (no connection has the database open for writing): a wake-up now,
 * then one whenever the file changes; a wake-up and the end once a `-wal` file appears.
 */
const awaitWriter = (filename: string): Stream.Stream<void> =>
  Stream.suspend(() => {
    let last = fileIdentity(filename)
    return Stream.concat(
      Stream.make(undefined),
      Stream.tick(`${WRITER_POLL_MILLIS} millis`).pipe(
        Stream.map(() => {
          const now = fileIdentity(filename)
          const changed = now !== last
          last = now
          return { wal: hasWal(filename), changed }
        }),
        Stream.takeUntil(({ wal }) => wal),
        Stream.filter(({ changed, wal }) => wal || changed),
        Stream.as(undefined)
      )
    )
  })

/**
 * While a `-wal` file exists: `PRAGMA data_version` on a read-only connection of the watch's own,
 * a wake-up now and after each change (its own commits never change it for itself; the store's
 * connection is another one). Empty when the `-wal` file went away before the open (the
 * connection would be immutable and never see a change).
 */
const dataVersionPhase = (filename: string): Stream.Stream<void, StoreFailure> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const { sql, target } = yield* sqliteClient({ filename, readOnly: true })
    if (target._tag === "immutable") return Stream.empty
    const read = pragmaNumber("data_version").pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      Effect.mapError((cause) => new StoreFailure({ method: "follow", cause }))
    )
    let last = yield* read
    const changed = Effect.map(read, (now) => {
      const wake = now !== last
      last = now
      return wake
    })
    return Stream.concat(
      Stream.make(undefined),
      Stream.tick(`${DATA_VERSION_POLL_MILLIS} millis`).pipe(Stream.mapEffect(() => changed), Stream.filter((wake) => wake), Stream.as(undefined))
    )
  }))

/**
 * The wake-ups of every session of the database at `filename`: `data_version` while a writer has
 * it open (a `-wal` file), else a watch for one (`awaitWriter`), so a follower started before any
 * writer sees the writes that come later.
 */
export const databaseWakeups = (filename: string): Stream.Stream<void, StoreFailure> =>
  Stream.forever(Stream.suspend(() => hasWal(filename) ? dataVersionPhase(filename) : awaitWriter(filename)))

/**
 * The wake-ups of a store instance's followers: one watch of the database (one connection) for
 * all its followed sessions, since `data_version` tells of any commit to the file.
 */
const sharedWakeups = (filename: string) => {
  const subscribe = makeWatchers("SqliteStore", () => databaseWakeups(filename))
  return (_id: string): Stream.Stream<void, StoreFailure> =>
    Stream.unwrapScoped(Effect.map(subscribe(filename), (wake) => Stream.fromQueue(wake)))
}

/** The SQLite dialect of the SQL store for `options`. */
export const sqliteDialect = (options: SqliteDialectOptions): SqlDialect => {
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
    ...(options.filename === ":memory:" || options.filename === "" ? {} : { wakeups: sharedWakeups(options.filename) }),
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
