/**
 * The JSONL store's append (SPEC §7.4.3): a registered session materialised by its first batch
 * (temporary file, no-overwrite link under the id's publication lock), then batches onto the file — for a
 * plain file in the common case one synchronous step (lock, check the cached state, write, fsync,
 * release), else under the locks with the stored next seq from the cache, the read's hint (one
 * line or frame checked) or a rescan; a compressed file's batch is encoded into frames continuing
 * its segment — in the common case in the same synchronous step. S7/S8 on a failed write.
 */

import * as Effect from "effect/Effect"
import { AppendConflict, SessionExists, SessionNotFound, StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { type SessionHeader } from "../../schema/SessionHeader.js"
import { type StoreAppendError } from "../../services/SessionStore.js"
import { STREAMED_WRITE_BYTES, type WriteFailure, writeBatch, writeBatchStreamed } from "./SyncFileSystem.js"
import { type CodecFailure, WriterCodec } from "./Compression.js"
import { type Batch, batchOf, headerLine, storageLines } from "./LineEncoding.js"
import {
  type EncodedFrames,
  encodeFrames,
  encodeFramesSync,
  type FrameText,
  frameTexts,
  MAGIC,
  type OpenSegment
} from "./FrameEncoding.js"
import { type HeldLock, releaseLock, tryLockFile, withPublishLock } from "./SessionLock.js"
import { lastFrameEnd, lastRecordEnd } from "./Reader.js"
import * as JsonlSessions from "./SessionCache.js"
import { mapFs, mapFsAmong, notFound, type Pieces, rescan, underLock } from "./StoreContext.js"


/** A registered session is materialised by its first append; otherwise the batch goes onto its file. */
export const append = (
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
  if (p.sessions.registry.get(id) === undefined) return appendExisting(p, id, expectedSeq, count, lines)
  const materialiseOnce = Effect.suspend((): Effect.Effect<boolean, StoreAppendError> => {
    const header = p.sessions.registry.get(id)
    // materialised by a concurrent fiber meanwhile: an ordinary append below
    if (header === undefined) return Effect.succeed(false)
    if (expectedSeq !== 0) return Effect.fail(new AppendConflict({ rule: "C5", sessionId: id, expectedSeq, storedSeq: 0 }))
    return Effect.as(materialise(p, id, header, count, lines), true)
  })
  return Effect.flatMap(
    p.sessions.serialised(id, materialiseOnce),
    (materialised) => materialised ? Effect.void : appendExisting(p, id, expectedSeq, count, lines)
  )
}

/** A codec failure of an append: nothing was written. */
const codecFailed = (cause: CodecFailure) => new StoreFailure({ method: "append", cause, detail: "compression failed" })

/**
 * Materialisation: header and batch to a temporary file, published by a no-overwrite link (J14)
 * under the id's publication lock, refused too when the session's name in the other layout exists. In the
 * compressed layout the header line is the first frame alone, starting the first segment.
 */
const materialise = (p: Pieces, id: string, header: SessionHeader, count: number, lines: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const { file, name, named } = p.files.pathOf(id, p.compress)
    const rival = named === true ? undefined : p.files.pathOf(id, !p.compress).file
    yield* p.files.ensureRoot.pipe(mapFs("append"))
    let segment: OpenSegment | undefined
    let parts: ReadonlyArray<string | Uint8Array>
    if (p.compress) {
      const first: FrameText = { text: Buffer.from(headerLine(header), "utf8"), turnEnd: false }
      const encoded = yield* Effect.mapError(encodeFrames(undefined, [first, ...frameTexts(lines)]), codecFailed)
      segment = encoded.segment
      parts = [MAGIC, encoded.bytes]
    } else {
      parts = [headerLine(header), batchOf(lines).text]
    }
    // the temporary file goes whatever happens once it exists — published (a link now holds the
    // session), refused, failed or interrupted (a SIGINT between its write and its link, §7.4.3)
    yield* p.files.withTemp(name, parts, (temp) =>
      Effect.gen(function*() {
        const linked = yield* withPublishLock(
          p.sync,
          p.files.publishLockOf(name),
          { method: "append", lockTimeoutMs: p.lockTimeoutMs },
          p.files.publish(temp.path, file, rival).pipe(mapFs("append"))
        )
        if (!linked) return yield* new SessionExists({ rule: "J14", sessionId: id })
        p.sessions.registry.materialised(id)
        yield* p.files.fsyncRoot.pipe(mapFs("append"))
        // what was published, not a later stat (another writer may append once the name exists)
        const state = { file, ino: temp.ino, size: temp.size, nextSeq: count }
        p.sessions.remember(id, p.compress ? { ...state, compressed: true } : state)
        if (segment !== undefined) p.segments.keep(id, { ...segment, ino: temp.ino, size: temp.size })
      })).pipe(
      mapFsAmong("append"),
      // the encoder lives on only with the file it wrote
      Effect.onExit((exit) => exit._tag === "Success" ? Effect.void : Effect.sync(() => segment?.encoder.close()))
    )
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
 * instance and the state of its plain file is cached, one synchronous step needs no in-process
 * lock (nothing can interleave with it); what it cannot finish (a cache miss, a held lock), large
 * batches (streamed) and compressed files start again under the locks.
 */
const appendExisting = (p: Pieces, id: string, expectedSeq: number, count: number, lines: ReadonlyArray<string>) => {
  if (p.sessions.cached(id)?.compressed === true) return appendCompressed(p, id, expectedSeq, count, lines)
  const batch = batchOf(lines)
  const underLocks = () => underLock(p, id, "append", (lock, file) => appendLocked(p, id, expectedSeq, count, lines, batch, lock, file))
  if (batch.bytes >= STREAMED_WRITE_BYTES) return underLocks()
  return Effect.flatMap(p.sessions.busy(id), (busy) => {
    const cached = p.sessions.cached(id)
    // nothing cached (the first append of this instance), or a read's hint: checked under the lock
    if (busy || cached === undefined || cached.lastRecord !== undefined || cached.compressed === true) return underLocks()
    const step = appendStep(p, id, cached, expectedSeq, count, batch)
    return step._tag === "Done" ? Effect.void : step._tag === "Retry" ? underLocks() : Effect.fail(step)
  })
}

/**
 * A batch onto a compressed file. When no other operation on the id is in flight in this store
 * instance and this instance's encoder wrote the file as it is (the cached state), the batch is
 * encoded continuing that encoder's segment and written in the synchronous step — with the
 * deflate codec encoding and step are one synchronous step, with brotli the encoding comes first;
 * if the file is no longer the cached one when the step locks it (another writer), the encoded
 * bytes are dropped with their encoder and the batch starts again under the locks, on a new
 * segment. A cache miss, a large batch or a held lock take the locks from the start.
 */
const appendCompressed = (p: Pieces, id: string, expectedSeq: number, count: number, lines: ReadonlyArray<string>) => {
  const underLocks = () => underLock(p, id, "append", (lock, file) => appendLocked(p, id, expectedSeq, count, lines, undefined, lock, file))
  return Effect.flatMap(Effect.zip(p.sessions.busy(id), WriterCodec), ([busy, codec]) => {
    const cached = p.sessions.cached(id)
    if (busy || cached === undefined || cached.compressed !== true || cached.lastRecord !== undefined) return underLocks()
    const segment = p.segments.take(id, cached.ino, cached.size)
    if (segment === undefined) return underLocks()
    /** The step after the encoding: write, or (not written) drop the encoder and retry or fail. */
    const write = (encoded: EncodedFrames, retry: () => Effect.Effect<void, StoreAppendError>) => {
      const batch: Batch = { data: encoded.bytes, bytes: encoded.bytes.length }
      const step = batch.bytes >= STREAMED_WRITE_BYTES ? RETRY : appendStep(p, id, cached, expectedSeq, count, batch)
      if (step._tag === "Done") {
        if (encoded.segment !== undefined) {
          const { encoder, textBytes } = encoded.segment
          p.segments.keep(id, { encoder, textBytes, ino: cached.ino, size: cached.size + batch.bytes })
        }
        return Effect.void
      }
      // not written: the encoder's state is ahead of the file
      encoded.segment?.encoder.close()
      return step._tag === "Retry" ? retry() : Effect.fail(step)
    }
    if (codec === "deflate" && segment.encoder.codec === "deflate") {
      // nothing waits between the encoding and the write: one synchronous step
      const encoded = encodeFramesSync(segment, frameTexts(lines))
      return "bytes" in encoded ? write(encoded, underLocks) : Effect.fail(codecFailed(encoded))
    }
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(
        // the encode may be interrupted (its encoder is then closed by encodeFrames' failure path
        // or below); the synchronous step after it cannot be
        Effect.onInterrupt(restore(Effect.mapError(encodeFrames(segment, frameTexts(lines)), codecFailed)), () =>
          Effect.sync(() => segment.encoder.close())),
        (encoded) => write(encoded, () => restore(underLocks()))
      )
    )
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
    const size = lock.size + batch.bytes
    const nextSeq = expectedSeq + count
    const after: JsonlSessions.CachedState = cached.compressed === true
      ? { file: cached.file, ino: lock.ino, size, nextSeq, compressed: true }
      : { file: cached.file, ino: lock.ino, size, nextSeq }
    return settle(p, id, writeBatch(p.sync, lock.fd, cached.file, batch, lock.size), after) ?? DONE
  } finally {
    releaseLock(p.sync, lock)
  }
}

/**
 * Steps 3–7 holding the locks: rescan on a cache miss; a compressed batch is encoded here (its
 * segment continues only when this instance's encoder wrote the file as it is), a plain one is
 * `plain` (made from `lines` when not given); large batches are streamed.
 */
const appendLocked = (
  p: Pieces,
  id: string,
  expectedSeq: number,
  count: number,
  lines: ReadonlyArray<string>,
  plain: Batch | undefined,
  lock: HeldLock,
  file: string
) =>
  Effect.gen(function*() {
    const stored = yield* storedNextSeq(p, id, expectedSeq, lock, file)
    const conflict = seqConflict(id, expectedSeq, stored.nextSeq)
    if (conflict !== undefined) return yield* conflict
    let batch: Batch
    let segment: OpenSegment | undefined
    if (stored.compressed) {
      const encoded = yield* Effect.mapError(encodeFrames(p.segments.take(id, lock.ino, lock.size), frameTexts(lines)), codecFailed)
      batch = { data: encoded.bytes, bytes: encoded.bytes.length }
      segment = encoded.segment
    } else {
      batch = plain ?? batchOf(lines)
    }
    const state = { file, ino: lock.ino, size: lock.size + batch.bytes, nextSeq: expectedSeq + count }
    const after = stored.compressed ? { ...state, compressed: true as const } : state
    // the write and its settlement (cache, S7/S8, suspect) in one uninterruptible region: an
    // interruption must not leave a rolled-back or suspect write looking durable
    const failed = batch.bytes >= STREAMED_WRITE_BYTES
      ? yield* Effect.uninterruptible(
        Effect.map(writeBatchStreamed(p.fs, file, batch, lock.size), (failure) => settle(p, id, failure, after))
      )
      : settle(p, id, writeBatch(p.sync, lock.fd, file, batch, lock.size), after)
    if (segment !== undefined) {
      if (failed === undefined) p.segments.keep(id, { ...segment, ino: lock.ino, size: after.size })
      else segment.encoder.close()
    }
    if (failed !== undefined) return yield* failed
  }).pipe(Effect.onInterrupt(() => Effect.sync(() => p.segments.drop(id))))

/**
 * Step 3: the cached next seq when the locked file is the cached one (a read's hint: when its
 * last record or frame is still the one read), else a rescan's (L1 on a torn tail); and the
 * file's layout.
 */
const storedNextSeq = (p: Pieces, id: string, expectedSeq: number, lock: HeldLock, file: string) =>
  Effect.gen(function*() {
    const cached = p.sessions.cached(id)
    if (cached !== undefined && cached.file === file && cached.ino === lock.ino && cached.size === lock.size) {
      const compressed = cached.compressed === true
      const trusted = cached.lastRecord !== undefined
        ? (yield* lastRecordEnd(p.fs, file, cached.lastRecord, lock.size, p.maxLineBytes)) === cached.nextSeq
        : cached.lastFrame !== undefined
        ? yield* lastFrameEnd(p.fs, file, cached.lastFrame, lock.size)
        : true
      if (trusted) {
        const state = { file, ino: lock.ino, size: lock.size, nextSeq: cached.nextSeq }
        if (cached.lastRecord !== undefined || cached.lastFrame !== undefined) {
          p.sessions.remember(id, compressed ? { ...state, compressed } : state)
        }
        return { nextSeq: cached.nextSeq, compressed }
      }
    }
    const scanned = yield* rescan(p, id, file, "append")
    const { compressed, nextSeq, tornTail } = scanned.result
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
    const state = { file, ino: lock.ino, size: lock.size, nextSeq }
    p.sessions.remember(id, compressed === true ? { ...state, compressed } : state)
    return { nextSeq, compressed: compressed === true }
  })

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

