/**
 * The JSONL SessionStore (SPEC §7.4): one file per session under `root`, published atomically by
 * a no-overwrite hard link, appended under the file's kernel lock with an expected-size-and-seq check, and
 * read as a stream of lines with a per-line cap, torn-tail classification (L1–L4), packed chunk
 * rows (Appendix A, written with `packChunks`) and header rules (K4–K6, L5–L7, J15). Also the
 * direct file reader and the JSONL serialiser of exports.
 */
import type { PlatformError, SystemError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import {
  AppendConflict,
  FormatUnsupported,
  NotLosslessJson,
  SessionExists,
  SessionHeaderInvalid,
  SessionNotFound,
  StoreCorrupt,
  StoreFailure
} from "../schema/Errors.js"
import { encodeEvent, isOrderedEnvelope, orderEnvelope } from "../schema/EventCodec.js"
import { ENVELOPE_KEYS, type Event } from "../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES } from "../schema/Format.js"
import { encodeJson, type Json, parseJson } from "../schema/Json.js"
import {
  decodeStorageRecord,
  DEFAULT_MAX_ROW_BYTES,
  encodePackedRow,
  isPackedRowTag,
  packChunkRuns
} from "../schema/PackedChunks.js"
import { headerRecord, type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import { encodeSessionId } from "../schema/SessionIdEncoding.js"
import {
  type LoadError,
  type LoadResult,
  appendPrechecked,
  readFromLoad,
  SessionStore,
  type SessionStoreShape,
  type StoreAppendError,
  type TornTail
} from "../services/SessionStore.js"
import {
  fsyncDirectory,
  isAlreadyExists,
  isNotFound,
  nodeSyncFileSystem,
  type SyncFileSystem,
  toSystemError
} from "./JsonlFiles.js"
import { acquireLock, type HeldLock, releaseLock, tryLockFile } from "./JsonlLock.js"

/** Options of the JSONL store (SPEC §7.4). */
export interface JsonlStoreOptions {
  readonly root: string
  readonly maxLineBytes?: number
  /**
   * How long a writer waits for the session file's lock held by another writer before failing
   * with `StoreFailure` (S6); default 5,000 ms.
   */
  readonly lockTimeoutMs?: number
  readonly maxEventBytes?: number
  /** Write runs of streamed delta chunks as packed rows (SPEC Appendix A); default false. */
  readonly packChunks?: boolean
  /**
   * The synchronous file calls of appends and the file lock; default node:fs and `flock(2)`. The fault-injection
   * seam of tests (write, fsync, truncate failures).
   */
  readonly syncFileSystem?: SyncFileSystem
}

const DEFAULT_LOCK_TIMEOUT_MS = 5_000
const READ_CHUNK = 65_536
const READ_ATTEMPTS = 3
const NEWLINE = 10
/**
 * Batches of at least this many bytes are written through the platform FileSystem (async, in
 * chunks) rather than by one synchronous write, so a large write does not hold the event loop.
 */
const STREAMED_WRITE_BYTES = 256 * 1024

type Rec = Record<string, unknown>
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v)

const encoder = new TextEncoder()
/** UTF-8 bytes of a string (Buffer.from: several times faster than TextEncoder on large text). */
const utf8 = (text: string): Uint8Array => Buffer.from(text, "utf8")
const envelopeKeySet: ReadonlySet<string> = new Set(ENVELOPE_KEYS)

// ---------------------------------------------------------------------------------------------
// Serialisation

/** The JSONL header record line (line 1). */
const headerLine = (header: SessionHeader): string => encodeJson(headerRecord(header) as Json) + "\n"

/**
 * The lines (without newlines) storing `events`, whose serialised lines are `lines` (same
 * length): verbatim, or with runs of delta chunks packed (Appendix A) when `pack` is set.
 */
const storageLines = (
  events: ReadonlyArray<Event>,
  lines: ReadonlyArray<string>,
  pack: { readonly maxRowBytes: number } | undefined
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

const batchText = (lines: ReadonlyArray<string>): string => lines.join("\n") + "\n"

const WRITE_CHUNK = 1 << 20

/** Write text parts in bounded chunks (a replaced log is never one giant string). */
const writeParts = (handle: FileSystem.File, parts: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    let pending = ""
    for (const part of parts) {
      pending += part
      if (pending.length >= WRITE_CHUNK) {
        yield* handle.writeAll(encoder.encode(pending))
        pending = ""
      }
    }
    if (pending.length > 0) yield* handle.writeAll(encoder.encode(pending))
  })

// ---------------------------------------------------------------------------------------------
// Read path (SPEC §7.4.4): a pure line classifier fed with chunks

interface ScanOptions {
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
}

interface Scanned {
  readonly header: SessionHeader
  readonly storedVersion: number
  readonly events: Array<unknown>
  readonly nextSeq: number
  readonly tornTail: TornTail | undefined
}

type ParsedLine =
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

const decodeUtf8 = (bytes: Uint8Array): string | undefined => {
  try {
    // one whole line per call (no streaming state carried from call to call)
    return lineDecoder.decode(bytes)
  } catch {
    return undefined
  }
}

/** parseJson, keeping the parsed value when only the lossless check failed (-0, ±Infinity). */
const parseLine = (text: string): ParsedLine => {
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

/** Reorder a stored record's envelope keys (§1.1) when it is a complete, closed envelope. */
const reorder = (r: Rec): unknown => {
  // the common case: written by this library, parsed and frozen, keys already in order
  if (isOrderedEnvelope(r)) return r
  for (const key of Object.keys(r)) if (!envelopeKeySet.has(key)) return r
  if (!("type" in r && "seq" in r && "time" in r && "data" in r)) return r
  return orderEnvelope(r)
}

const OVERLONG: unique symbol = Symbol("OVERLONG")

/** Line splitting and classification of one JSONL session file; fed chunk by chunk. */
class Scanner {
  private pieces: Array<Uint8Array> = []
  private pieceBytes = 0
  private overLong = false
  private lineStart = 0
  private lineNo = 0
  private header: SessionHeader | undefined
  private storedVersion = 0
  private readonly events: Array<unknown> = []
  private nextSeq = 0
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
  error: LoadError | undefined
  done = false

  constructor(private readonly opts: ScanOptions) {}

  /** Feed the bytes at absolute file offset `offset`. */
  push(chunk: Uint8Array, offset: number): void {
    let from = 0
    while (from < chunk.length && !this.done) {
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
      this.onLine(line, this.lineStart, true)
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
      this.onLine(this.overLong ? OVERLONG : concat(this.pieces, this.pieceBytes), this.lineStart, false)
    }
    if (this.error !== undefined) return this.error
    if (this.header === undefined) return this.corrupt("L5", 1, "empty file: no session header line")
    let tornTail: TornTail | undefined
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
    }
    return {
      header: this.header,
      storedVersion: this.storedVersion,
      events: this.events,
      nextSeq: this.nextSeq,
      tornTail
    }
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

  private fail(error: LoadError): void {
    this.error = error
    this.done = true
  }

  private onLine(line: Uint8Array | typeof OVERLONG, start: number, terminated: boolean): void {
    this.lineNo++
    if (this.lineNo === 1) {
      this.onHeader(line, terminated)
      if (this.opts.headerOnly === true) this.done = true
      return
    }
    const lineNo = this.lineNo
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
        const text = decodeUtf8(line)
        if (text !== undefined && text.includes("turn")) {
          const p = parseLine(text)
          if (p._tag === "Parsed" && isRecord(p.value) && p.value.type === "turn/end") this.laterTurnEnd = true
        }
      }
      return
    }
    if (!terminated) return this.markDefect("fragment", start, lineNo)
    const text = decodeUtf8(line)
    if (text === undefined) return this.markDefect("unparsable", start, lineNo)
    const p = parseLine(text)
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
    if (this.opts.keepEvents) {
      if (packed) for (const e of decoded.events) this.events.push(e)
      else this.events.push(reorder(value))
    }
    this.nextSeq += decoded.events.length
  }

  private markDefect(reason: TornTail["reason"], position: number, lineNo: number, packed?: string): void {
    this.defect = { reason, position, lineNo, packed }
  }

  private onHeader(line: Uint8Array | typeof OVERLONG, terminated: boolean): void {
    if (line === OVERLONG) {
      return this.fail(
        terminated
          ? this.corrupt("L7", 1, `header line longer than maxLineBytes (${this.opts.maxLineBytes})`)
          : this.corrupt("L5", 1, "header line without a newline")
      )
    }
    const text = decodeUtf8(line)
    if (text === undefined) return this.fail(this.corrupt("L5", 1, "header line is not valid UTF-8"))
    const p = parseLine(text)
    if (p._tag === "Unparsable") return this.fail(this.corrupt("L5", 1, "header line is not valid JSON"))
    const value = p.value
    // K5: JSON, but not an object
    if (!isRecord(value)) return this.fail(this.corrupt("K5", 1, "header line is not a JSON object"))
    // K4: checked before any header-shape check; the refusal is K1 (newer) or K2 (older), and a
    // non-string id is named stringified (K6)
    const version = value.version
    if (typeof version === "number" && version !== 0 && version !== 1) {
      const id = value.id
      const named = id === undefined ? undefined : typeof id === "string" ? id : (JSON.stringify(id) ?? String(id))
      return this.fail(
        new FormatUnsupported({
          rule: version > 1 ? "K1" : "K2",
          found: version,
          supported: 1,
          direction: version > 1 ? "newer" : "older",
          location: this.opts.location,
          ...(named === undefined ? {} : { sessionId: named })
        })
      )
    }
    if (value.type !== "session") {
      return this.fail(this.corrupt("L5", 1, "first line is not a {\"type\":\"session\"} record"))
    }
    if (!terminated) return this.fail(this.corrupt("L5", 1, "header line without a newline"))
    if (typeof version !== "number") {
      return this.fail(new SessionHeaderInvalid({ rule: "J2", field: "version", detail: "version must be a number" }))
    }
    const header = validateSessionHeader(value, { checkVersion: false })
    if (header instanceof SessionHeaderInvalid) return this.fail(header)
    // L6: identity (a renamed file, a case-insensitive name collision)
    if (this.opts.expectedId !== undefined && header.id !== this.opts.expectedId) {
      return this.fail(
        new SessionNotFound({
          rule: "L6",
          sessionId: this.opts.expectedId,
          detail: `${this.opts.location} holds session "${header.id}"`
        })
      )
    }
    if (this.opts.expectedName !== undefined && encodeSessionId(header.id) !== this.opts.expectedName) {
      return this.fail(
        new SessionNotFound({
          rule: "L6",
          sessionId: this.opts.expectedId ?? header.id,
          detail: `the header id "${header.id}" does not match the file name ${this.opts.location}`
        })
      )
    }
    this.header = header
    this.storedVersion = version
  }
}

