/**
 * The JSONL session file format as written, pure (SPEC §7.4.2, Appendix A): the header line,
 * event lines and packed chunk rows, and the batches of lines an append writes. Reading it is
 * `LineScanner`. No I/O.
 */
import { encodeEvent } from "../../schema/EventCodec.js"
import type { Event } from "../../schema/Events.js"
import { encodeJson, type Json } from "../../schema/Json.js"
import { DEFAULT_MAX_ROW_BYTES, encodePackedRow, packChunkRuns } from "../../schema/PackedChunks.js"
import { headerRecord, type SessionHeader } from "../../schema/SessionHeader.js"

// ---------------------------------------------------------------------------------------------
// Encoding (SPEC §7.4.2)

/** How runs of delta chunks are packed (Appendix A); `undefined` writes every event verbatim. */
export type PackOptions = { readonly maxRowBytes: number } | undefined

/**
 * The packing of a store: on unless `packChunks` is `false`; a packed row must also fit the
 * reader's line cap.
 */
export const packOptions = (packChunks: boolean | undefined, maxLineBytes: number): PackOptions =>
  packChunks === false ? undefined : { maxRowBytes: Math.min(DEFAULT_MAX_ROW_BYTES, maxLineBytes) }

/** The JSONL header record line (line 1), newline included. */
export const headerLine = (header: SessionHeader): string => encodeJson(headerRecord(header) as Json) + "\n"

/**
 * The lines (without newlines) storing `events`, whose serialised lines are `lines` (same
 * length): verbatim, or with runs of delta chunks packed (Appendix A) when `pack` is set.
 */
export const storageLines = (
  events: ReadonlyArray<Event>,
  lines: ReadonlyArray<string>,
  pack: PackOptions
): ReadonlyArray<string> => {
  if (pack === undefined) return lines
  const out: Array<string> = []
  let i = 0
  for (const record of packChunkRuns(events, { maxRowBytes: pack.maxRowBytes })) {
    if (record._tag === "Packed") {
      out.push(encodePackedRow(record.row))
      i += record.members
    } else {
      out.push(lines[i++])
    }
  }
  return out
}

/** The stored lines (without newlines) of a whole log's events. */
export const logLines = (events: ReadonlyArray<Event>, pack: PackOptions): ReadonlyArray<string> =>
  storageLines(events, events.map(encodeEvent), pack)

/** A whole log as text parts (header line, then one part per stored line), for a replaced file. */
export const logParts = (header: SessionHeader, events: ReadonlyArray<Event>, pack: PackOptions): Array<string> => [
  headerLine(header),
  ...logLines(events, pack).map((l) => l + "\n")
]

/** Serialise header + events as JSONL text (export); unpacked unless `packChunks` is set. */
export const toJsonlText = (
  header: SessionHeader,
  events: ReadonlyArray<Event>,
  options?: { readonly packChunks?: boolean }
): string => {
  let out = headerLine(header)
  if (options?.packChunks === true) {
    const lines = storageLines(events, events.map(encodeEvent), { maxRowBytes: DEFAULT_MAX_ROW_BYTES })
    for (const l of lines) out += l + "\n"
    return out
  }
  for (const e of events) out += encodeEvent(e) + "\n"
  return out
}

/**
 * What one append writes, and its size in bytes: a plain file's lines as one text, or a
 * compressed file's frames.
 */
export type Batch =
  | { readonly text: string; readonly bytes: number }
  | { readonly data: Uint8Array; readonly bytes: number }

/** The batch writing `lines`, a newline after each. */
export const batchOf = (lines: ReadonlyArray<string>): { readonly text: string; readonly bytes: number } => {
  const text = lines.join("\n") + "\n"
  return { text, bytes: Buffer.byteLength(text, "utf8") }
}

