/**
 * Helpers of the tests of the SQL store's rows (docs/formats.md "SQL schema version 2"), written from the
 * layout's description and independent of the store's codecs: a raw better-sqlite3 connection, a
 * stored row read back to the JSON texts it holds (payload inflated, provenance BLOB decoded), the
 * rows a batch must become (SPEC Appendix A runs packed), and a version-1 database (SPEC §7.5) as
 * the version-1 build wrote it, shared with the PostgreSQL tests.
 */
import * as Effect from "effect/Effect"
import { createRequire } from "node:module"
import { deflateRawSync, inflateRawSync } from "node:zlib"
import type { Event } from "../../src/schema/Events.js"

// ---------------------------------------------------------------------------------------------
// a raw better-sqlite3 connection, behind the store's back

export interface RawStatement {
  all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
  get(...params: ReadonlyArray<unknown>): Record<string, unknown> | undefined
  run(...params: ReadonlyArray<unknown>): unknown
}
export interface RawDb {
  pragma(source: string, options?: { simple: boolean }): unknown
  exec(source: string): void
  prepare(source: string): RawStatement
  transaction<A>(f: () => A): () => A
  close(): void
}
// as the store does before its first open: SQLite reads this when the addon loads, and read-only
// opens of a file without a -wal need URI filenames (immutable=1) to create no -wal/-shm pair
process.env.SQLITE_USE_URI ??= "1"
const require = createRequire(import.meta.url)
const Database = require("better-sqlite3") as new(filename: string) => RawDb

/** `f` on a raw connection to `file`, closed afterwards. */
export const withRaw = <A>(file: string, f: (db: RawDb) => A) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Database(file)),
    (db) => Effect.sync(() => f(db)),
    (db) => Effect.sync(() => db.close())
  )

// ---------------------------------------------------------------------------------------------
// stored rows

/** An `event_rows` row as the texts it stands for. */
export interface StoredRow {
  readonly seq: number
  readonly members: number
  readonly type: string
  readonly time: number
  /** the payload's JSON text (from `data`, or `data_z` inflated) */
  readonly payload: string
  /** which column held it */
  readonly column: "data" | "data_z"
  /** the provenance's JSON text, or null */
  readonly provenance: string | null
  /** the provenance BLOB's tag byte: 0 runs, 1 text */
  readonly provenanceTag: number | null
  readonly surface_op: string | null
  readonly ignorable: true | null
}

/** Payloads over this many UTF-8 bytes are compressed when that is smaller. */
export const COMPRESS_ABOVE = 1_024

/** The column a payload's JSON text belongs in. */
export const payloadColumn = (text: string): "data" | "data_z" => {
  const bytes = Buffer.from(text, "utf8")
  return bytes.length > COMPRESS_ABOVE && deflateRawSync(bytes).length < bytes.length ? "data_z" : "data"
}

/**
 * The JSON text a provenance BLOB stands for: tag 1, the UTF-8 text; tag 0, varint pairs (the gap
 * from the previous run's end + 1, the run's length - 1) expanded.
 */
export const blobText = (blob: Uint8Array): string => {
  if (blob[0] === 1) return Buffer.from(blob.subarray(1)).toString("utf8")
  if (blob[0] !== 0) throw new Error(`a provenance BLOB with the tag byte ${blob[0]}`)
  let i = 1
  const varint = (): number => {
    let n = 0
    let scale = 1
    for (;;) {
      if (i >= blob.length) throw new Error("a provenance BLOB ending inside a varint")
      const b = blob[i++]
      n += (b & 0x7f) * scale
      if (b < 0x80) return n
      scale *= 0x80
    }
  }
  const seqs: Array<number> = []
  let next = 0
  while (i < blob.length) {
    const start = next + varint()
    const end = start + varint()
    for (let s = start; s <= end; s++) seqs.push(s)
    next = end + 1
  }
  return JSON.stringify(seqs)
}

/** A raw `event_rows` row (SQLite or PostgreSQL: BIGINT as text, BOOLEAN) as its texts. */
export const readRow = (r: Record<string, unknown>): StoredRow => {
  const data = r.data ?? null
  const dataZ = r.data_z ?? null
  if ((data === null) === (dataZ === null)) throw new Error(`a row with data ${String(data)} and data_z ${String(dataZ)}`)
  const provenance = (r.source_event_seqs ?? null) as Uint8Array | null
  return {
    seq: Number(r.seq),
    members: Number(r.members),
    type: String(r.type),
    time: Number(r.time),
    payload: data !== null ? String(data) : inflateRawSync(dataZ as Uint8Array).toString("utf8"),
    column: data !== null ? "data" : "data_z",
    provenance: provenance === null ? null : blobText(provenance),
    provenanceTag: provenance === null ? null : provenance[0],
    surface_op: (r.surface_op ?? null) as string | null,
    ignorable: r.ignorable === 1 || r.ignorable === true ? true : null
  }
}

