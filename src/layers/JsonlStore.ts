/**
 * The JSONL SessionStore (SPEC §7.4), a thin shell over its pieces: `JsonlFormat` (lines, the
 * scanner), `JsonlReader` (streamed reads), `JsonlAppender` (the synchronous write port),
 * `JsonlLock` (the file's kernel lock), `JsonlFiles` (publish, replace, truncate), `JsonlSessions`
 * (per-session state). `makeJsonlStore` builds them and returns the store; each operation follows.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { AppendConflict, SessionExists, SessionHeaderInvalid, SessionNotFound, StoreCorrupt, StoreFailure } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES } from "../schema/Format.js"
import { type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import {
  appendPrepared,
  type EventSink,
  type LoadError,
  type LoadSummary,
  readFromLoad,
  SessionStore,
  type SessionStoreShape,
  type StoreAppendError,
  type TornTail
} from "../services/SessionStore.js"
import { STREAMED_WRITE_BYTES, SyncFileSystem, type WriteFailure, writeBatch, writeBatchStreamed } from "./JsonlAppender.js"
import * as JsonlFiles from "./JsonlFiles.js"
import { type Batch, batchOf, headerLine, logParts, type PackOptions, packOptions, seqAfterLine, storageLines } from "./JsonlFormat.js"
import { acquireLock, type HeldLock, releaseLock, tryLockFile } from "./JsonlLock.js"
import { type ScanOutcome, scanFile, scanFileEach, toLoadResult } from "./JsonlReader.js"
import * as JsonlSessions from "./JsonlSessions.js"

export { toJsonlText } from "./JsonlFormat.js"
export { readJsonlFile } from "./JsonlReader.js"

/**
 * Options of the JSONL store (SPEC §7.4). The synchronous file calls of appends and of the lock
 * are the `SyncFileSystem` service of the context the store is built in (node:fs and `flock(2)`
 * unless provided: the fault-injection seam of tests).
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
   * Runs of streamed delta chunks as packed rows (SPEC Appendix A): `true` packs appends and
   * rewritten logs, `false` writes every event as its own line. Unset: appends are written
   * verbatim and a rewritten log (`replaceLog`, the v0 upgrade) keeps the layout of the file it
   * replaces (packed when that file holds packed rows).
   */
  readonly packChunks?: boolean
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

/** What a store is built from. */
interface Pieces {
  readonly fs: FileSystem.FileSystem
  readonly sync: SyncFileSystem
  readonly files: JsonlFiles.JsonlFiles
  readonly sessions: JsonlSessions.JsonlSessions
  readonly maxLineBytes: number
  readonly lockTimeoutMs: number
  readonly pack: PackOptions
  /** `packChunks` unset: a rewrite keeps the layout of the file it replaces. */
  readonly keepLayout: boolean
}

