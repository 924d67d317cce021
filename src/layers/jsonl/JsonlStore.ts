/**
 * The JSONL SessionStore (SPEC §7.4), a thin shell over its pieces: `LineEncoding` (lines as
 * written), `LineScanner` (reading them), `FrameEncoding` / `FrameScanner` /
 * `Compression` (the compressed layout), `Reader` (whole and streamed reads),
 * `Append` (the append), `SyncFileSystem` (the synchronous write port), `SessionLock` (the
 * kernel locks), `Files` (names, publish, replace, truncate), `SessionCache` (per-session
 * state), `StoreContext` (the steps they share). `make` builds them and returns the
 * store; truncation, replacement and `list` follow.
 *
 * @since 0.1.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import {
  type EventSink,
  lastOf,
  type LoadSummary,
  make as makeSessionStore,
  type SessionEntry,
  SessionStore,
  type SessionStoreShape,
  type TornTail
} from "../../services/SessionStore.js"
import { lastRecordOf, UNDECIDED } from "./LastRecord.js"
import { SyncFileSystem } from "./SyncFileSystem.js"
import { makeSegmentEncoders } from "./Compression.js"
import * as JsonlFiles from "./Files.js"
import { headerLine, logLines, logParts, packOptions } from "./LineEncoding.js"
import { encodeFrames, frameTexts, MAGIC } from "./FrameEncoding.js"
import { type ScanOutcome, scanFile, scanFileEach, scanFileEachFrom, toLoadResult } from "./Reader.js"
import type { ScanCheckpoint, ScanResume } from "./LineScanner.js"
import * as JsonlSessions from "./SessionCache.js"
import { append } from "./Append.js"
import * as Watch from "./Watch.js"
import { checkpointedReadFrom, followReader } from "./FollowCursor.js"
import { changedSinceRead, hintFromRead, mapFs, type Pieces, rescan, scanOptions, underLock } from "./StoreContext.js"

export type {
  /**
   * One session of the store kept in a file of any name (SPEC §12: a `.jsonl` path given to the CLI).
   *
   * @since 0.1.0
   * @category models
   */
  NamedFile
} from "./Files.js"
export {
  /**
   * The JSONL header record line (line 1), newline included.
   *
   * @since 0.1.0
   * @category utils
   */
  headerLine,
  /**
   * Serialise header + events as JSONL text (export); unpacked unless `packChunks` is set.
   *
   * @since 0.1.0
   * @category utils
   */
  toJsonlText
} from "./LineEncoding.js"
export {
  /**
   * Read one JSONL session file directly (CLI path reads: no root, no file-name check; the id is the header's).
   *
   * @since 0.1.0
   * @category utils
   */
  readJsonlFile,
  /**
   * `readJsonlFile` streamed: the events are handed to `sink` as they are read (`SessionStore.loadEach`).
   *
   * @since 0.1.0
   * @category utils
   */
  readJsonlFileEach,
  /**
   * The header of the `.jsonl` file at `path`, its first line only (nothing else is read), or
   * `undefined` when there is no such file; the header's refusals (K4–K6, L5–L7) as for a read.
   *
   * @since 0.2.0
   * @category utils
   */
  readJsonlFileHeader
} from "./Reader.js"

/**
 * Options of the JSONL store (SPEC §7.4). The synchronous file calls of appends and of the lock
 * are the `SyncFileSystem` service of the context the store is built in (node:fs and `flock(2)`
 * unless provided: the fault-injection seam of tests).
 *
 * @since 0.1.0
 * @category models
 */