/** The columns `readRow` needs, in seq order. */
export const ROW_COLUMNS = "seq, members, type, time, data, data_z, source_event_seqs, surface_op, ignorable"

/** The stored rows of session `id` of a SQLite file, as texts. */
export const sqliteRows = (file: string, id: string) =>
  withRaw(file, (db) =>
    db.prepare(`SELECT ${ROW_COLUMNS} FROM event_rows WHERE session_id = ? ORDER BY seq`).all(id).map(readRow))

// ---------------------------------------------------------------------------------------------
// the rows a batch becomes

const exactInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && !Object.is(v, -0)

const keysAre = (o: unknown, keys: ReadonlyArray<string>): o is Record<string, unknown> => {
  if (typeof o !== "object" || o === null || Array.isArray(o)) return false
  const own = Object.keys(o)
  return own.length === keys.length && own.every((k, i) => k === keys[i])
}

/** A delta chunk that may join a packed row: its run key and its text. */
interface Member {
  readonly e: Event
  readonly key: string
  readonly piece: string
  readonly tag: string
  readonly head: Record<string, unknown>
}

const memberOf = (e: Event): Member | undefined => {
  if (e.type !== "assistant/chunk" || !keysAre(e, ["type", "seq", "time", "data"]) || !exactInt(e.seq) || !exactInt(e.time)) {
    return undefined
  }
  const d = e.data
  if (!keysAre(d, ["turn", "step", "chunk"]) || !exactInt(d.turn) || !exactInt(d.step)) return undefined
  if (typeof d.chunk !== "object" || d.chunk === null) return undefined
  const c = d.chunk as Record<string, unknown>
  if (!exactInt(c.index)) return undefined
  const { turn, step } = d
  if (keysAre(c, ["type", "index", "text"]) && (c.type === "text-delta" || c.type === "reasoning-delta") && typeof c.text === "string") {
    const tag = c.type === "text-delta" ? "text-chunks" : "reasoning-chunks"
    return { e, tag, key: JSON.stringify([tag, turn, step, c.index]), piece: c.text, head: { turn, step, index: c.index } }
  }
  if (c.type === "tool-call-delta" && typeof c.id === "string" && typeof c.argumentsDelta === "string") {
    const named = keysAre(c, ["type", "index", "id", "name", "argumentsDelta"]) && typeof c.name === "string"
    if (!named && !keysAre(c, ["type", "index", "id", "argumentsDelta"])) return undefined
    const head = named ? { turn, step, index: c.index, id: c.id, name: c.name } : { turn, step, index: c.index, id: c.id }
    return { e, tag: "tool-call-chunks", key: JSON.stringify(["tool", head]), piece: c.argumentsDelta, head }
  }
  return undefined
}

/** The row of one event written as itself. */
export const eventRow = (e: Event): StoredRow => {
  const payload = JSON.stringify(e.data)
  const seqs = e.sourceEventSeqs as unknown
  const ascending = Array.isArray(seqs) && seqs.every((s, i) => exactInt(s) && s >= 0 && (i === 0 || s > seqs[i - 1]))
  return {
    seq: e.seq,
    members: 1,
    type: e.type,
    time: e.time,
    payload,
    column: payloadColumn(payload),
    provenance: seqs === undefined ? null : JSON.stringify(seqs),
    provenanceTag: seqs === undefined ? null : ascending ? 0 : 1,
    surface_op: e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
    ignorable: e.ignorable === true ? true : null
  }
}

const packedRow = (run: ReadonlyArray<Member>): StoredRow => {
  const first = run[0]
  const dt = run.slice(1).map((m, k) => m.e.time - run[k].e.time)
  const pieces = run.map((m) => m.piece)
  const payload = JSON.stringify(
    first.tag === "tool-call-chunks" ? { ...first.head, dt, args: pieces } : { ...first.head, dt, texts: pieces }
  )
  return {
    seq: first.e.seq,
    members: run.length,
    type: first.tag,
    time: first.e.time,
    payload,
    column: payloadColumn(payload),
    provenance: null,
    provenanceTag: null,
    surface_op: null,
    ignorable: null
  }
}

