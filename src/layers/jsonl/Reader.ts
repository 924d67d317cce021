/**
 * Streamed reads of JSONL session files (SPEC §7.4.4 steps 1 and 6): the bytes `[0, S0)` are fed
 * in chunks through the scanner of the file's layout (`openScan`: lines, or compressed frames),
 * never held as one string, and the read is retried when the file was replaced or shrank
 * meanwhile. Reads take no lock and create nothing. Also the direct file reader of the CLI.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { StoreFailure } from "../../schema/Errors.js"
import { DEFAULT_MAX_LINE_BYTES } from "../../schema/Format.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import type { EventSink, LoadError, LoadResult, LoadSummary } from "../../services/SessionStore.js"
import { inoOf, isNotFound } from "./Files.js"
import { type FrameResume, frameResumeOf, openScan, resumeFrameScan } from "./FrameScanner.js"
import { FRAME_HEADER_BYTES, frameCrc, parseFrameHeader } from "./FrameEncoding.js"
import { type FileScan, type Scanned, Scanner, type ScanOptions, type ScanResume, seqAfterLine } from "./LineScanner.js"

/** Bytes per read: large reads cost far less per byte than 64 KiB ones (lines are still cut and capped as they come). */
const READ_CHUNK = 1_048_576
const READ_ATTEMPTS = 3

/** A scan's outcome plus the file identity and size it was read at. */
export interface ScanOutcome {
  readonly result: Scanned
  readonly ino: string
  readonly size: number
  /** `<ino>:<size>` (SPEC §7.4.4). */
  readonly revision: string
  /** A compressed file ending in a deflate segment: where a later read can go on (`FollowCursor`). */
  readonly frames?: FrameResume
}

/** The outcome of a finished scan, with where a compressed one can go on. */
const outcomeOf = (scanner: FileScan, result: Scanned, ino: string, size: number): ScanOutcome => {
  const frames = result.compressed === true ? frameResumeOf(scanner, result) : undefined
  return { result, ino, size, revision: `${ino}:${size}`, ...(frames === undefined ? {} : { frames }) }
}

const orMissing = <A, R>(effect: Effect.Effect<A, PlatformError, R>) =>
  effect.pipe(
    Effect.map(Option.some),
    Effect.catchIf((e) => isNotFound(e), () => Effect.succeed(Option.none<A>()))
  )

/** Feed `[0, size0)` of the file at `path` through a scanner; none when the file does not exist. */
const readOnce = (fs: FileSystem.FileSystem, path: string, opts: ScanOptions) =>
  orMissing(Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    const info = yield* file.stat
    const size0 = Number(info.size)
    const scanner = openScan(opts)
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
  })))

/**
 * Refuse a path that is there but is no regular file, before it is opened: opening a FIFO blocks
 * until a writer comes, a device or directory is no session log (`StoreFailure`, never read).
 */
const regularFileOnly = (fs: FileSystem.FileSystem, path: string, method: string) =>
  Effect.flatMap(
    orMissing(fs.stat(path)).pipe(Effect.mapError((cause) => new StoreFailure({ method, cause }))),
    (info) =>
      Option.isNone(info) || info.value.type === "File" ? Effect.void : Effect.fail(
        new StoreFailure({
          method,
          cause: `not a regular file (${info.value.type})`,
          detail: `${path} is not a regular file, so it is not read (a FIFO would block)`
        })
      )
  )

/**
 * Stream one file through the scanner: stat, read `[0, S0)` in chunks, re-stat and retry on an
 * identity change or a shrink. `undefined` when the file does not exist; a path that is no
 * regular file is refused unopened.
 */
export const scanFile = (
  fs: FileSystem.FileSystem,
  path: string,
  opts: ScanOptions,
  method: string
): Effect.Effect<ScanOutcome | undefined, LoadError> =>
  Effect.gen(function*() {
    yield* regularFileOnly(fs, path, method)
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const read = yield* readOnce(fs, path, opts)
      if (Option.isNone(read)) return undefined
      const { ino, scanner, size0 } = read.value
      const after = yield* orMissing(fs.stat(path))
      // consistency: the file was replaced or shrank during the read; read again
      if (Option.isNone(after) || inoOf(after.value) !== ino || Number(after.value.size) < size0) continue
      const outcome = scanner.finish()
      if (!("header" in outcome)) return yield* outcome
      return outcomeOf(scanner, outcome, ino, size0)
    }
    return yield* new StoreFailure({ method, cause: "the file kept changing while it was read", detail: path })
  }).pipe(
    Effect.catchTag("SystemError", "BadArgument", (cause: PlatformError) => Effect.fail(new StoreFailure({ method, cause })))
  )