/** Build a JSONL store over `options.root`; its in-process session locks live as long as the scope. */
export const makeJsonlStore = (
  options: JsonlStoreOptions
): Effect.Effect<SessionStoreShape, never, FileSystem.FileSystem | Path.Path | Scope.Scope> =>
  Effect.gen(function*() {
    const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES
    const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES
    if (maxLineBytes < maxEventBytes) {
      return yield* Effect.dieMessage(`JsonlStore: maxLineBytes (${maxLineBytes}) must be >= maxEventBytes (${maxEventBytes})`)
    }
    const p: Pieces = {
      fs: yield* FileSystem.FileSystem,
      sync: yield* SyncFileSystem,
      files: yield* JsonlFiles.make(options.root, options.file),
      sessions: yield* JsonlSessions.make,
      maxLineBytes,
      lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_LOCK_TIMEOUT_MS,
      pack: packOptions(options.packChunks, maxLineBytes),
      keepLayout: options.packChunks === undefined
    }
    const store: SessionStoreShape = {
      create: Effect.fn("JsonlStore.create")(function*(input: unknown) {
        const header = validateSessionHeader(input)
        // J13: a rejected create registers nothing
        if (header instanceof SessionHeaderInvalid) return yield* header
        // J14: registered in this store instance, or stored
        const taken = p.sessions.registered(header.id) !== undefined ||
          Option.isSome(yield* p.files.stat(p.files.pathOf(header.id).file).pipe(mapFs("create")))
        if (taken) return yield* new SessionExists({ rule: "J14", sessionId: header.id })
        p.sessions.register(header)
        return header
      }),

      // The hot path: untraced (a span costs about a third of the CPU of a single-event append),
      // and in the common case one synchronous step after the pre-checks.
      append: (id, events, options) =>
        appendPrepared(events, options, { maxEventBytes }, (checked, expectedSeq) => append(p, id, checked, expectedSeq)),

      load: Effect.fn("JsonlStore.load")(function*(id: string) {
        const scanned = yield* scanSession(p, id, "load", true)
        if (scanned === undefined) {
          const header = p.sessions.registered(id)
          if (header === undefined) return yield* notFound(id)
          return { header, storedVersion: header.version, events: [], tornTail: undefined, revision: "unmaterialised" }
        }
        p.sessions.clearSuspect(id)
        hintFromRead(p, id, scanned)
        return toLoadResult(scanned)
      }),

      loadEach: <E, R>(id: string, sink: EventSink<E, R>) =>
        Effect.gen(function*() {
          const { file, options } = scanOptions(p, id, true)
          const scanned = yield* scanFileEach(p.fs, file, options, "loadEach", sink)
          if (scanned === undefined) {
            const header = p.sessions.registered(id)
            if (header === undefined) return yield* notFound(id)
            if (sink.onHeader !== undefined) yield* sink.onHeader(header, header.version)
            const summary: LoadSummary = {
              header,
              storedVersion: header.version,
              tornTail: undefined,
              revision: "unmaterialised",
              count: 0
            }
            return summary
          }
          const { events: _, ...rest } = toLoadResult(scanned)
          return { ...rest, count: scanned.result.nextSeq }
        }).pipe(Effect.withSpan("JsonlStore.loadEach", { attributes: { sessionId: id } })),

      readFrom: (id, fromSeq) => readFromLoad(store.load)(id, fromSeq),

      list: Effect.fn("JsonlStore.list")(function*() {
        return yield* list(p)
      }),

      truncateTornTail: Effect.fn("JsonlStore.truncateTornTail")(
        function*(id: string, tornTail: TornTail, options: { readonly revision: string }) {
          return yield* truncateTornTail(p, id, tornTail, options.revision)
        }
      ),

      replaceLog: Effect.fn("JsonlStore.replaceLog")(
        function*(id: string, header: SessionHeader, events: ReadonlyArray<Event>, options: {
          readonly revision: string
          readonly backup: string
        }) {
          return yield* replaceLog(p, id, header, events, options.revision)
        }
      )
    }
    return store
  })

/**
 * A JSONL SessionStore layer over `options.root`: one `<encoded id>.jsonl` file per session in the
 * interchange format (SPEC §7.4); needs `FileSystem` and `Path` (`NodeContext.layer`).
 *
 * @example
 * ```ts
 * import * as NodeContext from "@effect/platform-node/NodeContext"
 * import * as Layer from "effect/Layer"
 * import { JsonlStore } from "effect-session-log"
 *
 * const store = JsonlStore.layerJsonlStore({ root: "./sessions" }).pipe(Layer.provide(NodeContext.layer))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerJsonlStore = (
  options: JsonlStoreOptions
): Layer.Layer<SessionStore, never, FileSystem.FileSystem | Path.Path> => Layer.scoped(SessionStore, makeJsonlStore(options))

// ---------------------------------------------------------------------------------------------
// Shared steps

const mapFs = (method: string) => <A, R>(effect: Effect.Effect<A, PlatformError, R>) =>
  Effect.mapError(effect, (cause) => new StoreFailure({ method, cause }))

const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

/** L8: the stored log changed since `load` read it. */
const changedSinceRead = (id: string, expectedSeq: number, storedSeq: number) =>
  new AppendConflict({ rule: "L8", sessionId: id, expectedSeq, storedSeq, detail: "the stored log changed since it was read" })

