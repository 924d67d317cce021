/**
 * Another OS process holding a JSONL session file's kernel lock, for lock tests: it opens the
 * file for writing, takes its exclusive kernel lock (`fs-native-extensions`, as the store does)
 * and says `locked`; a line on its stdin makes it close the file
 * (releasing the lock) and exit. Tests pause it (SIGSTOP), continue it, or kill it (SIGKILL).
 */
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, constants, openSync, unlinkSync } from "node:fs"
import { createRequire } from "node:module"
import { join, resolve } from "node:path"

const repo = resolve(import.meta.dirname, "../..")

const addon = createRequire(import.meta.url)("fs-native-extensions") as {
  readonly tryLock: (fd: number) => boolean
}

/** Take `fd`'s exclusive lock without waiting; throws when another description holds it. */
const lockNow = (fd: number): void => {
  if (!addon.tryLock(fd)) throw new Error("held")
}

const HOLDER_SOURCE = `
const fs = require("node:fs"), fx = require("fs-native-extensions")
const fd = fs.openSync(process.argv[1], "a")
fx.waitForLockSync(fd)
process.stdout.write("locked\\n")
process.stdin.once("data", () => { fs.closeSync(fd); process.exit(0) })
`

export interface Holder {
  readonly pid: number
  /** Close the file (releasing the lock) and wait for the process to exit. */
  readonly release: Effect.Effect<void>
  /** Send a signal; for SIGKILL, wait until the process is gone. */
  readonly signal: (signal: "SIGSTOP" | "SIGCONT" | "SIGKILL") => Effect.Effect<void>
}

const exited = (child: ChildProcess): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
  })

/** Spawn a process that holds `file`'s lock; killed when the scope closes. */
export const spawnHolder = (file: string) =>
  Effect.acquireRelease(
    Effect.async<Holder, Error>((resume) => {
      const child = spawn(process.execPath, ["-e", HOLDER_SOURCE, file], { cwd: repo, stdio: ["pipe", "pipe", "inherit"] })
      child.once("error", (e) => resume(Effect.fail(e)))
      child.stdout.once("data", () =>
        resume(Effect.succeed({
          pid: child.pid!,
          release: Effect.suspend(() => {
            child.stdin.write("release\n")
            return exited(child)
          }),
          signal: (signal) =>
            Effect.suspend(() => {
              child.kill(signal)
              return signal === "SIGKILL" ? exited(child) : Effect.void
            })
        })))
    }),
    (holder) => Effect.catchAllDefect(holder.signal("SIGKILL"), () => Effect.void)
  )

/** Whether some open file description holds `file`'s lock (probed with a non-blocking flock). */
export const isLocked = (file: string): boolean => {
  const fd = openSync(file, "a")
  try {
    return !addon.tryLock(fd)
  } finally {
    closeSync(fd)
  }
}

/** Hold `file`'s lock from this process through another open file description; close to release. */
export const holdInProcess = (file: string): { readonly release: () => void } => {
  const fd = openSync(file, "a")
  lockNow(fd)
  return { release: () => closeSync(fd) }
}

/**
 * Hold the publication lock of the session file named `name` in `root` (§7.4.5: the hidden
 * `.<name>.lock`, created for the hold) from this process; release removes it and closes it.
 */
export const holdPublishLockInProcess = (root: string, name: string): { readonly release: () => void } => {
  const file = join(root, `.${name}.lock`)
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o600)
  lockNow(fd)
  return {
    release: () => {
      unlinkSync(file)
      closeSync(fd)
    }
  }
}
