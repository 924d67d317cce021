/**
 * The event rows of the SQL store. Schema version 2 (docs/formats.md "SQL schema version 2"): a row holds
 * one event, or a packed chunk row (SPEC Appendix A) standing for `members` consecutive chunk
 * events; its payload is JSON text in `data`, or compressed in `data_z` (`ColumnEncoding`), and its
 * `source_event_seqs` a compact BLOB. Version 1 (SPEC §7.5) rows are read through the same codec
 * (one event each, text columns). Writing: a batch → the bound values of its rows; reading: a row
 * → its frozen envelopes in §1.1 key order, or the reason it is a defect.
 */
import { NotLosslessJson, StoreCorrupt } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { checkParsed, encodeJson, type Json, type WalkFailure, type WalkResult } from "../../schema/Json.js"
import { decodeStorageRecord, isPackedRowTag, packChunkRuns } from "../../schema/PackedChunks.js"
import type { TornTail } from "../../services/SessionStore.js"
import { decodePayload, decodeProvenance, encodePayload, encodeProvenance } from "./ColumnEncoding.js"

/** The stored text of the string marker (SPEC §7.5). */
export const APPEND_MARKER_TEXT = "\"append\""

/** The layout of the event rows: the schema version of the database. */
export type RowLayout = 1 | 2

/** The event table of each layout. */
export const EVENT_TABLE: Record<RowLayout, string> = { 1: "events", 2: "event_rows" }

// ---------------------------------------------------------------------------------------------
// writing (version 2)