/** Stream the session's file through the scanner with its identity checks (L6); none when absent. */
const scanSession = (p: Pieces, id: string, method: string, keepEvents: boolean) => {
  const { file, options } = scanOptions(p, id, keepEvents)
  return scanFile(p.fs, file, options, method)
}

/** Where a session's file is and how to scan it, with its identity checks (L6). */
const scanOptions = (p: Pieces, id: string, keepEvents: boolean) => {
  const { file, name, named } = p.files.pathOf(id)
  const nameCheck = named ? {} : { expectedName: name }
  return { file, options: { location: file, expectedId: id, ...nameCheck, maxLineBytes: p.maxLineBytes, keepEvents } }
}

/** What is at a session path, when it exists and is not a regular file (a FIFO would block the read). */
const irregularType = (p: Pieces, file: string, method: string) =>
  Effect.map(p.files.stat(file).pipe(mapFs(method)), (info) =>
    Option.isSome(info) && info.value.type !== "File" ? info.value.type : undefined)

/**
 * After a clean read (no torn tail), the read's view of the file as a hint for the first append
 * of this instance: under the lock, that append checks the file is still the one read (identity,
 * size) and re-reads only its last record instead of the whole file (`storedNextSeq`).
 */
const hintFromRead = (p: Pieces, id: string, scanned: ScanOutcome): void => {
  const { lastRecord, nextSeq, tornTail } = scanned.result
  if (tornTail !== undefined || lastRecord === undefined || p.sessions.cached(id) !== undefined) return
  p.sessions.remember(id, { file: p.files.pathOf(id).file, ino: scanned.ino, size: scanned.size, nextSeq, lastRecord })
}

/** Cold-read errors met by a writer: format refusals and header faults become StoreCorrupt. */
const asWriteError = (file: string) => (e: LoadError) =>
  e._tag === "FormatUnsupported" || e._tag === "SessionHeaderInvalid" || e._tag === "UnknownEventType"
    ? new StoreCorrupt({ rule: e.rule, location: file, detail: `cannot write: ${e.message}`, cause: e })
    : e

/** Rescan under the lock: the stored state, a torn tail or a corruption. */
const rescan = (p: Pieces, id: string, method: string) =>
  Effect.flatMap(scanSession(p, id, method, false), (scanned) => scanned === undefined ? notFound(id) : Effect.succeed(scanned))
    .pipe(Effect.mapError(asWriteError(p.files.pathOf(id).file)))

/** Run `body` holding the session's in-process lock and its file's kernel lock (SPEC §7.4.5). */
const underLock = <A, E>(p: Pieces, id: string, method: string, body: (lock: HeldLock) => Effect.Effect<A, E>) =>
  p.sessions.serialised(
    id,
    Effect.acquireUseRelease(
      acquireLock(p.sync, p.files.pathOf(id).file, { sessionId: id, method, lockTimeoutMs: p.lockTimeoutMs }),
      body,
      (lock) => Effect.sync(() => releaseLock(p.sync, lock))
    )
  )

// ---------------------------------------------------------------------------------------------
// append (SPEC §7.4.3)

/** A registered session is materialised by its first append; otherwise the batch goes onto its file. */
const append = (
  p: Pieces,
  id: string,
  checked: { readonly lines: ReadonlyArray<string>; readonly events: ReadonlyArray<Event> },
  expectedSeq: number
): Effect.Effect<void, StoreAppendError> => {
  if (p.sessions.isSuspect(id)) {
    return Effect.fail(
      new StoreFailure({
        rule: "S8",
        method: "append",
        cause: "session is suspect after a failed rollback",
        detail: "load the session to re-read it"
      })
    )
  }
  const lines = storageLines(checked.events, checked.lines, p.pack)
  const count = checked.events.length
  if (p.sessions.registered(id) === undefined) return appendExisting(p, id, expectedSeq, count, batchOf(lines))
  const materialiseOnce = Effect.suspend((): Effect.Effect<boolean, StoreAppendError> => {
    const header = p.sessions.registered(id)
    // materialised by a concurrent fiber meanwhile: an ordinary append below
    if (header === undefined) return Effect.succeed(false)
    if (expectedSeq !== 0) return Effect.fail(new AppendConflict({ rule: "C5", sessionId: id, expectedSeq, storedSeq: 0 }))
    return Effect.as(materialise(p, id, header, count, lines), true)
  })
  return Effect.flatMap(
    p.sessions.serialised(id, materialiseOnce),
    (materialised) => materialised ? Effect.void : appendExisting(p, id, expectedSeq, count, batchOf(lines))
  )
}

