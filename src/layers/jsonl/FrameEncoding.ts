/**
 * The compressed JSONL layout as written (docs/formats.md "Compressed JSONL"): the file magic, the 16-byte
 * frame header, how a batch's lines are cut into frames and frames into segments (deflate, or the
 * first layout's brotli), and the bytes of a batch's frames. Reading them is `FrameScanner`; the
 * codecs are `Compression`.
 */
import * as Effect from "effect/Effect"
import { type CodecFailure, crc32, makeSegmentEncoder, type SegmentCodec, type SegmentEncoder, WriterCodec } from "./Compression.js"

/** The first 8 bytes of a compressed file: `\x89JSONLZ\n` (a plain JSONL file starts with `{`). */
export const MAGIC: Uint8Array = Uint8Array.of(0x89, 0x4a, 0x53, 0x4f, 0x4e, 0x4c, 0x5a, 0x0a)

/** The file-name suffix of a compressed session file (`<encode(id)>.jsonlz`). */
export const COMPRESSED_SUFFIX = ".jsonlz"

/** The 3 bytes every frame header starts with (`\xF5FZ`), where a reader resynchronises. */
export const FRAME_MARK: ReadonlyArray<number> = [0xf5, 0x46, 0x5a]

/** Size of a frame header. */
export const FRAME_HEADER_BYTES = 16

/** Flag: the frame starts a segment (a new brotli stream, or an empty deflate history). */
export const SEGMENT_START = 0x01
/** Flag: the frame's text holds a `turn/end` record (L2 vs L3 without decoding it). */
export const TURN_END = 0x02
/**
 * Flag: the frame's segment is of the deflate codec (each frame one raw DEFLATE stream over the
 * segment's earlier text); set on every frame of such a segment, clear on a brotli segment's.
 */
export const DEFLATE = 0x04
const KNOWN_FLAGS = SEGMENT_START | TURN_END | DEFLATE

/** A writer cuts a batch into frames of at most this much text (one longer line is a frame alone). */
export const FRAME_TEXT_TARGET = 1_048_576
/**
 * A brotli segment holds at most this much text (a frame longer than that is a segment alone); a
 * deflate segment is not capped (a reader holds its last `HISTORY_BYTES`, not the segment).
 */
export const SEGMENT_TEXT_CAP = 4_194_304

/** Most text a reader accepts in one frame: a writer's frame target, or one line and its newline. */
export const frameTextCap = (maxLineBytes: number): number => Math.max(FRAME_TEXT_TARGET, maxLineBytes + 1)

/** Most payload bytes a frame of `textBytes` may have (neither codec expands text by more). */
export const payloadCap = (textBytes: number): number => textBytes + Math.ceil(textBytes / 256) + 1024

/** A decoded frame header. */
export interface FrameHeader {
  readonly flags: number
  readonly payloadBytes: number
  readonly textBytes: number
  readonly crc: number
}

/** True when `bytes` start with the magic of a compressed file. */
export const hasMagic = (bytes: Uint8Array): boolean => {
  if (bytes.length < MAGIC.length) return false
  for (let i = 0; i < MAGIC.length; i++) if (bytes[i] !== MAGIC[i]) return false
  return true
}

/**
 * Parse the 16 bytes of a frame header: `undefined` when they are none (no mark, unknown flags,
 * an empty text or payload). Lengths are not checked against caps here.
 */
export const parseFrameHeader = (bytes: Uint8Array): FrameHeader | undefined => {
  if (bytes[0] !== FRAME_MARK[0] || bytes[1] !== FRAME_MARK[1] || bytes[2] !== FRAME_MARK[2]) return undefined
  const view = new DataView(bytes.buffer, bytes.byteOffset, FRAME_HEADER_BYTES)
  const flags = bytes[3]
  const payloadBytes = view.getUint32(4, true)
  const textBytes = view.getUint32(8, true)
  if ((flags & ~KNOWN_FLAGS) !== 0 || payloadBytes === 0 || textBytes === 0) return undefined
  return { flags, payloadBytes, textBytes, crc: view.getUint32(12, true) }
}

/** The CRC a frame header must carry: over its flags and lengths (bytes 3–11) and the payload. */
export const frameCrc = (header: Uint8Array, payload: Uint8Array): number =>
  crc32(payload, crc32(header.subarray(3, 12))) >>> 0

/** The header and payload of one frame, as written. */
export const frameBytes = (flags: number, text: number, payload: Uint8Array): Uint8Array => {
  const out = new Uint8Array(FRAME_HEADER_BYTES + payload.length)
  out.set(payload, FRAME_HEADER_BYTES)
  return sealFrame(flags, text, out)
}

/**
 * A frame from `out`, whose first `FRAME_HEADER_BYTES` are room for the header and the rest the
 * payload: the header written there (the payload is not copied).
 */
export const sealFrame = (flags: number, text: number, out: Uint8Array): Uint8Array => {
  out.set(FRAME_MARK, 0)
  const view = new DataView(out.buffer, out.byteOffset, FRAME_HEADER_BYTES)
  out[3] = flags
  view.setUint32(4, out.length - FRAME_HEADER_BYTES, true)
  view.setUint32(8, text, true)
  view.setUint32(12, frameCrc(out.subarray(0, FRAME_HEADER_BYTES), out.subarray(FRAME_HEADER_BYTES)), true)
  return out
}

// ---------------------------------------------------------------------------------------------
// Writing

/** One frame's text before compression. */
export interface FrameText {
  readonly text: Uint8Array
  readonly turnEnd: boolean
}

/** A stored line of a `turn/end` event (serialised with `type` first, §1.1 key order). */
const isTurnEndLine = (line: string): boolean =>
  // the "u" of `{"type":"tu`: only turn records have it, most lines stop here
  line.charCodeAt(10) === 0x75 && line.startsWith("{\"type\":\"turn/end\"")

