/**
 * What the JSONL store's operations share (SPEC §7.4): the pieces a store is built from, and the
 * steps every operation takes — file-system errors as `StoreFailure`, finding the session's file
 * (`.jsonl` or `.jsonlz`), its scan with the identity checks (L6), the rescan under the lock, the
 * read's hint for the first append, and running under the session's in-process and kernel locks
 * (§7.4.5).
 */

import { isPlatformError, type PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { AppendConflict, SessionHeaderInvalid, SessionNotFound, StoreCorrupt, StoreFailure } from "../../schema/Errors.js"
import { type LoadError } from "../../services/SessionStore.js"
import { SyncFileSystem } from "./SyncFileSystem.js"
import * as JsonlFiles from "./Files.js"
import type { SegmentEncoders } from "./Compression.js"
import { type PackOptions } from "./LineEncoding.js"
import { acquireLock, type HeldLock, releaseLock } from "./SessionLock.js"
import { type ScanOutcome, scanFile } from "./Reader.js"
import type { ScanOptions } from "./LineScanner.js"
import * as JsonlSessions from "./SessionCache.js"

/** What a store is built from. */
export interface Pieces {
  readonly fs: FileSystem.FileSystem
  readonly sync: SyncFileSystem
  readonly files: JsonlFiles.JsonlFiles
  readonly sessions: JsonlSessions.JsonlSessions
  readonly maxLineBytes: number
  readonly lockTimeoutMs: number
  readonly pack: PackOptions
  /** New sessions are written in the compressed layout (`.jsonlz`). */
  readonly compress: boolean
  /** The encoders of the segments this instance's writes continue (a deflate segment's last text). */
  readonly segments: SegmentEncoders
}


export const mapFs = (method: string) => <A, R>(effect: Effect.Effect<A, PlatformError, R>) =>
  Effect.mapError(effect, (cause) => new StoreFailure({ method, cause }))

/** `mapFs` for an effect that fails with the store's own errors too: only its file-system errors become StoreFailure. */
export const mapFsAmong = (method: string) => <A, E, R>(effect: Effect.Effect<A, E | PlatformError, R>) =>
  Effect.catchIf(
    effect,
    (e): e is PlatformError => isPlatformError(e),
    (cause) => Effect.fail(new StoreFailure({ method, cause }))
  ) as Effect.Effect<A, Exclude<E, PlatformError> | StoreFailure, R>

export const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

/** L8: the stored log changed since `load` read it. */
export const changedSinceRead = (id: string, expectedSeq: number, storedSeq: number) =>
  new AppendConflict({ rule: "L8", sessionId: id, expectedSeq, storedSeq, detail: "the stored log changed since it was read" })

/**
 * The session's file: the one of its names (`.jsonl`, `.jsonlz`) that exists, none when neither
 * does. Both existing is corruption (J14: one session stored twice).
 */
export const locate = (p: Pieces, id: string, method: string) =>
  Effect.flatMap(mapFs(method)(p.files.locate(id)), (found) =>
    found === undefined || !("_tag" in found) ? Effect.succeed(found) : Effect.fail(
      new StoreCorrupt({
        rule: "J14",
        location: found.files.join(", "),
        detail: `session "${id}" is stored under two names; keep one of the files`
      })
    ))

/** Stream the session's file through the scanner with its identity checks (L6); none when absent. */
export const scanSession = (p: Pieces, id: string, method: string, keepEvents: boolean) =>
  Effect.flatMap(scanOptions(p, id, method, keepEvents), (found) =>
    found === undefined ? Effect.succeed(undefined) : scanFile(p.fs, found.file, found.options, method))

/** Where a session's file is and how to scan it, with its identity checks (L6); none when absent. */
export const scanOptions = (p: Pieces, id: string, method: string, keepEvents: boolean) =>
  Effect.map(locate(p, id, method), (found) => {
    if (found === undefined) return undefined
    const { file, name, named } = found
    const nameCheck = named ? {} : { expectedName: name }
    const options: ScanOptions = { location: file, expectedId: id, ...nameCheck, maxLineBytes: p.maxLineBytes, keepEvents }
    return { file, options }
  })

/**
 * After a clean read (no torn tail), the read's view of the file as a hint for the first append
 * of this instance: under the lock, that append checks the file is still the one read (identity,
 * size) and re-reads only its last record, or last frame, instead of the whole file (`storedNextSeq`).
 */
export const hintFromRead = (p: Pieces, id: string, file: string, scanned: ScanOutcome): void => {
  const { compressed, lastFrame, lastRecord, nextSeq, tornTail } = scanned.result
  if (tornTail !== undefined || p.sessions.cached(id) !== undefined) return
  const state = { file, ino: scanned.ino, size: scanned.size, nextSeq }
  if (compressed === true) {
    if (lastFrame !== undefined) p.sessions.remember(id, { ...state, compressed, lastFrame })
  } else if (lastRecord !== undefined) {
    p.sessions.remember(id, { ...state, lastRecord })
  }
}

/** Cold-read errors met by a writer: format refusals and header faults become StoreCorrupt. */
export const asWriteError = (file: string) => (e: LoadError) =>
  e._tag === "FormatUnsupported" || e._tag === "SessionHeaderInvalid" || e._tag === "UnknownEventType"
    ? new StoreCorrupt({ rule: e.rule, location: file, detail: `cannot write: ${e.message}`, cause: e })
    : e

/** Rescan the locked file under the lock: the stored state, a torn tail or a corruption. */
export const rescan = (p: Pieces, id: string, file: string, method: string) => {
  const { name, named } = p.files.candidates(id).find((c) => c.file === file) ?? p.files.pathOf(id)
  const options: ScanOptions = {
    location: file,
    expectedId: id,
    ...(named ? {} : { expectedName: name }),
    maxLineBytes: p.maxLineBytes,
    keepEvents: false
  }
  return Effect.flatMap(scanFile(p.fs, file, options, method), (scanned) => scanned === undefined ? notFound(id) : Effect.succeed(scanned))
    .pipe(Effect.mapError(asWriteError(file)))
}

/**
 * Run `body` holding the session's in-process lock and its file's kernel lock (SPEC §7.4.5); the
 * file is found first (L11 when there is none).
 */
export const underLock = <A, E>(
  p: Pieces,
  id: string,
  method: string,
  body: (lock: HeldLock, file: string) => Effect.Effect<A, E>
) =>
  p.sessions.serialised(
    id,
    Effect.flatMap(locate(p, id, method), (found) =>
      found === undefined ? Effect.fail(notFound(id)) : Effect.acquireUseRelease(
        acquireLock(p.sync, found.file, { sessionId: id, method, lockTimeoutMs: p.lockTimeoutMs }),
        (lock) => body(lock, found.file),
        (lock) => Effect.sync(() => releaseLock(p.sync, lock))
      ))
  )

