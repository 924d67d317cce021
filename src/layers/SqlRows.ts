/**
 * The row codec of the SQL store (SPEC §7.5 column encodings): a header ↔ a `sessions` row
 * (NULL = absent), an event → the bound values of an `events` row, and an `events` row → a frozen
 * envelope in §1.1 key order or the reason the row is a defect; plus the JSONL line of a defective
 * row as stored, for the backup of `replaceLog`.
 */
import * as Schema from "effect/Schema"
import { NotLosslessJson, StoreCorrupt } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { checkParsed, encodeJson, type Json, type WalkFailure, type WalkResult } from "../schema/Json.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import type { TornTail } from "../services/SessionStore.js"

// ---------------------------------------------------------------------------------------------
// sessions

/** A `sessions` row. */
export const SessionRow = Schema.Struct({
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
export type SessionRow = typeof SessionRow.Type

/** The columns of a `sessions` row as read, in `SessionRow` order. */
export const SESSION_SELECT_COLUMNS = "id, version, created_at, cwd, parent_session, seed_length, origin, " +
  "delegation_depth, agent_preset, next_seq, revision"

/** The `next_seq` of a `sessions` row. */
export const NextSeqRow = Schema.Struct({ next_seq: Schema.Number })

/** The header as stored in a `sessions` row (NULL = absent), in header key order. */
export const headerFromRow = (r: SessionRow): Record<string, unknown> => {
  const h: Record<string, unknown> = { version: r.version, id: r.id, createdAt: r.created_at }
  if (r.cwd !== null) h.cwd = r.cwd
  if (r.parent_session !== null) h.parentSession = r.parent_session
  if (r.seed_length !== null) h.seedLength = r.seed_length
  if (r.origin !== null) h.origin = r.origin
  if (r.delegation_depth !== null) h.delegationDepth = r.delegation_depth
  if (r.agent_preset !== null) h.agentPreset = r.agent_preset
  return h
}

/** The `sessions` row of a header not yet holding events (`next_seq` 0, `revision` 0). */
export const rowFromHeader = (h: SessionHeader): SessionRow => ({
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

// ---------------------------------------------------------------------------------------------
// events: writing

/** The stored text of the string marker (SPEC §7.5). */
export const APPEND_MARKER_TEXT = "\"append\""

/** The columns of an `events` row in the order `pushEventColumns` binds them. */
export const EVENT_INSERT_COLUMNS = [
  "session_id",
  "seq",
  "type",
  "time",
  "data",
  "source_event_seqs",
  "surface_op",
  "ignorable"
] as const

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

/** Push the bound values of one `events` row (EVENT_INSERT_COLUMNS); `line` as in `dataTextIn`. */
export const pushEventColumns = (params: Array<unknown>, sessionId: string, e: Event, line: string | undefined): void => {
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

// ---------------------------------------------------------------------------------------------
// events: reading

/** The columns of an `events` row as read, in `EventRow` order. */
export const EVENT_SELECT_COLUMNS = "seq, type, time, data, source_event_seqs, surface_op, ignorable"

/**
 * An `events` row read as an array of column values (EVENT_SELECT_COLUMNS order). Rows are read as
 * value arrays and checked by `isEventRow`, not decoded through a Schema: a resume reads 100,000.
 */
export type EventRow = readonly [
  seq: number,
  type: string,
  time: number,
  data: string,
  sourceEventSeqs: string | null,
  surfaceOp: string | null,
  ignorable: number | boolean | null
]

/** The column types an `events` row must have (`ignorable`: 1 in SQLite, a BOOLEAN in PostgreSQL). */
export const isEventRow = (r: unknown): r is EventRow => {
  if (!Array.isArray(r) || r.length !== 7) return false
  const s = r[4]
  const o = r[5]
  const g = r[6]
  return typeof r[0] === "number" && typeof r[1] === "string" && typeof r[2] === "number" &&
    typeof r[3] === "string" && (s === null || typeof s === "string") && (o === null || typeof o === "string") &&
    (g === null || typeof g === "number" || typeof g === "boolean")
}

/** L9: a row from disk that does not decode. */
export const undecodable = (location: string, row: unknown) =>
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
export const rowToEvent = (
  row: EventRow,
  expectedSeq: number,
  location: string
): Event | TornTail["reason"] | StoreCorrupt => {
  const seq = row[0]
  if (seq !== expectedSeq) return "seq-gap"
  if (!Number.isSafeInteger(row[2])) return "unparsable"
  const ignorable = row[6] === true ? 1 : row[6]
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

/** A defective stored row as a JSONL line in §1.1 key order, from the column text as stored. */
export const rawLine = (r: EventRow): string => {
  let line = `{"type":${encodeJson(r[1])},"seq":${r[0]},"time":${r[2]},"data":${r[3]}`
  if (r[4] !== null) line += `,"sourceEventSeqs":${r[4]}`
  if (r[5] !== null) line += `,"surfaceOp":${r[5]}`
  if (r[6] !== null) line += `,"ignorable":true`
  return line + "}"
}
