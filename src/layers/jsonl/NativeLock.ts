/**
 * The JSONL store's kernel lock addon, `fs-native-extensions`, loaded on first use (never when a
 * module is imported), so that a program that never appends to a JSONL file loads no native code
 * and runs where the addon is missing. A missing or unloadable addon is a thrown error with the
 * code `ERR_SESSION_LOG_ADDON` naming the package and what to do; the JSONL store turns it into a
 * `StoreFailure` of the operation that needed the lock.
 */
import { createRequire } from "node:module"

/** The calls of the addon the store uses. */
export interface LockAddon {
  /**
   * Try the exclusive lock of a descriptor opened for writing: `true` when taken, `false` when
   * another open file description holds it.
   */
  readonly tryLock: (fd: number) => boolean
}

/** The error code of a lock addon that could not be loaded. */
export const ADDON_UNAVAILABLE = "ERR_SESSION_LOG_ADDON"

/** Why a native addon is unusable, and what to do about it. */
export class AddonUnavailable extends Error {
  readonly code = ADDON_UNAVAILABLE
  constructor(readonly packageName: string, readonly usedBy: string, override readonly cause: unknown) {
    super(
      `the native addon ${packageName} could not be loaded (${cause instanceof Error ? cause.message : String(cause)}); ` +
        `${usedBy} needs it: reinstall the dependencies (npm ci) on this platform, or use a store that does not need it`
    )
    this.name = "AddonUnavailable"
  }
}

const PACKAGE = "fs-native-extensions"

interface RawAddon {
  readonly tryLock: (fd: number, offset?: number, length?: number, opts?: { readonly shared?: boolean }) => boolean
}

/** A `require` usable from ESM (the built library) and CommonJS (bundles) alike. */
const requireHere = (): NodeJS.Require =>
  typeof require === "function" ? require : createRequire(import.meta.url)

let loaded: LockAddon | AddonUnavailable | undefined

const load = (): LockAddon | AddonUnavailable => {
  try {
    const raw = requireHere()(PACKAGE) as RawAddon
    if (typeof raw.tryLock !== "function") return new AddonUnavailable(PACKAGE, "the JSONL store", "no tryLock export")
    return {
      tryLock: (fd) => {
        try {
          return raw.tryLock(fd)
        } catch (e) {
          // a conflicting lock (POSIX lets fcntl say either)
          const code = (e as { readonly code?: unknown } | null)?.code
          if (code === "EAGAIN" || code === "EACCES" || code === "EWOULDBLOCK") return false
          throw e
        }
      }
    }
  } catch (e) {
    return new AddonUnavailable(PACKAGE, "the JSONL store", e)
  }
}

/** The lock addon, loaded on the first call; throws `AddonUnavailable` when it cannot be loaded. */
export const lockAddon = (): LockAddon => {
  if (loaded === undefined) loaded = load()
  if (loaded instanceof AddonUnavailable) throw loaded
  return loaded
}
