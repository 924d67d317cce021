/**
 * Operating-system primitives of the JSONL backend that `@effect/platform`'s FileSystem lacks
 * (SPEC §7.4.3, §7.4.5): the synchronous file calls of the append hot path and the kernel file
 * lock (`SyncFileSystem`, node:fs plus `flock(2)` by default, and the fault-injection seam of
 * tests), their errors as PlatformErrors, and fsync of a directory (skipped where the platform
 * refuses it).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { type PlatformError, SystemError, type SystemErrorReason } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as FsExt from "fs-ext"

/**
 * The synchronous file calls of the JSONL append path and its lock. Each call throws what node:fs
 * throws (an Error with an errno `code`); the store turns it into a PlatformError.
 */
export interface SyncFileSystem {
  /**
   * `"append"`: write-only, every write at the end, never creates (ENOENT when missing);
   * `"create"`: a new file (`wx`: EEXIST when it exists) with `mode`.
   */
  readonly open: (path: string, flags: "append" | "create", mode?: number) => number
  /** Write `length` bytes of `buffer` from `offset`; returns how many were written. */
  readonly write: (fd: number, buffer: Uint8Array, offset: number, length: number) => number
  /** Write the UTF-8 bytes of `text`; returns how many were written (fewer on a partial write). */
  readonly writeString: (fd: number, text: string) => number
  readonly fsync: (fd: number) => void
  readonly ftruncate: (fd: number, length: number) => void
  readonly close: (fd: number) => void
  /** Identity and size of an open file. */
  readonly fstat: (fd: number) => FileStat
  /** Identity, size and modification time; `undefined` when the path does not exist. */
  readonly stat: (path: string) => FileStat | undefined
  /**
   * Try to take the exclusive advisory lock of an open file (`flock(LOCK_EX | LOCK_NB)`) without
   * waiting: `true` when taken, `false` when another open file description holds it. The kernel
   * releases it when the descriptor is closed or its process dies.
   */
  readonly tryLock: (fd: number) => boolean
}

/** What the JSONL store reads of a stat. */
export interface FileStat {
  readonly ino: number
  readonly size: number
  readonly mtimeMs: number
}

const APPEND = NodeFs.constants.O_WRONLY | NodeFs.constants.O_APPEND

/** The node:fs implementation of `SyncFileSystem`. */
export const nodeSyncFileSystem: SyncFileSystem = {
  open: (path, flags, mode) => NodeFs.openSync(path, flags === "append" ? APPEND : "wx", mode),
  write: (fd, buffer, offset, length) => NodeFs.writeSync(fd, buffer, offset, length),
  writeString: (fd, text) => NodeFs.writeSync(fd, text, null, "utf8"),
  fsync: (fd) => NodeFs.fsyncSync(fd),
  ftruncate: (fd, length) => NodeFs.ftruncateSync(fd, length),
  close: (fd) => NodeFs.closeSync(fd),
  fstat: (fd) => NodeFs.fstatSync(fd),
  stat: (path) => NodeFs.statSync(path, { throwIfNoEntry: false }),
  tryLock: (fd) => {
    try {
      FsExt.flockSync(fd, "exnb")
      return true
    } catch (e) {
      const code = thrownCode(e)
      if (code === "EAGAIN" || code === "EWOULDBLOCK") return false
      throw e
    }
  }
}


/** The errno code (`EEXIST`, `ENOENT`, ...) of a thrown node:fs error, when there is one. */
export const thrownCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error && typeof error.code === "string"
    ? error.code
    : undefined

const REASONS: Readonly<Record<string, SystemErrorReason>> = {
  ENOENT: "NotFound",
  EACCES: "PermissionDenied",
  EEXIST: "AlreadyExists",
  EISDIR: "BadResource",
  ENOTDIR: "BadResource",
  EBUSY: "Busy",
  ELOOP: "BadResource"
}

/** A thrown node:fs error as the PlatformError `@effect/platform-node` makes of it. */
export const toSystemError = (method: string, path: string | number, error: unknown): SystemError => {
  const code = thrownCode(error)
  const syscall = typeof error === "object" && error !== null && "syscall" in error && typeof error.syscall === "string"
    ? error.syscall
    : undefined
  return new SystemError({
    reason: (code === undefined ? undefined : REASONS[code]) ?? "Unknown",
    module: "FileSystem",
    method,
    pathOrDescriptor: path,
    ...(syscall === undefined ? {} : { syscall }),
    description: error instanceof Error ? error.message : String(error),
    cause: error
  })
}

/** The errno code (`EEXIST`, `EPERM`, ...) behind a PlatformError, when there is one. */
export const errnoCode = (error: PlatformError): string | undefined => {
  if (error._tag !== "SystemError") return undefined
  const cause: unknown = error.cause
  if (typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string") {
    return cause.code
  }
  return undefined
}

/** True when a PlatformError reports an existing target (EEXIST). */
export const isAlreadyExists = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "AlreadyExists"

/** True when a PlatformError reports a missing path (ENOENT). */
export const isNotFound = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "NotFound"

// Directories cannot be opened or fsynced on some platforms (Windows: EPERM/EISDIR); SPEC §7.4.3 step 4.
const UNSYNCABLE: ReadonlySet<string> = new Set(["EPERM", "EISDIR", "EINVAL", "ENOTSUP", "EBADF", "EACCES"])

/** fsync a directory so a new or renamed entry in it is durable; skipped where the OS refuses. */
export const fsyncDirectory = (dir: string): Effect.Effect<void, PlatformError, FileSystem.FileSystem> =>
  Effect.flatMap(FileSystem.FileSystem, (fs) =>
    Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync)).pipe(
      Effect.catchIf(
        (e) => {
          const code = errnoCode(e)
          return code !== undefined && UNSYNCABLE.has(code)
        },
        () => Effect.void
      )
    ))
