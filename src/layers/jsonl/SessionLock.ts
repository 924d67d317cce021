/**
 * The JSONL session lock (SPEC §7.4.5, S6): an exclusive kernel advisory lock on the session file
 * itself (`fs-native-extensions`: an open-file-description lock on Linux), taken without blocking
 * and retried on a `Schedule` until `lockTimeoutMs`. The kernel releases it when its holder closes
 * the descriptor or dies, so a lock is never broken on a guess: a dead holder frees it at once, a
 * paused one makes the others wait. No lock file outlives its holder. Publishing a new session
 * file takes the same kind of lock on a hidden per-id file that exists only while held (its two
 * possible names are checked together under it).
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type { SystemError } from "@effect/platform/Error"
import { SessionNotFound, StoreFailure } from "../../schema/Errors.js"
import { type FileStat, type SyncFileSystem, thrownCode, toSystemError } from "./SyncFileSystem.js"

/**
 * Lock waits use wall-clock time even when a test replaces the Clock service (a TestClock would
 * never end a wait for another process).
 */
export const wallClock = Clock.make()

/** A held lock: the session file opened for append and locked; closing `fd` releases it. */
export interface HeldLock {
  readonly fd: number
  /** Identity and size of the locked file, which is the one at the session's path. */
  readonly ino: string
  readonly size: number
}

/** The outcome of one attempt that did not take the lock. */
export type LockMiss =
  /** another descriptor holds the lock */
  | "held"
  /** no file at the path */
  | "missing"

/**
 * One synchronous attempt: open `file` for append, try the lock, and check that the locked file
 * is still the one at the path (a `replaceLog` of the holder we waited for may have renamed a new
 * file over it; then the attempt is repeated on the new file at once). The descriptor is closed
 * whenever the lock is not returned. A failing call is a SystemError.
 */
export const tryLockFile = (files: SyncFileSystem, file: string): HeldLock | LockMiss | SystemError => {
  for (;;) {
    let fd: number
    try {
      fd = files.open(file, "append")
    } catch (e) {
      return thrownCode(e) === "ENOENT" ? "missing" : toSystemError("open", file, e)
    }
    let method = "lock"
    try {
      if (!files.tryLock(fd)) {
        closeQuietly(files, fd)
        return "held"
      }
      method = "fstat"
      const locked = files.fstat(fd)
      method = "stat"
      const current = files.stat(file)
      if (current === undefined) {
        closeQuietly(files, fd)
        return "missing"
      }
      if (current.ino !== locked.ino) {
        // replaced while we waited: lock the file that is there now
        closeQuietly(files, fd)
        continue
      }
      return { fd, ino: String(locked.ino), size: locked.size }
    } catch (e) {
      closeQuietly(files, fd)
      return toSystemError(method, file, e)
    }
  }
}

/** Release a held lock by closing its descriptor (the kernel drops the lock with it). */
export const releaseLock = (files: SyncFileSystem, lock: HeldLock): void => closeQuietly(files, lock.fd)

const closeQuietly = (files: SyncFileSystem, fd: number): void => {
  try {
    files.close(fd)
  } catch {
    // the outcome is already decided; a failed close still releases the descriptor
  }
}

/**
 * How a writer waits for a held lock: short jittered exponential backoff (2 ms, doubling, at
 * most 50 ms apart) for at most `lockTimeoutMs` of wall-clock time.
 */
export const lockWait = (lockTimeoutMs: number): Schedule.Schedule<unknown> =>
  Schedule.exponential(Duration.millis(2)).pipe(
    Schedule.union(Schedule.spaced(Duration.millis(50))),
    Schedule.jittered,
    Schedule.upTo(Duration.millis(lockTimeoutMs))
  )

/**
 * Take the session file's lock, waiting on `lockWait` while another descriptor holds it: S6
 * (`StoreFailure`, cause "lock timeout") once `lockTimeoutMs` passed, L11 when the file does not
 * exist. Only the waits can be interrupted (also inside an `acquireUseRelease` acquire, whose
 * release closes the lock): a lock, once taken, is always returned.
 */
