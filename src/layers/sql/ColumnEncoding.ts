/**
 * The compact column encodings of the SQL store's schema version 2 (docs/formats.md "SQL schema
 * version 2"): a payload's JSON text over `COMPRESS_ABOVE` UTF-8 bytes stored raw-deflate compressed in
 * `data_z` when that is smaller, and `source_event_seqs` as a tagged BLOB — ascending runs as
 * varints, or the JSON text itself for anything else — so every stored value reads back to the
 * exact text it was written from.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib"

/** Payloads longer than this many UTF-8 bytes are compressed (when that saves bytes). */
export const COMPRESS_ABOVE = 1_024

/**
 * Decompressed payloads larger than this are a defect: no event the store writes is larger
 * (events are capped at `maxEventBytes`, packed rows at 1 MiB), and the cap bounds what a hostile
 * row can make a reader allocate.
 */
const MAX_INFLATED_BYTES = 64 * 1_048_576

/** `data` / `data_z` of one row: exactly one of the two is set. */
export type PayloadColumns = readonly [data: string | null, dataZ: Uint8Array | null]

/** The columns of a payload's JSON text: compressed when it is long and compression pays. */
export const encodePayload = (text: string): PayloadColumns => {
  // a string of n UTF-16 units has at most 3n UTF-8 bytes
  if (text.length * 3 <= COMPRESS_ABOVE) return [text, null]
  const bytes = Buffer.from(text, "utf8")
  if (bytes.length <= COMPRESS_ABOVE) return [text, null]
  const z = deflateRawSync(bytes, { level: 1 })
  return z.length < bytes.length ? [null, z] : [text, null]
}

/** The JSON text of a payload's columns, or undefined when they do not hold one. */
export const decodePayload = (data: unknown, dataZ: unknown): string | undefined => {
  if (typeof data === "string") return dataZ === null ? data : undefined
  if (data !== null || !(dataZ instanceof Uint8Array)) return undefined
  try {
    return inflateRawSync(dataZ, { maxOutputLength: MAX_INFLATED_BYTES }).toString("utf8")
  } catch {
    return undefined
  }
}

// ---------------------------------------------------------------------------------------------
// source_event_seqs

/** Tag byte: runs of consecutive seqs as unsigned varints `(gap, length - 1)`, the first gap from 0. */
const RUNS = 0
/** Tag byte: the UTF-8 JSON text as written (any array the runs cannot express). */
const TEXT = 1

const pushVarint = (out: Array<number>, n: number): void => {
  while (n >= 0x80) {
    out.push((n % 0x80) + 0x80)
    n = Math.floor(n / 0x80)
  }
  out.push(n)
}

/**
 * The BLOB of `sourceEventSeqs` given its JSON text: runs when the array is strictly ascending
 * non-negative safe integers whose text is the canonical one (so the text reads back byte for
 * byte), else the text itself.
 */
export const encodeProvenance = (seqs: unknown, text: string): Uint8Array => {
  const runs = ascendingRuns(seqs)
  if (runs !== undefined && runs.text === text) return Uint8Array.from(runs.bytes)
  const bytes = Buffer.from(text, "utf8")
  const out = new Uint8Array(bytes.length + 1)
  out[0] = TEXT
  out.set(bytes, 1)
  return out
}

const ascendingRuns = (seqs: unknown): { readonly bytes: Array<number>; readonly text: string } | undefined => {
  if (!Array.isArray(seqs)) return undefined
  const bytes = [RUNS]
  // `next`: the seq after the last run pushed (0 before any), so the first run of [0, …] has gap 0
  let next = 0
  let runStart = -1
  let runEnd = -1
  for (const s of seqs) {
    if (typeof s !== "number" || !Number.isSafeInteger(s) || s <= runEnd || Object.is(s, -0)) return undefined
    if (runStart !== -1 && s === runEnd + 1) {
      runEnd = s
      continue
    }
    if (runStart !== -1) {
      pushVarint(bytes, runStart - next)
      pushVarint(bytes, runEnd - runStart)
      next = runEnd + 1
    }
    runStart = runEnd = s
  }
  if (runStart !== -1) {
    pushVarint(bytes, runStart - next)
    pushVarint(bytes, runEnd - runStart)
  }
  return { bytes, text: `[${seqs.join(",")}]` }
}

/** Most seqs a runs BLOB may expand to: bounds what a hostile row can make a reader allocate. */
const MAX_RUN_SEQS = 8_000_000

const decodeRuns = (bytes: ArrayLike<number>): Array<number> | undefined => {
  const out: Array<number> = []
  let i = 1
  let next = 0
  const varint = (): number | undefined => {
    let n = 0
    let scale = 1
    for (;;) {
      if (i >= bytes.length || scale > 2 ** 49) return undefined
      const b = bytes[i++]
      n += (b & 0x7f) * scale
      if (b < 0x80) return n
      scale *= 0x80
    }
  }
  while (i < bytes.length) {
    const gap = varint()
    const extra = varint()
    if (gap === undefined || extra === undefined) return undefined
    const start = next + gap
    const end = start + extra
    if (!Number.isSafeInteger(end) || out.length + extra >= MAX_RUN_SEQS) return undefined
    for (let s = start; s <= end; s++) out.push(s)
    next = end + 1
  }
  return out
}

/** The JSON text of a `source_event_seqs` BLOB (or of a version-1 TEXT column), or undefined. */
export const decodeProvenance = (column: unknown): string | undefined => {
  if (typeof column === "string") return column
  if (!(column instanceof Uint8Array) || column.length === 0) return undefined
  if (column[0] === TEXT) return Buffer.from(column.buffer, column.byteOffset + 1, column.length - 1).toString("utf8")
  if (column[0] !== RUNS) return undefined
  const seqs = decodeRuns(column)
  return seqs === undefined ? undefined : `[${seqs.join(",")}]`
}
