/**
 * Operating-system primitives of the JSONL backend that `@effect/platform`'s FileSystem lacks
 * (SPEC §7.4.3, §7.4.5): fsync of a directory (skipped where the platform refuses it), the lock
 * holder's identity (pid, host name) and the process-alive check for stale locks. The no-overwrite
 * hard link is `FileSystem.link` (`link(2)` fails with EEXIST), so no `node:fs` import is needed.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import { hostname } from "node:os"
import * as NodeProcess from "node:process"

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

/** This process's id (the lock holder's `pid`). */
export const currentPid = (): number => NodeProcess.pid

/** This host's name (the lock holder's `host`). */
export const currentHost = (): string => hostname()

/** Whether a process with this pid is alive on this host (`kill(pid, 0)`; EPERM means alive). */
export const isProcessAlive = (pid: number): boolean => {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    NodeProcess.kill(pid, 0)
    return true
  } catch (e) {
    return typeof e === "object" && e !== null && "code" in e && e.code === "EPERM"
  }
}
