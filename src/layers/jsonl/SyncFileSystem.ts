/**
 * The JSONL appender (SPEC §7.4.3 steps 5–6), the one module that uses synchronous node:fs: the
 * `SyncFileSystem` port (the file calls of the append hot path and the kernel lock; node:fs and
 * the `fs-native-extensions` lock by default, replaced in tests to inject faults), its errors as
 * PlatformErrors, and the write of a batch onto a locked session file: every byte and fsync, else
 * rolled back.
 */
import { type PlatformError, SystemError, type SystemErrorReason } from "@effect/platform/Error"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodeFs from "node:fs"
import type { Batch } from "./LineEncoding.js"
import { lockAddon } from "./NativeLock.js"

// ---------------------------------------------------------------------------------------------
// The port

/**
 * The synchronous file calls of the JSONL append path and its lock. Each call throws what node:fs
 * throws (an Error with an errno `code`); callers turn it into a PlatformError (`toSystemError`).
 */
export interface SyncFileSystem {
  /**
   * `"append"`: write-only, every write at the end, never creates (ENOENT when missing);
   * `"create"`: a new file (`wx`: EEXIST when it exists) with `mode`.
   */
  readonly open: (path: string, flags: "append" | "create", mode?: number) => number
  /**
   * Open a lock file for reading and writing, creating it (mode 0600) when missing (`created`);
   * its descriptor can be locked (`tryLock`).
   */
  readonly openLockFile: (path: string) => { readonly fd: number; readonly created: boolean }
  /** Remove a name (ENOENT when missing). */
  readonly unlink: (path: string) => void
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
   * Try to take the exclusive advisory lock of a file opened for writing without waiting: `true`
   * when taken, `false` when another open file description holds it. The kernel releases it when
   * the descriptor is closed or its process dies (an open-file-description lock on Linux, `flock`
   * on macOS, `LockFileEx` on Windows: `fs-native-extensions`, loaded on the first call).
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
  openLockFile: (path) => {
    try {
      return { fd: NodeFs.openSync(path, NodeFs.constants.O_RDWR | NodeFs.constants.O_CREAT | NodeFs.constants.O_EXCL, 0o600), created: true }
    } catch (e) {
      if (thrownCode(e) !== "EEXIST") throw e
      return { fd: NodeFs.openSync(path, NodeFs.constants.O_RDWR), created: false }
    }
  },
  unlink: (path) => NodeFs.unlinkSync(path),
  write: (fd, buffer, offset, length) => NodeFs.writeSync(fd, buffer, offset, length),
  writeString: (fd, text) => NodeFs.writeSync(fd, text, null, "utf8"),
  fsync: (fd) => NodeFs.fsyncSync(fd),
  ftruncate: (fd, length) => NodeFs.ftruncateSync(fd, length),
  close: (fd) => NodeFs.closeSync(fd),
  fstat: (fd) => NodeFs.fstatSync(fd),
  stat: (path) => NodeFs.statSync(path, { throwIfNoEntry: false }),
  tryLock: (fd) => lockAddon().tryLock(fd)
}

/**
 * The port as a service. A JSONL store takes the one in its context when it is built, node:fs
 * and the native lock when none is provided.
 */
export const SyncFileSystem: Context.Reference<SyncFileSystem, SyncFileSystem> = Context.Reference<SyncFileSystem>()(
  "effect-session-log/SyncFileSystem",
  { defaultValue: () => nodeSyncFileSystem }
)

/** A `SyncFileSystem` of node:fs calls with some of them replaced (fault injection, probes). */
export const make = (overrides: Partial<SyncFileSystem> = {}): SyncFileSystem => ({
  ...nodeSyncFileSystem,
  ...overrides
})

/** The node:fs implementation as a layer. */
export const layer: Layer.Layer<SyncFileSystem> = Layer.succeed(SyncFileSystem, nodeSyncFileSystem)

/** A layer of node:fs calls with some of them replaced, for tests. */
export const layerTest = (overrides: Partial<SyncFileSystem>): Layer.Layer<SyncFileSystem> =>
  Layer.succeed(SyncFileSystem, make(overrides))

// ---------------------------------------------------------------------------------------------
// Errors of the port's calls

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

// ---------------------------------------------------------------------------------------------
// Writing a batch (SPEC §7.4.3 steps 5–6)

/**
 * Batches of at least this many bytes are written through the platform FileSystem (async, in
 * chunks) rather than by one synchronous write, so a large write does not hold the event loop.
 */
export const STREAMED_WRITE_BYTES = 256 * 1024

/** A failed write (S7) and, when it failed too, its rollback (S8). */
export interface WriteFailure {
  readonly write: unknown
  readonly rollback: unknown
}

/** UTF-8 bytes of a string (Buffer.from: several times faster than TextEncoder on large text). */
const utf8 = (text: string): Uint8Array => Buffer.from(text, "utf8")

/**
 * Step 5 on a descriptor opened for append: write every byte, fsync; on failure step 6's
 * rollback (truncate back to `size`, fsync). `undefined` when the bytes are durable.
 */
export const writeBatch = (
  files: SyncFileSystem,
  fd: number,
  file: string,
  batch: Batch,
  size: number
): WriteFailure | undefined => {
  let method = "write"
  try {
    let at = "text" in batch ? files.writeString(fd, batch.text) : 0
    if (at < batch.bytes) {
      // a partial write (or bytes to write): the rest from the bytes
      const bytes = "text" in batch ? utf8(batch.text) : batch.data
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

/** Step 5 through the platform FileSystem (large batches); the same outcome as `writeBatch`. */
export const writeBatchStreamed = (
  fs: FileSystem.FileSystem,
  file: string,
  batch: Batch,
  size: number
): Effect.Effect<WriteFailure | undefined> =>
  Effect.uninterruptible(Effect.scoped(Effect.gen(function*() {
    const handle = yield* fs.open(file, { flag: "a" })
    const bytes = "text" in batch ? utf8(batch.text) : batch.data
    const outcome = yield* Effect.either(Effect.zipRight(handle.writeAll(bytes), handle.sync))
    if (outcome._tag === "Right") return undefined
    // S7: roll back to the previous size so a retry cannot duplicate seqs
    const rollback = yield* Effect.either(Effect.zipRight(handle.truncate(size), handle.sync))
    return { write: outcome.left, rollback: rollback._tag === "Left" ? rollback.left : undefined }
  })).pipe(
    Effect.catchAll((e: PlatformError): Effect.Effect<WriteFailure> => Effect.succeed({ write: e, rollback: undefined }))
  ))