/**
 * A streamed read of one file (`SessionStore.loadEach`): the committed events are handed to
 * `sink` chunk by chunk as they are read and never kept. One descriptor reads `[0, S0)`: a file
 * replaced meanwhile is still read as it was; one shrunk meanwhile (a torn tail truncated) is
 * read up to its new end. `undefined` when the file does not exist; a path that is no regular
 * file is refused unopened.
 */
export const scanFileEach = <E, R>(
  fs: FileSystem.FileSystem,
  path: string,
  opts: ScanOptions,
  method: string,
  sink: EventSink<E, R>
): Effect.Effect<ScanOutcome | undefined, LoadError | E, R> =>
  Effect.gen(function*() {
    const io = <A, R2>(effect: Effect.Effect<A, PlatformError, R2>) =>
      Effect.mapError(effect, (cause) => new StoreFailure({ method, cause }))
    yield* regularFileOnly(fs, path, method)
    const opened = yield* io(orMissing(fs.open(path, { flag: "r" })))
    if (Option.isNone(opened)) return undefined
    const file = opened.value
    const info = yield* io(file.stat)
    const size0 = Number(info.size)
    const scanner = openScan({ ...opts, keepEvents: true })
    const buffer = new Uint8Array(Math.min(READ_CHUNK, Math.max(size0, 1)))
    let offset = 0
    let headerSeen = false
    while (offset < size0 && !scanner.done) {
      const n = Number(yield* io(file.read(buffer)))
      if (n === 0) break
      const take = Math.min(n, size0 - offset)
      scanner.push(buffer.subarray(0, take), offset)
      offset += take
      if (!headerSeen && sink.onHeader !== undefined) {
        const seen = scanner.sessionHeader
        if (seen !== undefined) {
          headerSeen = true
          yield* sink.onHeader(seen.header, seen.storedVersion)
        }
      }
      const events = scanner.drain()
      if (events.length > 0) yield* sink.onEvents(events)
    }
    const outcome = scanner.finish()
    if (!("header" in outcome)) return yield* outcome
    if (!headerSeen && sink.onHeader !== undefined) yield* sink.onHeader(outcome.header, outcome.storedVersion)
    const rest = scanner.drain()
    if (rest.length > 0) yield* sink.onEvents(rest)
    return { result: outcome, ino: inoOf(info), size: offset, revision: `${inoOf(info)}:${offset}` }
  }).pipe(Effect.scoped)

/**
 * `scanFileEach` from a checkpoint of an earlier clean whole read of the plain file at `path`
 * (`SessionStore.loadEach` from a seq): only the bytes from `opts.resume.offset` are read and
 * classified, with the header and next seq of the earlier scan; the events are handed to `sink`
 * from the `skip`-th on. `"changed"` (nothing handed over) when the file is not the one scanned
 * (`ino`: renamed in), is gone, or is shorter than `size` (the size that read found): the caller
 * reads from the start instead.
 */