/**
 * The rows one appended batch must become: with `pack`, every maximal run of ≥ 3 consecutive
 * exact-shape delta chunks of one kind, turn, step and index (and tool-call id and name) is one
 * packed row of at most 1,024 members (the 1 MiB cap is not reached by these tests), every other
 * event a row of its own.
 */
export const expectedRows = (batch: ReadonlyArray<Event>, pack: boolean): Array<StoredRow> => {
  const out: Array<StoredRow> = []
  let run: Array<Member> = []
  const flush = () => {
    if (run.length >= 3) out.push(packedRow(run))
    else for (const m of run) out.push(eventRow(m.e))
    run = []
  }
  for (const e of batch) {
    const m = pack ? memberOf(e) : undefined
    if (m === undefined) {
      flush()
      out.push(eventRow(e))
      continue
    }
    const last = run[run.length - 1]
    if (
      last !== undefined && run.length < 1_024 && m.key === last.key && m.e.seq === last.e.seq + 1 &&
      Number.isSafeInteger(m.e.time - last.e.time)
    ) {
      run.push(m)
      continue
    }
    flush()
    run = [m]
  }
  flush()
  return out
}

// ---------------------------------------------------------------------------------------------
// a version-1 database

/** The version-1 schema of SPEC §7.5, as the version-1 build created it. */
export const SQLITE_V1_DDL = [
  `CREATE TABLE sessions (
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
) STRICT`,
  `CREATE TABLE events (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT    NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT    NOT NULL,
  source_event_seqs TEXT,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  PRIMARY KEY (session_id, seq)
) STRICT`,
  `CREATE TABLE session_backups (
  id         INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  taken_at   INTEGER NOT NULL,
  reason     TEXT    NOT NULL,
  content    TEXT    NOT NULL
) STRICT`
]

/** An `events` row of version 1: the JSON columns as text. */
export interface V1Row {
  readonly seq: number
  readonly type: string
  readonly time: number
  readonly data: string
  readonly source_event_seqs: string | null
  readonly surface_op: string | null
  readonly ignorable: boolean
}

/** A session of a version-1 database. */
export interface V1Session {
  readonly id: string
  readonly createdAt: number
  readonly cwd: string | null
  readonly delegationDepth: number | null
  readonly nextSeq: number
  readonly revision: number
  readonly rows: ReadonlyArray<V1Row>
}

const v1Row = (
  seq: number,
  type: string,
  data: unknown,
  extra: { readonly provenance?: string; readonly marker?: string; readonly ignorable?: true; readonly text?: string } = {}
): V1Row => ({
  seq,
  type,
  time: 1_000 + seq,
  data: extra.text ?? JSON.stringify(data),
  source_event_seqs: extra.provenance ?? null,
  surface_op: extra.marker ?? null,
  ignorable: extra.ignorable === true
})

/** A long, compressible payload (over 1 KiB). */
export const LONG_TEXT = "the quick brown fox jumps over the lazy dog; ".repeat(80)

/**
 * Sessions as a version-1 build wrote them: `chat` with a string marker, provenance arrays (runs,
 * not ascending, and a hand-written non-canonical text), a long payload, ignorable rows and a
 * chunk run; `torn` ending in a damaged row (a torn tail); `corrupt` with a damaged row before a
 * turn/end (L2); `long` with 2,345 rows (several pages of the migration's copy).
 */
