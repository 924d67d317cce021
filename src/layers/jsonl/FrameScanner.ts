/**
 * Reading the compressed JSONL layout, pure besides the codec (docs/formats.md "Compressed JSONL"): the
 * `FrameScanner` checks the magic, cuts the bytes into frames (mark, flags, lengths and CRC-32),
 * decodes them — a deflate frame at once over its segment's history, a brotli segment's frames
 * when the segment ends — and feeds their text to the line `Scanner`, and classifies a damaged
 * frame as a torn tail or corruption the way lines are (L1–L3, L5, L7). Fed chunk by chunk; it
 * holds at most one brotli segment's frames (or a deflate segment's last 32 KiB of text) and one
 * frame's bytes. `openScan` tells the two layouts apart by the magic.
 */
import { StoreCorrupt } from "../../schema/Errors.js"
import type { LoadError, TornTail, TornTailExtent } from "../../services/SessionStore.js"
import { decodeBrotliSegment, HISTORY_BYTES, inflateFrame } from "./Compression.js"
import {
  DEFLATE,
  FRAME_HEADER_BYTES,
  FRAME_MARK,
  type FrameHeader,
  frameCrc,
  frameTextCap,
  hasMagic,
  MAGIC,
  parseFrameHeader,
  payloadCap,
  SEGMENT_START,
  SEGMENT_TEXT_CAP,
  TURN_END
} from "./FrameEncoding.js"
import { type FileScan, type Scanned, Scanner, type ScanOptions, type ScanResume } from "./LineScanner.js"

/**
 * Where an earlier scan of a compressed file stopped after a sound frame of a deflate segment (a
 * follower's next read starts there, `FollowCursor`; docs/follow.md "JSONL"): the byte offset after
 * that frame (the first byte of a torn tail, if any), the frames before it, the line reader's state
 * (its offset counted in the decoded text) and the segment's last `HISTORY_BYTES` of text, the
 * dictionary the segment's next frame may refer to. None is kept for a brotli segment (its stream
 * state cannot be resumed): such a file is read whole.
 *
 * @since 0.2.0
 * @category models
 */
export interface FrameResume {
  readonly offset: number
  readonly frames: number
  readonly lines: ScanResume
  readonly history: Uint8Array
}

/** Bytes received and not yet consumed, as a list of pieces (no quadratic copying). */
class ByteQueue {
  private pieces: Array<Uint8Array> = []
  length = 0
  /** File offset of the first byte held. */
  at = 0

  push(bytes: Uint8Array): void {
    if (bytes.length === 0) return
    this.pieces.push(bytes.slice())
    this.length += bytes.length
  }

  /** The first `n` bytes (n ≤ length) as one array. */
  peek(n: number): Uint8Array {
    const first = this.pieces[0]
    if (first.length >= n) return first.subarray(0, n)
    const out = new Uint8Array(n)
    let at = 0
    for (const p of this.pieces) {
      const take = Math.min(p.length, n - at)
      out.set(p.subarray(0, take), at)
      at += take
      if (at === n) break
    }
    // keep the joined bytes as one piece: the next peek of them is free
    this.pieces = n === this.length ? [out] : [out, ...this.rest(n)]
    return out
  }

  private rest(n: number): Array<Uint8Array> {
    const out: Array<Uint8Array> = []
    let skipped = 0
    for (const p of this.pieces) {
      if (skipped >= n) out.push(p)
      else if (skipped + p.length > n) out.push(p.subarray(n - skipped))
      skipped += p.length
    }
    return out
  }

  /** Drop the first `n` bytes (n ≤ length). */
  skip(n: number): void {
    this.pieces = this.rest(n)
    this.length -= n
    this.at += n
  }

  /** The offset (from the first byte held) of the next frame mark, or -1. */
  indexOfMark(): number {
    if (this.length < FRAME_MARK.length) return -1
    const all = this.peek(this.length)
    let from = 0
    for (;;) {
      const i = all.indexOf(FRAME_MARK[0], from)
      if (i === -1 || i + 2 >= all.length) return i === -1 ? -1 : i
      if (all[i + 1] === FRAME_MARK[1] && all[i + 2] === FRAME_MARK[2]) return i
      from = i + 1
    }
  }
}

/**
 * A deflate segment's last `HISTORY_BYTES` of text, in a buffer of twice that size: the text is
 * copied once when it comes and once more when the buffer is full, not `HISTORY_BYTES` per frame.
 */
class History {
  private readonly buffer = new Uint8Array(2 * HISTORY_BYTES)
  private end = 0

