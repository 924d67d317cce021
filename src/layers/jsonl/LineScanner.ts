/**
 * Reading the JSONL session file format, pure (SPEC §7.4.4 steps 2–5, Appendix A): the
 * `Scanner`, which splits bytes into lines under a per-line cap and classifies them — header
 * rules (K4–K6, L5–L7, J15), committed records, the torn tail (L1, L3) and corruption (L2, L4,
 * L7, L9) — and the check of one committed line (`seqAfterLine`). No I/O.
 */
import {
  FormatUnsupported,
  NotLosslessJson,
  SessionHeaderInvalid,
  SessionNotFound,
  StoreCorrupt
} from "../../schema/Errors.js"
import { isLosslessParsed } from "../../schema/JsonParse.js"
import { decodeStorageRecord, isPackedRowTag } from "../../schema/PackedChunks.js"
import { type SessionHeader, validateSessionHeader } from "../../schema/SessionHeader.js"
import { encodeSessionId } from "../../schema/SessionIdEncoding.js"
import { isRecord } from "../../schema/Validation.js"
import type { LoadError, TornTail, TornTailExtent } from "../../services/SessionStore.js"
import {
  concat,
  decodeUtf8,
  INVALID_UTF8,
  isPackedType,
  keep,
  lineText,
  type LineText,
  OVERLONG,
  type ParsedLine,
  parseLine,
  reorder
} from "./LineRecord.js"

type Rec = Record<string, unknown>

const NEWLINE = 10

// ---------------------------------------------------------------------------------------------
// Lines

/**
 * Complete lines are decoded a run at a time, at most this many bytes (a young-generation
 * string; a bigger one is allocated in the large-object space, page by page), and each line is
 * sliced out of the run's text instead of being decoded on its own.
 */
const TEXT_RUN_BYTES = 65_536

const jsonParse = JSON.parse

/**
 * The seq after one committed-looking record line (its newline included) whose first event has
 * seq `seq`; `undefined` when the bytes are anything else (more than one line, a fragment, a
 * defect, a lossy record).
 */
export const seqAfterLine = (bytes: Uint8Array, seq: number): number | undefined => {
  if (bytes.length === 0 || bytes[bytes.length - 1] !== NEWLINE || bytes.indexOf(NEWLINE) !== bytes.length - 1) return undefined
  const text = decodeUtf8(bytes.subarray(0, bytes.length - 1))
  if (text === undefined) return undefined
  const p = parseLine(text)
  if (p._tag === "Unparsable" || !p.lossless) return undefined
  const decoded = decodeStorageRecord(p.value, seq)
  return decoded._tag === "Defect" ? undefined : seq + decoded.events.length
}

// ---------------------------------------------------------------------------------------------
// The scanner (SPEC §7.4.4 steps 1–5)

/** What a scan checks and keeps. */
export interface ScanOptions {
  /** Where the file lives, for error messages. */
  readonly location: string
  /** L6: the header id must equal this. */
  readonly expectedId?: string
  /** L6: `encodeSessionId(header.id)` must equal this file-name stem. */
  readonly expectedName?: string
  readonly maxLineBytes: number
  /** Keep the parsed events (load) or only count them (append's rescan). */
  readonly keepEvents: boolean
  /** Stop after the header line (list). */
  readonly headerOnly?: boolean
  /**
   * Continue a scan that ended cleanly at `offset` (a follower's next read, `FollowCursor`): the
   * header, the next seq and the lines before `offset` are those of the earlier scan; the bytes
   * fed start at `offset`.
   */
  readonly resume?: ScanResume
  /**
   * Record a checkpoint (`Scanned.checkpoints`) before the first committed record at or after
   * every `checkpointEvery` seqs (a streamed read from a seq later starts at one, `JsonlStore`).
   */
  readonly checkpointEvery?: number
}

/** Where a scan can go on from: before a committed record's line (`ScanResume` without the header). */
export interface ScanCheckpoint {
  readonly offset: number
  readonly nextSeq: number
  /** Lines before `offset`, the header's included. */
  readonly lines: number
}

/** Where an earlier scan of a plain file ended cleanly (after a complete committed record). */
export interface ScanResume {
  readonly header: SessionHeader
  readonly storedVersion: number
  readonly offset: number
  readonly nextSeq: number
  /** Lines before `offset`, the header's included. */
  readonly lines: number
}