/** Materialisation: header and batch to a temporary file, published by a no-overwrite link (J14). */
const materialise = (p: Pieces, id: string, header: SessionHeader, count: number, lines: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { file, name } = p.files.pathOf(id)
    yield* p.files.ensureRoot.pipe(mapFs("append"))
    const temp = yield* p.files.writeTemp(name, [headerLine(header), batchOf(lines).text]).pipe(mapFs("append"))
    const published = yield* p.files.publish(temp.path, file).pipe(mapFs("append"))
    if (!published) return yield* new SessionExists({ rule: "J14", sessionId: id })
    p.sessions.materialised(id)
    yield* p.files.fsyncRoot.pipe(mapFs("append"))
    // what was published, not a later stat (another writer may append once the name exists)
    p.sessions.remember(id, { file, ino: temp.ino, size: temp.size, nextSeq: count })
    yield* p.files.removeQuietly(temp.path)
  })

/** The outcome of the synchronous append step. */
type AppendStep =
  | { readonly _tag: "Done" }
  | { readonly _tag: "Retry" }
  | AppendConflict
  | SessionNotFound
  | StoreFailure

const DONE: AppendStep = { _tag: "Done" }
const RETRY: AppendStep = { _tag: "Retry" }

/**
 * Steps 2–7 on an existing file. When no other operation on the id is in flight in this store
 * instance and its state is cached, one synchronous step needs no in-process lock (nothing can
 * interleave with it); what it cannot finish (a cache miss, a held lock) and large batches
 * (streamed) start again under the locks.
 */
const appendExisting = (p: Pieces, id: string, expectedSeq: number, count: number, batch: Batch) => {
  const underLocks = () => underLock(p, id, "append", (lock) => appendLocked(p, id, expectedSeq, count, batch, lock))
  if (batch.bytes >= STREAMED_WRITE_BYTES) return underLocks()
  return Effect.flatMap(p.sessions.busy(id), (busy) => {
    const cached = p.sessions.cached(id)
    // nothing cached (the first append of this instance), or a read's hint: checked under the lock
    if (busy || cached === undefined || cached.lastRecord !== undefined) return underLocks()
    const step = appendStep(p, id, cached, expectedSeq, count, batch)
    return step._tag === "Done" ? Effect.void : step._tag === "Retry" ? underLocks() : Effect.fail(step)
  })
}

/**
 * The hot path, one synchronous step (it cannot be interrupted half-way): lock the file and, when
 * the cached state matches it, check, write, fsync and release the lock; else `Retry` (a held lock
 * or a changed file).
 */
const appendStep = (
  p: Pieces,
  id: string,
  cached: JsonlSessions.CachedState,
  expectedSeq: number,
  count: number,
  batch: Batch
): AppendStep => {
  const lock = tryLockFile(p.sync, cached.file)
  if (lock === "held") return RETRY
  if (lock === "missing") return notFound(id)
  if (!("fd" in lock)) return new StoreFailure({ method: "append", cause: lock })
  try {
    if (cached.ino !== lock.ino || cached.size !== lock.size) return RETRY
    const conflict = seqConflict(id, expectedSeq, cached.nextSeq)
    if (conflict !== undefined) return conflict
    const after = { file: cached.file, ino: lock.ino, size: lock.size + batch.bytes, nextSeq: expectedSeq + count }
    return settle(p, id, writeBatch(p.sync, lock.fd, cached.file, batch, lock.size), after) ?? DONE
  } finally {
    releaseLock(p.sync, lock)
  }
}