export interface JsonlStoreOptions {
  readonly root: string
  readonly maxLineBytes?: number
  /**
   * How long a writer waits for the session file's lock held by another writer before failing
   * with `StoreFailure` (S6); default 5,000 ms.
   */
  readonly lockTimeoutMs?: number
  readonly maxEventBytes?: number
  /**
   * Runs of at least 3 streamed delta chunks within one append batch are written as one packed
   * row (SPEC Appendix A), in appends and rewritten logs: on unless `false`, which writes every
   * event as its own line. Files of either layout are read and appended alike.
   */
  readonly packChunks?: boolean
  /**
   * New sessions are written in the compressed layout, `<encode(id)>.jsonlz` (docs/formats.md
   * "Compressed JSONL"): brotli frames of the lines a plain file would hold. Existing sessions keep the
   * layout of their file; reads and `list` see both. Default `false`.
   */
  readonly compress?: boolean
  /**
   * One session kept in a file of any name in `root` (the CLI's `.jsonl` path, SPEC §12): session
   * `sessionId` is the file at `path` instead of `<root>/<encode(id)>.jsonl`, which it shadows.
   * Its reads skip the file-name check (the header id must still be `sessionId`, L6); its lock,
   * torn-tail truncation and `replaceLog` (the backup beside it) act on that file. Other ids (a
   * fork's child) live in `root` as usual. A `path` outside `root` is a defect.
   */
  readonly file?: JsonlFiles.NamedFile
}

const DEFAULT_LOCK_TIMEOUT_MS = 5_000

/**
 * Build a JSONL store over `options.root`; its in-process session locks live as long as the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: JsonlStoreOptions
): Effect.Effect<SessionStoreShape, never, FileSystem.FileSystem | Path.Path | Scope.Scope> =>
  Effect.gen(function*() {
    const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES
    const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES
    if (maxLineBytes < maxEventBytes) {
      return yield* Effect.dieMessage(`JsonlStore: maxLineBytes (${maxLineBytes}) must be >= maxEventBytes (${maxEventBytes})`)
    }
    const path = yield* Path.Path
    const p: Pieces = {
      fs: yield* FileSystem.FileSystem,
      sync: yield* SyncFileSystem,
      files: yield* JsonlFiles.make(options.root, options.file),
      sessions: yield* JsonlSessions.make,
      maxLineBytes,
      lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
      pack: packOptions(options.packChunks, maxLineBytes),
      compress: options.compress === true,
      segments: yield* makeSegmentEncoders
    }
    const checkpoints = makeCheckpoints()
    const store = makeSessionStore({
      name: "JsonlStore",
      registry: p.sessions.registry,
      maxEventBytes,
      // J14: stored under either layout's name
      isStored: (id) =>
        Effect.reduce(p.files.candidates(id), false, (taken, candidate) =>
          taken ? Effect.succeed(true) : Effect.map(p.files.stat(candidate.file).pipe(mapFs("create")), Option.isSome)),
      // The hot path: untraced (a span costs about a third of the CPU of a single-event append),
      // and in the common case one synchronous step after the pre-checks.
      appendBatch: (id, batch, expectedSeq) => append(p, id, batch, expectedSeq),
      load: (id) =>
        Effect.gen(function*() {
          const found = yield* scanOptions(p, id, "load", true)
          const scanned = found === undefined
            ? undefined
            : yield* checkpoints.track(found.file, true, scanFile(p.fs, found.file, checkpoints.options(found.options), "load"))
          if (found === undefined || scanned === undefined) return undefined
          p.sessions.clearSuspect(id)
          hintFromRead(p, id, found.file, scanned)
          return toLoadResult(scanned)
        }),
      loadEach: <E, R>(id: string, sink: EventSink<E, R>) =>
        Effect.gen(function*() {
          const found = yield* scanOptions(p, id, "loadEach", true)
          const scanned = found === undefined
            ? undefined
            : yield* checkpoints.track(found.file, true, scanFileEach(p.fs, found.file, checkpoints.options(found.options), "loadEach", sink))
          if (scanned === undefined) return undefined
          const { events: _, ...rest } = toLoadResult(scanned)
          const summary: LoadSummary = { ...rest, count: scanned.result.nextSeq }
          return summary
        }),
      // from the checkpoint at or before fromSeq of an earlier whole read of the unchanged file
      loadEachFrom: <E, R>(id: string, sink: EventSink<E, R>, fromSeq: number) =>
        Effect.gen(function*() {
          const found = yield* scanOptions(p, id, "loadEach", true)
          if (found === undefined) return undefined
          const at = p.sessions.isSuspect(id) ? undefined : checkpoints.at(found.file, fromSeq)
          if (at === undefined) return "whole" as const
          const scanned = yield* checkpoints.track(
            found.file,
            false,
            scanFileEachFrom(p.fs, found.file, at.at, { ...found.options, resume: at.resume }, "loadEach", sink)
          )
          if (scanned === "changed") return "whole" as const
          const { events: _, ...rest } = toLoadResult(scanned)
          const summary: LoadSummary = { ...rest, count: scanned.result.nextSeq }
          return summary
        }),
      list: () => Effect.map(listed(p, "list"), (files) => files.map((f) => f.header)),
      listEntries: () => listEntries(p),
      wakeups: (id) => Watch.wakeups(p.files.candidates(id).map((c) => c.file)),
      followReader: followReader(p),
      readFrom: checkpointedReadFrom(p),
      truncateTornTail: (id, tornTail, { revision }) => truncateTornTail(p, id, tornTail, revision),
      replaceLog: (id, header, events, { revision }) => replaceLog(p, id, header, events, revision),
      discard: (id, { revision }) => discard(p, path, id, revision)
    })
    // the store-wide wake-ups (list --watch): a watch of the directory holding the session files
    return { ...store, changes: () => Watch.storeWakeups(options.root) }
  })

/** How many seqs apart a whole read records the checkpoints a read from a seq starts at. */
const CHECKPOINT_EVERY = 4_096