export const v1Sessions = (): ReadonlyArray<V1Session> => {
  const note = (seq: number, data: unknown, provenance?: string) =>
    v1Row(seq, "test/note", data, { ignorable: true, ...(provenance === undefined ? {} : { provenance }) })
  const chat: Array<V1Row> = [
    v1Row(0, "turn/start", { turn: 1 }),
    v1Row(1, "user/message", { id: "u1", role: "user", content: [{ type: "text", text: "hi" }], source: { kind: "user" } }, {
      marker: "\"append\""
    }),
    v1Row(2, "step/start", { turn: 1, step: 1 }),
    ...["Hel", "lo", " wor", "ld"].map((text, k) =>
      v1Row(3 + k, "assistant/chunk", { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text } })
    ),
    v1Row(7, "assistant/message", {
      turn: 1,
      step: 1,
      message: {
        id: "a1",
        role: "assistant",
        content: [{ type: "text", text: "Hello world" }],
        source: { kind: "model", provider: "anthropic", model: "m" }
      }
    }, { marker: "\"append\"", provenance: "[3,4,5,6]" }),
    note(8, { text: LONG_TEXT }, "[0,1,2,5]"),
    note(9, { n: 9 }, "[6,2]"),
    note(10, { n: 10 }, "[ 1, 2 ]"),
    v1Row(11, "step/end", { turn: 1, step: 1 }),
    v1Row(12, "turn/end", { turn: 1, reason: { kind: "completed" } })
  ]
  const torn: Array<V1Row> = [
    v1Row(0, "turn/start", { turn: 1 }),
    v1Row(1, "step/start", { turn: 1, step: 1 }),
    v1Row(2, "assistant/chunk", { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: "a" } }),
    v1Row(3, "assistant/chunk", null, { text: "{\"turn\":1,\"st" })
  ]
  const corrupt: Array<V1Row> = [
    v1Row(0, "turn/start", { turn: 1 }),
    note(1, null),
    v1Row(2, "turn/end", { turn: 1, reason: { kind: "completed" } })
  ].map((r) => r.seq === 1 ? { ...r, data: "{" } : r)
  const long = Array.from({ length: 2_345 }, (_, i) => note(i, { i }))
  const session = (id: string, createdAt: number, rows: ReadonlyArray<V1Row>, extra: Partial<V1Session> = {}): V1Session => ({
    id,
    createdAt,
    cwd: null,
    delegationDepth: null,
    nextSeq: rows.length,
    revision: 1,
    rows,
    ...extra
  })
  return [
    session("chat", 10, chat, { cwd: "/w", delegationDepth: 0, revision: 3 }),
    session("corrupt", 11, corrupt),
    session("long", 12, long, { revision: 3 }),
    session("torn", 13, torn, { revision: 2 })
  ]
}

/**
 * Sessions of streamed responses as a version-1 build wrote them (one row per event): `stream`
 * with long runs of text deltas (across the migration's 1,000-row pages and the 1,024-member cap),
 * reasoning and named tool-call runs, a run of two and a lone delta; `cut` with a chunk run, a
 * damaged chunk row and more deltas after it (a torn tail); `broken` the same before a turn/end
 * (L2).
 */
export const v1StreamedSessions = (): ReadonlyArray<V1Session> => {
  const chunk = (seq: number, chunk: Record<string, unknown>, turn = 1) => v1Row(seq, "assistant/chunk", { turn, step: 1, chunk })
  const text = (seq: number, t: string, turn = 1, index = 0) => chunk(seq, { type: "text-delta", index, text: t }, turn)
  const rowsOf = (build: (push: (make: (seq: number) => V1Row) => void) => void): Array<V1Row> => {
    const rows: Array<V1Row> = []
    build((make) => void rows.push(make(rows.length)))
    return rows
  }
  const stream = rowsOf((push) => {
    for (const turn of [1, 2]) {
      push((seq) => v1Row(seq, "turn/start", { turn }))
      push((seq) => v1Row(seq, "step/start", { turn, step: 1 }))
      push((seq) =>
        v1Row(seq, "user/message", { id: `u${turn}`, role: "user", content: [{ type: "text", text: "go" }], source: { kind: "user" } }, {
          marker: "\"append\""
        })
      )
      for (let k = 0; k < (turn === 1 ? 1_500 : 700); k++) push((seq) => text(seq, `w${k} `, turn))
      for (const r of ["think", "ing", " more", "..."]) push((seq) => chunk(seq, { type: "reasoning-delta", index: 1, text: r }, turn))
      for (const a of ["{\"pa", "th\":", "\"a\"}"]) {
        push((seq) => chunk(seq, { type: "tool-call-delta", index: 2, id: `call_${turn}`, name: "read", argumentsDelta: a }, turn))
      }
      push((seq) => text(seq, "two", turn, 3))
      push((seq) => text(seq, " of them", turn, 3))
      push((seq) => chunk(seq, { type: "reasoning-delta", index: 4, text: "alone" }, turn))
      push((seq) => v1Row(seq, "step/end", { turn, step: 1 }))
      push((seq) => v1Row(seq, "turn/end", { turn, reason: { kind: "completed" } }))
    }
  })
  const damaged = (seq: number) => v1Row(seq, "assistant/chunk", null, { text: "{\"turn\":1,\"st" })
  const cut = rowsOf((push) => {
    push((seq) => v1Row(seq, "turn/start", { turn: 1 }))
    push((seq) => v1Row(seq, "step/start", { turn: 1, step: 1 }))
    for (let k = 0; k < 6; k++) push((seq) => text(seq, `a${k}`))
    push(damaged)
    for (let k = 0; k < 5; k++) push((seq) => text(seq, `b${k}`))
  })
  const broken = [...cut, v1Row(cut.length, "step/end", { turn: 1, step: 1 }), v1Row(cut.length + 1, "turn/end", { turn: 1, reason: { kind: "completed" } })]
  const session = (id: string, createdAt: number, rows: ReadonlyArray<V1Row>): V1Session => ({
    id,
    createdAt,
    cwd: null,
    delegationDepth: null,
    nextSeq: rows.length,
    revision: 1,
    rows
  })
  return [session("broken", 20, broken), session("cut", 21, cut), session("stream", 22, stream)]
}

