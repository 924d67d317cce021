/**
 * The SQLite SessionStore (SPEC §7.5): one database file with three STRICT tables, an ownership
 * check on open (application_id, user_version, canonical schema) that never modifies a foreign
 * file, and every write as one `BEGIN IMMEDIATE` transaction with an expected-seq or revision
 * check. Built on `@effect/sql-sqlite-node`; every `SqlError` becomes a `StoreFailure`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import {
  AppendConflict,
  FormatUnsupported,
  NotLosslessJson,
  SessionExists,
  SessionHeaderInvalid,
  SessionNotFound,
  StoreCorrupt,
  StoreFailure,
  StoreSchemaMismatch,
  UnknownEventType
} from "../schema/Errors.js"
import { encodeEvent, orderEnvelope } from "../schema/EventCodec.js"
import { type Event, KNOWN_EVENT_TYPES } from "../schema/Events.js"
import { SESSION_FORMAT_VERSION } from "../schema/Format.js"
import { encodeJson, type Json, parseJson } from "../schema/Json.js"
import { headerRecord, type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import {
  checkFromSeq,
  type LoadResult,
  precheckBatch,
  readFromLoad,
  SessionStore,
  type SessionStoreShape,
  type TornTail
} from "../services/SessionStore.js"

/** Options of the SQLite store. */
export interface SqliteStoreOptions {
  readonly filename: string
  readonly busyTimeoutMs?: number
  readonly maxEventBytes?: number
}

/** The schema version stamped into `user_version`; any other is refused (bump-and-reject). */
export const SCHEMA_VERSION = 1

/** The `application_id` of a session-log database ("ESLG"). */
export const APPLICATION_ID = 0x45534c47

/** The canonical schema objects (SPEC §7.5), in `sqlite_schema` name order. */
export const CANONICAL_SCHEMA: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
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
  {
    name: "session_backups",
    sql: `CREATE TABLE session_backups (
  id         INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  taken_at   INTEGER NOT NULL,
  reason     TEXT    NOT NULL,
  content    TEXT    NOT NULL
) STRICT`
  },
  {
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
]

/** Creation order: `events` references `sessions`. */
const CREATION_ORDER = ["sessions", "events", "session_backups"] as const

const DEFAULT_BUSY_TIMEOUT_MS = 5_000

/** Rows per multi-row INSERT: 8 columns each, below SQLite's default 32,766 bound variables. */
const ROWS_PER_INSERT = 4_000

// ---------------------------------------------------------------------------------------------
// Rows

const SessionRow = Schema.Struct({
  id: Schema.String,
  version: Schema.Number,
  created_at: Schema.Number,
  cwd: Schema.NullOr(Schema.String),
  parent_session: Schema.NullOr(Schema.String),
  seed_length: Schema.NullOr(Schema.Number),
  origin: Schema.NullOr(Schema.String),
  delegation_depth: Schema.NullOr(Schema.Number),
  agent_preset: Schema.NullOr(Schema.String),
  next_seq: Schema.Number,
  revision: Schema.Number
})
type SessionRow = typeof SessionRow.Type

const EventRow = Schema.Struct({
  seq: Schema.Number,
  type: Schema.String,
  time: Schema.Number,
  data: Schema.String,
  source_event_seqs: Schema.NullOr(Schema.String),
  surface_op: Schema.NullOr(Schema.String),
  ignorable: Schema.NullOr(Schema.Number)
})
type EventRow = typeof EventRow.Type

const SchemaObject = Schema.Struct({
  type: Schema.String,
  name: Schema.String,
  tbl_name: Schema.String,
  sql: Schema.NullOr(Schema.String)
})
type SchemaObject = typeof SchemaObject.Type

const CountRow = Schema.Struct({ n: Schema.Number })

/** The `events` row of an envelope (SPEC §7.5 column encodings). */
const eventColumns = (sessionId: string, e: Event) => ({
  session_id: sessionId,
  seq: e.seq,
  type: e.type,
  time: e.time,
  data: encodeJson(e.data as Json),
  source_event_seqs: e.sourceEventSeqs === undefined ? null : encodeJson(e.sourceEventSeqs as Json),
  surface_op: e.surfaceOp === undefined ? null : encodeJson(e.surfaceOp as Json),
  ignorable: e.ignorable === true ? 1 : null
})