const concat = (pieces: ReadonlyArray<Uint8Array>, total: number): Uint8Array => {
  if (pieces.length === 1) return pieces[0]
  const out = new Uint8Array(total)
  let at = 0
  for (const p of pieces) {
    out.set(p, at)
    at += p.length
  }
  return out
}

const inoOf = (info: FileSystem.File.Info): string => String(Option.getOrElse(info.ino, () => 0))

/** A scan's outcome plus the file identity it was read at. */
interface ScanOutcome {
  readonly result: Scanned
  readonly ino: string
  readonly size: number
  readonly revision: string
}

const storeFailure = (method: string) => (cause: unknown) => new StoreFailure({ method, cause })

/**
 * Stream one file through the scanner (SPEC §7.4.4): stat, read `[0, S0)` in chunks, re-stat
 * and retry on an identity change or a shrink. `undefined` when the file does not exist.
 */
const scanFile = (
  path: string,
  opts: ScanOptions,
  method: string
): Effect.Effect<ScanOutcome | undefined, LoadError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const read = yield* Effect.scoped(Effect.gen(function*() {
        const file = yield* fs.open(path, { flag: "r" })
        const info = yield* file.stat
        const size0 = Number(info.size)
        const scanner = new Scanner(opts)
        const buffer = new Uint8Array(Math.min(READ_CHUNK, Math.max(size0, 1)))
        let offset = 0
        while (offset < size0 && !scanner.done) {
          const n = Number(yield* file.read(buffer))
          if (n === 0) break
          const take = Math.min(n, size0 - offset)
          scanner.push(buffer.subarray(0, take), offset)
          offset += take
        }
        return { scanner, ino: inoOf(info), size0 }
      })).pipe(
        Effect.map(Option.some),
        Effect.catchIf((e) => isNotFound(e), () => Effect.succeed(Option.none()))
      )
      if (Option.isNone(read)) return undefined
      const { ino, scanner, size0 } = read.value
      const after = yield* fs.stat(path).pipe(
        Effect.map(Option.some),
        Effect.catchIf((e) => isNotFound(e), () => Effect.succeed(Option.none()))
      )
      // consistency: the file was replaced or shrank during the read; read again
      if (Option.isNone(after) || inoOf(after.value) !== ino || Number(after.value.size) < size0) continue
      const outcome = scanner.finish()
      if (!("header" in outcome)) return yield* outcome
      return { result: outcome, ino, size: size0, revision: `${ino}:${size0}` }
    }
    return yield* new StoreFailure({ method, cause: "the file kept changing while it was read", detail: path })
  }).pipe(Effect.catchTag("SystemError", "BadArgument", (e: PlatformError) => Effect.fail(storeFailure(method)(e))))