/** A classified file: the header, the committed prefix and the torn tail, if any. */
export interface Scanned {
  readonly header: SessionHeader
  readonly storedVersion: number
  readonly events: Array<unknown>
  readonly nextSeq: number
  readonly tornTail: TornTail | undefined
  readonly tornTailExtent?: TornTailExtent
  /**
   * The last committed record: its byte offset and the seq of its first event (a writer checks
   * this one line under the lock instead of rescanning the file, `JsonlStore`). Absent without
   * events, and in a compressed file.
   */
  readonly lastRecord?: { readonly start: number; readonly seq: number }
  /** Lines classified, the header's and a torn tail's included (from a resumed scan's start). */
  readonly lines?: number
  /** With `checkpointEvery`: the checkpoints before committed records, in seq order. */
  readonly checkpoints?: ReadonlyArray<ScanCheckpoint>
  /** The file is in the compressed layout (`FrameScanner`). */
  readonly compressed?: true
  /** Compressed: the last sound frame, its offset and header (the read's hint, as `lastRecord`). */
  readonly lastFrame?: { readonly start: number; readonly header: Uint8Array }
}

/** What the readers feed a file's bytes through: the line `Scanner` or the `FrameScanner`. */
export interface FileScan {
  /** Feed the bytes at absolute file offset `offset`. */
  push(chunk: Uint8Array, offset: number): void
  /** End of the bytes to read: the outcome. */
  finish(): Scanned | LoadError
  /** The events kept since the last call (a streamed read). */
  drain(): Array<unknown>
  /** Nothing more to learn: stop feeding. */
  readonly done: boolean
  /** The header, once read. */
  readonly sessionHeader: { readonly header: SessionHeader; readonly storedVersion: number } | undefined
}

/** Line splitting and classification of one JSONL session file; fed chunk by chunk. */
export class Scanner implements FileScan {
  private pieces: Array<Uint8Array> = []
  private pieceBytes = 0
  private overLong = false
  private lineStart = 0
  private lineNo = 0
  private header: SessionHeader | undefined
  private storedVersion = 0
  private events: Array<unknown> = []
  private nextSeq = 0
  /** The last committed record: its offset (-1: none yet) and first seq. */
  private lastRecordStart = -1
  private lastRecordSeq = 0
  /** Event lines seen with their newline; at the defect: how many came before it. */
  private terminatedLines = 0
  private terminatedBeforeDefect = 0
  private lineTerminated = false
  private endOffset = 0
  private defect:
    | {
      readonly reason: TornTail["reason"]
      readonly position: number
      readonly lineNo: number
      /** Why a packed row (Appendix A) is malformed: an L4 defect. */
      readonly packed: string | undefined
    }
    | undefined
  private laterTurnEnd = false
  /** Committed `turn/end` records so far (a compressed frame's flag is checked against them). */
  turnEnds = 0
  private readonly checkpoints: Array<ScanCheckpoint> = []
  private nextCheckpoint = 0
  error: LoadError | undefined
  /** Nothing more to learn: stop feeding. */
  done = false

  constructor(private readonly opts: ScanOptions) {
    const resume = opts.resume
    if (resume !== undefined) {
      this.header = resume.header
      this.storedVersion = resume.storedVersion
      this.nextSeq = resume.nextSeq
      this.lineNo = resume.lines
      this.lineStart = resume.offset
      this.endOffset = resume.offset
    }
  }

  /** The header, once its line was read. */
  get sessionHeader(): { readonly header: SessionHeader; readonly storedVersion: number } | undefined {
    return this.header === undefined ? undefined : { header: this.header, storedVersion: this.storedVersion }
  }

  /** Lines seen so far, the header's included. */
  get lineCount(): number {
    return this.lineNo
  }

  /** No defect, no error and no unfinished line so far: every line fed was a committed record. */
  get clean(): boolean {
    return this.error === undefined && this.defect === undefined && this.pieceBytes === 0 && !this.overLong
  }

  /**
   * Hand over the events kept since the last call (a streamed read, `keepEvents`): only events
   * before a defect are kept, so what was handed over is the committed prefix unless `finish`
   * reports an error.
   */
  drain(): Array<unknown> {
    const out = this.events
    this.events = []
    return out
  }