const SELECT_NEXT_SEQ = "SELECT next_seq FROM sessions WHERE id = ?"
const UPDATE_NEXT_SEQ = "UPDATE sessions SET next_seq = ?, revision = revision + 1 WHERE id = ?"
const EVENT_COLUMNS = "session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable"

/** `INSERT INTO events (...) VALUES (?, ...), ...` for `rows` rows: static text, every value bound. */
const insertEventsSql = (rows: number): string =>
  `INSERT INTO events (${EVENT_COLUMNS}) VALUES ${Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`

/** Insert a batch with one multi-row INSERT per chunk of ROWS_PER_INSERT rows. */
const insertEventRows = (conn: Connection, sessionId: string, events: ReadonlyArray<Event>) =>
  Effect.gen(function*() {
    for (let start = 0; start < events.length; start += ROWS_PER_INSERT) {
      const chunk = events.slice(start, start + ROWS_PER_INSERT)
      const params: Array<unknown> = []
      for (const e of chunk) {
        const c = eventColumns(sessionId, e)
        params.push(c.session_id, c.seq, c.type, c.time, c.data, c.source_event_seqs, c.surface_op, c.ignorable)
      }
      yield* conn.execute(insertEventsSql(chunk.length), params, undefined)
    }
  })

/** The header as stored in a `sessions` row (NULL = absent). */
const headerFromRow = (r: SessionRow): Record<string, unknown> => {
  const h: Record<string, unknown> = { version: r.version, id: r.id, createdAt: r.created_at }
  if (r.cwd !== null) h.cwd = r.cwd
  if (r.parent_session !== null) h.parentSession = r.parent_session
  if (r.seed_length !== null) h.seedLength = r.seed_length
  if (r.origin !== null) h.origin = r.origin
  if (r.delegation_depth !== null) h.delegationDepth = r.delegation_depth
  if (r.agent_preset !== null) h.agentPreset = r.agent_preset
  return h
}

/** One row turned back into an envelope, or the reason it is a defect. */
type RowVerdict =
  | { readonly _tag: "Ok"; readonly event: Event }
  | { readonly _tag: "Defect"; readonly reason: TornTail["reason"] }
  | { readonly _tag: "Corrupt"; readonly error: StoreCorrupt }

const defect = (reason: TornTail["reason"]): RowVerdict => ({ _tag: "Defect", reason })

const rowToEvent = (row: EventRow, expectedSeq: number, location: string): RowVerdict => {
  if (row.seq !== expectedSeq) return defect("seq-gap")
  if (!Number.isSafeInteger(row.time)) return defect("unparsable")
  const columns: Array<readonly [string, string | null]> = [
    ["data", row.data],
    ["sourceEventSeqs", row.source_event_seqs],
    ["surfaceOp", row.surface_op]
  ]
  const out: Record<string, unknown> = { type: row.type, seq: row.seq, time: row.time }
  for (const [key, text] of columns) {
    if (text === null) continue
    const parsed = parseJson(text)
    if (parsed._tag === "Unparsable") return defect("unparsable")
    if (parsed._tag === "Fail") {
      // L9: a committed-looking row whose JSON fails the lossless walk
      return {
        _tag: "Corrupt",
        error: new StoreCorrupt({
          rule: "L9",
          seq: row.seq,
          location,
          detail: `column ${key} is not lossless JSON (${parsed.rule} at "${parsed.path}": ${parsed.detail})`,
          // the rule error itself, with its path relative to the event record
          cause: new NotLosslessJson({ rule: parsed.rule, seq: row.seq, path: `/${key}${parsed.path}`, detail: parsed.detail })
        })
      }
    }
    out[key] = parsed.value
  }
  // inconsistent columns: provenance must be an array, a marker a string or an object
  if (out.sourceEventSeqs !== undefined && !Array.isArray(out.sourceEventSeqs)) return defect("unparsable")
  const op = out.surfaceOp
  if (op !== undefined && typeof op !== "string" && (typeof op !== "object" || op === null || Array.isArray(op))) {
    return defect("unparsable")
  }
  if (row.ignorable === 1) out.ignorable = true
  else if (row.ignorable !== null) return defect("unparsable")
  return { _tag: "Ok", event: orderEnvelope(out) }
}

/**
 * Classify the rows of one session (SPEC §7.5 "Load", §7.4.4 step 5): the contiguous prefix of
 * good rows, then either no defect, a torn tail from the first defect, or `StoreCorrupt` (L2)
 * when a later row has type `turn/end`. `firstSeq` is the seq the first row must have.
 */
