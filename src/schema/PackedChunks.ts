/**
 * Packed chunk rows (SPEC Appendix A): the optional JSONL storage form of a run of streamed
 * `assistant/chunk` deltas. `packChunkRuns` turns a batch into storage records (packed rows and
 * verbatim events); `decodeStorageRecord` expands one stored record into its member events with
 * the reader's strict checks, or names the defect (L4 for a malformed row).
 */
import type { Event } from "./Events.js"
import { encodeJson, type Json, utf8Length } from "./Json.js"
import { isRecord } from "./Validation.js"

/** The `type` tags of packed rows. */
export const PACKED_ROW_TAGS = ["text-chunks", "reasoning-chunks", "tool-call-chunks"] as const

/** One packed row tag. */
export type PackedRowTag = typeof PACKED_ROW_TAGS[number]

const tagSet: ReadonlySet<unknown> = new Set(PACKED_ROW_TAGS)

/** True for the `type` of a packed row. */
export const isPackedRowTag = (type: unknown): type is PackedRowTag => tagSet.has(type)

/** The payload of a `text-chunks` / `reasoning-chunks` row. */
export interface TextChunksData {
  readonly turn: number
  readonly step: number
  readonly index: number
  readonly dt: ReadonlyArray<number>
  readonly texts: ReadonlyArray<string>
}

/** The payload of a `tool-call-chunks` row (`name` on every member iff present here). */
export interface ToolCallChunksData {
  readonly turn: number
  readonly step: number
  readonly index: number
  readonly id: string
  readonly name?: string
  readonly dt: ReadonlyArray<number>
  readonly args: ReadonlyArray<string>
}

/** A packed row: one JSONL line holding a run of consecutive chunk events. */
export type PackedRow =
  | {
    readonly type: "text-chunks" | "reasoning-chunks"
    readonly seq0: number
    readonly time0: number
    readonly data: TextChunksData
  }
  | { readonly type: "tool-call-chunks"; readonly seq0: number; readonly time0: number; readonly data: ToolCallChunksData }

/** One stored line: a packed row standing for `members` events, or one event written verbatim. */
export type StorageRecord =
  | { readonly _tag: "Packed"; readonly row: PackedRow; readonly members: number }
  | { readonly _tag: "Verbatim"; readonly event: Event }

/** Writer limits (SPEC Appendix A: SHOULD cap a row at 1,024 members and 1 MiB). */
export interface PackOptions {
  /** Most members of one row (default 1,024). */
  readonly maxMembers?: number
  /** Most UTF-8 bytes of one row's line, newline excluded (default 1 MiB). */
  readonly maxRowBytes?: number
}

/** Runs shorter than this stay verbatim. */
export const MIN_PACKED_RUN = 3
/** Default member cap of one row. */
export const DEFAULT_MAX_ROW_MEMBERS = 1_024
/** Default byte cap of one row. */
export const DEFAULT_MAX_ROW_BYTES = 1_048_576

type Rec = Record<string, unknown>
const isSafeInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v)
/** A safe integer that serialises back to itself (-0 would come back as 0). */
const isExactInt = (v: unknown): v is number => isSafeInt(v) && !Object.is(v, -0)

const hasKeys = (r: Rec, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(r)
  if (own.length !== keys.length) return false
  for (let i = 0; i < keys.length; i++) if (own[i] !== keys[i]) return false
  return true
}

const hasKeySet = (r: Rec, keys: ReadonlyArray<string>): boolean => {
  const own = Object.keys(r)
  if (own.length !== keys.length) return false
  for (const key of keys) if (!Object.prototype.hasOwnProperty.call(r, key)) return false
  return true
}

// ---------------------------------------------------------------------------------------------
// Packing (writer)

type Kind = "text-delta" | "reasoning-delta" | "tool-call-delta"

interface Candidate {
  readonly event: Event
  readonly kind: Kind
  readonly seq: number
  readonly time: number
  readonly turn: number
  readonly step: number
  readonly index: number
  readonly id: string | undefined
  readonly name: string | undefined
  readonly hasName: boolean
  readonly member: string
}

