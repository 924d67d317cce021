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
import { encodeEvent } from "../schema/EventCodec.js"
import { type Event, KNOWN_EVENT_TYPES } from "../schema/Events.js"
import { SESSION_FORMAT_VERSION } from "../schema/Format.js"
import { checkParsed, encodeJson, type Json, type WalkFailure, type WalkResult } from "../schema/Json.js"
import { headerRecord, type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import {
  checkFromSeq,
  type LoadResult,
  appendPrechecked,
  precheckBatch,
  readFromLoad,
  SessionStore,
  type SessionStoreShape,
  type StoreAppendError,
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

/** Rows per page of a read: short-lived rows stay in the young generation. */
const PAGE_ROWS = 1_000

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

const SchemaObject = Schema.Struct({
  type: Schema.String,
  name: Schema.String,
  tbl_name: Schema.String,
  sql: Schema.NullOr(Schema.String)
})
type SchemaObject = typeof SchemaObject.Type


// Static SQL of the hot paths, run on the store's connection with bound parameters.

const SELECT_NEXT_SEQ = "SELECT next_seq FROM sessions WHERE id = ?"
const INSERT_SESSION = "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, " +
  "delegation_depth, agent_preset, next_seq, revision) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0)"
const SELECT_EVENT_COLUMNS = "SELECT seq, type, time, data, source_event_seqs, surface_op, ignorable FROM events"
const SELECT_EVENTS_PAGE = `${SELECT_EVENT_COLUMNS} WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?`
/** The lower bound of a full read: below every seq a row can hold (INTEGER is 64-bit). */
const LOWEST_SEQ = -9223372036854775808n

const SELECT_EVENTS_REST = `${SELECT_EVENT_COLUMNS} WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT -1 OFFSET ?`
const UPDATE_NEXT_SEQ = "UPDATE sessions SET next_seq = ?, revision = revision + 1 WHERE id = ?"
/** The expected-seq check and the counter update in one statement: 0 changed rows = no match. */
const ADVANCE_NEXT_SEQ = "UPDATE sessions SET next_seq = ?, revision = revision + 1 WHERE id = ? AND next_seq = ?"
const EVENT_COLUMNS = "session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable"

/** The stored text of the string marker (SPEC §7.5). */
const APPEND_MARKER_TEXT = "\"append\""

/** `INSERT INTO events (...) VALUES (?, ...), ...` for `rows` rows: static text, every value bound. */
const insertEventsSql = (rows: number): string =>
  `INSERT INTO events (${EVENT_COLUMNS}) VALUES ${Array.from({ length: rows }, () => "(?, ?, ?, ?, ?, ?, ?, ?)").join(", ")}`

/** The INSERT texts of batches up to 128 rows, built on first use. */
const insertSqlCache: Array<string | undefined> = []

const insertSqlFor = (rows: number): string => {
  if (rows > 128) return insertEventsSql(rows)
  return insertSqlCache[rows] ??= insertEventsSql(rows)
}

/**
 * The JSON text of `e.data` cut out of `line`, the event's JSONL text from the batch pre-checks
 * (`{"type":…,"seq":…,"time":…,"data":` + data + the optional keys in §1.1 order + `}`), so it
 * is not encoded a second time; undefined when the line does not have that frame. The first
 * `,"data":` is the key: inside the type string every `"` is escaped.
 */
const dataTextIn = (
  line: string,
  e: Event,
  sourceEventSeqs: string | null,
  surfaceOp: string | null
): string | undefined => {
  if (line.charCodeAt(line.length - 1) !== 125 /* } */ || !line.startsWith("{\"type\":")) return undefined
  const start = line.indexOf(",\"data\":")
  if (start === -1) return undefined
  let end = line.length - 1
  if (e.ignorable !== undefined) {
    end -= 17
    if (e.ignorable !== true || !line.startsWith(",\"ignorable\":true", end)) return undefined
  }
  if (surfaceOp !== null) {
    end -= surfaceOp.length
    if (!line.startsWith(surfaceOp, end)) return undefined
    end -= 13
    if (!line.startsWith(",\"surfaceOp\":", end)) return undefined
  }
  if (sourceEventSeqs !== null) {
    end -= sourceEventSeqs.length
    if (!line.startsWith(sourceEventSeqs, end)) return undefined
    end -= 19
    if (!line.startsWith(",\"sourceEventSeqs\":", end)) return undefined
  }
  return end > start + 8 ? line.slice(start + 8, end) : undefined
}

/** Push the bound values of one `events` row (SPEC §7.5 column encodings); `line` as in `dataTextIn`. */
const pushEventColumns = (params: Array<unknown>, sessionId: string, e: Event, line: string | undefined): void => {
  const sourceEventSeqs = e.sourceEventSeqs === undefined ? null : encodeJson(e.sourceEventSeqs as Json)
  const surfaceOp = e.surfaceOp === undefined
    ? null
    : e.surfaceOp === "append"
    ? APPEND_MARKER_TEXT
    : encodeJson(e.surfaceOp as Json)
  const data = line === undefined ? undefined : dataTextIn(line, e, sourceEventSeqs, surfaceOp)
  params.push(
    sessionId,
    e.seq,
    e.type,
    e.time,
    data ?? encodeJson(e.data as Json),
    sourceEventSeqs,
    surfaceOp,
    e.ignorable === true ? 1 : null
  )
}

/**
 * Insert a batch with one multi-row INSERT per chunk of ROWS_PER_INSERT rows; `lines` (optional)
 * are the events' JSONL texts.
 */
const insertEventRows = (
  conn: Connection,
  sessionId: string,
  events: ReadonlyArray<Event>,
  lines?: ReadonlyArray<string>
): Effect.Effect<void, SqlError> => {
  if (events.length <= ROWS_PER_INSERT) {
    const params: Array<unknown> = []
    for (let i = 0; i < events.length; i++) pushEventColumns(params, sessionId, events[i], lines?.[i])
    return Effect.asVoid(conn.execute(insertSqlFor(events.length), params, undefined))
  }
  return Effect.gen(function*() {
    for (let start = 0; start < events.length; start += ROWS_PER_INSERT) {
      const end = start + ROWS_PER_INSERT
      yield* insertEventRows(conn, sessionId, events.slice(start, end), lines?.slice(start, end))
    }
  })
}

/** `changes` of a better-sqlite3 run result (from `executeRaw`). */
const changedRows = (result: unknown): number => {
  const changes = (result as { readonly changes?: unknown } | null)?.changes
  return typeof changes === "number" ? changes : 0
}

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

/**
 * An `events` row as read by SELECT_EVENT_COLUMNS, as an array of column values in this order:
 * seq, type, time, data, source_event_seqs, surface_op, ignorable.
 */
type EventRow = readonly [
  seq: number,
  type: string,
  time: number,
  data: string,
  sourceEventSeqs: string | null,
  surfaceOp: string | null,
  ignorable: number | null
]

/** The column types a STRICT `events` row must have (checked by hand: 100,000 rows per load). */
const isEventRow = (r: unknown): r is EventRow => {
  if (!Array.isArray(r) || r.length !== 7) return false
  const s = r[4]
  const o = r[5]
  const g = r[6]
  return typeof r[0] === "number" && typeof r[1] === "string" && typeof r[2] === "number" &&
    typeof r[3] === "string" && (s === null || typeof s === "string") && (o === null || typeof o === "string") &&
    (g === null || typeof g === "number")
}

/** L9: a row from disk that does not decode. */
const undecodable = (location: string, row: unknown) =>
  new StoreCorrupt({ rule: "L9", location, detail: "a stored row does not decode", cause: row })

const UNPARSABLE: unique symbol = Symbol("UNPARSABLE")

/** JSON.parse then the lossless check of parsed values (freezes in place); UNPARSABLE on a syntax error. */
const parseColumn = (text: string): WalkResult | typeof UNPARSABLE => {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return UNPARSABLE
  }
  return checkParsed(parsed)
}

/** L9: a committed-looking row whose JSON fails the lossless walk. */
const notLossless = (seq: number, key: string, failure: WalkFailure, location: string) =>
  new StoreCorrupt({
    rule: "L9",
    seq,
    location,
    detail: `column ${key} is not lossless JSON (${failure.rule} at "${failure.path}": ${failure.detail})`,
    // the rule error itself, with its path relative to the event record
    cause: new NotLosslessJson({ rule: failure.rule, seq, path: `/${key}${failure.path}`, detail: failure.detail })
  })

/** An envelope in §1.1 key order (the rare shapes of `rowToEvent`). */
const envelope = (
  type: string,
  seq: number,
  time: number,
  data: unknown,
  sourceEventSeqs: unknown,
  surfaceOp: unknown,
  ignorable: true | undefined
): object => {
  const out: Record<string, unknown> = { type, seq, time, data }
  if (sourceEventSeqs !== undefined) out.sourceEventSeqs = sourceEventSeqs
  if (surfaceOp !== undefined) out.surfaceOp = surfaceOp
  if (ignorable !== undefined) out.ignorable = ignorable
  return out
}

/**
 * One row turned back into a frozen envelope built in §1.1 key order, or the reason it is a
 * defect (a string), or L9.
 */
const rowToEvent = (row: EventRow, expectedSeq: number, location: string): Event | TornTail["reason"] | StoreCorrupt => {
  const seq = row[0]
  if (seq !== expectedSeq) return "seq-gap"
  if (!Number.isSafeInteger(row[2])) return "unparsable"
  const ignorable = row[6]
  if (ignorable !== null && ignorable !== 1) return "unparsable"
  // every JSON column must parse (else the row is a defect) before a lossless failure counts
  // (L9 is for committed-looking records only); marker and provenance shapes are the seed
  // validation's business (L9 there), as for a JSONL line
  const data = parseColumn(row[3])
  if (data === UNPARSABLE) return "unparsable"
  const provenance = row[4] === null ? undefined : parseColumn(row[4])
  if (provenance === UNPARSABLE) return "unparsable"
  const marker = row[5] === null || row[5] === APPEND_MARKER_TEXT ? undefined : parseColumn(row[5])
  if (marker === UNPARSABLE) return "unparsable"
  if (data._tag === "Fail") return notLossless(seq, "data", data, location)
  if (provenance?._tag === "Fail") return notLossless(seq, "sourceEventSeqs", provenance, location)
  if (marker?._tag === "Fail") return notLossless(seq, "surfaceOp", marker, location)
  const sourceEventSeqs: unknown = provenance?.value
  const surfaceOp: unknown = row[5] === APPEND_MARKER_TEXT ? "append" : marker?.value
  // one object literal per envelope shape: stable hidden classes for 100,000 retained envelopes
  let out: object
  if (ignorable === 1) {
    out = sourceEventSeqs === undefined && surfaceOp === undefined
      ? { type: row[1], seq, time: row[2], data: data.value, ignorable: true }
      : envelope(row[1], seq, row[2], data.value, sourceEventSeqs, surfaceOp, true)
  } else if (sourceEventSeqs === undefined) {
    out = surfaceOp === undefined
      ? { type: row[1], seq, time: row[2], data: data.value }
      : { type: row[1], seq, time: row[2], data: data.value, surfaceOp }
  } else {
    out = surfaceOp === undefined
      ? { type: row[1], seq, time: row[2], data: data.value, sourceEventSeqs }
      : { type: row[1], seq, time: row[2], data: data.value, sourceEventSeqs, surfaceOp }
  }
  return Object.freeze(out) as unknown as Event
}

/**
 * Incremental classification of a session's rows, fed page by page (SPEC §7.5 "Load", §7.4.4
 * step 5): the contiguous prefix of good rows, then either no defect, a torn tail from the first
 * defect, or `StoreCorrupt` (L2) when a later row has type `turn/end`. Rows after the first
 * defect are only looked at for their type and seq.
 */
class RowScan {
  readonly events: Array<Event> = []
  /** rows fed so far */
  rows = 0
  /** seq of the last row fed */
  lastSeq = -1
  private stopped = false
  private defectSeq = -1
  private defectReason: TornTail["reason"] | undefined
  private laterTurnEnd = -1
  private corrupt: StoreCorrupt | undefined

  constructor(private readonly firstSeq: number, private readonly location: string) {}

  /** Classify one page of raw result rows; L9 when a row does not decode at all. */
  feed(page: ReadonlyArray<unknown>): StoreCorrupt | undefined {
    for (let i = 0; i < page.length; i++) {
      const row = page[i]
      if (!isEventRow(row)) return undecodable(this.location, row)
      if (row[0] < 0) {
        // written by something else: truncating a torn tail (seq >= fromSeq) could never remove
        // it, so it is corruption wherever it is, never a torn tail
        return new StoreCorrupt({
          rule: "L2",
          seq: row[0],
          location: this.location,
          detail: `a row with the negative seq ${row[0]}`
        })
      }
      const expected = this.firstSeq + this.rows
      this.rows++
      this.lastSeq = row[0]
      if (this.stopped) {
        if (this.defectReason !== undefined && this.laterTurnEnd === -1 && row[1] === "turn/end") this.laterTurnEnd = row[0]
        continue
      }
      const verdict = rowToEvent(row, expected, this.location)
      if (typeof verdict === "string") {
        this.stopped = true
        this.defectSeq = expected
        this.defectReason = verdict
      } else if (verdict instanceof StoreCorrupt) {
        this.stopped = true
        this.corrupt = verdict
      } else {
        this.events.push(verdict)
      }
    }
    return undefined
  }

  /** The verdict once every row was fed. */
  result(): StoreCorrupt | { readonly events: ReadonlyArray<Event>; readonly tornTail: TornTail | undefined } {
    if (this.corrupt !== undefined) return this.corrupt
    const reason = this.defectReason
    if (reason === undefined) return { events: this.events, tornTail: undefined }
    const at = this.defectSeq
    if (this.laterTurnEnd !== -1) {
      return new StoreCorrupt({
        rule: "L2",
        seq: at,
        location: this.location,
        detail: `defective row (${reason}) at seq ${at} before a turn/end at seq ${this.laterTurnEnd}`
      })
    }
    return { events: this.events, tornTail: { fromSeq: at, reason, position: at } }
  }
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
 * Run `body` in one transaction on a connection reserved for it (the open check; a store's own
 * operations use its long-lived reservation): `BEGIN IMMEDIATE` for writes (never the client's
 * deferred BEGIN, SPEC §7.5), plain `BEGIN` for reads. COMMIT failures are errors, not
 * defects; `afterCommit` runs before the connection is released.
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
    // The store's connection, reserved for the store's lifetime (released with its scope);
    // store operations take turns on it through a semaphore. A reservation per operation costs a
    // Scope each time (~12 µs, about what the rest of a single-event append costs).
    const conn: Connection = yield* sql.reserve.pipe(Effect.mapError((e) => storeFailure("open", e)))
    const withLock = (yield* Effect.makeSemaphore(1)).withPermits(1)
    // closing the store waits for the operation in flight (finalizers run in reverse order, so
    // this one runs before the connection is released and closed)
    yield* Effect.addFinalizer(() => withLock(Effect.void))
    const onConnection = [conn, 0] as const

    /** Run `effect` alone on the store's connection: waiting for it is interruptible, running is not. */
    const exclusive = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> => withLock(Effect.uninterruptible(effect))

    /** `effect` with the store's connection as the `sql` template's connection. */
    const onStoreConnection = <A, E>(effect: Effect.Effect<A, E, SqlClient.TransactionConnection>) =>
      Effect.provideService(effect, SqlClient.TransactionConnection, onConnection)

    // Statements as reusable effects (static SQL, prepared once by the client's cache).
    const beginWrite = conn.execute("BEGIN IMMEDIATE", [], undefined)
    const beginRead = conn.execute("BEGIN", [], undefined)
    const commit = conn.execute("COMMIT", [], undefined)
    const rollback = Effect.ignore(conn.execute("ROLLBACK", [], undefined))

    /**
     * Run `body` in one transaction on the store's connection: `BEGIN IMMEDIATE` for writes
     * (never a deferred BEGIN, SPEC §7.5), plain `BEGIN` for reads. COMMIT failures are errors,
     * not defects; `afterCommit` runs before the connection is handed on. Plain combinators, no
     * generator: this is the append's hot path.
     */
    const transactionRaw = <A, E>(
      write: boolean,
      body: Effect.Effect<A, E | SqlError>,
      afterCommit?: (a: A) => void
    ): Effect.Effect<A, E | SqlError> =>
      exclusive(Effect.zipRight(
        write ? beginWrite : beginRead,
        Effect.matchCauseEffect(body, {
          onFailure: (cause) => Effect.zipRight(rollback, Effect.failCause(cause)),
          onSuccess: (a) =>
            Effect.matchCauseEffect(commit, {
              onFailure: (cause) => Effect.zipRight(rollback, Effect.failCause(cause)),
              onSuccess: () => {
                afterCommit?.(a)
                return Effect.succeed(a)
              }
            })
        })
      ))

    /** `transactionRaw` for a body that uses the `sql` template. */
    const transaction = <A, E>(
      write: boolean,
      body: Effect.Effect<A, E | SqlError, SqlClient.TransactionConnection>,
      afterCommit?: (a: A) => void
    ) => transactionRaw(write, onStoreConnection(body), afterCommit)

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

    /**
     * The rows with `seq >= fromSeq`, classified page by page (static SQL, rows as value arrays,
     * no row Schema: 100,000 rows per resume): pages keep the rows short-lived, the
     * classification builds each envelope once.
     */
    /**
     * Every row of a session, classified page by page. The reads start below any seq (a row with
     * a negative seq, written by something else, is a defect like any other, never invisible).
     */
    const scanEvents = (id: string) =>
      Effect.gen(function*() {
        const scan = new RowScan(0, location)
        let from: number | bigint = LOWEST_SEQ
        for (;;) {
          const page = yield* conn.executeValues(SELECT_EVENTS_PAGE, [id, from, PAGE_ROWS])
          const bad = scan.feed(page)
          if (bad !== undefined) return yield* bad
          if (page.length < PAGE_ROWS) return scan
          from = scan.lastSeq + 1
          if (!Number.isSafeInteger(from)) {
            // a stored seq beyond 2^53 reads back rounded: take the rest by position instead
            const rest = yield* conn.executeValues(SELECT_EVENTS_REST, [id, LOWEST_SEQ, scan.rows])
            const worse = scan.feed(rest)
            if (worse !== undefined) return yield* worse
            return scan
          }
        }
      })

    /** Every row of a session, unclassified (replaceLog's backup keeps defective rows as stored). */
    const allEventRows = (id: string) =>
      Effect.gen(function*() {
        const rows = yield* conn.executeValues(SELECT_EVENTS_REST, [id, LOWEST_SEQ, 0])
        const out: Array<EventRow> = []
        for (const row of rows) {
          if (!isEventRow(row)) return yield* undecodable(location, row)
          out.push(row)
        }
        return out
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
      conn.execute(INSERT_SESSION, [
        h.id,
        h.version,
        h.createdAt,
        h.cwd ?? null,
        h.parentSession ?? null,
        h.seedLength ?? null,
        h.origin ?? null,
        h.delegationDepth ?? null,
        h.agentPreset ?? null
      ], undefined)

    const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

    const conflict = (id: string, expectedSeq: number, storedSeq: number) =>
      new AppendConflict({ rule: expectedSeq > storedSeq ? "C5" : "C7", sessionId: id, expectedSeq, storedSeq })

    // C7 (SPEC §7.5): a row of the batch is already stored although `next_seq` matched
    const rowTaken = (id: string, expectedSeq: number) =>
      new AppendConflict({
        rule: "C7",
        sessionId: id,
        expectedSeq,
        storedSeq: expectedSeq,
        detail: "a row of the batch is already stored"
      })

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
    const scanSession = (row: SessionRow, scan: RowScan) => {
      const lastSeq = scan.rows === 0 ? -1 : scan.lastSeq
      if (row.next_seq !== lastSeq + 1) {
        return new StoreCorrupt({
          rule: "L2",
          location,
          detail: `sessions.next_seq is ${row.next_seq} but the last stored seq is ${lastSeq}`
        })
      }
      return scan.result()
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
        const scanned = scanSession(row, yield* scanEvents(id))
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

    /** Advance `next_seq` from `expectedSeq` and insert the batch (a materialised session). */
    const advance = (id: string, batch: ReadonlyArray<Event>, lines: ReadonlyArray<string>, expectedSeq: number) =>
      Effect.flatMap(
        // C5/C7 and the counter in one statement; on no match, tell L11 and C5/C7 apart
        conn.executeRaw(ADVANCE_NEXT_SEQ, [expectedSeq + batch.length, id, expectedSeq]),
        (advanced): Effect.Effect<false, SessionNotFound | AppendConflict | SqlError> =>
          changedRows(advanced) === 1
            ? insertEventRows(conn, id, batch, lines).pipe(
              Effect.catchIf(isPrimaryKeyViolation, () => rowTaken(id, expectedSeq)),
              Effect.as(false as const)
            )
            : Effect.flatMap(conn.execute(SELECT_NEXT_SEQ, [id], undefined), (found) =>
              Effect.fail(
                found.length === 0
                  ? notFound(id)
                  : conflict(id, expectedSeq, (found[0] as { readonly next_seq: number }).next_seq)
              ))
      )

    /** The first append of a session registered here: the `sessions` row and the batch, atomically. */
    const materialise = (
      id: string,
      pending: SessionHeader,
      batch: ReadonlyArray<Event>,
      lines: ReadonlyArray<string>,
      expectedSeq: number
    ) =>
      Effect.gen(function*() {
        const found = yield* conn.execute(SELECT_NEXT_SEQ, [id], undefined)
        if (found.length !== 0) {
          // materialised by another writer meanwhile: the registration is stale
          registered.delete(id)
          return yield* new SessionExists({ rule: "J14", sessionId: id })
        }
        // nothing stored yet: the stored next seq is 0
        if (expectedSeq !== 0) return yield* conflict(id, expectedSeq, 0)
        // J14: the primary key decides between writers materialising the same id
        yield* insertSession(pending).pipe(
          Effect.catchIf(isPrimaryKeyViolation, () => new SessionExists({ rule: "J14", sessionId: id }))
        )
        yield* insertEventRows(conn, id, batch, lines).pipe(
          Effect.catchIf(isPrimaryKeyViolation, () => rowTaken(id, expectedSeq))
        )
        yield* conn.execute(UPDATE_NEXT_SEQ, [batch.length, id], undefined)
        return true as const
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
        const stored = yield* exclusive(onStoreConnection(findNextSeq(header.id))).pipe(
          Effect.mapError((e) => e instanceof SqlError ? storeFailure("create", e) : new StoreFailure({ method: "create", cause: e }))
        )
        if (Option.isSome(stored) || registered.has(header.id)) return yield* exists
        registered.set(header.id, header)
        return header
      }),

      // The hot path: untraced (a span costs about a third of a single-event append), static SQL
      // text with bound parameters on the store's connection (the template compiler and its span
      // cost ~10x the statement itself).
      append: (id, events, options) =>
        appendPrechecked(events, options, batchOptions, (checked, expectedSeq): Effect.Effect<void, StoreAppendError> => {
          const batch = checked.events
          for (const e of batch) {
            if (LONE_SURROGATE.test(e.type)) return Effect.fail(unrepresentable("append", `type of seq ${e.seq}`))
          }
          const body = Effect.suspend((): Effect.Effect<boolean, StoreAppendError | SqlError> => {
            const pending = registered.get(id)
            return pending === undefined
              ? advance(id, batch, checked.lines, expectedSeq)
              : materialise(id, pending, batch, checked.lines, expectedSeq)
          })
          return transactionRaw(true, body, (materialised) => {
            if (materialised) registered.delete(id)
          }).pipe(failures("append", location), Effect.asVoid)
        }),

      load,

      // The suffix of the whole read (§7.1): the rows below fromSeq are classified too (a defect
      // there means a torn tail or L2, never a suffix read past it). K7 checks the returned suffix
      // (SPEC §8.2 "seek reads"); a log of another version takes the sequential pipeline.
      readFrom: Effect.fn("SqliteStore.readFrom")(function*(id: string, fromSeq: number) {
        const bad = checkFromSeq(fromSeq)
        if (bad !== undefined) return yield* bad
        const loaded = yield* load(id)
        if (loaded.storedVersion !== SESSION_FORMAT_VERSION) {
          return yield* readFromLoad(() => Effect.succeed(loaded))(id, fromSeq)
        }
        // a version-1 load of this store yields envelopes (rowToEvent) only
        const suffix = loaded.events.slice(fromSeq) as ReadonlyArray<Event>
        for (const e of suffix) {
          if (e.type === "request/header-delta" || e.type === "mode/set") continue
          if (!KNOWN_EVENT_TYPES.has(e.type) && e.ignorable !== true) {
            return yield* new UnknownEventType({ rule: "K7", seq: e.seq, eventType: e.type })
          }
        }
        return suffix
      }),

      list: Effect.fn("SqliteStore.list")(function*() {
        const rows = yield* exclusive(onStoreConnection(listSessions(undefined))).pipe(
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
          const scanned = scanSession(row, yield* scanEvents(id))
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
          const rows = yield* allEventRows(id)
          let content = encodeJson(headerRecord(headerFromRow(row) as SessionHeader) as Json) + "\n"
          for (let i = 0; i < rows.length; i++) {
            const verdict = rowToEvent(rows[i], i, location)
            content += (typeof verdict === "object" && !(verdict instanceof StoreCorrupt)
              ? encodeEvent(verdict)
              : rawLine(rows[i])) + "\n"
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
          yield* insertEventRows(conn, id, checked.events, checked.lines)
        })
        yield* transaction(true, body).pipe(failures("replaceLog", location))
      })
    }
    return store
  })

/** A defective stored row as a JSONL line in §1.1 key order, from the column text as stored. */
const rawLine = (r: EventRow): string => {
  let line = `{"type":${encodeJson(r[1])},"seq":${r[0]},"time":${r[2]},"data":${r[3]}`
  if (r[4] !== null) line += `,"sourceEventSeqs":${r[4]}`
  if (r[5] !== null) line += `,"surfaceOp":${r[5]}`
  if (r[6] !== null) line += `,"ignorable":true`
  return line + "}"
}

/** A SQLite SessionStore layer; bind it to a const (each build opens its own connection). */
export const layerSqliteStore = (
  options: SqliteStoreOptions
): Layer.Layer<SessionStore, StoreSchemaMismatch | StoreFailure> => Layer.scoped(SessionStore, makeSqliteStore(options))
