/**
 * What the JSONL store's operations share (SPEC §7.4): the pieces a store is built from, and the
 * steps every operation takes — file-system errors as `StoreFailure`, the session file's scan
 * with its identity checks (L6), the rescan under the lock, the read's hint for the first append,
 * and running under the session's in-process and kernel locks (§7.4.5).
 */

import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { AppendConflict, SessionHeaderInvalid, SessionNotFound, StoreCorrupt, StoreFailure } from "../schema/Errors.js"
import { type LoadError } from "../services/SessionStore.js"
import { SyncFileSystem } from "./JsonlAppender.js"
import * as JsonlFiles from "./JsonlFiles.js"
import { type PackOptions } from "./JsonlFormat.js"
import { acquireLock, type HeldLock, releaseLock } from "./JsonlLock.js"
import { type ScanOutcome, scanFile } from "./JsonlReader.js"
import * as JsonlSessions from "./JsonlSessions.js"

/** What a store is built from. */
export interface Pieces {
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


export const mapFs = (method: string) => <A, R>(effect: Effect.Effect<A, PlatformError, R>) =>
  Effect.mapError(effect, (cause) => new StoreFailure({ method, cause }))

export const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

/** L8: the stored log changed since `load` read it. */
export const changedSinceRead = (id: string, expectedSeq: number, storedSeq: number) =>
  new AppendConflict({ rule: "L8", sessionId: id, expectedSeq, storedSeq, detail: "the stored log changed since it was read" })

/** Stream the session's file through the scanner with its identity checks (L6); none when absent. */
export const scanSession = (p: Pieces, id: string, method: string, keepEvents: boolean) => {
  const { file, options } = scanOptions(p, id, keepEvents)
  return scanFile(p.fs, file, options, method)
}

/** Where a session's file is and how to scan it, with its identity checks (L6). */
export const scanOptions = (p: Pieces, id: string, keepEvents: boolean) => {
  const { file, name, named } = p.files.pathOf(id)
  const nameCheck = named ? {} : { expectedName: name }
  return { file, options: { location: file, expectedId: id, ...nameCheck, maxLineBytes: p.maxLineBytes, keepEvents } }
}

/**
 * After a clean read (no torn tail), the read's view of the file as a hint for the first append
 * of this instance: under the lock, that append checks the file is still the one read (identity,
 * size) and re-reads only its last record instead of the whole file (`storedNextSeq`).
 */
export const hintFromRead = (p: Pieces, id: string, scanned: ScanOutcome): void => {
  const { lastRecord, nextSeq, tornTail } = scanned.result
  if (tornTail !== undefined || lastRecord === undefined || p.sessions.cached(id) !== undefined) return
  p.sessions.remember(id, { file: p.files.pathOf(id).file, ino: scanned.ino, size: scanned.size, nextSeq, lastRecord })
}

/** Cold-read errors met by a writer: format refusals and header faults become StoreCorrupt. */
export const asWriteError = (file: string) => (e: LoadError) =>
  e._tag === "FormatUnsupported" || e._tag === "SessionHeaderInvalid" || e._tag === "UnknownEventType"
    ? new StoreCorrupt({ rule: e.rule, location: file, detail: `cannot write: ${e.message}`, cause: e })
    : e

/** Rescan under the lock: the stored state, a torn tail or a corruption. */
export const rescan = (p: Pieces, id: string, method: string) =>
  Effect.flatMap(scanSession(p, id, method, false), (scanned) => scanned === undefined ? notFound(id) : Effect.succeed(scanned))
    .pipe(Effect.mapError(asWriteError(p.files.pathOf(id).file)))

/** Run `body` holding the session's in-process lock and its file's kernel lock (SPEC §7.4.5). */
export const underLock = <A, E>(p: Pieces, id: string, method: string, body: (lock: HeldLock) => Effect.Effect<A, E>) =>
  p.sessions.serialised(
    id,
    Effect.acquireUseRelease(
      acquireLock(p.sync, p.files.pathOf(id).file, { sessionId: id, method, lockTimeoutMs: p.lockTimeoutMs }),
      body,
      (lock) => Effect.sync(() => releaseLock(p.sync, lock))
    )
  )