const ENVELOPE = ["type", "seq", "time", "data"] as const
const PAYLOAD = ["turn", "step", "chunk"] as const
const TEXT_CHUNK = ["type", "index", "text"] as const
const TOOL_CHUNK = ["type", "index", "id", "argumentsDelta"] as const
const NAMED_TOOL_CHUNK = ["type", "index", "id", "name", "argumentsDelta"] as const

/** The packable view of an event whose entire shape, key order included, is a plain delta chunk. */
const candidate = (event: Event): Candidate | undefined => {
  const e: unknown = event
  if (!isRecord(e) || e.type !== "assistant/chunk" || !hasKeys(e, ENVELOPE)) return undefined
  const { data, seq, time } = e
  if (!isExactInt(seq) || !isExactInt(time) || !isRecord(data) || !hasKeys(data, PAYLOAD)) return undefined
  const { chunk, step, turn } = data
  if (!isExactInt(turn) || !isExactInt(step) || !isRecord(chunk) || !isExactInt(chunk.index)) return undefined
  const index = chunk.index
  if (chunk.type === "text-delta" || chunk.type === "reasoning-delta") {
    if (!hasKeys(chunk, TEXT_CHUNK) || typeof chunk.text !== "string") return undefined
    return { event, kind: chunk.type, seq, time, turn, step, index, id: undefined, name: undefined, hasName: false, member: chunk.text }
  }
  if (chunk.type === "tool-call-delta") {
    const hasName = hasKeys(chunk, NAMED_TOOL_CHUNK)
    if (!hasName && !hasKeys(chunk, TOOL_CHUNK)) return undefined
    if (typeof chunk.id !== "string" || typeof chunk.argumentsDelta !== "string") return undefined
    if (hasName && typeof chunk.name !== "string") return undefined
    const name = hasName ? chunk.name as string : undefined
    return { event, kind: "tool-call-delta", seq, time, turn, step, index, id: chunk.id, name, hasName, member: chunk.argumentsDelta }
  }
  return undefined
}

/** Whether `next` continues a run ending with `prev`; the time gap, or undefined. */
const gapIfContinues = (prev: Candidate, next: Candidate): number | undefined => {
  if (
    next.seq !== prev.seq + 1 || next.kind !== prev.kind || next.turn !== prev.turn || next.step !== prev.step ||
    next.index !== prev.index || next.id !== prev.id || next.hasName !== prev.hasName || next.name !== prev.name
  ) return undefined
  const gap = next.time - prev.time
  return Number.isSafeInteger(gap) ? gap : undefined
}

const tagOf = (kind: Kind): PackedRowTag =>
  kind === "text-delta" ? "text-chunks" : kind === "reasoning-delta" ? "reasoning-chunks" : "tool-call-chunks"

const buildRow = (first: Candidate, dt: ReadonlyArray<number>, members: ReadonlyArray<string>): PackedRow => {
  const { index, step, turn } = first
  if (first.kind === "tool-call-delta") {
    const data: ToolCallChunksData = first.hasName
      ? { turn, step, index, id: first.id!, name: first.name!, dt, args: members }
      : { turn, step, index, id: first.id!, dt, args: members }
    return { type: "tool-call-chunks", seq0: first.seq, time0: first.time, data }
  }
  return { type: tagOf(first.kind) as "text-chunks", seq0: first.seq, time0: first.time, data: { turn, step, index, dt, texts: members } }
}

/**
 * The UTF-8 length of the JSON text of a string (`utf8Length(JSON.stringify(s))`, counted without
 * building either): quotes, two-byte escapes, `\u00XX` for other control characters and lone
 * surrogates, UTF-8 widths for the rest.
 */
export const stringBytes = (s: string): number => {
  let n = 2
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) {
      n += c >= 0x20 ? (c === 0x22 || c === 0x5c ? 2 : 1) : (c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6)
    } else if (c < 0x800) {
      n += 2
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4
      i++
    } else {
      n += c >= 0xd800 && c <= 0xdfff ? 6 : 3
    }
  }
  return n
}