/** How many session files keep checkpoints (those read whole last). */
const CHECKPOINT_FILES = 256

/**
 * The checkpoints of one store instance (`loadEach` from a seq): per plain session file, those a
 * whole read that succeeded recorded (`ScanCheckpoint`: byte offset, seq, lines before it; one
 * every `CHECKPOINT_EVERY` seqs; for the last `CHECKPOINT_FILES` files read whole), with the
 * file's identity and the size that read found. Any other outcome of a read of the file (a
 * failure, a version-0 or compressed file, a read from a checkpoint that found it changed) drops
 * them; a read from a checkpoint keeps them.
 */
const LOAD_ERROR_TAGS = new Set([
  "SessionNotFound",
  "StoreCorrupt",
  "FormatUnsupported",
  "SessionHeaderInvalid",
  "UnknownEventType",
  "StoreFailure"
])
const isLoadError = (e: unknown) =>
  typeof e === "object" && e !== null && LOAD_ERROR_TAGS.has((e as { readonly _tag?: unknown })._tag as string)

const makeCheckpoints = () => {
  interface Kept {
    readonly ino: string
    readonly size: number
    readonly header: SessionHeader
    readonly storedVersion: number
    readonly points: ReadonlyArray<ScanCheckpoint>
  }
  const kept = new Map<string, Kept>()
  return {
    options: <O extends object>(options: O): O & { readonly checkpointEvery: number } => ({
      ...options,
      checkpointEvery: CHECKPOINT_EVERY
    }),
    /**
     * The outcome of a read of `file` (`whole`: from the start): a whole read's checkpoints kept;
     * a store's verdict against the file (a read error, a changed file, another version or
     * layout) drops them. A read ended by its sink or interrupted changes nothing.
     */
    track: <A extends ScanOutcome | "changed" | undefined, E, R>(file: string, whole: boolean, read: Effect.Effect<A, E, R>) =>
      Effect.onExit(read, (exit) =>
        Effect.sync(() => {
          if (exit._tag === "Failure") {
            const failure = Cause.failureOption(exit.cause)
            if (Option.isSome(failure) && isLoadError(failure.value)) kept.delete(file)
            return
          }
          if (exit.value === undefined || exit.value === "changed") return void kept.delete(file)
          const { ino, result, size } = exit.value as ScanOutcome
          if (result.storedVersion !== SESSION_FORMAT_VERSION || result.compressed === true) return void kept.delete(file)
          if (!whole) return
          if (result.checkpoints === undefined) return void kept.delete(file)
          kept.delete(file)
          kept.set(file, { ino, size, header: result.header, storedVersion: result.storedVersion, points: result.checkpoints })
          // the files read last keep theirs
          if (kept.size > CHECKPOINT_FILES) kept.delete(kept.keys().next().value!)
        })),
    /** The checkpoint at or before `fromSeq` of `file`, as a scan resumes from it. */
    at: (file: string, fromSeq: number) => {
      const k = kept.get(file)
      if (k === undefined) return undefined
      let lo = 0
      let hi = k.points.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (k.points[mid].nextSeq <= fromSeq) lo = mid + 1
        else hi = mid
      }
      if (lo === 0) return undefined
      const point = k.points[lo - 1]
      const resume: ScanResume = { header: k.header, storedVersion: k.storedVersion, ...point }
      return { resume, at: { ino: k.ino, size: k.size, skip: fromSeq - point.nextSeq } }
    }
  }
}

