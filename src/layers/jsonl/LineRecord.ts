/**
 * One line of a JSONL session file, pure (SPEC §7.4.4, §1.2): its text (strict UTF-8, a BOM kept so
 * that it fails the parse), its parse with the lossless verdict, and the event a read keeps of a
 * record (envelope keys in §1.1 order). The `Scanner` classifies lines with these.
 */
import { isOrderedEnvelope, orderEnvelope } from "../../schema/EventCodec.js"
import { ENVELOPE_KEYS } from "../../schema/Events.js"
import { parseJson } from "../../schema/Json.js"
import { PACKED_ROW_TAGS } from "../../schema/PackedChunks.js"

type Rec = Record<string, unknown>

/** A line's parse: unparsable, or the value with its lossless verdict (§1.2). */
export type ParsedLine =
  | { readonly _tag: "Unparsable" }
  | {
    readonly _tag: "Parsed"
    readonly value: unknown
    readonly lossless: boolean
    readonly detail?: string
    /** the lossless violation (A4/A5 after a parse), relative to the record */
    readonly violation?: { readonly rule: string; readonly path: string; readonly detail: string }
  }

/** fatal: invalid UTF-8 is a defect; ignoreBOM keeps a BOM so that it fails the parse. */
const lineDecoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/** A line's bytes as text, or undefined when they are not valid UTF-8. */
export const decodeUtf8 = (bytes: Uint8Array): string | undefined => {
  try {
    // one whole line per call (no streaming state carried from call to call)
    return lineDecoder.decode(bytes)
  } catch {
    return undefined
  }
}

/** The text of a line, or why it has none (a line whose bytes are not valid UTF-8). */
export type LineText = string | typeof OVERLONG | typeof INVALID_UTF8

/** parseJson, keeping the parsed value when only the lossless check failed (-0, ±Infinity). */
export const parseLine = (text: string): ParsedLine => {
  const r = parseJson(text)
  if (r._tag === "Unparsable") return { _tag: "Unparsable" }
  if (r._tag === "Ok") return { _tag: "Parsed", value: r.value, lossless: true }
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    return { _tag: "Unparsable" }
  }
  return {
    _tag: "Parsed",
    value: raw,
    lossless: false,
    detail: `${r.rule} at "${r.path}": ${r.detail}`,
    violation: { rule: r.rule, path: r.path, detail: r.detail }
  }
}

const envelopeKeySet: ReadonlySet<string> = new Set(ENVELOPE_KEYS)

/** Reorder a stored record's envelope keys (§1.1) when it is a complete, closed envelope. */
export const reorder = (r: Rec): unknown => {
  // the common case: written by this library, parsed and frozen, keys already in order
  if (isOrderedEnvelope(r)) return r
  for (const key of Object.keys(r)) if (!envelopeKeySet.has(key)) return r
  if (!("type" in r && "seq" in r && "time" in r && "data" in r)) return r
  return orderEnvelope(r)
}

const freeze = Object.freeze
const objectKeys = Object.keys

/**
 * A record fresh from the lossless walk (frozen) as the event a read keeps: `reorder`, except
 * that an envelope of exactly `type, seq, time, data` is rebuilt as an equal frozen object at the
 * literal below. `JSON.parse` allocates in the young generation, which the scavenger then copies
 * twice as the whole log is kept; V8 allocates the objects of a literal whose objects survive
 * straight in the old generation, as it does a packed row's members.
 */
export const keep = (r: Rec): unknown => {
  const keys = objectKeys(r)
  return keys.length === 4 && keys[0] === "type" && keys[1] === "seq" && keys[2] === "time" && keys[3] === "data"
    ? freeze({ type: r.type, seq: r.seq, time: r.time, data: r.data })
    : reorder(r)
}

/** `isPackedRowTag` without hashing the type (a fresh string per parsed line): most differ in length. */
export const isPackedType = (type: unknown): boolean => {
  for (const tag of PACKED_ROW_TAGS) if (type === tag) return true
  return false
}

/** The pieces of one line (read in several chunks) as one array. */
export const concat = (pieces: ReadonlyArray<Uint8Array>, total: number): Uint8Array => {
  if (pieces.length === 1) return pieces[0]
  const out = new Uint8Array(total)
  let at = 0
  for (const p of pieces) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** A line over the per-line cap: never decoded. */
export const OVERLONG: unique symbol = Symbol("OVERLONG")
/** A line whose bytes are not valid UTF-8. */
export const INVALID_UTF8: unique symbol = Symbol("INVALID_UTF8")

/** The text of a line's bytes (or of an overlong line: none). */
export const lineText = (line: Uint8Array | typeof OVERLONG): LineText =>
  line === OVERLONG ? OVERLONG : decodeUtf8(line) ?? INVALID_UTF8