/**
 * The frames storing `lines` (each without its newline): consecutive lines up to
 * `FRAME_TEXT_TARGET` bytes of text per frame, a longer line alone.
 */
export const frameTexts = (lines: ReadonlyArray<string>): Array<FrameText> => {
  if (lines.length === 0) return []
  // the common case, a batch well under the target: one frame, its text encoded once (UTF-8
  // takes at most 3 bytes per UTF-16 code unit, so no line's byte length needs counting)
  let units = 0
  for (const line of lines) units += line.length + 1
  if (units * 3 <= FRAME_TEXT_TARGET) {
    return [{ text: Buffer.from(lines.join("\n") + "\n", "utf8"), turnEnd: lines.some(isTurnEndLine) }]
  }
  const frames: Array<FrameText> = []
  let parts: Array<string> = []
  let bytes = 0
  let turnEnd = false
  const cut = () => {
    if (parts.length === 0) return
    frames.push({ text: Buffer.from(parts.join(""), "utf8"), turnEnd })
    parts = []
    bytes = 0
    turnEnd = false
  }
  for (const line of lines) {
    const text = line + "\n"
    const n = Buffer.byteLength(text, "utf8")
    if (bytes > 0 && bytes + n > FRAME_TEXT_TARGET) cut()
    parts.push(text)
    bytes += n
    turnEnd ||= isTurnEndLine(line)
  }
  cut()
  return frames
}

/** The segment a writer continues: its encoder and how much text it holds. */
export interface OpenSegment {
  readonly encoder: SegmentEncoder
  readonly textBytes: number
}

/** What a batch's frames encode to: the bytes to write and the segment they leave open. */
export interface EncodedFrames {
  readonly bytes: Uint8Array
  readonly segment: OpenSegment | undefined
}

/** Whether `segment` goes on with the next frame (`textBytes` of text) written with `codec`. */
const continues = (segment: OpenSegment | undefined, codec: SegmentCodec, textBytes: number): segment is OpenSegment =>
  segment !== undefined && segment.encoder.codec === codec &&
  (codec === "deflate" || segment.textBytes + textBytes <= SEGMENT_TEXT_CAP)

/** One frame's header flags. */
const flagsOf = (frame: FrameText, starts: boolean, codec: SegmentCodec): number =>
  (frame.turnEnd ? TURN_END : 0) | (starts ? SEGMENT_START : 0) | (codec === "deflate" ? DEFLATE : 0)

/** The frames' bytes as one array (the one frame's own when there is one). */
const joined = (out: ReadonlyArray<Uint8Array>, total: number): Uint8Array => {
  if (out.length === 1) return out[0]
  const bytes = new Uint8Array(total)
  let at = 0
  for (const b of out) {
    bytes.set(b, at)
    at += b.length
  }
  return bytes
}

/**
 * `encodeFrames` with the deflate codec, without an effect: the append's synchronous step calls
 * it. On failure every encoder used is closed.
 */
export const encodeFramesSync = (
  segment: OpenSegment | undefined,
  frames: ReadonlyArray<FrameText>
): EncodedFrames | CodecFailure => {
  const out: Array<Uint8Array> = []
  let total = 0
  let open = segment
  for (const frame of frames) {
    const starts = !continues(open, "deflate", frame.text.length)
    if (starts) {
      open?.encoder.close()
      open = { encoder: makeSegmentEncoder("deflate"), textBytes: 0 }
    }
    const encoder = open!.encoder
    const room = encoder.encodeSync!(frame.text, FRAME_HEADER_BYTES)
    if (!(room instanceof Uint8Array)) {
      encoder.close()
      return room
    }
    const bytes = sealFrame(flagsOf(frame, starts, "deflate"), frame.text.length, room)
    out.push(bytes)
    total += bytes.length
    open = { encoder, textBytes: open!.textBytes + frame.text.length }
  }
  return { bytes: joined(out, total), segment: open }
}

/**
 * Compress `frames` after `segment` (none: the first frame starts a segment) into the bytes to
 * write, and the segment they leave open. The segment is continued only when its codec is the
 * `WriterCodec`'s; a frame that would take a brotli segment past `SEGMENT_TEXT_CAP` starts a new
 * one. An encoder replaced here is closed; on failure every encoder used is closed. With the
 * deflate codec nothing here waits (`encodeFramesSync`).
 */
export const encodeFrames = (
  segment: OpenSegment | undefined,
  frames: ReadonlyArray<FrameText>
): Effect.Effect<EncodedFrames, CodecFailure> =>
  Effect.flatMap(WriterCodec, (codec) => {
    if (codec === "deflate") {
      return Effect.suspend(() => {
        const encoded = encodeFramesSync(segment, frames)
        return "bytes" in encoded ? Effect.succeed(encoded) : Effect.fail(encoded)
      })
    }
    return Effect.gen(function*() {
      const out: Array<Uint8Array> = []
      let total = 0
      let open = segment
      for (const frame of frames) {
        const starts = !continues(open, codec, frame.text.length)
        if (starts) {
          open?.encoder.close()
          open = { encoder: makeSegmentEncoder(codec), textBytes: 0 }
        }
        const encoder: SegmentEncoder = open!.encoder
        const payload = yield* Effect.onError(encoder.encode(frame.text), () => Effect.sync(() => encoder.close()))
        const bytes = frameBytes(flagsOf(frame, starts, codec), frame.text.length, payload)
        out.push(bytes)
        total += bytes.length
        open = { encoder, textBytes: open!.textBytes + frame.text.length }
      }
      return { bytes: joined(out, total), segment: open }
    })
  })