export const scanFileEachFrom = <E, R>(
  fs: FileSystem.FileSystem,
  path: string,
  at: { readonly ino: string; readonly size: number; readonly skip: number },
  opts: ScanOptions & { readonly resume: ScanResume },
  method: string,
  sink: EventSink<E, R>
): Effect.Effect<ScanOutcome | "changed", LoadError | E, R> =>
  Effect.gen(function*() {
    const io = <A, R2>(effect: Effect.Effect<A, PlatformError, R2>) =>
      Effect.mapError(effect, (cause) => new StoreFailure({ method, cause }))
    yield* regularFileOnly(fs, path, method)
    const opened = yield* io(orMissing(fs.open(path, { flag: "r" })))
    if (Option.isNone(opened)) return "changed" as const
    const file = opened.value
    const info = yield* io(file.stat)
    const size0 = Number(info.size)
    if (inoOf(info) !== at.ino || size0 < at.size || size0 < opts.resume.offset) return "changed" as const
    const scanner = new Scanner({ ...opts, keepEvents: true })
    const buffer = new Uint8Array(Math.min(READ_CHUNK, Math.max(size0 - opts.resume.offset, 1)))
    yield* io(file.seek(opts.resume.offset, "start"))
    if (sink.onHeader !== undefined) yield* sink.onHeader(opts.resume.header, opts.resume.storedVersion)
    let skip = at.skip
    const hand = (events: Array<unknown>) => {
      const n = Math.min(skip, events.length)
      skip -= n
      return n === events.length ? Effect.void : sink.onEvents(n === 0 ? events : events.slice(n))
    }
    let offset = opts.resume.offset
    while (offset < size0 && !scanner.done) {
      const n = Number(yield* io(file.read(buffer)))
      if (n === 0) break
      const take = Math.min(n, size0 - offset)
      scanner.push(buffer.subarray(0, take), offset)
      offset += take
      yield* hand(scanner.drain())
    }
    const outcome = scanner.finish()
    if (!("header" in outcome)) return yield* outcome
    yield* hand(scanner.drain())
    return { result: outcome, ino: inoOf(info), size: offset, revision: `${inoOf(info)}:${offset}` }
  }).pipe(Effect.scoped)

/**
 * Continue a clean scan of the plain file at `path` from `opts.resume.offset` (a follower's next
 * read, `FollowCursor`): only the bytes `[offset, S0)` are read and classified, with the header
 * and next seq of the earlier scan. With `frames`, the file is compressed and the scan goes on
 * from `frames.offset` with that state (`opts.resume` is then `frames.lines`). `undefined` when
 * the file is not the one scanned (`ino`), is gone, or is shorter than `offset`: the caller reads
 * the whole file instead.
 */
export const scanFileFrom = (
  fs: FileSystem.FileSystem,
  path: string,
  ino: string,
  opts: ScanOptions & { readonly resume: ScanResume },
  method: string,
  frames?: FrameResume
): Effect.Effect<ScanOutcome | undefined, LoadError> =>
  Effect.gen(function*() {
    const from = frames === undefined ? opts.resume.offset : frames.offset
    const read = yield* orMissing(Effect.scoped(Effect.gen(function*() {
      const file = yield* fs.open(path, { flag: "r" })
      const info = yield* file.stat
      const size0 = Number(info.size)
      if (inoOf(info) !== ino || size0 < from) return undefined
      const scanner = frames === undefined ? new Scanner(opts) : resumeFrameScan(opts, frames)
      const buffer = new Uint8Array(Math.min(READ_CHUNK, Math.max(size0 - from, 1)))
      yield* file.seek(from, "start")
      let offset = from
      while (offset < size0 && !scanner.done) {
        const n = Number(yield* file.read(buffer))
        if (n === 0) break
        const take = Math.min(n, size0 - offset)
        scanner.push(buffer.subarray(0, take), offset)
        offset += take
      }
      return { scanner, size0 }
    })))
    if (Option.isNone(read) || read.value === undefined) return undefined
    const { scanner, size0 } = read.value
    // a file that shrank during the read (a torn tail truncated) is read again whole
    const after = yield* orMissing(fs.stat(path))
    if (Option.isNone(after) || inoOf(after.value) !== ino || Number(after.value.size) < size0) return undefined
    const outcome = scanner.finish()
    if (!("header" in outcome)) return yield* outcome
    return outcomeOf(scanner, outcome, ino, size0)
  }).pipe(
    Effect.catchTag("SystemError", "BadArgument", (cause: PlatformError) => Effect.fail(new StoreFailure({ method, cause })))
  )

/** The load result of a scan. */
export const toLoadResult = (s: ScanOutcome): LoadResult => ({
  header: s.result.header,
  storedVersion: s.result.storedVersion,
  events: s.result.events,
  tornTail: s.result.tornTail,
  ...(s.result.tornTailExtent === undefined ? {} : { tornTailExtent: s.result.tornTailExtent }),
  revision: s.revision
})