/**
 * A JSONL SessionStore layer over `options.root`: one `<encoded id>.jsonl` file per session in the
 * interchange format (SPEC §7.4), or `<encoded id>.jsonlz` in the compressed layout (`compress`);
 * needs `FileSystem` and `Path` (`NodeContext.layer`).
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import * as Layer from "effect/Layer"
 * import { JsonlStore } from "effect-session-log"
 *
 * const store = JsonlStore.layer({ root: "./sessions" }).pipe(Layer.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: JsonlStoreOptions
): Layer.Layer<SessionStore, never, FileSystem.FileSystem | Path.Path> => Layer.scoped(SessionStore, make(options))

// ---------------------------------------------------------------------------------------------
// truncateTornTail, replaceLog, list

/** Under the locks, the torn point and the revision must be what `load` reported (L8). */
const truncateTornTail = (p: Pieces, id: string, tornTail: TornTail, revision: string) =>
  Effect.gen(function*() {
    yield* underLock(p, id, "truncateTornTail", (_lock, file) =>
      Effect.gen(function*() {
        const scanned = yield* rescan(p, id, file, "truncateTornTail")
        const now = scanned.result.tornTail
        if (
          scanned.revision !== revision || now === undefined || now.fromSeq !== tornTail.fromSeq ||
          now.position !== tornTail.position
        ) {
          return yield* changedSinceRead(id, tornTail.fromSeq, scanned.result.nextSeq)
        }
        p.sessions.forget(id)
        p.segments.drop(id)
        yield* p.files.truncate(file, now.position).pipe(mapFs("truncateTornTail"))
        const state = { file, ino: scanned.ino, size: now.position, nextSeq: now.fromSeq }
        p.sessions.remember(id, scanned.result.compressed === true ? { ...state, compressed: true } : state)
      }))
  })

/**
 * Under the locks, if unchanged since `load` (L8): the session's file removed (its directory
 * fsynced, so the removal is durable), no backup kept.
 */
const discard = (p: Pieces, path: Path.Path, id: string, revision: string) =>
  underLock(p, id, "discard", (_lock, file) =>
    Effect.gen(function*() {
      const current = yield* rescan(p, id, file, "discard")
      if (current.revision !== revision) return yield* changedSinceRead(id, 0, current.result.nextSeq)
      p.sessions.forget(id)
      p.segments.drop(id)
      yield* p.fs.remove(file).pipe(mapFs("discard"))
      yield* JsonlFiles.fsyncDirectory(p.fs, path.dirname(file)).pipe(mapFs("discard"))
    }))

/**
 * Under the locks, if unchanged since `load` (L8): the new log to a temp file in the layout of
 * the file it replaces, the old kept as backup.
 */
const replaceLog = (p: Pieces, id: string, header: SessionHeader, events: ReadonlyArray<Event>, revision: string) =>
  Effect.gen(function*() {
    yield* underLock(p, id, "replaceLog", (_lock, file) =>
      Effect.gen(function*() {
        const current = yield* rescan(p, id, file, "replaceLog")
        if (current.revision !== revision) return yield* changedSinceRead(id, events.length, current.result.nextSeq)
        p.sessions.forget(id)
        p.segments.drop(id)
        const compressed = current.result.compressed === true
        const parts = compressed ? yield* compressedLog(header, events, p) : logParts(header, events, p.pack)
        const { name } = p.files.candidates(id).find((c) => c.file === file) ?? p.files.pathOf(id)
        // a session file that is a symbolic link is rewritten where it points (the link stays)
        const target = yield* p.files.realFile(file).pipe(mapFs("replaceLog"))
        // the temporary file goes whatever happens once it exists, interruption included
        yield* p.files.withTemp(name, parts, (temp) => p.files.replace(temp.path, target, current.result.storedVersion), target)
          .pipe(mapFs("replaceLog"))
        const info = yield* p.files.stat(file).pipe(Effect.orElseSucceed(() => Option.none<FileSystem.File.Info>()))
        if (Option.isSome(info)) {
          const state = { file, ino: JsonlFiles.inoOf(info.value), size: Number(info.value.size), nextSeq: events.length }
          p.sessions.remember(id, compressed ? { ...state, compressed: true } : state)
        }
      }))
  })