  reset(): void {
    this.end = 0
  }

  /** The history as a view (valid until the next `push`). */
  view(): Uint8Array {
    return this.buffer.subarray(Math.max(0, this.end - HISTORY_BYTES), this.end)
  }

  push(text: Uint8Array): void {
    if (text.length >= HISTORY_BYTES) {
      this.buffer.set(text.subarray(text.length - HISTORY_BYTES), 0)
      this.end = HISTORY_BYTES
      return
    }
    if (this.end + text.length > this.buffer.length) {
      // keep what the history still needs of the old text at the front
      const keep = HISTORY_BYTES - text.length
      this.buffer.copyWithin(0, this.end - keep, this.end)
      this.end = keep
    }
    this.buffer.set(text, this.end)
    this.end += text.length
  }
}

/** A complete frame waiting for its segment to be decoded. */
interface PendingFrame {
  readonly start: number
  readonly number: number
  readonly header: Uint8Array
  readonly flags: number
  readonly payload: Uint8Array
  readonly textBytes: number
}

/** The first damaged frame (after it, frames are only checked for a `turn/end` flag). */
interface FrameDefect {
  readonly reason: TornTail["reason"]
  readonly position: number
  readonly frame: number
  /** A header over the reader's caps: where its frame would end (L7 when the file reaches it). */
  readonly claimedEnd?: number
}

/** Frame cutting and classification of one compressed session file; fed chunk by chunk. */
export class FrameScanner implements FileScan {
  private readonly lines: Scanner
  private readonly queue = new ByteQueue()
  private magicChecked = false
  private searching = false
  private frames = 0
  private segment: Array<PendingFrame> = []
  private segmentText = 0
  /** The open segment is of the deflate codec: its frames are decoded at once over `history`. */
  private segmentDeflate = false
  /** The last `HISTORY_BYTES` of the open deflate segment's text. */
  private readonly history = new History()
  /** How many of the segment's first frames were decoded and fed already (the header frame). */
  private segmentFed = 0
  private textOffset = 0
  private defect: FrameDefect | undefined
  private laterTurnEnd = false
  private framesAfterDefect = 0
  private endOffset = 0
  private lastFrame: { readonly start: number; readonly header: Uint8Array } | undefined
  private readonly textCap: number
  /** After the last frame fed: its end, the frames up to it and the lines they held. */
  private fed: { readonly end: number; readonly frames: number; readonly lines: number } | undefined
  error: LoadError | undefined
  done = false

  constructor(private readonly opts: ScanOptions, resume?: FrameResume) {
    this.lines = new Scanner(resume === undefined ? opts : { ...opts, resume: resume.lines })
    this.textCap = frameTextCap(opts.maxLineBytes)
    if (resume !== undefined) {
      this.magicChecked = true
      this.queue.at = resume.offset
      this.endOffset = resume.offset
      this.frames = resume.frames
      this.segmentDeflate = true
      this.history.push(resume.history)
      this.textOffset = resume.lines.offset
    }
  }

  /**
   * After `finish` gave `scanned`: where a later scan can go on (after the last sound frame), or
   * `undefined` when none can (an error, a brotli segment open, no frame fed).
   */
  resumePoint(scanned: Scanned): FrameResume | undefined {
    const fed = this.fed
    if (this.error !== undefined || this.laterTurnEnd || !this.segmentDeflate || fed === undefined) return undefined
    return {
      offset: fed.end,
      frames: fed.frames,
      history: this.history.view().slice(),
      lines: {
        header: scanned.header,
        storedVersion: scanned.storedVersion,
        offset: this.textOffset,
        nextSeq: scanned.nextSeq,
        lines: fed.lines
      }
    }
  }

  get sessionHeader() {
    return this.lines.sessionHeader
  }

  drain(): Array<unknown> {
    return this.lines.drain()
  }

  push(chunk: Uint8Array, offset: number): void {
    this.endOffset = Math.max(this.endOffset, offset + chunk.length)
    if (this.done) return
    this.queue.push(chunk)
    this.pump()
  }

