/**
 * The JSONL session lock file (SPEC §7.4.5, S6, S9). A lock is acquired by hard-linking this
 * process's *template* — a file in the root named `.lock-<pid>-<hex>.tmp` holding
 * `{"pid","host","at"}` — to `<file>.lock` (no overwrite: EEXIST means held), so a lock never
 * exists without its content and acquiring it costs one `link(2)`. One template per process and
 * root, replaced (never rewritten: locks may share its inode) once its `at` is `templateAgeMs` old.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { StoreFailure } from "../schema/Errors.js"
import { isProcessAlive, type SyncFileSystem, thrownCode, toSystemError } from "./JsonlFiles.js"

/**
 * The lock file's `at` is compared across processes (S9), so lock timing uses wall-clock time
 * even when a test replaces the Clock service (a TestClock would also never end a lock wait).
 */
export const wallClock = Clock.make()

/** What the lock functions need of their store. */
export interface LockContext {
  readonly root: string
  /** `Path.join` */
  readonly join: (dir: string, name: string) => string
  readonly files: SyncFileSystem
  readonly pid: number
  readonly host: string
  readonly staleLockMs: number
  readonly lockTimeoutMs: number
}

/**
 * A lock's `at` is its template's: at most this old when the lock is taken (the smaller of
 * `staleLockMs / 4` and 100 ms). Other processes judge staleness with their own `staleLockMs`, so
 * the template's age must stay far below any sane setting (a lock held for an fsync can already
 * take tens of milliseconds): a lock we just took never looks stale to a process configured with a
 * short `staleLockMs`. Costs at most one template write per 100 ms of appending.
 */
export const templateAgeMs = (staleLockMs: number): number => Math.min(staleLockMs / 4, 100)

/** This process's current template per root (its content names the process, so it is shared). */
const templates = new Map<string, { readonly path: string; readonly at: number }>()
let templateCounter = 0

/** Names of lock templates (hidden temporary names: `list` and reads never look at them). */
export const TEMPLATE_NAME = /^\.lock-\d+-[0-9a-f]+\.tmp$/

const encoder = new TextEncoder()

/** Write a new template (`wx`, 0600) holding the lock content at `now`. Throws a SystemError. */
const writeTemplate = (ctx: LockContext, now: number): string => {
  const content = encoder.encode(JSON.stringify({ pid: ctx.pid, host: ctx.host, at: now }))
  for (let attempt = 0;; attempt++) {
    const path = ctx.join(ctx.root, `.lock-${ctx.pid}-${hex(now, 12)}${hex(templateCounter++ & 0xffff, 4)}.tmp`)
    let fd: number
    try {
      fd = ctx.files.open(path, "create", 0o600)
    } catch (e) {
      if (thrownCode(e) === "EEXIST" && attempt < 8) continue
      throw toSystemError("open", path, e)
    }
    try {
      for (let at = 0; at < content.length;) {
        const n = ctx.files.write(fd, content, at, content.length - at)
        if (n <= 0) throw new Error("short write")
        at += n
      }
    } catch (e) {
      ignore(() => ctx.files.close(fd))
      ignore(() => ctx.files.unlink(path))
      throw toSystemError("write", path, e)
    }
    ignore(() => ctx.files.close(fd))
    return path
  }
}

const hex = (n: number, digits: number): string => n.toString(16).padStart(digits, "0")

const ignore = (f: () => void): void => {
  try {
    f()
  } catch {
    // best effort
  }
}

/**
 * Remove templates left by earlier processes (killed, or never released) once they are older
 * than `staleLockMs`: their owners, if alive, replace them before linking again. Best effort.
 */
const sweep = (ctx: LockContext, now: number, keep: string): void => {
  let names: ReadonlyArray<string>
  try {
    names = ctx.files.readDirectory(ctx.root)
  } catch {
    return
  }
  for (const name of names) {
    const path = ctx.join(ctx.root, name)
    if (!TEMPLATE_NAME.test(name) || path === keep) continue
    ignore(() => {
      const info = ctx.files.stat(path)
      if (info !== undefined && now - info.mtimeMs > ctx.staleLockMs) ctx.files.unlink(path)
    })
  }
}