const scanRows = (
  rows: ReadonlyArray<EventRow>,
  firstSeq: number,
  location: string
): StoreCorrupt | { readonly events: ReadonlyArray<Event>; readonly tornTail: TornTail | undefined } => {
  const events: Array<Event> = []
  for (let i = 0; i < rows.length; i++) {
    const expected = firstSeq + i
    const verdict = rowToEvent(rows[i], expected, location)
    if (verdict._tag === "Corrupt") return verdict.error
    if (verdict._tag === "Ok") {
      events.push(verdict.event)
      continue
    }
    for (let j = i + 1; j < rows.length; j++) {
      if (rows[j].type === "turn/end") {
        return new StoreCorrupt({
          rule: "L2",
          seq: expected,
          location,
          detail: `defective row (${verdict.reason}) at seq ${expected} before a turn/end at seq ${rows[j].seq}`
        })
      }
    }
    return { events, tornTail: { fromSeq: expected, reason: verdict.reason, position: expected } }
  }
  return { events, tornTail: undefined }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v)

/** Whitespace-normalised SQL text for the schema comparison (S3). */
const normaliseSql = (text: string): string =>
  text.replace(/\s+/g, " ").replace(/ ?([(),]) ?/g, "$1").replace(/;$/, "").trim()

/** TEXT columns hold UTF-8: a lone surrogate would be stored as U+FFFD, not verbatim. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

const unrepresentable = (method: string, field: string) =>
  new StoreFailure({
    method,
    cause: `${field} contains a lone surrogate`,
    detail: `${field} cannot be stored verbatim in a SQLite TEXT column`
  })

const hex = (n: number): string => "0x" + (n >>> 0).toString(16).padStart(8, "0")

/** The driver error inside a `SqlError` (a better-sqlite3 `SqliteError` with a `code`). */
const driverCode = (e: SqlError): string | undefined => {
  const cause = e.cause as { readonly code?: unknown } | undefined
  return typeof cause?.code === "string" ? cause.code : undefined
}

const isBusy = (e: SqlError): boolean => {
  const code = driverCode(e)
  return code !== undefined && (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED"))
}

const isPrimaryKeyViolation = (e: SqlError): boolean =>
  driverCode(e) === "SQLITE_CONSTRAINT_PRIMARYKEY"

/** `SqlError` → `StoreFailure { method, cause }`; an exhausted busy wait is S6. */
const storeFailure = (method: string, e: SqlError): StoreFailure =>
  isBusy(e)
    ? new StoreFailure({ rule: "S6", method, cause: e.cause ?? e, detail: "write lock not obtained in time" })
    : new StoreFailure({ method, cause: e.cause ?? e })

/** Map the driver and decode errors of one store method; rule errors pass through. */
const failures = (method: string, location: string) =>
<A, E, R>(
  self: Effect.Effect<A, E, R>
): Effect.Effect<A, Exclude<E, SqlError | ParseError> | StoreFailure | StoreCorrupt, R> =>
  Effect.mapError(self, (e) => {
    if (e instanceof SqlError) return storeFailure(method, e)
    if (isRecord(e) && e._tag === "ParseError") {
      // L9: a row from disk that does not decode
      return new StoreCorrupt({ rule: "L9", location, detail: "a stored row does not decode", cause: e })
    }
    return e as Exclude<E, SqlError | ParseError>
  })

// ---------------------------------------------------------------------------------------------
// The store

/**
 * Run `body` in one transaction on the reserved connection: `BEGIN IMMEDIATE` for writes
 * (never the client's deferred BEGIN, SPEC §7.5), plain `BEGIN` for reads. COMMIT failures
 * are errors, not defects; `afterCommit` runs before the connection is released.
 */
export const transactionOn = <A, E>(
  sql: SqlClient.SqlClient,
  write: boolean,
  body: Effect.Effect<A, E | SqlError, SqlClient.TransactionConnection>,
  afterCommit?: (a: A) => void
): Effect.Effect<A, E | SqlError> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.scoped(Effect.gen(function*() {
      // waiting for this process's connection stays interruptible; the transaction does not
      const conn: Connection = yield* restore(sql.reserve)
      yield* conn.execute(write ? "BEGIN IMMEDIATE" : "BEGIN", [], undefined)
      const exit = yield* Effect.exit(Effect.provideService(body, SqlClient.TransactionConnection, [conn, 0] as const))
      const rollback = Effect.ignore(conn.execute("ROLLBACK", [], undefined))
      if (Exit.isFailure(exit)) {
        yield* rollback
        return yield* Effect.failCause(exit.cause)
      }
      const committed = yield* Effect.exit(conn.execute("COMMIT", [], undefined))
      if (Exit.isFailure(committed)) {
        yield* rollback
        return yield* Effect.failCause(committed.cause)
      }
      afterCommit?.(exit.value)
      return exit.value
    }))
  )