/** The columns of an `event_rows` row in the order `pushEventRows` binds them. */
export const EVENT_INSERT_COLUMNS = [
  "session_id",
  "seq",
  "members",
  "type",
  "time",
  "data",
  "data_z",
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

/** Push the bound values of the row of one event written verbatim; `line` as in `dataTextIn`. */
const pushEventRow = (params: Array<unknown>, sessionId: string, e: Event, line: string | undefined): void => {
  const provenance = e.sourceEventSeqs === undefined ? null : encodeJson(e.sourceEventSeqs as Json)
  const surfaceOp = e.surfaceOp === undefined
    ? null
    : e.surfaceOp === "append"
    ? APPEND_MARKER_TEXT
    : encodeJson(e.surfaceOp as Json)
  const data = encodePayload(
    (line === undefined ? undefined : dataTextIn(line, e, provenance, surfaceOp)) ?? encodeJson(e.data as Json)
  )
  params.push(
    sessionId,
    e.seq,
    1,
    e.type,
    e.time,
    data[0],
    data[1],
    provenance === null ? null : encodeProvenance(e.sourceEventSeqs, provenance),
    surfaceOp,
    e.ignorable === true ? 1 : null
  )
}

/**
 * Push the bound values (EVENT_INSERT_COLUMNS) of the rows of a batch and return how many rows
 * they are: with `pack`, runs of delta chunks become packed rows (Appendix A), the rest one row per
 * event; `lines` (optional) are the events' JSONL texts.
 */
export const pushEventRows = (
  params: Array<unknown>,
  sessionId: string,
  events: ReadonlyArray<Event>,
  lines: ReadonlyArray<string> | undefined,
  pack: boolean
): number => {
  if (!pack) {
    for (let i = 0; i < events.length; i++) pushEventRow(params, sessionId, events[i], lines?.[i])
    return events.length
  }
  const records = packChunkRuns(events)
  let i = 0
  for (const record of records) {
    if (record._tag === "Verbatim") {
      pushEventRow(params, sessionId, record.event, lines?.[i])
      i++
      continue
    }
    const { row } = record
    const data = encodePayload(encodeJson(row.data as unknown as Json))
    params.push(sessionId, row.seq0, record.members, row.type, row.time0, data[0], data[1], null, null, null)
    i += record.members
  }
  return records.length
}

// ---------------------------------------------------------------------------------------------
// reading

/** The columns of an event row as read, in `EventRow` order, per layout. */
export const EVENT_SELECT_COLUMNS: Record<RowLayout, string> = {
  1: "seq, 1 AS members, type, time, data, NULL AS data_z, source_event_seqs, surface_op, ignorable",
  2: "seq, members, type, time, data, data_z, source_event_seqs, surface_op, ignorable"
}

/**
 * An event row read as an array of column values (EVENT_SELECT_COLUMNS order). Rows are read as
 * value arrays and checked by `isEventRow`, not decoded through a Schema: a resume reads 100,000.
 */
export type EventRow = readonly [
  seq: number,
  members: number,
  type: string,
  time: number,
  data: string | null,
  dataZ: Uint8Array | null,
  sourceEventSeqs: string | Uint8Array | null,
  surfaceOp: string | null,
  ignorable: number | boolean | null
]

/** The column types an event row must have (`ignorable`: 1 in SQLite, a BOOLEAN in PostgreSQL). */
export const isEventRow = (r: unknown): r is EventRow => {
  if (!Array.isArray(r) || r.length !== 9) return false
  const d = r[4]
  const z = r[5]
  const s = r[6]
  const o = r[7]
  const g = r[8]
  return typeof r[0] === "number" && typeof r[1] === "number" && typeof r[2] === "string" && typeof r[3] === "number" &&
    (d === null || typeof d === "string") && (z === null || z instanceof Uint8Array) &&
    (s === null || typeof s === "string" || s instanceof Uint8Array) && (o === null || typeof o === "string") &&
    (g === null || typeof g === "number" || typeof g === "boolean")
}

/** The seq after a row (its last member's seq + 1), read from its columns only. */
export const rowEnd = (row: EventRow): number => row[0] + (Number.isSafeInteger(row[1]) && row[1] > 0 ? row[1] : 1)

/** L9: a row from disk that does not decode. */
export const undecodable = (location: string, row: unknown) =>
  new StoreCorrupt({ rule: "L9", location, detail: "a stored row does not decode", cause: row })

/** A malformed packed row (Appendix A): a defect like any other, L4 when it lies in the committed region. */
export class PackedDefect {
  constructor(readonly detail: string, readonly reason: "unparsable" | "seq-gap" = "unparsable") {}
}

/** Why a row is a defect. */
export type RowDefect = TornTail["reason"] | PackedDefect

const UNPARSABLE: unique symbol = Symbol("UNPARSABLE")

/** JSON.parse then the lossless check of parsed values (freezes in place); UNPARSABLE on a syntax error. */
const parseColumn = (text: string | undefined): WalkResult | typeof UNPARSABLE => {
  if (text === undefined) return UNPARSABLE
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

/** An envelope in §1.1 key order (the rare shapes of `rowToEvents`). */
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

/** The member events of a packed row pushed onto `out`, or why the row is a defect. */
const packedMembers = (
  row: EventRow,
  expectedSeq: number,
  location: string,
  out: Array<Event>
): number | RowDefect | StoreCorrupt => {
  const tag = row[2]
  if (row[6] !== null || row[7] !== null || row[8] !== null) {
    return new PackedDefect(`${tag} row with source_event_seqs, surface_op or ignorable set`)
  }
  const data = parseColumn(decodePayload(row[4], row[5]))
  if (data === UNPARSABLE) return "unparsable"
  if (data._tag === "Fail") return notLossless(row[0], "data", data, location)
  const decoded = decodeStorageRecord({ type: tag, seq0: row[0], time0: row[3], data: data.value }, expectedSeq)
  if (decoded._tag === "Defect") {
    if (!decoded.packed && decoded.reason !== "malformed") return decoded.reason
    return new PackedDefect(decoded.detail, decoded.reason === "seq-gap" ? "seq-gap" : "unparsable")
  }
  if (decoded.events.length !== row[1]) {
    return new PackedDefect(`${tag} row of ${decoded.events.length} members stored with members = ${row[1]}`)
  }
  for (const e of decoded.events) out.push(e as Event)
  return decoded.events.length
}

/**
 * One row turned back into frozen envelopes built in §1.1 key order, pushed onto `out`: how many,
 * or the reason the row is a defect, or L9.
 */
export const rowToEvents = (
  row: EventRow,
  expectedSeq: number,
  location: string,
  out: Array<Event>
): number | RowDefect | StoreCorrupt => {
  const seq = row[0]
  // Appendix A: a packed row's seq0 is one of its decoding checks (a gap there is L4 in the
  // committed region, as in a JSONL file)
  if (isPackedRowTag(row[2])) return packedMembers(row, expectedSeq, location, out)
  if (seq !== expectedSeq) return "seq-gap"
  if (!Number.isSafeInteger(row[3])) return "unparsable"
  if (row[1] !== 1) return "unparsable"
  const ignorable = row[8] === true ? 1 : row[8]
  if (ignorable !== null && ignorable !== 1) return "unparsable"
  // every JSON column must parse (else the row is a defect) before a lossless failure counts
  // (L9 is for committed-looking records only); marker and provenance shapes are the seed
  // validation's business (L9 there), as for a JSONL line
  const data = parseColumn(decodePayload(row[4], row[5]))
  if (data === UNPARSABLE) return "unparsable"
  const provenance = row[6] === null ? undefined : parseColumn(decodeProvenance(row[6]))
  if (provenance === UNPARSABLE) return "unparsable"
  const marker = row[7] === null || row[7] === APPEND_MARKER_TEXT ? undefined : parseColumn(row[7])
  if (marker === UNPARSABLE) return "unparsable"
  if (data._tag === "Fail") return notLossless(seq, "data", data, location)
  if (provenance?._tag === "Fail") return notLossless(seq, "sourceEventSeqs", provenance, location)
  if (marker?._tag === "Fail") return notLossless(seq, "surfaceOp", marker, location)
  const sourceEventSeqs: unknown = provenance?.value
  const surfaceOp: unknown = row[7] === APPEND_MARKER_TEXT ? "append" : marker?.value
  // one object literal per envelope shape: stable hidden classes for 100,000 retained envelopes
  let e: object
  if (ignorable === 1) {
    e = sourceEventSeqs === undefined && surfaceOp === undefined
      ? { type: row[2], seq, time: row[3], data: data.value, ignorable: true }
      : envelope(row[2], seq, row[3], data.value, sourceEventSeqs, surfaceOp, true)
  } else if (sourceEventSeqs === undefined) {
    e = surfaceOp === undefined
      ? { type: row[2], seq, time: row[3], data: data.value }
      : { type: row[2], seq, time: row[3], data: data.value, surfaceOp }
  } else {
    e = surfaceOp === undefined
      ? { type: row[2], seq, time: row[3], data: data.value, sourceEventSeqs }
      : { type: row[2], seq, time: row[3], data: data.value, sourceEventSeqs, surfaceOp }
  }
  out.push(Object.freeze(e) as unknown as Event)
  return 1
}

/**
 * A defective stored row as a JSONL line, from the columns as stored: §1.1 key order (Appendix A
 * order for a packed row), the payload decompressed; a payload that does not decompress is kept
 * as `data_z` in base64, a provenance BLOB that does not decode as `source_event_seqs_blob`.
 */
export const rawLine = (r: EventRow): string => {
  const data = decodePayload(r[4], r[5])
  const payload = data !== undefined
    ? `"data":${data}`
    : `"data_z":${encodeJson(r[5] === null ? null : Buffer.from(r[5]).toString("base64"))}`
  if (isPackedRowTag(r[2])) return `{"type":${encodeJson(r[2])},"seq0":${r[0]},"time0":${r[3]},${payload}}`
  let line = `{"type":${encodeJson(r[2])},"seq":${r[0]},"time":${r[3]},${payload}`
  if (r[6] !== null) {
    const provenance = decodeProvenance(r[6])
    line += provenance !== undefined
      ? `,"sourceEventSeqs":${provenance}`
      : `,"source_event_seqs_blob":${encodeJson(Buffer.from(r[6]).toString("base64"))}`
  }
  if (r[7] !== null) line += `,"surfaceOp":${r[7]}`
  if (r[8] !== null) line += `,"ignorable":true`
  return line + "}"
}
