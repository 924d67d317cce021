/**
 * The last event of a plain JSONL session file read from its end (`SessionStore.listEntries`):
 * the file's last complete line (a fragment after it, a torn tail, is skipped) decoded as a
 * storage record, read backwards a block at a time up to one line's cap. What it cannot decide so
 * (a compressed file, a last line that is no committed-looking record) it leaves to a full read.
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { decodeStorageRecord } from "../../schema/PackedChunks.js"
import { isRecord } from "../../schema/Validation.js"
import type { SessionEntry } from "../../services/SessionStore.js"
import { hasMagic } from "./FrameEncoding.js"
import { decodeUtf8, parseLine } from "./LineRecord.js"

const NEWLINE = 0x0a

/** How many bytes are read from the end at a time. */
const BLOCK_BYTES = 16 * 1024

/** Not decidable from the file's end: read the file whole. */
export const UNDECIDED = "undecided" as const

/**
 * The last event (seq and time) of the plain JSONL file at `file`, from its last complete line;
 * `undefined` when that line is the session header (no event); `UNDECIDED` for a compressed file,
 * a line longer than `maxLineBytes`, or a last line that is not a committed-looking record.
 */
export const lastRecordOf = (
  fs: FileSystem.FileSystem,
  file: string,
  maxLineBytes: number
): Effect.Effect<SessionEntry["last"] | typeof UNDECIDED> =>
  Effect.scoped(Effect.gen(function*() {
    const handle = yield* fs.open(file, { flag: "r" })
    const size = Number((yield* handle.stat).size)
    const readAt = (position: number, length: number) =>
      Effect.gen(function*() {
        const bytes = new Uint8Array(length)
        yield* handle.seek(position, "start")
        let read = 0
        while (read < length) {
          const n = Number(yield* handle.read(bytes.subarray(read)))
          if (n === 0) break
          read += n
        }
        return bytes.subarray(0, read)
      })
    if (hasMagic(yield* readAt(0, Math.min(size, 8)))) return UNDECIDED
    // [start, end): the last complete line, its newline excluded; `end` is the last newline
    let tail = new Uint8Array(0)
    let from = size
    let end = -1
    let start = -1
    while (start < 0 && from > 0 && size - from <= maxLineBytes + 2 * BLOCK_BYTES) {
      const at = Math.max(0, from - BLOCK_BYTES)
      const block = yield* readAt(at, from - at)
      const joined = new Uint8Array(block.length + tail.length)
      joined.set(block)
      joined.set(tail, block.length)
      tail = joined
      from = at
      if (end < 0) {
        const i = tail.lastIndexOf(NEWLINE)
        if (i >= 0) end = from + i
      }
      if (end >= 0) {
        const i = tail.subarray(0, end - from).lastIndexOf(NEWLINE)
        if (i >= 0) start = from + i + 1
        else if (from === 0) start = 0
      }
    }
    if (start < 0 || end - start > maxLineBytes) return UNDECIDED
    const text = decodeUtf8(tail.subarray(start - from, end - from))
    if (text === undefined) return UNDECIDED
    const parsed = parseLine(text)
    if (parsed._tag === "Unparsable" || !parsed.lossless || !isRecord(parsed.value)) return UNDECIDED
    const record = parsed.value
    if (record.type === "session") return start === 0 ? undefined : UNDECIDED
    const seq = "seq0" in record ? record.seq0 : record.seq
    if (typeof seq !== "number" || !Number.isSafeInteger(seq)) return UNDECIDED
    const decoded = decodeStorageRecord(record, seq)
    if (decoded._tag === "Defect") return UNDECIDED
    const last = decoded.events.at(-1) as { readonly seq?: unknown; readonly time?: unknown } | undefined
    return last !== undefined && Number.isSafeInteger(last.seq) && Number.isSafeInteger(last.time)
      ? { seq: last.seq as number, time: last.time as number }
      : UNDECIDED
  })).pipe(Effect.orElseSucceed(() => UNDECIDED))