  /** Feed the bytes at absolute file offset `offset`. */
  push(chunk: Uint8Array, offset: number): void {
    this.endOffset = Math.max(this.endOffset, offset + chunk.length)
    let from = 0
    while (from < chunk.length && !this.done) {
      if (this.pieces.length === 0 && !this.overLong) {
        from = this.pushRun(chunk, from, offset)
        if (from >= chunk.length || this.done) return
      }
      const nl = chunk.indexOf(NEWLINE, from)
      if (nl === -1) {
        this.accumulate(chunk.subarray(from))
        return
      }
      let line: Uint8Array | typeof OVERLONG
      if (this.overLong) {
        line = OVERLONG
      } else if (this.pieces.length === 0) {
        line = nl - from > this.opts.maxLineBytes ? OVERLONG : chunk.subarray(from, nl)
      } else {
        this.accumulate(chunk.subarray(from, nl))
        line = this.overLong ? OVERLONG : concat(this.pieces, this.pieceBytes)
      }
      this.onLine(lineText(line), this.lineStart, true)
      this.pieces = []
      this.pieceBytes = 0
      this.overLong = false
      this.lineStart = offset + nl + 1
      from = nl + 1
    }
  }

  /** End of the bytes to read: classify the final fragment and return the outcome. */
  finish(): Scanned | LoadError {
    if (!this.done && (this.pieceBytes > 0 || this.overLong)) {
      this.onLine(lineText(this.overLong ? OVERLONG : concat(this.pieces, this.pieceBytes)), this.lineStart, false)
    }
    if (this.error !== undefined) return this.error
    if (this.header === undefined) return this.corrupt("L5", 1, "empty file: no session header line")
    let tornTail: TornTail | undefined
    let tornTailExtent: TornTailExtent | undefined
    if (this.defect !== undefined) {
      if (this.laterTurnEnd) {
        // L2 (L4 for a packed row): the defect lies in the committed region
        const packed = this.defect.packed
        return new StoreCorrupt({
          rule: packed === undefined ? "L2" : "L4",
          seq: this.nextSeq,
          location: this.opts.location,
          line: this.defect.lineNo,
          detail: packed === undefined
            ? `defective line (${this.defect.reason}) before a later turn/end record`
            : `${packed}, before a later turn/end record`
        })
      }
      tornTail = { fromSeq: this.nextSeq, reason: this.defect.reason, position: this.defect.position }
      tornTailExtent = {
        line: this.defect.lineNo,
        completeLines: this.terminatedLines - this.terminatedBeforeDefect,
        bytes: this.endOffset - this.defect.position
      }
    }
    return {
      header: this.header,
      storedVersion: this.storedVersion,
      events: this.events,
      nextSeq: this.nextSeq,
      tornTail,
      lines: this.lineNo,
      ...(this.checkpoints.length === 0 ? {} : { checkpoints: this.checkpoints }),
      ...(tornTailExtent === undefined ? {} : { tornTailExtent }),
      ...(this.lastRecordStart < 0 ? {} : { lastRecord: { start: this.lastRecordStart, seq: this.lastRecordSeq } })
    }
  }

  /**
   * The complete lines of `chunk` from `from` (no line pending before it) that end within
   * TEXT_RUN_BYTES, decoded as one text and each sliced out of it; returns where it stopped.
   * A run that is not valid UTF-8 is decoded line by line (each invalid line is a defect alone).
   */
  private pushRun(chunk: Uint8Array, from: number, offset: number): number {
    const last = chunk.lastIndexOf(NEWLINE, Math.min(chunk.length, from + TEXT_RUN_BYTES) - 1)
    if (last < from) return from
    const run = decodeUtf8(chunk.subarray(from, last))
    // as many UTF-16 units as bytes: ASCII, so the run's offsets are the bytes' offsets
    const base = from
    const ascii = run !== undefined && run.length === last - from
    let at = 0
    while (from <= last && !this.done) {
      let nl: number
      let line: LineText
      if (run === undefined) {
        nl = chunk.indexOf(NEWLINE, from)
        line = nl - from > this.opts.maxLineBytes ? OVERLONG : lineText(chunk.subarray(from, nl))
      } else {
        // the run's newlines are its bytes' newlines (no UTF-8 sequence holds byte 10), in order
        const found = run.indexOf("\n", at)
        const end = found === -1 ? run.length : found
        nl = ascii ? base + end : chunk.indexOf(NEWLINE, from)
        line = nl - from > this.opts.maxLineBytes ? OVERLONG : run.slice(at, end)
        at = end + 1
      }
      this.onLine(line, this.lineStart, true)
      this.lineStart = offset + nl + 1
      from = nl + 1
    }
    return from
  }