  finish(): Scanned | LoadError {
    if (!this.done) {
      if (!this.magicChecked) return this.corrupt("L5", "empty file: no session header frame")
      // a frame cut short by the end of the file: torn
      if (!this.searching && this.queue.length > 0) this.markDefect("fragment", this.queue.at)
      this.flushSegment()
    }
    if (this.error !== undefined) return this.error
    const defect = this.defect
    if (defect !== undefined && (defect.frame === 0 || this.lines.sessionHeader === undefined)) {
      return this.corrupt("L5", `the session header frame at byte ${defect.position} is damaged (${defect.reason})`)
    }
    if (defect !== undefined && this.laterTurnEnd) {
      // L2: a frame after the damaged one holds a turn/end: the damage is in the committed region
      return this.corrupt(
        "L2",
        `damaged frame ${defect.frame + 1} at byte ${defect.position} (${defect.reason}) before a later frame holding a turn/end record`
      )
    }
    if (defect?.claimedEnd !== undefined && defect.claimedEnd <= this.endOffset) {
      return this.corrupt("L7", `frame ${defect.frame + 1} at byte ${defect.position} is longer than the reader's cap`)
    }
    const scanned = this.lines.finish()
    if (!("header" in scanned)) return scanned
    const { lastRecord: _, tornTail: __, tornTailExtent: ___, ...rest } = scanned
    if (defect === undefined) {
      return { ...rest, compressed: true, tornTail: undefined, ...(this.lastFrame === undefined ? {} : { lastFrame: this.lastFrame }) }
    }
    // a header over the caps whose frame the file does not reach: cut short, like any other
    const reason = defect.claimedEnd !== undefined ? "fragment" : defect.reason
    const tornTail: TornTail = { fromSeq: scanned.nextSeq, reason, position: defect.position }
    const tornTailExtent: TornTailExtent = {
      line: this.lines.lineCount + 1,
      // complete frames in the torn tail (each holds at least one record)
      completeLines: this.framesAfterDefect,
      bytes: this.endOffset - defect.position
    }
    return { ...rest, compressed: true, tornTail, tornTailExtent }
  }

  private corrupt(rule: string, detail: string): StoreCorrupt {
    return new StoreCorrupt({ rule, location: this.opts.location, detail })
  }

  private fail(error: LoadError): void {
    this.error = error
    this.done = true
  }

  private pump(): void {
    if (!this.magicChecked) {
      if (this.queue.length < MAGIC.length) return
      if (!hasMagic(this.queue.peek(MAGIC.length))) return this.fail(this.corrupt("L5", "not a compressed session file (no magic)"))
      this.queue.skip(MAGIC.length)
      this.magicChecked = true
    }
    while (!this.done) {
      if (this.searching ? !this.searchStep() : !this.frameStep()) return
    }
  }

  /** The header at the front, when it is a header within the caps; else why not. */
  private header(): FrameHeader | "none" | "over-cap" {
    const header = parseFrameHeader(this.queue.peek(FRAME_HEADER_BYTES))
    if (header === undefined) return "none"
    return header.textBytes > this.textCap || header.payloadBytes > payloadCap(header.textBytes) ? "over-cap" : header
  }

  /** The frame at the front when complete and sound; "wait" for more bytes; "bad" otherwise. */
  private frameAtFront(header: FrameHeader): { bytes: Uint8Array } | "wait" | "bad" {
    const total = FRAME_HEADER_BYTES + header.payloadBytes
    if (this.queue.length < total) return "wait"
    const bytes = this.queue.peek(total)
    const crc = frameCrc(bytes.subarray(0, FRAME_HEADER_BYTES), bytes.subarray(FRAME_HEADER_BYTES))
    return crc === header.crc ? { bytes } : "bad"
  }

  /** One frame in order; false when more bytes are needed. */
  private frameStep(): boolean {
    if (this.queue.length < FRAME_HEADER_BYTES) return false
    const start = this.queue.at
    const header = this.header()
    if (header === "none") {
      this.markDefect("unparsable", start)
      return true
    }
    if (header === "over-cap") {
      const raw = this.queue.peek(FRAME_HEADER_BYTES)
      const payloadBytes = new DataView(raw.buffer, raw.byteOffset, FRAME_HEADER_BYTES).getUint32(4, true)
      this.markDefect("unparsable", start, start + FRAME_HEADER_BYTES + payloadBytes)
      return true
    }
    const frame = this.frameAtFront(header)
    if (frame === "wait") return false
    if (frame === "bad") {
      this.markDefect("unparsable", start)
      return true
    }
    this.queue.skip(frame.bytes.length)
    this.accept(start, header, frame.bytes)
    return true
  }