/** Read one JSONL session file directly (CLI path reads: no root, no file-name check; the id is the header's). */
export const readJsonlFile = (
  path: string,
  options?: { readonly expectedId?: string; readonly maxLineBytes?: number }
): Effect.Effect<LoadResult, LoadError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const scanned = yield* scanFile(path, {
      location: path,
      maxLineBytes: options?.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES,
      keepEvents: true,
      ...(options?.expectedId === undefined ? {} : { expectedId: options.expectedId })
    }, "readJsonlFile")
    if (scanned === undefined) {
      return yield* new StoreFailure({ method: "readJsonlFile", cause: "no such file", detail: path })
    }
    return toLoadResult(scanned)
  })

const toLoadResult = (s: ScanOutcome): LoadResult => ({
  header: s.result.header,
  storedVersion: s.result.storedVersion,
  events: s.result.events,
  tornTail: s.result.tornTail,
  revision: s.revision
})

// ---------------------------------------------------------------------------------------------
// The store

interface CachedState {
  readonly ino: string
  readonly size: number
  readonly nextSeq: number
}

/** The outcome of the synchronous append step. */
type AppendStep =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Held" }
  | { readonly _tag: "Slow" }
  | AppendConflict
  | SessionNotFound
  | StoreFailure

const DONE: AppendStep = { _tag: "Done" }
const HELD: AppendStep = { _tag: "Held" }
const SLOW: AppendStep = { _tag: "Slow" }