/** A version-1 row copied as one row, its texts kept. */
export const copiedRow = (r: V1Row): StoredRow => ({
  seq: r.seq,
  members: 1,
  type: r.type,
  time: r.time,
  payload: r.data,
  column: payloadColumn(r.data),
  provenance: r.source_event_seqs,
  provenanceTag: r.source_event_seqs === null ? null : blobTagOf(r.source_event_seqs),
  surface_op: r.surface_op,
  ignorable: r.ignorable ? true : null
})

const blobTagOf = (text: string): number => {
  const seqs: unknown = JSON.parse(text)
  const canonical = Array.isArray(seqs) && JSON.stringify(seqs) === text
  return canonical && seqs.every((s, i) => exactInt(s) && s >= 0 && (i === 0 || s > seqs[i - 1])) ? 0 : 1
}

const parses = (text: string): boolean => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * The rows a writing open's migration must leave of a version-1 session whose rows are well
 * formed up to a first row whose data does not parse: with `pack`, each stretch of consecutive
 * `assistant/chunk` rows before that row becomes the rows of an append of those events
 * (`expectedRows`); every other row is copied as it is.
 */
export const migratedRows = (s: V1Session, pack: boolean): Array<StoredRow> => {
  const out: Array<StoredRow> = []
  let stretch: Array<Event> = []
  const flush = () => {
    out.push(...expectedRows(stretch, true))
    stretch = []
  }
  let defect = false
  for (const r of s.rows) {
    defect ||= !parses(r.data)
    if (pack && !defect && r.type === "assistant/chunk") {
      stretch.push({ type: r.type, seq: r.seq, time: r.time, data: JSON.parse(r.data) } as unknown as Event)
      continue
    }
    flush()
    out.push(copiedRow(r))
  }
  flush()
  return out
}

/** The `session_backups` row of the version-1 fixture. */
export const V1_BACKUP = { session_id: "chat", taken_at: 7, reason: "v0-upgrade", content: "{\"type\":\"session\"}\n" }

/**
 * A version-1 SQLite database at `file` as the version-1 build left it: the schema, the stamps
 * (user_version 1, application_id "ESLG") and `sessions` written in one transaction, WAL mode.
 */
export const createV1Sqlite = (file: string, sessions: ReadonlyArray<V1Session>) =>
  withRaw(file, (db) => {
    db.transaction(() => {
      for (const ddl of SQLITE_V1_DDL) db.exec(ddl)
      db.pragma("application_id = 1163086919")
      db.pragma("user_version = 1")
      const session = db.prepare(
        `INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth,
                               agent_preset, next_seq, revision)
         VALUES (?, 1, ?, ?, NULL, NULL, NULL, ?, NULL, ?, ?)`
      )
      const event = db.prepare(
        `INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
      )
      for (const s of sessions) {
        session.run(s.id, s.createdAt, s.cwd, s.delegationDepth, s.nextSeq, s.revision)
        for (const r of s.rows) {
          event.run(s.id, r.seq, r.type, r.time, r.data, r.source_event_seqs, r.surface_op, r.ignorable ? 1 : null)
        }
      }
      db.prepare("INSERT INTO session_backups (session_id, taken_at, reason, content) VALUES (?, ?, ?, ?)").run(
        V1_BACKUP.session_id,
        V1_BACKUP.taken_at,
        V1_BACKUP.reason,
        V1_BACKUP.content
      )
    })()
    db.pragma("journal_mode = WAL")
  })