  /** After a defect: the next sound frame (resynchronised at a mark), only for its flag. */
  private searchStep(): boolean {
    const i = this.queue.indexOfMark()
    if (i === -1) {
      // keep the last bytes: a mark may start there
      this.queue.skip(Math.max(0, this.queue.length - (FRAME_MARK.length - 1)))
      return false
    }
    this.queue.skip(i)
    if (this.queue.length < FRAME_HEADER_BYTES) return false
    const header = this.header()
    if (header === "none" || header === "over-cap") {
      this.queue.skip(1)
      return true
    }
    const frame = this.frameAtFront(header)
    if (frame === "wait") return false
    if (frame === "bad") {
      this.queue.skip(1)
      return true
    }
    this.queue.skip(frame.bytes.length)
    this.framesAfterDefect++
    // nothing more to learn once a later frame holds a turn/end (L2)
    if ((header.flags & TURN_END) !== 0) {
      this.laterTurnEnd = true
      this.done = true
    }
    return true
  }

  private markDefect(reason: TornTail["reason"], position: number, claimedEnd?: number): void {
    // the frames before it are sound: decode them first
    this.flushSegment()
    if (this.done) return
    this.defect = { reason, position, frame: this.frames, ...(claimedEnd === undefined ? {} : { claimedEnd }) }
    this.searching = true
    // resynchronise after the damaged header's first byte
    if (this.queue.length > 0) this.queue.skip(1)
  }

  private accept(start: number, header: FrameHeader, bytes: Uint8Array): void {
    const number = this.frames++
    const starts = (header.flags & SEGMENT_START) !== 0
    const deflate = (header.flags & DEFLATE) !== 0
    if (number === 0 && !starts) return this.fail(this.frameCorrupt("L5", number, start, "the first frame does not start a segment"))
    if (starts) {
      this.flushSegment()
      this.segmentDeflate = deflate
      this.history.reset()
    } else if (deflate !== this.segmentDeflate) {
      return this.fail(this.frameCorrupt("L7", number, start, "its codec is not its segment's"))
    } else if (!deflate && this.segmentText + header.textBytes > SEGMENT_TEXT_CAP) {
      return this.fail(this.frameCorrupt("L7", number, start, `its segment holds more than ${SEGMENT_TEXT_CAP} bytes of text`))
    }
    if (this.done) return
    if (deflate) return this.inflate(start, number, header, bytes)
    this.segment.push({
      start,
      number,
      header: bytes.slice(0, FRAME_HEADER_BYTES),
      flags: header.flags,
      payload: bytes.subarray(FRAME_HEADER_BYTES),
      textBytes: header.textBytes
    })
    this.segmentText += header.textBytes
    // the header at once (a frame is decodable after its segment's earlier frames alone)
    if (number === 0) this.flushSegment(true)
  }

  /** A deflate frame, decoded at once over its segment's history and fed. */
  private inflate(start: number, number: number, header: FrameHeader, bytes: Uint8Array): void {
    const text = inflateFrame(bytes.subarray(FRAME_HEADER_BYTES), this.history.view(), header.textBytes)
    if (!(text instanceof Uint8Array)) {
      // the frame passed its CRC: damage the framing marks complete (L7)
      return this.fail(this.frameCorrupt("L7", number, start, `it does not decode (${String(text.cause)})`))
    }
    this.history.push(text)
    this.feed({ start, number, header: bytes.slice(0, FRAME_HEADER_BYTES), flags: header.flags }, text)
  }

  private frameCorrupt(rule: string, frame: number, start: number, detail: string): StoreCorrupt {
    return new StoreCorrupt({
      rule,
      location: this.opts.location,
      line: this.lines.lineCount + 1,
      detail: `frame ${frame + 1} at byte ${start}: ${detail}`
    })
  }

  /**
   * Decode the pending segment's frames and feed the lines of those not fed yet, frame by frame;
   * `keep`: the segment goes on (its frames are kept, as fed).
   */
  private flushSegment(keep = false): void {
    const frames = this.segment
    if (frames.length === 0 || this.done) return
    const fed = this.segmentFed
    if (keep) {
      this.segmentFed = frames.length
    } else {
      this.segment = []
      this.segmentText = 0
      this.segmentFed = 0
      if (fed === frames.length) return
    }
    let total = 0
    let textBytes = 0
    for (const f of frames) {
      total += f.payload.length
      textBytes += f.textBytes
    }
    const payload = frames.length === 1 ? frames[0].payload : new Uint8Array(total)
    if (frames.length > 1) {
      let at = 0
      for (const f of frames) {
        payload.set(f.payload, at)
        at += f.payload.length
      }
    }
    const text = decodeBrotliSegment(payload, textBytes)
    if (!(text instanceof Uint8Array)) {
      // every frame passed its CRC: damage the framing marks complete (L7)
      return this.fail(this.frameCorrupt("L7", frames[0].number, frames[0].start, `its segment does not decode (${String(text.cause)})`))
    }
    let at = 0
    for (const [i, f] of frames.entries()) {
      if (i >= fed && !this.feed(f, text.subarray(at, at + f.textBytes))) return
      at += f.textBytes
    }
  }