/**
 * Open `options.filename` through `@effect/sql-sqlite-node` and run the open sequence of SPEC
 * §7.5 (pragmas, ownership check or creation in one BEGIN IMMEDIATE transaction, then WAL and
 * synchronous=FULL with read-back). Returns the client; the connection closes with the scope.
 */
export const openDatabase = (
  options: SqliteStoreOptions
): Effect.Effect<SqlClient.SqlClient, StoreSchemaMismatch | StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const busyTimeoutMs = options.busyTimeoutMs ?? DEFAULT_BUSY_TIMEOUT_MS
    if (!Number.isSafeInteger(busyTimeoutMs) || busyTimeoutMs < 0 || busyTimeoutMs > 2_147_483_647) {
      return yield* new StoreFailure({
        method: "open",
        cause: busyTimeoutMs,
        detail: "busyTimeoutMs must be an integer from 0 to 2147483647"
      })
    }
    // disableWAL: the client would otherwise switch to WAL before the ownership check, which
    // persists in a foreign file. The better-sqlite3 constructor throws (e.g. a missing
    // directory) inside the client's Effect.gen, so its defect is this layer's StoreFailure.
    const clientContext = yield* Layer.build(
      SqliteClient.layer({ filename: options.filename, disableWAL: true })
    ).pipe(
      Effect.catchAllDefect((cause) => new StoreFailure({ method: "open", cause })),
      Effect.mapError((e) => e instanceof StoreFailure ? e : new StoreFailure({ method: "open", cause: e }))
    )
    const sql = Context.get(clientContext, SqlClient.SqlClient)

    // --- open --------------------------------------------------------------------------------

    const pragmaNumber = (name: "trusted_schema" | "user_version" | "application_id" | "synchronous") =>
      sql<Record<string, unknown>>`PRAGMA ${sql.literal(name)}`.pipe(
        Effect.flatMap((rows) => Schema.decodeUnknown(Schema.Struct({ [name]: Schema.Number }))(rows[0])),
        Effect.map((row) => row[name] as number)
      )

    const readSchemaObjects = SqlSchema.findAll({
      Request: Schema.Void,
      Result: SchemaObject,
      execute: () =>
        sql`SELECT type, name, tbl_name, sql FROM sqlite_schema
            WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`
    })

    const mismatch = (rule: string, found: string, expected: string) =>
      new StoreSchemaMismatch({ rule, found, expected })

    const expectedIds = `user_version=${SCHEMA_VERSION}, application_id=${hex(APPLICATION_ID)}`

    /** S1–S3 verdict on what the file holds; undefined = pristine or canonical. */
    const ownership = (userVersion: number, applicationId: number, objects: ReadonlyArray<SchemaObject>) => {
      const found = `user_version=${userVersion}, application_id=${hex(applicationId)}, ${objects.length} schema objects`
      if (userVersion !== 0 && userVersion !== SCHEMA_VERSION) return mismatch("S1", found, expectedIds)
      if (applicationId !== 0 && applicationId !== APPLICATION_ID) return mismatch("S2", found, expectedIds)
      if (userVersion === 0 && applicationId === 0 && objects.length === 0) return "pristine" as const
      if (applicationId === 0) return mismatch("S2", found, expectedIds)
      if (userVersion === 0) return mismatch("S1", found, expectedIds)
      const differences: Array<string> = []
      const canonical = new Map(CANONICAL_SCHEMA.map((o) => [o.name, normaliseSql(o.sql)]))
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
        return mismatch("S3", `schema objects: ${differences.join(", ")}`, "the canonical schema of version 1")
      }
      return undefined
    }

    const checkOrCreate = Effect.gen(function*() {
      const userVersion = yield* pragmaNumber("user_version")
      const applicationId = yield* pragmaNumber("application_id")
      const objects = yield* readSchemaObjects(undefined)
      const verdict = ownership(userVersion, applicationId, objects)
      if (verdict === "pristine") {
        // S4: schema, application_id and user_version in this one transaction
        for (const name of CREATION_ORDER) {
          yield* sql.unsafe(CANONICAL_SCHEMA.find((o) => o.name === name)!.sql)
        }
        yield* sql`PRAGMA application_id = ${sql.literal(String(APPLICATION_ID))}`
        yield* sql`PRAGMA user_version = ${sql.literal(String(SCHEMA_VERSION))}`
      } else if (verdict !== undefined) {
        return yield* verdict
      }
    })

    const readBack = (name: string, found: unknown, wanted: string) =>
      new StoreFailure({ rule: "S5", method: "open", cause: `${name} is ${String(found)}`, detail: `${name} must read back ${wanted}` })

    const open = Effect.gen(function*() {
      yield* sql`PRAGMA busy_timeout = ${sql.literal(String(busyTimeoutMs))}`
      yield* sql`PRAGMA foreign_keys = ON`
      yield* sql`PRAGMA trusted_schema = OFF`
      const trusted = yield* pragmaNumber("trusted_schema")
      if (trusted !== 0) return yield* readBack("trusted_schema", trusted, "0")
      yield* transactionOn(sql, true, checkOrCreate)
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
    })

    yield* open.pipe(
      Effect.mapError((e) => {
        if (e instanceof SqlError) {
          // S2: a file that is not a SQLite database at all (nothing was written to it)
          if (driverCode(e) === "SQLITE_NOTADB") {
            return mismatch("S2", "not a SQLite database", expectedIds)
          }
          return storeFailure("open", e)
        }
        if (e._tag === "ParseError") return new StoreFailure({ method: "open", cause: e })
        return e
      })
    )

    return sql
  })