/**
 * Split a batch into storage records (Appendix A): runs of ≥ 3 exact-shape delta chunks with the
 * same kind, turn, step, index (and tool-call id and name) and safe-integer time gaps become packed
 * rows of at most `maxMembers` members and `maxRowBytes` bytes; everything else stays verbatim.
 */
export const packChunkRuns = (events: ReadonlyArray<Event>, options: PackOptions = {}): Array<StorageRecord> => {
  const maxMembers = options.maxMembers ?? DEFAULT_MAX_ROW_MEMBERS
  const maxRowBytes = options.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES
  const out: Array<StorageRecord> = []
  let run: Array<Candidate> = []
  let dt: Array<number> = []
  let rowBytes = 0

  const flush = () => {
    if (run.length >= MIN_PACKED_RUN) {
      out.push({ _tag: "Packed", row: buildRow(run[0], dt, run.map((c) => c.member)), members: run.length })
    } else {
      for (const c of run) out.push({ _tag: "Verbatim", event: c.event })
    }
    run = []
    dt = []
    rowBytes = 0
  }

  for (const event of events) {
    const c = candidate(event)
    if (c === undefined) {
      flush()
      out.push({ _tag: "Verbatim", event })
      continue
    }
    if (run.length > 0 && run.length < maxMembers) {
      const gap = gapIfContinues(run[run.length - 1], c)
      if (gap !== undefined) {
        // one more member: `,"<text>"` and, after the first gap, `,<gap>`
        const more = 1 + stringBytes(c.member) + String(gap).length + (dt.length > 0 ? 1 : 0)
        if (rowBytes + more <= maxRowBytes) {
          run.push(c)
          dt.push(gap)
          rowBytes += more
          continue
        }
      }
    }
    flush()
    run = [c]
    // the exact bytes of a one-member row holding c
    rowBytes = utf8Length(encodeJson(buildRow(c, [], [c.member]) as unknown as Json))
  }
  flush()
  return out
}

// ---------------------------------------------------------------------------------------------
// Decoding (reader)

/** A chunk event reconstructed from a packed row (Appendix A, member k). */
export interface ChunkEvent {
  readonly type: "assistant/chunk"
  readonly seq: number
  readonly time: number
  readonly data: {
    readonly turn: number
    readonly step: number
    readonly chunk: Readonly<Record<string, unknown>>
  }
}

/** The outcome of decoding one stored record. */
export type DecodedRecord =
  | { readonly _tag: "Members"; readonly events: ReadonlyArray<unknown> }
  | {
    readonly _tag: "Defect"
    /** `malformed`: a packed row failing a structural check; `seq-gap`: seq (or seq0) ≠ the expected seq. */
    readonly reason: "not-object" | "seq-gap" | "malformed"
    /** The record is a packed row (L4). */
    readonly packed: boolean
    readonly detail: string
  }

const malformed = (tag: string, detail: string): DecodedRecord => ({
  _tag: "Defect",
  reason: "malformed",
  packed: true,
  detail: `malformed ${tag} row: ${detail}`
})

const ROW_KEYS = ["type", "seq0", "time0", "data"] as const
const TEXT_DATA_KEYS = ["turn", "step", "index", "dt", "texts"] as const
const TOOL_DATA_KEYS = ["turn", "step", "index", "id", "dt", "args"] as const
const NAMED_TOOL_DATA_KEYS = ["turn", "step", "index", "id", "name", "dt", "args"] as const