/** A whole log in the compressed layout: the magic, the header frame, the events' frames. */
const compressedLog = (header: SessionHeader, events: ReadonlyArray<Event>, p: Pieces) =>
  Effect.gen(function*() {
    const first = { text: Buffer.from(headerLine(header), "utf8"), turnEnd: false }
    const encoded = yield* encodeFrames(undefined, [first, ...frameTexts(logLines(events, p.pack))]).pipe(
      Effect.mapError((cause) => new StoreFailure({ method: "replaceLog", cause, detail: "compression failed" }))
    )
    encoded.segment?.encoder.close()
    return [MAGIC, encoded.bytes]
  })

/**
 * Headers of the session files (any order: `SessionStore.make` sorts them), first lines only; an unreadable one (a FIFO or other non-regular
 * file too: never opened) is skipped with a warning.
 */
const listed = (p: Pieces, method: string) =>
  Effect.gen(function*() {
    const headers: Array<{ readonly file: string; readonly named: boolean; readonly name: string; readonly header: SessionHeader }> = []
    const files = yield* p.files.sessionFiles.pipe(mapFs(method))
    const seen = new Map<string, number>()
    for (const { name, named } of files) if (named !== true) seen.set(name, (seen.get(name) ?? 0) + 1)
    for (const { file, name, named } of files) {
      if (named !== true && seen.get(name)! > 1) {
        // J14: one session under both names (`.jsonl` and `.jsonlz`): reads refuse it too
        yield* Effect.logWarning(`JsonlStore.${method}: skipping ${file}: the session is stored under two names`)
        continue
      }
      const scanned = yield* Effect.either(scanFile(p.fs, file, {
        location: file,
        ...(named ? {} : { expectedName: name }),
        maxLineBytes: p.maxLineBytes,
        keepEvents: false,
        headerOnly: true
      }, method))
      if (scanned._tag === "Left") {
        yield* Effect.logWarning(`JsonlStore.${method}: skipping ${file}: ${scanned.left.message}`)
      } else if (scanned.right !== undefined) {
        headers.push({ file, named: named === true, name, header: scanned.right.result.header })
      }
    }
    return headers
  })

/**
 * The sessions with their last event (`SessionStore.listEntries`): of a plain file, its last
 * complete line (`LastRecord`, a few KiB read from its end); a compressed file, or one whose last
 * line is not a committed-looking record, is read whole (streamed, keeping only the last event).
 * A session that cannot be read is left out with a warning.
 */
const listEntries = (p: Pieces) =>
  Effect.gen(function*() {
    const entries: Array<SessionEntry> = []
    for (const { file, header, name, named } of yield* listed(p, "listEntries")) {
      const last = yield* lastRecordOf(p.fs, file, p.maxLineBytes)
      if (last !== UNDECIDED) {
        entries.push({ header, last })
        continue
      }
      let events: ReadonlyArray<unknown> = []
      const read = yield* Effect.either(scanFileEach(p.fs, file, {
        location: file,
        ...(named ? {} : { expectedName: name }),
        maxLineBytes: p.maxLineBytes,
        keepEvents: false
      }, "listEntries", { onEvents: (chunk) => Effect.sync(() => void (events = chunk)) }))
      if (read._tag === "Left") yield* Effect.logWarning(`JsonlStore.listEntries: skipping ${file}: ${read.left.message}`)
      else if (read.right !== undefined) entries.push({ header, last: lastOf(events) })
    }
    return entries
  })

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `JsonlStore.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makeJsonlStore = make

/**
 * `layer` under its earlier name.
 *
 * @deprecated since 0.2.0: use `JsonlStore.layer`.
 * @since 0.1.0
 * @category layers
 */
export const layerJsonlStore = layer