  /** One frame's decoded text through the line reader; false when the scan stops here. */
  private feed(f: Pick<PendingFrame, "start" | "number" | "header" | "flags">, text: Uint8Array): boolean {
    const turnEnds = this.lines.turnEnds
    this.lines.push(text, this.textOffset)
    this.textOffset += text.length
    if (this.lines.error !== undefined) {
      this.fail(this.lines.error)
      return false
    }
    // list: the header was all it wanted
    if (this.lines.done) {
      this.done = true
      return false
    }
    if (!this.lines.clean) {
      const rule = this.lines.sessionHeader === undefined ? "L5" : "L7"
      this.fail(this.frameCorrupt(rule, f.number, f.start, "its text is not a run of complete, committed records"))
      return false
    }
    if ((this.lines.turnEnds > turnEnds) !== ((f.flags & TURN_END) !== 0)) {
      this.fail(this.frameCorrupt("L7", f.number, f.start, "its turn/end flag does not match its records"))
      return false
    }
    this.lastFrame = { start: f.start, header: f.header }
    const payloadBytes = new DataView(f.header.buffer, f.header.byteOffset, FRAME_HEADER_BYTES).getUint32(4, true)
    this.fed = { end: f.start + FRAME_HEADER_BYTES + payloadBytes, frames: f.number + 1, lines: this.lines.lineCount }
    return true
  }
}

/**
 * The scan of a file of either layout, told apart by its first bytes: the magic of the compressed
 * layout, anything else plain JSONL (whose first line then decides, L5).
 */
export const openScan = (opts: ScanOptions): FileScan => new LayoutSniffer(opts)

/**
 * The scan of a compressed file from `resume` (an earlier scan's `frameResumeOf`): only the bytes
 * from `resume.offset` are fed; the line reader's own `opts.resume`, if any, is not used.
 *
 * @since 0.2.0
 * @category constructors
 */
export const resumeFrameScan = (opts: ScanOptions, resume: FrameResume): FileScan => {
  const { resume: _, ...rest } = opts
  return new FrameScanner(rest, resume)
}

/**
 * Where a later scan of the same compressed file can go on after `scan` (from `openScan` or
 * `resumeFrameScan`) finished with `scanned`; `undefined` for a plain file, a brotli segment
 * open at the end, or a scan that failed.
 *
 * @since 0.2.0
 * @category getters
 */
export const frameResumeOf = (scan: FileScan, scanned: Scanned): FrameResume | undefined => {
  const inner = scan instanceof LayoutSniffer ? scan.scanner : scan
  return scanned.compressed === true && inner instanceof FrameScanner ? inner.resumePoint(scanned) : undefined
}

class LayoutSniffer implements FileScan {
  private inner: FileScan | undefined
  private head: Array<{ readonly bytes: Uint8Array; readonly offset: number }> = []
  private headBytes = 0

  constructor(private readonly opts: ScanOptions) {}

  get done(): boolean {
    return this.inner?.done ?? false
  }

  /** The scan of the layout found, once decided. */
  get scanner(): FileScan | undefined {
    return this.inner
  }

  get sessionHeader() {
    return this.inner?.sessionHeader
  }

  drain(): Array<unknown> {
    return this.inner?.drain() ?? []
  }

  push(chunk: Uint8Array, offset: number): void {
    if (this.inner !== undefined) return this.inner.push(chunk, offset)
    this.head.push({ bytes: chunk.slice(), offset })
    this.headBytes += chunk.length
    if (this.headBytes >= MAGIC.length) this.decide()
  }

  finish(): Scanned | LoadError {
    if (this.inner === undefined) this.decide()
    return this.inner!.finish()
  }

  private decide(): void {
    const first = new Uint8Array(Math.min(this.headBytes, MAGIC.length))
    let at = 0
    for (const { bytes } of this.head) {
      const take = Math.min(bytes.length, first.length - at)
      first.set(bytes.subarray(0, take), at)
      at += take
      if (at === first.length) break
    }
    const inner = hasMagic(first) ? new FrameScanner(this.opts) : new Scanner(this.opts)
    this.inner = inner
    for (const { bytes, offset } of this.head) if (!inner.done) inner.push(bytes, offset)
    this.head = []
  }
}