export const acquireLock = (
  files: SyncFileSystem,
  file: string,
  options: { readonly sessionId: string; readonly method: string; readonly lockTimeoutMs: number }
): Effect.Effect<HeldLock, StoreFailure | SessionNotFound> =>
  Effect.uninterruptible(
    Effect.gen(function*() {
      const driver = yield* Schedule.driver(lockWait(options.lockTimeoutMs))
      for (;;) {
        const outcome = tryLockFile(files, file)
        if (outcome === "missing") return yield* new SessionNotFound({ rule: "L11", sessionId: options.sessionId })
        if (outcome !== "held") {
          if ("fd" in outcome) return outcome
          return yield* new StoreFailure({ method: options.method, cause: outcome })
        }
        const waited = yield* Effect.interruptible(Effect.option(driver.next(undefined)))
        if (Option.isNone(waited)) {
          return yield* new StoreFailure({ rule: "S6", method: options.method, cause: "lock timeout", detail: file })
        }
      }
    })
  ).pipe(Effect.withClock(wallClock))

/** Where a file system offers no such lock (some network file systems). */
const UNLOCKABLE: ReadonlySet<string> = new Set(["EBADF", "EINVAL", "ENOTSUP", "EOPNOTSUPP", "ENOLCK", "EPERM"])

const unlinkQuietly = (files: SyncFileSystem, file: string): void => {
  try {
    files.unlink(file)
  } catch {
    // gone already, or left for the next publisher of the id to reuse
  }
}

/**
 * Run `body` holding a session id's publication lock (waiting as `acquireLock` does, S6): a new
 * session file is published under it, so that its name in one layout is never created while the
 * other layout's name exists. The lock is a hidden file beside the session (`lockFile`) that
 * exists only while it is held: it is opened (created when missing), locked, checked to be the
 * file at its name still (a holder that finished removed it: then the attempt starts again on the
 * new one), and removed before it is closed. A process killed while holding it leaves the empty
 * file, which the next publication of the id locks, reuses and removes. Where the lock file cannot
 * be created, or the file system offers no lock, `body` runs unlocked (the check and the link then
 * race, as they did before the compressed layout).
 */
export const withPublishLock = <A, E>(
  files: SyncFileSystem,
  lockFile: string,
  options: { readonly method: string; readonly lockTimeoutMs: number },
  body: Effect.Effect<A, E>
): Effect.Effect<A, E | StoreFailure> =>
  Effect.acquireUseRelease(
    Effect.uninterruptible(
      Effect.gen(function*() {
        const driver = yield* Schedule.driver(lockWait(options.lockTimeoutMs))
        for (;;) {
          let opened: { readonly fd: number; readonly created: boolean }
          try {
            opened = files.openLockFile(lockFile)
          } catch {
            return undefined
          }
          const { created, fd } = opened
          let taken: boolean
          try {
            taken = files.tryLock(fd)
          } catch (e) {
            closeQuietly(files, fd)
            // nobody can hold a lock file this attempt created and could not lock
            if (created) unlinkQuietly(files, lockFile)
            const code = thrownCode(e)
            if (code !== undefined && UNLOCKABLE.has(code)) return undefined
            return yield* new StoreFailure({ method: options.method, cause: toSystemError("lock", lockFile, e) })
          }
          if (taken) {
            let current: FileStat | undefined
            let locked: FileStat
            try {
              locked = files.fstat(fd)
              current = files.stat(lockFile)
            } catch (e) {
              closeQuietly(files, fd)
              return yield* new StoreFailure({ method: options.method, cause: toSystemError("stat", lockFile, e) })
            }
            if (current !== undefined && current.ino === locked.ino) return fd
            // removed (or replaced) by the holder we waited for: lock the one there now
            closeQuietly(files, fd)
            continue
          }
          closeQuietly(files, fd)
          const waited = yield* Effect.interruptible(Effect.option(driver.next(undefined)))
          if (Option.isNone(waited)) {
            return yield* new StoreFailure({ rule: "S6", method: options.method, cause: "lock timeout", detail: lockFile })
          }
        }
      })
    ).pipe(Effect.withClock(wallClock)),
    () => body,
    // removed while still held, so that nobody locks a name that is about to go away
    (fd) =>
      Effect.sync(() => {
        if (fd === undefined) return
        unlinkQuietly(files, lockFile)
        closeQuietly(files, fd)
      })
  )