/** Steps 3–7 holding the locks: rescan on a cache miss; large batches are streamed. */
const appendLocked = (p: Pieces, id: string, expectedSeq: number, count: number, batch: Batch, lock: HeldLock) =>
  Effect.gen(function*() {
    const { file } = p.files.pathOf(id)
    const storedSeq = yield* storedNextSeq(p, id, expectedSeq, lock)
    const conflict = seqConflict(id, expectedSeq, storedSeq)
    if (conflict !== undefined) return yield* conflict
    const after = { file, ino: lock.ino, size: lock.size + batch.bytes, nextSeq: expectedSeq + count }
    // the write and its settlement (cache, S7/S8, suspect) in one uninterruptible region: an
    // interruption must not leave a rolled-back or suspect write looking durable
    const failed = batch.bytes >= STREAMED_WRITE_BYTES
      ? yield* Effect.uninterruptible(
        Effect.map(writeBatchStreamed(p.fs, file, batch, lock.size), (failure) => settle(p, id, failure, after))
      )
      : settle(p, id, writeBatch(p.sync, lock.fd, file, batch, lock.size), after)
    if (failed !== undefined) return yield* failed
  })

/** Step 3: the cached next seq when the locked file is the cached one, else a rescan's (L1 on a torn tail). */
const storedNextSeq = (p: Pieces, id: string, expectedSeq: number, lock: HeldLock) =>
  Effect.gen(function*() {
    const cached = p.sessions.cached(id)
    const { file } = p.files.pathOf(id)
    if (cached !== undefined && cached.ino === lock.ino && cached.size === lock.size) {
      if (cached.lastRecord === undefined) return cached.nextSeq
      // a read's hint: the file is the one read; its last record must still end at nextSeq
      if ((yield* lastRecordEnd(p, file, cached.lastRecord, lock.size)) === cached.nextSeq) {
        p.sessions.remember(id, { file, ino: lock.ino, size: lock.size, nextSeq: cached.nextSeq })
        return cached.nextSeq
      }
    }
    const scanned = yield* rescan(p, id, "append")
    const { nextSeq, tornTail } = scanned.result
    if (tornTail !== undefined) {
      // L1: never append onto a torn tail
      return yield* new AppendConflict({
        rule: "L1",
        sessionId: id,
        expectedSeq,
        storedSeq: nextSeq,
        detail: `the stored log has a torn tail at byte ${tornTail.position}; open the session to repair it`
      })
    }
    if (scanned.ino !== lock.ino || scanned.size !== lock.size) {
      // written by something that does not take the lock: refuse rather than guess
      p.sessions.forget(id)
      return yield* new StoreFailure({ method: "append", cause: "the file changed under the lock", detail: file })
    }
    p.sessions.remember(id, { file, ino: lock.ino, size: lock.size, nextSeq })
    return nextSeq
  })