/** Read one JSONL session file directly (CLI path reads: no root, no file-name check; the id is the header's). */
export const readJsonlFile = (
  path: string,
  options?: { readonly expectedId?: string; readonly maxLineBytes?: number }
): Effect.Effect<LoadResult, LoadError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const scanned = yield* scanFile(fs, path, {
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

/** `readJsonlFile` streamed: the events are handed to `sink` as they are read (`SessionStore.loadEach`). */
export const readJsonlFileEach = <E, R>(
  path: string,
  sink: EventSink<E, R>
): Effect.Effect<LoadSummary, LoadError | E, R | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const scanned = yield* scanFileEach(fs, path, { location: path, maxLineBytes: DEFAULT_MAX_LINE_BYTES, keepEvents: true }, "readJsonlFile", sink)
    if (scanned === undefined) {
      return yield* new StoreFailure({ method: "readJsonlFile", cause: "no such file", detail: path })
    }
    const { events: _, ...summary } = toLoadResult(scanned)
    return { ...summary, count: scanned.result.nextSeq }
  })

/**
 * The header of the `.jsonl` file at `path`, its first line only (nothing else is read), or
 * `undefined` when there is no such file; the header's refusals (K4–K6, L5–L7) as for a read.
 */
export const readJsonlFileHeader = (path: string): Effect.Effect<SessionHeader | undefined, LoadError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const scanned = yield* scanFile(fs, path, {
      location: path,
      maxLineBytes: DEFAULT_MAX_LINE_BYTES,
      keepEvents: false,
      headerOnly: true
    }, "readJsonlFile")
    return scanned?.result.header
  })

/**
 * The seq after the record at `lastRecord.start` of the file at `file` (`size` bytes) when it is
 * the file's one complete last line and a committed record from `lastRecord.seq`; else
 * `undefined` (a writer then rescans). Reads only that line.
 */
export const lastRecordEnd = (
  fs: FileSystem.FileSystem,
  file: string,
  lastRecord: { readonly start: number; readonly seq: number },
  size: number,
  maxLineBytes: number
): Effect.Effect<number | undefined> =>
  Effect.scoped(Effect.gen(function*() {
    const length = size - lastRecord.start
    if (length <= 0 || length > maxLineBytes + 1) return undefined
    const handle = yield* fs.open(file, { flag: "r" })
    yield* handle.seek(lastRecord.start, "start")
    const bytes = new Uint8Array(length)
    let read = 0
    while (read < length) {
      const n = Number(yield* handle.read(bytes.subarray(read)))
      if (n === 0) return undefined
      read += n
    }
    return seqAfterLine(bytes, lastRecord.seq)
  })).pipe(Effect.orElseSucceed(() => undefined))

/**
 * True when the file at `file` (`size` bytes) still ends with the frame read at `lastFrame.start`:
 * the same header (mark, flags, lengths and CRC) and a payload that still matches its CRC,
 * ending at `size`. Reads only that frame.
 */
export const lastFrameEnd = (
  fs: FileSystem.FileSystem,
  file: string,
  lastFrame: { readonly start: number; readonly header: Uint8Array },
  size: number
): Effect.Effect<boolean> =>
  Effect.scoped(Effect.gen(function*() {
    const header = parseFrameHeader(lastFrame.header)
    if (header === undefined || lastFrame.start + FRAME_HEADER_BYTES + header.payloadBytes !== size) return false
    const handle = yield* fs.open(file, { flag: "r" })
    yield* handle.seek(lastFrame.start, "start")
    const bytes = new Uint8Array(FRAME_HEADER_BYTES + header.payloadBytes)
    let read = 0
    while (read < bytes.length) {
      const n = Number(yield* handle.read(bytes.subarray(read)))
      if (n === 0) return false
      read += n
    }
    const head = bytes.subarray(0, FRAME_HEADER_BYTES)
    return head.every((b, i) => b === lastFrame.header[i]) && frameCrc(head, bytes.subarray(FRAME_HEADER_BYTES)) === header.crc
  })).pipe(Effect.orElseSucceed(() => false))