  private accumulate(bytes: Uint8Array): void {
    if (this.overLong || bytes.length === 0) return
    if (this.pieceBytes + bytes.length > this.opts.maxLineBytes) {
      // not buffered: skip to the next newline
      this.overLong = true
      this.pieces = []
      this.pieceBytes = 0
      return
    }
    this.pieces.push(bytes.slice())
    this.pieceBytes += bytes.length
  }

  private corrupt(rule: string, line: number, detail: string, seq?: number, cause?: unknown): StoreCorrupt {
    return new StoreCorrupt({
      rule,
      location: this.opts.location,
      line,
      detail,
      ...(seq === undefined ? {} : { seq }),
      ...(cause === undefined ? {} : { cause })
    })
  }

  /** A checkpoint before the committed record at `start` (line `lineNo`). */
  private checkpoint(start: number, lineNo: number): void {
    this.checkpoints.push({ offset: start, nextSeq: this.nextSeq, lines: lineNo - 1 })
    this.nextCheckpoint = this.nextSeq + (this.opts.checkpointEvery ?? 1)
  }

  private fail(error: LoadError): void {
    this.error = error
    this.done = true
  }

  private onLine(line: LineText, start: number, terminated: boolean): void {
    this.lineNo++
    if (this.lineNo === 1) {
      this.onHeader(line, terminated)
      if (this.opts.headerOnly === true) this.done = true
      return
    }
    const lineNo = this.lineNo
    this.lineTerminated = terminated
    if (terminated) this.terminatedLines++
    if (line === OVERLONG) {
      // L7: a complete over-long line is corruption wherever it is; a final one is torn (L1)
      if (terminated) {
        return this.fail(this.corrupt("L7", lineNo, `line longer than maxLineBytes (${this.opts.maxLineBytes})`))
      }
      return this.markDefect("fragment", start, lineNo)
    }
    if (this.defect !== undefined) {
      // only to learn whether a later record is a turn/end (L2 vs L3)
      if (!this.laterTurnEnd) {
        if (line !== INVALID_UTF8 && line.includes("turn")) {
          const p = parseLine(line)
          if (p._tag === "Parsed" && isRecord(p.value) && p.value.type === "turn/end") this.laterTurnEnd = true
        }
      }
      return
    }
    if (!terminated) return this.markDefect("fragment", start, lineNo)
    if (line === INVALID_UTF8) return this.markDefect("unparsable", start, lineNo)
    // the common case: a lossless record that is one event (no verdict objects built)
    let value: unknown
    try {
      value = jsonParse(line)
    } catch {
      return this.markDefect("unparsable", start, lineNo)
    }
    if (!isLosslessParsed(value)) return this.onRecord(parseLine(line), start, lineNo)
    if (!isRecord(value)) return this.markDefect("not-object", start, lineNo)
    if (isPackedType(value.type)) return this.onRecord({ _tag: "Parsed", value, lossless: true }, start, lineNo)
    // decodeStorageRecord of an event: one member, at the next seq
    if (value.seq !== this.nextSeq) return this.markDefect("seq-gap", start, lineNo)
    if (value.type === "turn/end") this.turnEnds++
    if (this.nextSeq >= this.nextCheckpoint && this.opts.checkpointEvery !== undefined) this.checkpoint(start, lineNo)
    this.lastRecordStart = start
    this.lastRecordSeq = this.nextSeq
    if (this.opts.keepEvents) this.events.push(keep(value))
    this.nextSeq++
  }

