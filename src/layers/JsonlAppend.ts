/**
 * The JSONL store's append (SPEC §7.4.3): a registered session materialised by its first batch
 * (temporary file, no-overwrite link), then batches onto the file — in the common case one
 * synchronous step (lock, check the cached state, write, fsync, release), else under the locks
 * with the stored next seq from the cache, the read's hint (one line checked) or a rescan; S7/S8
 * on a failed write.
 */

import * as Effect from "effect/Effect"
import { AppendConflict, SessionExists, SessionNotFound, StoreFailure } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { type SessionHeader } from "../schema/SessionHeader.js"
import { type StoreAppendError } from "../services/SessionStore.js"
import { STREAMED_WRITE_BYTES, type WriteFailure, writeBatch, writeBatchStreamed } from "./JsonlAppender.js"
import { type Batch, batchOf, headerLine, storageLines } from "./JsonlFormat.js"
import { type HeldLock, releaseLock, tryLockFile } from "./JsonlLock.js"
import { lastRecordEnd } from "./JsonlReader.js"
import * as JsonlSessions from "./JsonlSessions.js"
import { mapFs, notFound, type Pieces, rescan, underLock } from "./JsonlPieces.js"


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
      if ((yield* lastRecordEnd(p.fs, file, cached.lastRecord, lock.size, p.maxLineBytes)) === cached.nextSeq) {
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