/** The serialised batch and its size in UTF-8 bytes. */
interface Batch {
  readonly text: string
  readonly bytes: number
}

const toBatch = (lines: ReadonlyArray<string>): Batch => {
  const text = batchText(lines)
  return { text, bytes: Buffer.byteLength(text, "utf8") }
}

/** A failed write (S7) and, when it failed too, its rollback (S8). */
interface WriteFailure {
  readonly write: unknown
  readonly rollback: unknown
}

/** Build a JSONL store over `options.root`. */
export const makeJsonlStore = (
  options: JsonlStoreOptions
): Effect.Effect<SessionStoreShape, never, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES
    const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES
    if (maxLineBytes < maxEventBytes) {
      return yield* Effect.dieMessage(`JsonlStore: maxLineBytes (${maxLineBytes}) must be >= maxEventBytes (${maxEventBytes})`)
    }
    const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS
    const files = options.syncFileSystem ?? nodeSyncFileSystem
    const root = path.resolve(options.root)
    const provideFs = Effect.provideService(FileSystem.FileSystem, fs)
    // Appendix A: a packed row must also fit the reader's line cap
    const pack = options.packChunks === true
      ? { maxRowBytes: Math.min(DEFAULT_MAX_ROW_BYTES, maxLineBytes) }
      : undefined

    /** Registered by `create`, not yet materialised by this instance. */
    const registered = new Map<string, SessionHeader>()
    const cache = new Map<string, CachedState>()
    /** S8: appends fail until a `load` re-reads the session. */
    const suspect = new Set<string>()
    const semaphores = new Map<string, Effect.Semaphore>()
    /** How many operations on an id hold or wait for its semaphore. */
    const active = new Map<string, number>()
    const paths = new Map<string, { readonly name: string; readonly file: string }>()
    let rootReady = false

    const fileOf = (id: string) => {
      let p = paths.get(id)
      if (p === undefined) {
        const name = encodeSessionId(id)
        const file = path.join(root, name + ".jsonl")
        p = { name, file }
        paths.set(id, p)
      }
      return p
    }
    const mapFs = (method: string) => <A, R>(effect: Effect.Effect<A, PlatformError, R>) =>
      Effect.mapError(effect, storeFailure(method))
    const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })
    const semaphoreFor = (id: string): Effect.Semaphore => {
      let s = semaphores.get(id)
      if (s === undefined) {
        s = Effect.unsafeMakeSemaphore(1)
        semaphores.set(id, s)
      }
      return s
    }
    const enter = (id: string) => void active.set(id, (active.get(id) ?? 0) + 1)
    const leave = (id: string) =>
      Effect.sync(() => {
        const n = (active.get(id) ?? 1) - 1
        if (n === 0) active.delete(id)
        else active.set(id, n)
      })
    /**
     * Run `effect` holding the id's semaphore (SPEC §7.4.5: one operation per id at a time in a
     * store instance), counted in `active` so that the synchronous append step knows it is alone.
     */
    const serialised = <A, E>(id: string, effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.uninterruptibleMask((restore) => {
        enter(id)
        return Effect.ensuring(restore(semaphoreFor(id).withPermits(1)(effect)), leave(id))
      })
    const statOption = (file: string) =>
      fs.stat(file).pipe(
        Effect.map(Option.some),
        Effect.catchIf((e) => isNotFound(e), () => Effect.succeed(Option.none<FileSystem.File.Info>()))
      )
    const randomHex = Effect.gen(function*() {
      let out = ""
      for (let i = 0; i < 4; i++) out += (yield* Random.nextIntBetween(0, 0x10000)).toString(16).padStart(4, "0")
      return out
    })

    /** SPEC §7.4.3 step 1: create missing directories (0700), fsyncing each new one's parent. */
    const ensureRoot = Effect.gen(function*() {
      if (rootReady) return
      const missing: Array<string> = []
      let dir = root
      while (!(yield* fs.exists(dir))) {
        missing.unshift(dir)
        const parent = path.dirname(dir)
        if (parent === dir) break
        dir = parent
      }
      for (const d of missing) {
        yield* fs.makeDirectory(d, { mode: 0o700 }).pipe(Effect.catchIf(isAlreadyExists, () => Effect.void))
        yield* provideFs(fsyncDirectory(path.dirname(d)))
      }
      rootReady = true
    })

    /**
     * Write `parts` to a fresh temporary file (`wx`, 0600) next to the session file and fsync it;
     * its path and identity (the inode a hard link or rename publishes).
     */
    const writeTemp = (name: string, parts: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        for (let attempt = 0;; attempt++) {
          const temp = path.join(root, `.${name}.${yield* randomHex}.tmp`)
          const created = yield* Effect.scoped(Effect.gen(function*() {
            const handle = yield* fs.open(temp, { flag: "wx", mode: 0o600 })
            return yield* Effect.onError(
              Effect.zipRight(Effect.zipRight(writeParts(handle, parts), handle.sync), handle.stat),
              () => Effect.ignore(fs.remove(temp))
            )
          })).pipe(
            Effect.map(Option.some),
            Effect.catchIf((e) => isAlreadyExists(e) && attempt < 8, () => Effect.succeed(Option.none()))
          )
          if (Option.isSome(created)) return { temp, ino: inoOf(created.value), size: Number(created.value.size) }
        }
      })

    // -- the session file's lock (SPEC §7.4.5) -----------------------------------------------

    const lockFile = (id: string, method: string) =>
      acquireLock(files, fileOf(id).file, { sessionId: id, method, lockTimeoutMs })

    /** Run `body` holding the per-id semaphore and the session file's lock. */
    const underLock = <A, E>(id: string, method: string, body: (lock: HeldLock) => Effect.Effect<A, E>) =>
      serialised(
        id,
        Effect.acquireUseRelease(lockFile(id, method), body, (lock) => Effect.sync(() => releaseLock(files, lock)))
      )

    /** Rescan under the lock: the stored state, a torn tail or a corruption. */
    const rescan = (id: string, method: string) =>
      Effect.gen(function*() {
        const { file, name } = fileOf(id)
        const scanned = yield* provideFs(scanFile(file, {
          location: file,
          expectedId: id,
          expectedName: name,
          maxLineBytes,
          keepEvents: false
        }, method))
        if (scanned === undefined) return yield* notFound(id)
        return scanned
      })

    /** Cold-read errors met by a writer: format refusals and header faults become StoreCorrupt. */
    const asWriteError = (file: string) => (e: LoadError) =>
      e._tag === "FormatUnsupported" || e._tag === "SessionHeaderInvalid" || e._tag === "UnknownEventType"
        ? new StoreCorrupt({ rule: e.rule, location: file, detail: `cannot write: ${e.message}`, cause: e })
        : e

    // -- materialisation (SPEC §7.4.3) ------------------------------------------------------

    const materialise = (id: string, header: SessionHeader, events: ReadonlyArray<Event>, lines: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const { file, name } = fileOf(id)
        yield* mapFs("append")(ensureRoot)
        const { ino, size, temp } = yield* mapFs("append")(writeTemp(name, [headerLine(header), batchText(lines)]))
        const linked = yield* fs.link(temp, file).pipe(
          Effect.as(true),
          Effect.catchIf(isAlreadyExists, () => Effect.succeed(false)),
          Effect.tapError(() => Effect.ignore(fs.remove(temp))),
          mapFs("append")
        )
        if (!linked) {
          yield* Effect.ignore(fs.remove(temp))
          return yield* new SessionExists({ rule: "J14", sessionId: id })
        }
        registered.delete(id)
        yield* provideFs(fsyncDirectory(root)).pipe(mapFs("append"))
        // what was published, not a later stat (another writer may append once the name exists)
        cache.set(id, { ino, size, nextSeq: events.length })
        yield* Effect.ignore(fs.remove(temp))
      })

    // -- append onto an existing file (SPEC §7.4.3) -----------------------------------------

    /** Step 4 (C5 / C7). */
    const seqConflict = (id: string, expectedSeq: number, storedSeq: number): AppendConflict | undefined =>
      expectedSeq === storedSeq ? undefined : new AppendConflict({
        rule: expectedSeq > storedSeq ? "C5" : "C7",
        sessionId: id,
        expectedSeq,
        storedSeq
      })

    /**
     * Step 5 on a descriptor opened for append: write every byte, fsync; on failure step 6's
     * rollback (truncate back to `size`, fsync). `undefined` when the bytes are durable.
     */
    const writeFd = (fd: number, file: string, batch: Batch, size: number): WriteFailure | undefined => {
      let method = "write"
      try {
        let at = files.writeString(fd, batch.text)
        if (at < batch.bytes) {
          // a partial write: the rest from the bytes
          const bytes = utf8(batch.text)
          while (at < bytes.length) {
            const n = files.write(fd, bytes, at, bytes.length - at)
            if (n <= 0) throw new Error(`write returned ${n}`)
            at += n
          }
        }
        method = "sync"
        files.fsync(fd)
        return undefined
      } catch (e) {
        const write = toSystemError(method, file, e)
        // S7: roll back to the previous size so a retry cannot duplicate seqs
        let rollbackMethod = "truncate"
        try {
          files.ftruncate(fd, size)
          rollbackMethod = "sync"
          files.fsync(fd)
          return { write, rollback: undefined }
        } catch (r) {
          return { write, rollback: toSystemError(rollbackMethod, file, r) }
        }
      }
    }

    /** Step 5 through the platform FileSystem (large batches); same outcome as `writeFd`. */
    const writeStreamed = (file: string, batch: Batch, size: number) =>
      Effect.uninterruptible(Effect.scoped(Effect.gen(function*() {
        const handle = yield* fs.open(file, { flag: "a" })
        const outcome = yield* Effect.either(Effect.zipRight(handle.writeAll(utf8(batch.text)), handle.sync))
        if (outcome._tag === "Right") return undefined
        // S7: roll back to the previous size so a retry cannot duplicate seqs
        const rollback = yield* Effect.either(Effect.zipRight(handle.truncate(size), handle.sync))
        return { write: outcome.left, rollback: rollback._tag === "Left" ? rollback.left : undefined }
      })).pipe(
        Effect.catchAll((e): Effect.Effect<WriteFailure> => Effect.succeed({ write: e, rollback: undefined }))
      ))

    /** Steps 6–7: the failure of a write (S7, S8), or the cache updated after a durable one. */
    const settle = (
      id: string,
      failure: WriteFailure | undefined,
      after: CachedState
    ): StoreFailure | undefined => {
      if (failure === undefined) {
        cache.set(id, after)
        return undefined
      }
      return writeFailed(id, failure)
    }

    /** Step 6's outcome: S7, or S8 (and the session suspect) when the rollback failed too. */
    const writeFailed = (id: string, failure: WriteFailure): StoreFailure => {
      cache.delete(id)
      if (failure.rollback !== undefined) {
        suspect.add(id)
        return new StoreFailure({
          rule: "S8",
          method: "append",
          cause: { write: failure.write, rollback: failure.rollback },
          detail: "write failed and its rollback failed too; the session is suspect until reloaded"
        })
      }
      return new StoreFailure({ rule: "S7", method: "append", cause: failure.write })
    }

    /**
     * The hot path, one synchronous step (it cannot be interrupted half-way): lock the file and,
     * when this instance's cache matches it, check, write, fsync and release the lock. Otherwise
     * `Slow` (a cache miss: released, and retried under the semaphore, where it rescans) or `Held`
     * (another writer has the lock).
     */
    const appendStep = (id: string, file: string, expectedSeq: number, count: number, batch: Batch): AppendStep => {
      const lock = tryLockFile(files, file)
      if (lock === "held") return HELD
      if (lock === "missing") return notFound(id)
      if (!("fd" in lock)) return new StoreFailure({ method: "append", cause: lock })
      try {
        const cached = cache.get(id)
        if (cached === undefined || cached.ino !== lock.ino || cached.size !== lock.size) return SLOW
        const conflict = seqConflict(id, expectedSeq, cached.nextSeq)
        if (conflict !== undefined) return conflict
        const after = { ino: lock.ino, size: lock.size + batch.bytes, nextSeq: expectedSeq + count }
        return settle(id, writeFd(lock.fd, file, batch, lock.size), after) ?? DONE
      } finally {
        releaseLock(files, lock)
      }
    }

    /** Steps 3–7 holding the lock: rescan on a cache miss; large batches are streamed. */
    const appendLocked = (id: string, expectedSeq: number, count: number, batch: Batch, lock: HeldLock) =>
      Effect.gen(function*() {
        const { file } = fileOf(id)
        let nextSeq: number
        const cached = cache.get(id)
        if (cached !== undefined && cached.ino === lock.ino && cached.size === lock.size) {
          nextSeq = cached.nextSeq
        } else {
          const scanned = yield* rescan(id, "append").pipe(Effect.mapError(asWriteError(file)))
          if (scanned.result.tornTail !== undefined) {
            // L1: never append onto a torn tail
            return yield* new AppendConflict({
              rule: "L1",
              sessionId: id,
              expectedSeq,
              storedSeq: scanned.result.nextSeq,
              detail: `the stored log has a torn tail at byte ${scanned.result.tornTail.position}; open the session to repair it`
            })
          }
          if (scanned.ino !== lock.ino || scanned.size !== lock.size) {
            // written by something that does not take the lock: refuse rather than guess
            cache.delete(id)
            return yield* new StoreFailure({ method: "append", cause: "the file changed under the lock", detail: file })
          }
          nextSeq = scanned.result.nextSeq
          cache.set(id, { ino: lock.ino, size: lock.size, nextSeq })
        }
        const conflict = seqConflict(id, expectedSeq, nextSeq)
        if (conflict !== undefined) return yield* conflict
        const after = { ino: lock.ino, size: lock.size + batch.bytes, nextSeq: expectedSeq + count }
        // the write and its settlement (cache, S7/S8, suspect) in one uninterruptible region: an
        // interruption must not leave a rolled-back or suspect write looking durable
        const failed = batch.bytes >= STREAMED_WRITE_BYTES
          ? yield* Effect.uninterruptible(
            Effect.map(writeStreamed(file, batch, lock.size), (failure) => settle(id, failure, after))
          )
          : settle(id, writeFd(lock.fd, file, batch, lock.size), after)
        if (failed !== undefined) return yield* failed
      })

    /**
     * §7.4.3 steps 2–7. When no other operation on the id is in flight in this store instance,
     * the synchronous step needs no semaphore (nothing can interleave with it); what it cannot
     * finish (a cache miss, a held lock, a large batch) starts again under the semaphore.
     */
    const appendExisting = (id: string, expectedSeq: number, count: number, batch: Batch) => {
      const waitForLock = () =>
        underLock(id, "append", (lock) => appendLocked(id, expectedSeq, count, batch, lock))
      // large batches are streamed (async) on the slow path; so is anything another operation on
      // the id is busy with in this store instance
      if (batch.bytes >= STREAMED_WRITE_BYTES) return waitForLock()
      return Effect.suspend(() => {
        // nothing cached yet (the first append of this instance): a rescan is certain
        if (active.has(id) || !cache.has(id)) return waitForLock()
        const step = appendStep(id, fileOf(id).file, expectedSeq, count, batch)
        switch (step._tag) {
          case "Done":
            return Effect.void
          case "Held":
          case "Slow":
            return waitForLock()
          default:
            return Effect.fail(step)
        }
      })
    }

    const store: SessionStoreShape = {
      create: Effect.fn("JsonlStore.create")(function*(input: unknown) {
        const header = validateSessionHeader(input)
        // J13: a rejected create registers nothing
        if (header instanceof SessionHeaderInvalid) return yield* header
        if (registered.has(header.id)) return yield* new SessionExists({ rule: "J14", sessionId: header.id })
        const existing = yield* statOption(fileOf(header.id).file).pipe(mapFs("create"))
        if (Option.isSome(existing)) return yield* new SessionExists({ rule: "J14", sessionId: header.id })
        registered.set(header.id, header)
        return header
      }),

      // The hot path: untraced (a span costs about a third of the CPU of a single-event append),
      // and in the common case one synchronous step after the pre-checks.
      append: (id, events, options) =>
        appendPrechecked(events, options, { maxEventBytes }, (checked, expectedSeq): Effect.Effect<void, StoreAppendError> => {
          if (suspect.has(id)) {
            return Effect.fail(
              new StoreFailure({
                rule: "S8",
                method: "append",
                cause: "session is suspect after a failed rollback",
                detail: "load the session to re-read it"
              })
            )
          }
          const lines = storageLines(checked.events, checked.lines, pack)
          const count = checked.events.length
          if (!registered.has(id)) return appendExisting(id, expectedSeq, count, toBatch(lines))
          return Effect.flatMap(
            serialised(id, Effect.gen(function*() {
              const header = registered.get(id)
              // materialised by a concurrent fiber meanwhile: an ordinary append below
              if (header === undefined) return false
              if (expectedSeq !== 0) {
                return yield* new AppendConflict({ rule: "C5", sessionId: id, expectedSeq, storedSeq: 0 })
              }
              yield* materialise(id, header, checked.events, lines)
              return true
            })),
            (materialised) => materialised ? Effect.void : appendExisting(id, expectedSeq, count, toBatch(lines))
          )
        }),

      load: Effect.fn("JsonlStore.load")(function*(id: string) {
        const { file, name } = fileOf(id)
        const scanned = yield* provideFs(scanFile(file, {
          location: file,
          expectedId: id,
          expectedName: name,
          maxLineBytes,
          keepEvents: true
        }, "load"))
        if (scanned === undefined) {
          const header = registered.get(id)
          if (header === undefined) return yield* notFound(id)
          return { header, storedVersion: header.version, events: [], tornTail: undefined, revision: "unmaterialised" }
        }
        suspect.delete(id)
        return toLoadResult(scanned)
      }),

      readFrom: (id, fromSeq) => readFromLoad(store.load)(id, fromSeq),

      list: Effect.fn("JsonlStore.list")(function*() {
        const names = yield* fs.readDirectory(root).pipe(
          Effect.catchIf(isNotFound, () => Effect.succeed<Array<string>>([])),
          mapFs("list")
        )
        const headers: Array<SessionHeader> = []
        for (const entry of names) {
          if (!entry.endsWith(".jsonl") || entry.startsWith(".")) continue
          const file = path.join(root, entry)
          const scanned = yield* provideFs(scanFile(file, {
            location: file,
            expectedName: entry.slice(0, -".jsonl".length),
            maxLineBytes,
            keepEvents: false,
            headerOnly: true
          }, "list")).pipe(Effect.either)
          if (scanned._tag === "Left" || scanned.right === undefined) {
            if (scanned._tag === "Left") {
              yield* Effect.logWarning(`JsonlStore.list: skipping ${file}: ${scanned.left.message}`)
            }
            continue
          }
          headers.push(scanned.right.result.header)
        }
        return headers.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      }),

      truncateTornTail: Effect.fn("JsonlStore.truncateTornTail")(function*(id: string, tornTail: TornTail, options: {
        readonly revision: string
      }) {
        const { file } = fileOf(id)
        const exists = yield* statOption(file).pipe(mapFs("truncateTornTail"))
        if (Option.isNone(exists)) return yield* notFound(id)
        return yield* underLock(
          id,
          "truncateTornTail",
          () => Effect.gen(function*() {
            const scanned = yield* rescan(id, "truncateTornTail").pipe(Effect.mapError(asWriteError(file)))
            const now = scanned.result.tornTail
            if (
              scanned.revision !== options.revision || now === undefined || now.fromSeq !== tornTail.fromSeq ||
              now.position !== tornTail.position
            ) {
              // L8: the stored log changed since it was read
              return yield* new AppendConflict({
                rule: "L8",
                sessionId: id,
                expectedSeq: tornTail.fromSeq,
                storedSeq: scanned.result.nextSeq,
                detail: "the stored log changed since it was read"
              })
            }
            cache.delete(id)
            yield* Effect.scoped(Effect.gen(function*() {
              const handle = yield* fs.open(file, { flag: "r+" })
              yield* handle.truncate(now.position)
              yield* handle.sync
            })).pipe(mapFs("truncateTornTail"))
            cache.set(id, { ino: scanned.ino, size: now.position, nextSeq: now.fromSeq })
          })
        )
      }),

      replaceLog: Effect.fn("JsonlStore.replaceLog")(function*(id: string, header: SessionHeader, events: ReadonlyArray<Event>, options: {
        readonly revision: string
        readonly backup: string
      }) {
        const { file, name } = fileOf(id)
        const exists = yield* statOption(file).pipe(mapFs("replaceLog"))
        if (Option.isNone(exists)) return yield* notFound(id)
        return yield* underLock(
          id,
          "replaceLog",
          () => Effect.gen(function*() {
            const current = yield* rescan(id, "replaceLog").pipe(Effect.mapError(asWriteError(file)))
            if (current.revision !== options.revision) {
              // L8: the stored log changed since it was read
              return yield* new AppendConflict({
                rule: "L8",
                sessionId: id,
                expectedSeq: events.length,
                storedSeq: current.result.nextSeq,
                detail: "the stored log changed since it was read"
              })
            }
            cache.delete(id)
            const parts = [
              headerLine(header),
              ...(pack === undefined
                ? events.map((e) => encodeEvent(e) + "\n")
                : storageLines(events, events.map(encodeEvent), pack).map((l) => l + "\n"))
            ]
            const { temp } = yield* writeTemp(name, parts).pipe(mapFs("replaceLog"))
            const swap = Effect.gen(function*() {
              const version = current.result.storedVersion
              // keep the original: <name>.jsonl.v<version>.bak, then .v<version>.1.bak, ...
              for (let n = 0;; n++) {
                const backup = `${file}.v${version}${n === 0 ? "" : `.${n}`}.bak`
                const linked = yield* fs.link(file, backup).pipe(
                  Effect.as(true),
                  Effect.catchIf((e) => isAlreadyExists(e) && n < 1000, () => Effect.succeed(false))
                )
                if (linked) break
              }
              yield* fs.rename(temp, file)
              yield* provideFs(fsyncDirectory(root))
            })
            yield* swap.pipe(Effect.tapError(() => Effect.ignore(fs.remove(temp))), mapFs("replaceLog"))
            const info = yield* statOption(file).pipe(Effect.orElseSucceed(() => Option.none<FileSystem.File.Info>()))
            if (Option.isSome(info)) {
              cache.set(id, { ino: inoOf(info.value), size: Number(info.value.size), nextSeq: events.length })
            }
          })
        )
      })
    }
    return store
  })

/** A JSONL SessionStore layer over `options.root`. */
export const layerJsonlStore = (
  options: JsonlStoreOptions
): Layer.Layer<SessionStore, never, FileSystem.FileSystem | Path.Path> => Layer.effect(SessionStore, makeJsonlStore(options))