  /** A parsed committed-looking line in general: a packed row, or a lossy record (L9). */
  private onRecord(p: ParsedLine, start: number, lineNo: number): void {
    if (p._tag === "Unparsable") return this.markDefect("unparsable", start, lineNo)
    const value = p.value
    if (!isRecord(value)) return this.markDefect("not-object", start, lineNo)
    // a packed row (Appendix A) is committed-looking when it decodes and its seq0 is the next seq
    const decoded = decodeStorageRecord(value, this.nextSeq)
    if (decoded._tag === "Defect") {
      return this.markDefect(
        decoded.reason === "malformed" ? "unparsable" : decoded.reason,
        start,
        lineNo,
        decoded.packed ? decoded.detail : undefined
      )
    }
    if (!p.lossless) {
      // L9: a committed-looking record that fails the lossless walk
      // the cause is the rule error itself, so readers (verify) report A4/A5 with its path
      const cause = p.violation === undefined ? undefined : new NotLosslessJson({ ...p.violation, seq: this.nextSeq })
      return this.fail(
        this.corrupt("L9", lineNo, `stored event is not lossless JSON (${p.detail ?? ""})`, this.nextSeq, cause)
      )
    }
    const packed = isPackedRowTag(value.type)
    if (!packed && value.type === "turn/end") this.turnEnds++
    if (this.nextSeq >= this.nextCheckpoint && this.opts.checkpointEvery !== undefined) this.checkpoint(start, lineNo)
    this.lastRecordStart = start
    this.lastRecordSeq = this.nextSeq
    if (this.opts.keepEvents) {
      if (packed) for (const e of decoded.events) this.events.push(e)
      else this.events.push(reorder(value))
    }
    this.nextSeq += decoded.events.length
  }

  private markDefect(reason: TornTail["reason"], position: number, lineNo: number, packed?: string): void {
    this.defect = { reason, position, lineNo, packed }
    this.terminatedBeforeDefect = this.terminatedLines - (this.lineTerminated ? 1 : 0)
  }

  private onHeader(line: LineText, terminated: boolean): void {
    if (line === OVERLONG) {
      return this.fail(
        terminated
          ? this.corrupt("L7", 1, `header line longer than maxLineBytes (${this.opts.maxLineBytes})`)
          : this.corrupt("L5", 1, "header line without a newline")
      )
    }
    if (line === INVALID_UTF8) return this.fail(this.corrupt("L5", 1, "header line is not valid UTF-8"))
    const p = parseLine(line)
    if (p._tag === "Unparsable") return this.fail(this.corrupt("L5", 1, "header line is not valid JSON"))
    const value = p.value
    // K5: JSON, but not an object
    if (!isRecord(value)) return this.fail(this.corrupt("K5", 1, "header line is not a JSON object"))
    // K4: checked before any header-shape check
    const version = value.version
    if (typeof version === "number" && version !== 0 && version !== 1) return this.fail(this.refuseVersion(value, version))
    if (value.type !== "session") {
      return this.fail(this.corrupt("L5", 1, "first line is not a {\"type\":\"session\"} record"))
    }
    if (!terminated) return this.fail(this.corrupt("L5", 1, "header line without a newline"))
    if (typeof version !== "number") {
      return this.fail(new SessionHeaderInvalid({ rule: "J2", field: "version", detail: "version must be a number" }))
    }
    const header = validateSessionHeader(value, { checkVersion: false })
    if (header instanceof SessionHeaderInvalid) return this.fail(header)
    const identity = this.checkIdentity(header)
    if (identity !== undefined) return this.fail(identity)
    this.header = header
    this.storedVersion = version
  }

  /** K4: the refusal is K1 (newer) or K2 (older), and a non-string id is named stringified (K6). */
  private refuseVersion(value: Rec, version: number): FormatUnsupported {
    const id = value.id
    const named = id === undefined ? undefined : typeof id === "string" ? id : (JSON.stringify(id) ?? String(id))
    return new FormatUnsupported({
      rule: version > 1 ? "K1" : "K2",
      found: version,
      supported: 1,
      direction: version > 1 ? "newer" : "older",
      location: this.opts.location,
      ...(named === undefined ? {} : { sessionId: named })
    })
  }

  /** L6: identity (a renamed file, a case-insensitive name collision). */
  private checkIdentity(header: SessionHeader): SessionNotFound | undefined {
    if (this.opts.expectedId !== undefined && header.id !== this.opts.expectedId) {
      return new SessionNotFound({
        rule: "L6",
        sessionId: this.opts.expectedId,
        detail: `${this.opts.location} holds session "${header.id}"`
      })
    }
    if (this.opts.expectedName !== undefined && encodeSessionId(header.id) !== this.opts.expectedName) {
      return new SessionNotFound({
        rule: "L6",
        sessionId: this.opts.expectedId ?? header.id,
        detail: `the header id "${header.id}" does not match the file name ${this.opts.location}`
      })
    }
    return undefined
  }
}