const decodeRow = (tag: PackedRowTag, r: Rec, expectedSeq: number): DecodedRecord => {
  if (!hasKeySet(r, ROW_KEYS)) return malformed(tag, "keys must be exactly {type, seq0, time0, data}")
  const { data, seq0, time0 } = r
  if (!isSafeInt(seq0)) return malformed(tag, "seq0 must be a safe integer")
  if (!isSafeInt(time0)) return malformed(tag, "time0 must be a safe integer")
  if (!isRecord(data)) return malformed(tag, "data must be an object")
  const tool = tag === "tool-call-chunks"
  if (tool) {
    if (!hasKeySet(data, TOOL_DATA_KEYS) && !hasKeySet(data, NAMED_TOOL_DATA_KEYS)) {
      return malformed(tag, "data keys must be exactly {turn, step, index, id, name?, dt, args}")
    }
    if (typeof data.id !== "string") return malformed(tag, "id must be a string")
    if ("name" in data && typeof data.name !== "string") return malformed(tag, "name must be a string when present")
  } else if (!hasKeySet(data, TEXT_DATA_KEYS)) {
    return malformed(tag, "data keys must be exactly {turn, step, index, dt, texts}")
  }
  const { dt, index, step, turn } = data
  if (!isSafeInt(turn)) return malformed(tag, "turn must be a safe integer")
  if (!isSafeInt(step)) return malformed(tag, "step must be a safe integer")
  if (!isSafeInt(index)) return malformed(tag, "index must be a safe integer")
  const membersKey = tool ? "args" : "texts"
  const members = data[membersKey]
  if (!Array.isArray(members) || members.length === 0) return malformed(tag, `${membersKey} must be a non-empty array`)
  // a reader's memory is bounded by what it returns: a row costs a few bytes per member on disk and
  // a whole event per member in memory, so it may hold no more than a writer may write (issue 18)
  if (members.length > DEFAULT_MAX_ROW_MEMBERS) {
    return malformed(tag, `${members.length} members, more than the ${DEFAULT_MAX_ROW_MEMBERS} a packed row may hold`)
  }
  for (const m of members) if (typeof m !== "string") return malformed(tag, `${membersKey} must hold only strings`)
  if (!Array.isArray(dt)) return malformed(tag, "dt must be an array")
  if (dt.length !== members.length - 1) {
    return malformed(tag, `dt has ${dt.length} elements for ${members.length} members (must be members - 1)`)
  }
  for (const gap of dt) if (!isSafeInt(gap)) return malformed(tag, "dt elements must be safe integers")
  if (!Number.isSafeInteger(seq0 + members.length - 1)) return malformed(tag, "member seqs must be safe integers")
  if (seq0 !== expectedSeq) {
    return { _tag: "Defect", reason: "seq-gap", packed: true, detail: `${tag} row has seq0 ${seq0}, expected ${expectedSeq}` }
  }
  const events: Array<ChunkEvent> = []
  let time = time0
  for (let k = 0; k < members.length; k++) {
    if (k > 0) {
      time += dt[k - 1] as number
      if (!Number.isSafeInteger(time)) return malformed(tag, `member ${k} time is not a safe integer`)
    }
    const member = members[k] as string
    let chunk: Record<string, unknown>
    if (!tool) {
      chunk = { type: tag === "text-chunks" ? "text-delta" : "reasoning-delta", index, text: member }
    } else if ("name" in data) {
      chunk = { type: "tool-call-delta", index, id: data.id, name: data.name, argumentsDelta: member }
    } else {
      chunk = { type: "tool-call-delta", index, id: data.id, argumentsDelta: member }
    }
    events.push(Object.freeze({
      type: "assistant/chunk" as const,
      seq: seq0 + k,
      time,
      data: Object.freeze({ turn, step, chunk: Object.freeze(chunk) })
    }))
  }
  return { _tag: "Members", events }
}

/**
 * Decode one stored record (a parsed JSONL line after the header) at `expectedSeq`: a packed row
 * expands to its members under Appendix A's strict checks; any other object is one event whose
 * `seq` must equal `expectedSeq`. Otherwise the defect, `packed` when the record is a packed row.
 */
export const decodeStorageRecord = (record: unknown, expectedSeq: number): DecodedRecord => {
  if (!isRecord(record)) return { _tag: "Defect", reason: "not-object", packed: false, detail: "record is not an object" }
  if (isPackedRowTag(record.type)) return decodeRow(record.type, record, expectedSeq)
  if (record.seq !== expectedSeq) {
    return { _tag: "Defect", reason: "seq-gap", packed: false, detail: `seq ${String(record.seq)}, expected ${expectedSeq}` }
  }
  return { _tag: "Members", events: [record] }
}

/** The JSON text of a packed row (one JSONL line without the newline), keys in Appendix A order. */
export const encodePackedRow = (row: PackedRow): string => encodeJson(row as unknown as Json)