/** This process's template for the root, replaced when `templateAgeMs` old. Throws a SystemError. */
const currentTemplate = (ctx: LockContext, now: number): string => {
  const current = templates.get(ctx.root)
  if (current !== undefined && now >= current.at && now - current.at <= templateAgeMs(ctx.staleLockMs)) {
    return current.path
  }
  const path = writeTemplate(ctx, now)
  templates.set(ctx.root, { path, at: now })
  if (current === undefined) sweep(ctx, now, path)
  else ignore(() => ctx.files.unlink(current.path))
  return path
}

/**
 * One synchronous attempt to take the lock: `true` when taken, `false` when it exists. A
 * template removed by someone else is written again. Throws a SystemError on other failures.
 */
export const tryLock = (ctx: LockContext, lock: string, now: number): boolean => {
  for (let attempt = 0;; attempt++) {
    const template = currentTemplate(ctx, now)
    try {
      ctx.files.link(template, lock)
      return true
    } catch (e) {
      const code = thrownCode(e)
      if (code === "EEXIST") return false
      if (code === "ENOENT" && attempt === 0 && templates.get(ctx.root)?.path === template) {
        templates.delete(ctx.root)
        continue
      }
      throw toSystemError("link", lock, e)
    }
  }
}

/** Remove a lock this store holds (best effort: a lock broken as stale may be gone). */
export const unlock = (ctx: LockContext, lock: string): void => ignore(() => ctx.files.unlink(lock))

type HolderState = "gone" | "stale" | "held"

/** S9: whether an existing lock is stale (holder dead on this host, or older than staleLockMs). */
const holderState = (ctx: LockContext, lock: string, now: number): HolderState => {
  let content: Uint8Array
  try {
    content = ctx.files.readFile(lock)
  } catch (e) {
    // gone meanwhile: retry at once
    if (thrownCode(e) === "ENOENT") return "gone"
    throw toSystemError("readFile", lock, e)
  }
  let holder: unknown
  try {
    holder = JSON.parse(new TextDecoder().decode(content))
  } catch {
    holder = undefined
  }
  if (
    typeof holder === "object" && holder !== null && "pid" in holder && typeof holder.pid === "number" &&
    "host" in holder && typeof holder.host === "string" && "at" in holder && typeof holder.at === "number"
  ) {
    if (holder.host === ctx.host && !isProcessAlive(holder.pid)) return "stale"
    return now - holder.at > ctx.staleLockMs ? "stale" : "held"
  }
  // unreadable content (a holder of an older build that died between create and write): judge by age
  let info: ReturnType<SyncFileSystem["stat"]>
  try {
    info = ctx.files.stat(lock)
  } catch (e) {
    throw toSystemError("stat", lock, e)
  }
  if (info === undefined) return "gone"
  return now - info.mtimeMs > ctx.staleLockMs ? "stale" : "held"
}

/**
 * Take the lock, breaking stale locks (S9) and retrying with a short backoff until
 * `lockTimeoutMs` (S6). Failures are `StoreFailure { method }`.
 */
export const acquireLock = (ctx: LockContext, lock: string, method: string): Effect.Effect<void, StoreFailure> =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    let delay = 2
    for (;;) {
      const now = yield* Clock.currentTimeMillis
      const outcome = attempt(ctx, lock, now)
      if (outcome === "acquired") return
      if (typeof outcome === "object") return yield* new StoreFailure({ method, cause: outcome.cause })
      if (outcome === "gone") continue
      if (outcome === "stale") {
        const removed = removeStale(ctx, lock)
        if (removed !== undefined) return yield* new StoreFailure({ method, cause: removed })
        yield* Effect.logDebug(`JsonlStore: removed a stale lock ${lock}`)
        continue
      }
      if (now - start >= ctx.lockTimeoutMs) {
        return yield* new StoreFailure({ rule: "S6", method, cause: "lock timeout", detail: lock })
      }
      // the wait may be interrupted (taking the lock is one synchronous link, never cut in half)
      yield* Effect.interruptible(Effect.sleep(delay))
      delay = Math.min(delay * 2, 50)
    }
  }).pipe(Effect.withClock(wallClock))

const attempt = (
  ctx: LockContext,
  lock: string,
  now: number
): "acquired" | HolderState | { readonly cause: unknown } => {
  try {
    return tryLock(ctx, lock, now) ? "acquired" : holderState(ctx, lock, now)
  } catch (cause) {
    return { cause }
  }
}

const removeStale = (ctx: LockContext, lock: string): unknown => {
  try {
    ctx.files.unlink(lock)
    return undefined
  } catch (e) {
    return thrownCode(e) === "ENOENT" ? undefined : toSystemError("remove", lock, e)
  }
}