/** Build a SQLite store over `options.filename`; opens and checks the database now (SPEC §7.5). */
export const makeSqliteStore = (
  options: SqliteStoreOptions
): Effect.Effect<SessionStoreShape, StoreSchemaMismatch | StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const location = options.filename
    const batchOptions = options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes }
    const sql = yield* openDatabase(options)
    const transaction = <A, E>(
      write: boolean,
      body: Effect.Effect<A, E | SqlError, SqlClient.TransactionConnection>,
      afterCommit?: (a: A) => void
    ) =>
      transactionOn(sql, write, body, afterCommit)

    // --- queries -----------------------------------------------------------------------------

    const findSession = SqlSchema.findOne({
      Request: Schema.String,
      Result: SessionRow,
      execute: (id) =>
        sql`SELECT id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth,
                   agent_preset, next_seq, revision
            FROM sessions WHERE id = ${id}`
    })

    const findNextSeq = SqlSchema.findOne({
      Request: Schema.String,
      Result: Schema.Struct({ next_seq: Schema.Number }),
      execute: (id) => sql`SELECT next_seq FROM sessions WHERE id = ${id}`
    })

    const findEvents = SqlSchema.findAll({
      Request: Schema.Struct({ id: Schema.String, fromSeq: Schema.Number }),
      Result: EventRow,
      execute: ({ fromSeq, id }) =>
        sql`SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable
            FROM events WHERE session_id = ${id} AND seq >= ${fromSeq} ORDER BY seq`
    })

    const countBelow = SqlSchema.findOne({
      Request: Schema.Struct({ id: Schema.String, seq: Schema.Number }),
      Result: CountRow,
      execute: ({ id, seq }) => sql`SELECT count(*) AS n FROM events WHERE session_id = ${id} AND seq < ${seq}`
    })

    const listSessions = SqlSchema.findAll({
      Request: Schema.Void,
      Result: Schema.Unknown,
      execute: () =>
        sql`SELECT id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth,
                   agent_preset, next_seq, revision
            FROM sessions`
    })

    const insertSession = (h: SessionHeader) =>
      sql`INSERT INTO sessions ${
        sql.insert({
          id: h.id,
          version: h.version,
          created_at: h.createdAt,
          cwd: h.cwd ?? null,
          parent_session: h.parentSession ?? null,
          seed_length: h.seedLength ?? null,
          origin: h.origin ?? null,
          delegation_depth: h.delegationDepth ?? null,
          agent_preset: h.agentPreset ?? null,
          next_seq: 0,
          revision: 0
        })
      }`

    const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

    const conflict = (id: string, expectedSeq: number, storedSeq: number) =>
      new AppendConflict({ rule: expectedSeq > storedSeq ? "C5" : "C7", sessionId: id, expectedSeq, storedSeq })

    const staleRevision = (id: string, revision: string, stored: SessionRow, detail?: string) =>
      new AppendConflict({
        rule: "L8",
        sessionId: id,
        expectedSeq: stored.next_seq,
        storedSeq: stored.next_seq,
        detail: detail ?? `the stored log changed since it was read (revision ${revision}, now ${stored.revision})`
      })

    /** Header of a stored row: version first (K1/K2 before any shape check), then J15/J16. */
    const storedHeader = (row: SessionRow) =>
      Effect.gen(function*() {
        if (row.version !== 0 && row.version !== SESSION_FORMAT_VERSION) {
          const newer = row.version > SESSION_FORMAT_VERSION
          return yield* new FormatUnsupported({
            rule: newer ? "K1" : "K2",
            found: row.version,
            supported: SESSION_FORMAT_VERSION,
            direction: newer ? "newer" : "older",
            sessionId: row.id,
            location
          })
        }
        const header = validateSessionHeader(headerFromRow(row), { expectedId: row.id, checkVersion: false })
        if (header instanceof SessionHeaderInvalid) return yield* header
        return header
      })

    /** Rows of a session checked against `next_seq` (SPEC §7.5 "Load"). */
    const scanSession = (row: SessionRow, rows: ReadonlyArray<EventRow>) => {
      const lastSeq = rows.length === 0 ? -1 : rows[rows.length - 1].seq
      if (row.next_seq !== lastSeq + 1) {
        return new StoreCorrupt({
          rule: "L2",
          location,
          detail: `sessions.next_seq is ${row.next_seq} but the last stored seq is ${lastSeq}`
        })
      }
      return scanRows(rows, 0, location)
    }

    // Sessions registered in this store instance and not yet materialised by it.
    const registered = new Map<string, SessionHeader>()

    const loadIn = (id: string) =>
      Effect.gen(function*() {
        const found = yield* findSession(id)
        if (Option.isNone(found)) {
          const header = registered.get(id)
          if (header === undefined) return yield* notFound(id)
          const unmaterialised: LoadResult = {
            header,
            storedVersion: header.version,
            events: [],
            tornTail: undefined,
            revision: "0"
          }
          return unmaterialised
        }
        const row = found.value
        // L6: the stored id must be the requested one
        if (row.id !== id) return yield* new SessionNotFound({ rule: "L6", sessionId: id, detail: `stored id is "${row.id}"` })
        const header = yield* storedHeader(row)
        const rows = yield* findEvents({ id, fromSeq: 0 })
        const scanned = scanSession(row, rows)
        if (scanned instanceof StoreCorrupt) return yield* scanned
        const result: LoadResult = {
          header,
          storedVersion: row.version,
          events: scanned.events,
          tornTail: scanned.tornTail,
          revision: String(row.revision)
        }
        return result
      })

    const load = Effect.fn("SqliteStore.load")(function*(id: string) {
      return yield* transaction(false, loadIn(id)).pipe(failures("load", location))
    })

    const store: SessionStoreShape = {
      create: Effect.fn("SqliteStore.create")(function*(input: unknown) {
        const header = validateSessionHeader(input)
        // J13: a rejected create registers nothing
        if (header instanceof SessionHeaderInvalid) return yield* header
        for (const key of ["id", "cwd", "parentSession", "agentPreset"] as const) {
          const value = header[key]
          if (value !== undefined && LONE_SURROGATE.test(value)) return yield* unrepresentable("create", `header.${key}`)
        }
        const exists = new SessionExists({ rule: "J14", sessionId: header.id })
        if (registered.has(header.id)) return yield* exists
        const stored = yield* findNextSeq(header.id).pipe(
          Effect.mapError((e) => e instanceof SqlError ? storeFailure("create", e) : new StoreFailure({ method: "create", cause: e }))
        )
        if (Option.isSome(stored) || registered.has(header.id)) return yield* exists
        registered.set(header.id, header)
        return header
      }),

      append: Effect.fn("SqliteStore.append")(function*(
        id: string,
        events: ReadonlyArray<Event>,
        { expectedSeq }: { readonly expectedSeq: number }
      ) {
        if (events.length === 0) return
        const checked = precheckBatch(events, expectedSeq, batchOptions)
        if ("_tag" in checked) return yield* checked
        const batch = checked.events
        for (const e of batch) {
          if (LONE_SURROGATE.test(e.type)) return yield* unrepresentable("append", `type of seq ${e.seq}`)
        }
        let materialised = false
        const body = Effect.gen(function*() {
          // hot path: static SQL text with bound parameters straight on the transaction's
          // connection (the template compiler and its span cost ~100x the statement itself)
          const [conn] = yield* SqlClient.TransactionConnection
          const found = yield* conn.execute(SELECT_NEXT_SEQ, [id], undefined)
          const current = found.length === 0
            ? Option.none<{ next_seq: number }>()
            : Option.some(found[0] as { next_seq: number })
          const pending = registered.get(id)
          let storedSeq: number
          if (Option.isNone(current)) {
            if (pending === undefined) return yield* notFound(id)
            if (expectedSeq !== 0) return yield* conflict(id, expectedSeq, 0)
            // J14: the primary key decides between writers materialising the same id
            yield* insertSession(pending).pipe(
              Effect.catchIf(
                (e) => isPrimaryKeyViolation(e),
                () => new SessionExists({ rule: "J14", sessionId: id })
              )
            )
            materialised = true
            storedSeq = 0
          } else {
            // registered here but materialised by another writer meanwhile: the registration is stale
            if (pending !== undefined) {
              registered.delete(id)
              return yield* new SessionExists({ rule: "J14", sessionId: id })
            }
            storedSeq = current.value.next_seq
          }
          if (expectedSeq !== storedSeq) return yield* conflict(id, expectedSeq, storedSeq)
          yield* insertEventRows(conn, id, batch).pipe(
            Effect.catchIf((e) => isPrimaryKeyViolation(e), () => conflict(id, expectedSeq, expectedSeq - 1))
          )
          yield* conn.execute(UPDATE_NEXT_SEQ, [expectedSeq + batch.length, id], undefined)
        })
        yield* transaction(true, body, () => {
          if (materialised) registered.delete(id)
        }).pipe(failures("append", location))
      }),

      load,

      readFrom: Effect.fn("SqliteStore.readFrom")(function*(id: string, fromSeq: number) {
        // L10 first
        const bad = checkFromSeq(fromSeq)
        if (bad !== undefined) return yield* bad
        // Seek: the suffix from `fromSeq`, when the stored prefix is gap-free and the suffix has
        // no defect; anything else (a version-0 log, a torn tail, damage) takes the full read.
        const seek = transaction(
          false,
          Effect.gen(function*() {
            const found = yield* findSession(id)
            if (Option.isNone(found)) return undefined
            const row = found.value
            if (row.version !== SESSION_FORMAT_VERSION || row.id !== id) return undefined
            yield* storedHeader(row)
            const below = Option.match(yield* countBelow({ id, seq: fromSeq }), { onNone: () => 0, onSome: (r) => r.n })
            if (below !== Math.min(fromSeq, row.next_seq)) return undefined
            const rows = yield* findEvents({ id, fromSeq })
            const lastSeq = rows.length === 0 ? below - 1 : rows[rows.length - 1].seq
            if (row.next_seq !== lastSeq + 1) return undefined
            const scanned = scanRows(rows, fromSeq, location)
            if (scanned instanceof StoreCorrupt || scanned.tornTail !== undefined) return undefined
            return scanned.events
          })
        ).pipe(failures("readFrom", location))
        const events = yield* seek
        if (events === undefined) return yield* readFromLoad(load)(id, fromSeq)
        // K7 on the returned suffix
        for (const e of events) {
          if (e.type === "request/header-delta" || e.type === "mode/set") continue
          if (!KNOWN_EVENT_TYPES.has(e.type) && e.ignorable !== true) {
            return yield* new UnknownEventType({ rule: "K7", seq: e.seq, eventType: e.type })
          }
        }
        return events
      }),

      list: Effect.fn("SqliteStore.list")(function*() {
        const rows = yield* listSessions(undefined).pipe(
          Effect.mapError((e) => e instanceof SqlError ? storeFailure("list", e) : new StoreFailure({ method: "list", cause: e }))
        )
        const headers: Array<SessionHeader> = []
        const decode = Schema.decodeUnknownEither(SessionRow)
        for (const raw of rows) {
          const row = decode(raw)
          const header = row._tag === "Right"
            ? validateSessionHeader(headerFromRow(row.right), { checkVersion: false })
            : undefined
          if (header === undefined || header instanceof SessionHeaderInvalid) {
            yield* Effect.logWarning("SqliteStore.list: skipping a session row whose header cannot be read").pipe(
              Effect.annotateLogs({ location, id: isRecord(raw) ? String(raw.id) : "?" })
            )
            continue
          }
          headers.push(header)
        }
        return headers.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      }),

      truncateTornTail: Effect.fn("SqliteStore.truncateTornTail")(function*(
        id: string,
        tornTail: TornTail,
        { revision }: { readonly revision: string }
      ) {
        const body = Effect.gen(function*() {
          const found = yield* findSession(id)
          if (Option.isNone(found)) return yield* notFound(id)
          const row = found.value
          if (String(row.revision) !== revision) return yield* staleRevision(id, revision, row)
          // recompute the torn point under the write lock
          const scanned = scanSession(row, yield* findEvents({ id, fromSeq: 0 }))
          if (scanned instanceof StoreCorrupt) return yield* scanned
          const now = scanned.tornTail
          if (now === undefined || now.fromSeq !== tornTail.fromSeq || now.reason !== tornTail.reason) {
            return yield* staleRevision(id, revision, row, "the torn tail differs from the one load reported")
          }
          yield* sql`DELETE FROM events WHERE session_id = ${id} AND seq >= ${now.fromSeq}`
          yield* sql`UPDATE sessions SET next_seq = ${now.fromSeq}, revision = revision + 1 WHERE id = ${id}`
        })
        yield* transaction(true, body).pipe(failures("truncateTornTail", location))
      }),

      replaceLog: Effect.fn("SqliteStore.replaceLog")(function*(
        id: string,
        header: SessionHeader,
        events: ReadonlyArray<Event>,
        { backup, revision }: { readonly revision: string; readonly backup: string }
      ) {
        const checked = precheckBatch(events, 0, batchOptions)
        if ("_tag" in checked) {
          return yield* new StoreCorrupt({
            rule: "L9",
            location,
            detail: "the replacement events fail the batch pre-checks",
            cause: checked
          })
        }
        const takenAt = yield* Clock.currentTimeMillis
        const body = Effect.gen(function*() {
          const found = yield* findSession(id)
          if (Option.isNone(found)) return yield* notFound(id)
          const row = found.value
          if (String(row.revision) !== revision) return yield* staleRevision(id, revision, row)
          // the previous content as JSONL text (§7.4.2); a defective row is kept as stored
          const rows = yield* findEvents({ id, fromSeq: 0 })
          let content = encodeJson(headerRecord(headerFromRow(row) as SessionHeader) as Json) + "\n"
          for (let i = 0; i < rows.length; i++) {
            const verdict = rowToEvent(rows[i], i, location)
            content += (verdict._tag === "Ok" ? encodeEvent(verdict.event) : rawLine(rows[i])) + "\n"
          }
          yield* sql`INSERT INTO session_backups ${
            sql.insert({ session_id: id, taken_at: takenAt, reason: backup, content })
          }`
          yield* sql`DELETE FROM events WHERE session_id = ${id}`
          yield* sql`UPDATE sessions SET
                       version = ${header.version},
                       created_at = ${header.createdAt},
                       cwd = ${header.cwd ?? null},
                       parent_session = ${header.parentSession ?? null},
                       seed_length = ${header.seedLength ?? null},
                       origin = ${header.origin ?? null},
                       delegation_depth = ${header.delegationDepth ?? null},
                       agent_preset = ${header.agentPreset ?? null},
                       next_seq = ${checked.events.length},
                       revision = revision + 1
                     WHERE id = ${id}`
          const [conn] = yield* SqlClient.TransactionConnection
          yield* insertEventRows(conn, id, checked.events)
        })
        yield* transaction(true, body).pipe(failures("replaceLog", location))
      })
    }
    return store
  })

/** A defective stored row as a JSONL line in §1.1 key order, from the column text as stored. */
const rawLine = (r: EventRow): string => {
  let line = `{"type":${encodeJson(r.type)},"seq":${r.seq},"time":${r.time},"data":${r.data}`
  if (r.source_event_seqs !== null) line += `,"sourceEventSeqs":${r.source_event_seqs}`
  if (r.surface_op !== null) line += `,"surfaceOp":${r.surface_op}`
  if (r.ignorable !== null) line += `,"ignorable":true`
  return line + "}"
}

/** A SQLite SessionStore layer; bind it to a const (each build opens its own connection). */
export const layerSqliteStore = (
  options: SqliteStoreOptions
): Layer.Layer<SessionStore, StoreSchemaMismatch | StoreFailure> => Layer.scoped(SessionStore, makeSqliteStore(options))