/** The seq after the record at `lastRecord.start` when it is the file's one last line (else undefined). */
const lastRecordEnd = (
  p: Pieces,
  file: string,
  lastRecord: { readonly start: number; readonly seq: number },
  size: number
) =>
  Effect.scoped(Effect.gen(function*() {
    const length = size - lastRecord.start
    if (length <= 0 || length > p.maxLineBytes + 1) return undefined
    const handle = yield* p.fs.open(file, { flag: "r" })
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

/** Step 4 (C5 / C7). */
const seqConflict = (id: string, expectedSeq: number, storedSeq: number): AppendConflict | undefined =>
  expectedSeq === storedSeq ? undefined : new AppendConflict({
    rule: expectedSeq > storedSeq ? "C5" : "C7",
    sessionId: id,
    expectedSeq,
    storedSeq
  })

/**
 * Steps 6–7: the cache updated after a durable write; or S7 after a rolled-back one, or S8 (and
 * the session suspect) when the rollback failed too. The cached state is dropped on failure.
 */
const settle = (
  p: Pieces,
  id: string,
  failure: WriteFailure | undefined,
  after: JsonlSessions.CachedState
): StoreFailure | undefined => {
  if (failure === undefined) {
    p.sessions.remember(id, after)
    return undefined
  }
  p.sessions.forget(id)
  if (failure.rollback === undefined) return new StoreFailure({ rule: "S7", method: "append", cause: failure.write })
  p.sessions.markSuspect(id)
  return new StoreFailure({
    rule: "S8",
    method: "append",
    cause: { write: failure.write, rollback: failure.rollback },
    detail: "write failed and its rollback failed too; the session is suspect until reloaded"
  })
}

// ---------------------------------------------------------------------------------------------
// truncateTornTail, replaceLog, list

/** Under the locks, the torn point and the revision must be what `load` reported (L8). */
const truncateTornTail = (p: Pieces, id: string, tornTail: TornTail, revision: string) =>
  Effect.gen(function*() {
    const { file } = p.files.pathOf(id)
    if (Option.isNone(yield* p.files.stat(file).pipe(mapFs("truncateTornTail")))) return yield* notFound(id)
    yield* underLock(p, id, "truncateTornTail", () =>
      Effect.gen(function*() {
        const scanned = yield* rescan(p, id, "truncateTornTail")
        const now = scanned.result.tornTail
        if (
          scanned.revision !== revision || now === undefined || now.fromSeq !== tornTail.fromSeq ||
          now.position !== tornTail.position
        ) {
          return yield* changedSinceRead(id, tornTail.fromSeq, scanned.result.nextSeq)
        }
        p.sessions.forget(id)
        yield* p.files.truncate(file, now.position).pipe(mapFs("truncateTornTail"))
        p.sessions.remember(id, { file, ino: scanned.ino, size: now.position, nextSeq: now.fromSeq })
      }))
  })

/** Under the locks, if unchanged since `load` (L8): the new log to a temp file, the old kept as backup. */
const replaceLog = (p: Pieces, id: string, header: SessionHeader, events: ReadonlyArray<Event>, revision: string) =>
  Effect.gen(function*() {
    const { file, name } = p.files.pathOf(id)
    if (Option.isNone(yield* p.files.stat(file).pipe(mapFs("replaceLog")))) return yield* notFound(id)
    yield* underLock(p, id, "replaceLog", () =>
      Effect.gen(function*() {
        const current = yield* rescan(p, id, "replaceLog")
        if (current.revision !== revision) return yield* changedSinceRead(id, events.length, current.result.nextSeq)
        p.sessions.forget(id)
        const pack = p.keepLayout && current.result.packedRows > 0 ? packOptions(true, p.maxLineBytes) : p.pack
        const temp = yield* p.files.writeTemp(name, logParts(header, events, pack)).pipe(mapFs("replaceLog"))
        yield* p.files.replace(temp.path, file, current.result.storedVersion).pipe(mapFs("replaceLog"))
        const info = yield* p.files.stat(file).pipe(Effect.orElseSucceed(() => Option.none<FileSystem.File.Info>()))
        if (Option.isSome(info)) {
          const size = Number(info.value.size)
          p.sessions.remember(id, { file, ino: JsonlFiles.inoOf(info.value), size, nextSeq: events.length })
        }
      }))
  })

/** Headers of the session files, first lines only; an unreadable one is skipped with a warning. */
const list = (p: Pieces) =>
  Effect.gen(function*() {
    const headers: Array<SessionHeader> = []
    for (const { file, name, named } of yield* p.files.sessionFiles.pipe(mapFs("list"))) {
      const irregular = yield* Effect.either(irregularType(p, file, "list"))
      if (irregular._tag === "Left" || irregular.right !== undefined) {
        const why = irregular._tag === "Left" ? irregular.left.message : `not a regular file (${irregular.right})`
        yield* Effect.logWarning(`JsonlStore.list: skipping ${file}: ${why}`)
        continue
      }
      const scanned = yield* Effect.either(scanFile(p.fs, file, {
        location: file,
        ...(named ? {} : { expectedName: name }),
        maxLineBytes: p.maxLineBytes,
        keepEvents: false,
        headerOnly: true
      }, "list"))
      if (scanned._tag === "Left") {
        yield* Effect.logWarning(`JsonlStore.list: skipping ${file}: ${scanned.left.message}`)
      } else if (scanned.right !== undefined) {
        headers.push(scanned.right.result.header)
      }
    }
    return headers.sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  })
