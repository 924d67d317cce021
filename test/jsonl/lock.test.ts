/**
 * JSONL concurrency and failure handling (SPEC §7.4.3 steps 5–7, §7.4.5, S6–S9): the lock file
 * taken by hard-linking the process's lock template (content, freshness, leftovers, stale-lock
 * breaking, timeout), racing appends from two store instances, and write/fsync failures rolled
 * back (S7) or leaving the session suspect (S8), injected through the store's synchronous file
 * seam (`syncFileSystem`) and, for large streamed batches, through a wrapped FileSystem.
 */
import { SystemError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { hostname } from "node:os"
import { nodeSyncFileSystem, type SyncFileSystem } from "../../src/layers/JsonlFiles.js"
import { type LockContext, tryLock, unlock } from "../../src/layers/JsonlLock.js"
import { makeJsonlStore } from "../../src/layers/JsonlStore.js"
import { fixture, header, turn, turnEnd, turnStart, userMessage } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)
const rule = (e: unknown) => (e as { rule?: string }).rule

/** A pid that cannot be alive (above Linux's maximum pid_max). */
const DEAD_PID = 999_999_999

const TEMPLATE = /^\.lock-\d+-[0-9a-f]{16}\.tmp$/

/** A materialised session `s` with one turn, plus the lock path. */
const withSession = (options: Parameters<typeof fixture>[0] = {}) =>
  Effect.gen(function*() {
    const f = yield* fixture(options)
    yield* f.store.create(header("s"))
    yield* f.store.append("s", turn(0), { expectedSeq: 0 })
    const templates = f.fs.readDirectory(f.root).pipe(Effect.map((names) => names.filter((n) => TEMPLATE.test(n)).sort()))
    return { ...f, lock: f.fileOf("s") + ".lock", templates }
  })

const lockContent = (pid: number, host: string, at: number) => JSON.stringify({ pid, host, at })

const holderOf = (text: string) => JSON.parse(text) as { pid: number; host: string; at: number }

/** A SyncFileSystem that records the content of every lock at the moment it is linked. */
const recordingLocks = (seen: Array<string>): SyncFileSystem => ({
  ...nodeSyncFileSystem,
  link: (existing, target) => {
    nodeSyncFileSystem.link(existing, target)
    if (target.endsWith(".lock")) seen.push(new TextDecoder().decode(nodeSyncFileSystem.readFile(target)))
  }
})

describe("JsonlStore lock file (§7.4.5)", () => {
  it.scopedLive("the lock holds {pid, host, at} while held and is removed after the append; one hidden template remains", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const { fs, lock, root, another, templates } = yield* withSession()
      const store = yield* another({ syncFileSystem: recordingLocks(seen) })
      const before = Date.now()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.isFalse(yield* fs.exists(lock))
      assert.strictEqual(seen.length, 1)
      const holder = holderOf(seen[0])
      assert.deepStrictEqual(Object.keys(holder), ["pid", "host", "at"])
      assert.strictEqual(holder.pid, process.pid)
      assert.strictEqual(holder.host, hostname())
      // the template's time: at most 100 ms before the lock was taken
      assert.isAtMost(before - holder.at, 100)
      assert.isAtMost(holder.at, Date.now())
      // the process's lock template: a hidden temporary name, 0600, holding the same content
      const names = yield* templates
      assert.strictEqual(names.length, 1)
      assert.isTrue(names[0].startsWith(`.lock-${process.pid}-`))
      assert.deepStrictEqual((yield* fs.readDirectory(root)).sort(), [names[0], "s.jsonl"])
      assert.strictEqual((yield* fs.stat(`${root}/${names[0]}`)).mode & 0o777, 0o600)
      assert.deepStrictEqual(holderOf(yield* fs.readFileString(`${root}/${names[0]}`)), holder)
    }).pipe(provide))

  it.scopedLive("the template is never listed, read or loaded as a session", () =>
    Effect.gen(function*() {
      const { store, templates } = yield* withSession()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.strictEqual((yield* templates).length, 1)
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["s"])
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scopedLive("S9: the lock content at acquisition is fresh: the template is replaced once staleLockMs / 4 old", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const { another, templates, fs, root } = yield* withSession()
      const store = yield* another({ staleLockMs: 400, syncFileSystem: recordingLocks(seen) })
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      const first = yield* templates
      yield* Effect.sleep("150 millis")
      const before = Date.now()
      yield* store.append("s", [turnEnd(4, 2)], { expectedSeq: 4 })
      assert.strictEqual(seen.length, 2)
      // a new template (the old inode is never rewritten: a lock may still be linked to it)
      assert.isAtLeast(holderOf(seen[1]).at, before)
      const second = yield* templates
      assert.strictEqual(second.length, 1)
      assert.notStrictEqual(second[0], first[0])
      assert.isAtLeast(holderOf(yield* fs.readFileString(`${root}/${second[0]}`)).at, before)
      // within staleLockMs / 4 the template is reused
      yield* store.append("s", [userMessage(5)], { expectedSeq: 5 })
      assert.deepStrictEqual(yield* templates, second)
      assert.strictEqual(seen[2], seen[1])
    }).pipe(provide))

  it.scopedLive("S9: with the default staleLockMs a lock's at is still at most 100 ms old when taken", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const { another } = yield* withSession()
      const store = yield* another({ syncFileSystem: recordingLocks(seen) })
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      yield* Effect.sleep("150 millis")
      const before = Date.now()
      yield* store.append("s", [turnEnd(4, 2)], { expectedSeq: 4 })
      assert.isAtLeast(holderOf(seen[1]).at, before)
    }).pipe(provide))

  it.scopedLive("a template removed by someone else is written again", () =>
    Effect.gen(function*() {
      const { fs, root, store, templates } = yield* withSession()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      const [first] = yield* templates
      yield* fs.remove(`${root}/${first}`)
      yield* store.append("s", [turnEnd(4, 2)], { expectedSeq: 4 })
      assert.strictEqual((yield* templates).length, 1)
      assert.strictEqual((yield* store.load("s")).events.length, 5)
    }).pipe(provide))

  it.scopedLive("two store instances in one process share the template and never interleave", () =>
    Effect.gen(function*() {
      const { another, store, templates } = yield* withSession()
      const other = yield* another()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      yield* other.append("s", [userMessage(4)], { expectedSeq: 4 })
      yield* store.append("s", [turnEnd(5, 2)], { expectedSeq: 5 })
      assert.strictEqual((yield* templates).length, 1)
      assert.strictEqual((yield* other.load("s")).events.length, 6)
    }).pipe(provide))

  it.scopedLive("a leftover template (and its lock) of a dead process is harmless, and removed once stale", () =>
    Effect.gen(function*() {
      const { fs, root, lock, store, templates } = yield* withSession({ staleLockMs: 60_000 })
      // a process killed while holding the lock: its template and the lock linked to it
      const leftover = `${root}/.lock-${DEAD_PID}-00000000000000ff.tmp`
      const old = `${root}/.lock-${DEAD_PID}-0000000000000aaa.tmp`
      yield* fs.writeFileString(leftover, lockContent(DEAD_PID, hostname(), Date.now()))
      yield* fs.link(leftover, lock)
      yield* fs.writeFileString(old, lockContent(DEAD_PID, hostname(), Date.now() - 120_000))
      const long = new Date(Date.now() - 120_000)
      yield* fs.utimes(old, long, long)
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["s"])
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.isFalse(yield* fs.exists(lock))
      // the young leftover stays (its owner could be a live process of another host); the old one is gone
      assert.isTrue(yield* fs.exists(leftover))
      assert.isFalse(yield* fs.exists(old))
      assert.strictEqual((yield* templates).filter((n) => n.startsWith(`.lock-${process.pid}-`)).length, 1)
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["s"])
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scopedLive("S9: a lock held by a dead pid on this host is broken", () =>
    Effect.gen(function*() {
      const { fs, lock, store } = yield* withSession({ lockTimeoutMs: 200 })
      yield* fs.writeFileString(lock, lockContent(DEAD_PID, hostname(), Date.now()))
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.isFalse(yield* fs.exists(lock))
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scopedLive("S9: a lock taken just now is not stale to a process with a short staleLockMs, however old the template", () =>
    Effect.gen(function*() {
      const { another, fs, lock, path, root } = yield* withSession()
      // "P": this process, default staleLockMs; its template was written by the first append
      const p: LockContext = {
        root,
        join: path.join,
        files: nodeSyncFileSystem,
        pid: process.pid,
        host: hostname(),
        staleLockMs: 30_000,
        lockTimeoutMs: 1_000
      }
      yield* Effect.sleep("600 millis")
      assert.isTrue(tryLock(p, lock, Date.now()))
      // "Q": a store configured with staleLockMs 500 sees P's lock, taken an instant ago
      const q = yield* another({ staleLockMs: 500, lockTimeoutMs: 200 })
      const err = yield* Effect.flip(q.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S6")
      assert.isTrue(yield* fs.exists(lock))
      unlock(p, lock)
      yield* q.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scopedLive("S6: an append waiting for a held lock can be interrupted at once; the holder's lock stays", () =>
    Effect.gen(function*() {
      const { fs, fileOf, lock, store } = yield* withSession({ lockTimeoutMs: 10_000 })
      yield* fs.writeFileString(lock, lockContent(process.pid, hostname(), Date.now()))
      const before = yield* fs.readFile(fileOf("s"))
      const fiber = yield* Effect.fork(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      yield* Effect.sleep("100 millis")
      const started = Date.now()
      yield* Fiber.interrupt(fiber)
      assert.isBelow(Date.now() - started, 1_000)
      assert.isTrue(yield* fs.exists(lock))
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
    }).pipe(provide))

  it.scopedLive("S6: a live holder blocks the append until it releases the lock", () =>
    Effect.gen(function*() {
      const { fs, fileOf, lock, store } = yield* withSession({ lockTimeoutMs: 5_000 })
      yield* fs.writeFileString(lock, lockContent(process.pid, hostname(), Date.now()))
      const before = yield* fs.readFile(fileOf("s"))
      const fiber = yield* Effect.fork(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      yield* Effect.sleep("150 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      yield* fs.remove(lock)
      yield* Fiber.join(fiber)
      assert.isFalse(yield* fs.exists(lock))
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scopedLive("S6: a live holder (this process) makes the append fail with StoreFailure after lockTimeoutMs; nothing written", () =>
    Effect.gen(function*() {
      const { fs, fileOf, lock, store } = yield* withSession({ lockTimeoutMs: 150 })
      yield* fs.writeFileString(lock, lockContent(process.pid, hostname(), Date.now()))
      const before = yield* fs.readFile(fileOf("s"))
      const started = Date.now()
      const err = yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      assert.isAtLeast(Date.now() - started, 150)
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual(rule(err), "S6")
      assert.strictEqual((err as { cause?: unknown }).cause, "lock timeout")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      // the holder's lock is left alone
      assert.isTrue(yield* fs.exists(lock))
      // truncateTornTail and replaceLog wait on the same lock
      const loaded = yield* store.load("s")
      const t = yield* Effect.flip(
        store.truncateTornTail("s", { fromSeq: 3, reason: "fragment", position: 1 }, { revision: loaded.revision })
      )
      assert.strictEqual(rule(t), "S6")
      const r = yield* Effect.flip(
        store.replaceLog("s", loaded.header, [], { revision: loaded.revision, backup: "jsonl" })
      )
      assert.strictEqual(rule(r), "S6")
      // released by the holder: the append goes through
      yield* fs.remove(lock)
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scopedLive("S6: a fresh lock of another host is not broken even if its pid is dead here", () =>
    Effect.gen(function*() {
      const { fs, lock, store } = yield* withSession({ lockTimeoutMs: 100 })
      yield* fs.writeFileString(lock, lockContent(DEAD_PID, "some-other-host.invalid", Date.now()))
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))), "S6")
    }).pipe(provide))

  it.scopedLive("S9: a lock older than staleLockMs is broken, whoever holds it", () =>
    Effect.gen(function*() {
      const { fs, lock, store } = yield* withSession({ lockTimeoutMs: 2_000, staleLockMs: 1_000 })
      yield* fs.writeFileString(lock, lockContent(process.pid, hostname(), Date.now() - 10_000))
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      yield* fs.writeFileString(lock, lockContent(4242, "some-other-host.invalid", Date.now() - 10_000))
      yield* store.append("s", [turnEnd(4, 2)], { expectedSeq: 4 })
      assert.strictEqual((yield* store.load("s")).events.length, 5)
    }).pipe(provide))

  it.scopedLive("S9: an unreadable lock is judged by its age", () =>
    Effect.gen(function*() {
      const { fs, lock, store } = yield* withSession({ lockTimeoutMs: 100, staleLockMs: 60_000 })
      yield* fs.writeFileString(lock, "")
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))), "S6")
      const old = new Date(Date.now() - 120_000)
      yield* fs.utimes(lock, old, old)
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
    }).pipe(provide))

  // it.scoped: lock waits use wall-clock time, so contention does not hang under the TestClock
  it.scoped("C7: racing appends with the same expectedSeq from two store instances: exactly one wins per round", () =>
    Effect.gen(function*() {
      const { another, store } = yield* withSession()
      const other = yield* another()
      let next = 3
      for (let round = 0; round < 5; round++) {
        const attempts = Array.from({ length: 8 }, (_, k) =>
          Effect.either((k % 2 === 0 ? store : other).append("s", [userMessage(next, `r${round}k${k}`)], {
            expectedSeq: next
          })))
        const results = yield* Effect.all(attempts, { concurrency: "unbounded" })
        const wins = results.filter((r) => r._tag === "Right").length
        assert.strictEqual(wins, 1)
        for (const r of results) if (r._tag === "Left") assert.strictEqual(r.left._tag, "AppendConflict")
        next++
      }
      const loaded = yield* other.load("s")
      assert.strictEqual(loaded.events.length, next)
      assert.isUndefined(loaded.tornTail)
    }).pipe(provide))

  it.scoped("C7: an append by another instance is seen through the file size (the stale cache is not trusted)", () =>
    Effect.gen(function*() {
      const { another, store } = yield* withSession()
      const other = yield* another()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      yield* other.append("s", [userMessage(4)], { expectedSeq: 4 })
      const err = yield* Effect.flip(store.append("s", [userMessage(4, "late")], { expectedSeq: 4 }))
      assert.strictEqual(rule(err), "C7")
      assert.strictEqual((err as { storedSeq?: number }).storedSeq, 5)
      yield* store.append("s", [turnEnd(5, 2)], { expectedSeq: 5 })
      assert.strictEqual((yield* other.load("s")).events.length, 6)
    }).pipe(provide))

  it.scopedLive("an append interrupted while it rescans under the lock releases the lock and writes nothing", () =>
    Effect.gen(function*() {
      const { fileOf, fs, lock, root } = yield* withSession()
      const path = yield* Path.Path
      const reading = yield* Deferred.make<void>()
      // a FileSystem whose reads of the session file (the rescan of a cache miss) never finish
      const stuck: FileSystem.FileSystem = {
        ...fs,
        open: (file, options) =>
          file === fileOf("s") && options?.flag === "r"
            ? Effect.zipRight(Deferred.succeed(reading, undefined), Effect.never)
            : fs.open(file, options)
      }
      const store = yield* makeJsonlStore({ root }).pipe(
        Effect.provideService(FileSystem.FileSystem, stuck),
        Effect.provideService(Path.Path, path)
      )
      const before = yield* fs.readFile(fileOf("s"))
      const fiber = yield* Effect.fork(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      yield* Deferred.await(reading)
      assert.isTrue(yield* fs.exists(lock))
      yield* Fiber.interrupt(fiber)
      assert.isFalse(yield* fs.exists(lock))
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
    }).pipe(provide))

  it.scoped("L11: an append to a session file removed meanwhile is SessionNotFound; the lock is released", () =>
    Effect.gen(function*() {
      const { fs, fileOf, lock, store } = yield* withSession()
      yield* fs.remove(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "SessionNotFound")
      assert.strictEqual(rule(err), "L11")
      assert.isFalse(yield* fs.exists(lock))
    }).pipe(provide))

  it.scoped("L11: an append to an unknown id before the root exists is SessionNotFound and creates nothing", () =>
    Effect.gen(function*() {
      const { fs, root, store } = yield* fixture()
      const err = yield* Effect.flip(store.append("nope", [turnStart(0)], { expectedSeq: 0 }))
      assert.strictEqual(err._tag, "SessionNotFound")
      assert.strictEqual(rule(err), "L11")
      assert.isFalse(yield* fs.exists(root))
    }).pipe(provide))
})

describe("JsonlStore first materialisation races", () => {
  it.scoped("J14/C7: racing first appends: one fiber materialises; the others conflict or find the id taken", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf, store } = yield* fixture()
      const other = yield* another()
      yield* store.create(header("m"))
      yield* other.create(header("m"))
      const attempts = Array.from({ length: 8 }, (_, k) =>
        Effect.either((k % 2 === 0 ? store : other).append("m", [userMessage(0, `k${k}`)], { expectedSeq: 0 })))
      const results = yield* Effect.all(attempts, { concurrency: "unbounded" })
      assert.strictEqual(results.filter((r) => r._tag === "Right").length, 1)
      for (const r of results) {
        if (r._tag === "Left") assert.include(["AppendConflict", "SessionExists"], r.left._tag)
      }
      const loaded = yield* store.load("m")
      assert.strictEqual(loaded.events.length, 1)
      assert.strictEqual((yield* fs.readFileString(fileOf("m"))).split("\n").length, 3)
    }).pipe(provide))
})

// ---------------------------------------------------------------------------------------------
// Fault injection: failures to write, fsync or truncate files opened for append

interface Faults {
  failWrite: boolean
  /** How many fsyncs of append-mode files fail next. */
  syncFailures: number
  failTruncate: boolean
  /** Short writes (half the bytes) that do not fail: the writer must write the rest. */
  shortWrites?: boolean
  /** Fail every stat and fstat with EACCES. */
  failStat?: boolean
  /** Fail every link with EPERM. */
  failLink?: boolean
}

const errno = (code: string, syscall: string) =>
  Object.assign(new Error(`${code}: injected ${syscall} failure`), { code, syscall })

/** The node:fs seam with faults on append-mode descriptors (lock templates are written normally). */
const faultySync = (faults: Faults): SyncFileSystem => {
  const appending = new Set<number>()
  const base = nodeSyncFileSystem
  return {
    ...base,
    open: (path, flags, mode) => {
      const fd = base.open(path, flags, mode)
      if (flags === "append") appending.add(fd)
      return fd
    },
    close: (fd) => {
      appending.delete(fd)
      base.close(fd)
    },
    // a partial write (half the bytes), then the failure of the write of the rest
    writeString: (fd, text) => {
      if (!appending.has(fd) || !(faults.failWrite || faults.shortWrites === true)) return base.writeString(fd, text)
      const bytes = new TextEncoder().encode(text)
      return base.write(fd, bytes, 0, Math.ceil(bytes.length / 2))
    },
    write: (fd, buffer, offset, length) => {
      if (!appending.has(fd) || !faults.failWrite) {
        return base.write(fd, buffer, offset, faults.shortWrites === true ? Math.ceil(length / 2) : length)
      }
      throw errno("EIO", "write")
    },
    fsync: (fd) => {
      if (appending.has(fd) && faults.syncFailures > 0) {
        faults.syncFailures--
        throw errno("EIO", "fsync")
      }
      base.fsync(fd)
    },
    ftruncate: (fd, length) => {
      if (faults.failTruncate) throw errno("EIO", "ftruncate")
      base.ftruncate(fd, length)
    },
    stat: (path) => {
      if (faults.failStat === true) throw errno("EACCES", "stat")
      return base.stat(path)
    },
    fstat: (fd) => {
      if (faults.failStat === true) throw errno("EACCES", "fstat")
      return base.fstat(fd)
    },
    link: (existing, target) => {
      if (faults.failLink === true) throw errno("EPERM", "link")
      base.link(existing, target)
    }
  }
}

const noFaults = (): Faults => ({ failWrite: false, syncFailures: 0, failTruncate: false })

describe("JsonlStore write failures (S7, S8)", () => {
  it.scoped("§7.4.3 step 5: short writes are continued until every byte of the batch is written", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf } = yield* withSession()
      const store = yield* another({ syncFileSystem: faultySync({ ...noFaults(), shortWrites: true }) })
      const batch = [userMessage(3, "naïve façade — 日本語 ✓ ".repeat(50)), turnEnd(4, 1)]
      yield* store.append("s", batch, { expectedSeq: 3 })
      yield* store.append("s", [userMessage(5, "ü".repeat(999))], { expectedSeq: 5 })
      const loaded = yield* store.load("s")
      assert.isUndefined(loaded.tornTail)
      assert.strictEqual(loaded.events.length, 6)
      const text = yield* fs.readFileString(fileOf("s"))
      assert.isTrue(text.includes("日本語 ✓ naïve"))
      assert.isTrue(text.endsWith(`${"ü".repeat(999)}"}],"source":{"kind":"user"}},"surfaceOp":"append"}\n`))
    }).pipe(provide))

  it.scoped("S7: a partial write then a failure is truncated back; a retry with the same expectedSeq succeeds", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf, lock } = yield* withSession()
      const faults: Faults = { ...noFaults(), failWrite: true }
      const store = yield* another({ syncFileSystem: faultySync(faults) })
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3, "lost")], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual(rule(err), "S7")
      assert.strictEqual((err as { method?: string }).method, "append")
      const cause = (err as { cause?: unknown }).cause
      assert.instanceOf(cause, SystemError)
      assert.strictEqual((cause as SystemError).reason, "Unknown")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(yield* fs.exists(lock))
      faults.failWrite = false
      yield* store.append("s", [userMessage(3, "kept")], { expectedSeq: 3 })
      const loaded = yield* store.load("s")
      assert.strictEqual(loaded.events.length, 4)
      assert.isUndefined(loaded.tornTail)
    }).pipe(provide))

  it.scoped("S7: an fsync failure after a complete write is rolled back; a retry succeeds", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf } = yield* withSession()
      const faults: Faults = { ...noFaults(), syncFailures: 1 }
      const store = yield* another({ syncFileSystem: faultySync(faults) })
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual(rule(err), "S7")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scoped("S8: when the rollback's fsync fails too, the append fails with both causes", () =>
    Effect.gen(function*() {
      const { another } = yield* withSession()
      const faults: Faults = { ...noFaults(), syncFailures: 2 }
      const store = yield* another({ syncFileSystem: faultySync(faults) })
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))), "S8")
      yield* store.load("s")
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scoped("S8: a failed rollback marks the session suspect until a load re-reads it", () =>
    Effect.gen(function*() {
      const { another, fileOf, fs, lock } = yield* withSession()
      const faults: Faults = { ...noFaults(), failWrite: true, failTruncate: true }
      const store = yield* another({ syncFileSystem: faultySync(faults) })
      const size = Number((yield* fs.stat(fileOf("s"))).size)
      const err = yield* Effect.flip(store.append("s", [userMessage(3, "half")], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      const cause = (err as { cause?: { write?: unknown; rollback?: unknown } }).cause
      assert.instanceOf(cause?.write, SystemError)
      assert.instanceOf(cause?.rollback, SystemError)
      assert.isFalse(yield* fs.exists(lock))
      // half the batch is on disk, unacknowledged
      assert.isAbove(Number((yield* fs.stat(fileOf("s"))).size), size)
      faults.failWrite = false
      faults.failTruncate = false
      const suspect = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(suspect._tag, "StoreFailure")
      assert.strictEqual(rule(suspect), "S8")
      // a load re-reads it: the partial write is a torn tail, and the store no longer refuses outright
      const loaded = yield* store.load("s")
      assert.strictEqual(loaded.tornTail?.fromSeq, 3)
      const after = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(after), "L1")
      yield* store.truncateTornTail("s", loaded.tornTail!, { revision: loaded.revision })
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scoped("a stat failure under the lock is StoreFailure (append) with the errno as a SystemError; nothing written", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf, lock } = yield* withSession()
      const faults: Faults = { ...noFaults(), failStat: true }
      const store = yield* another({ syncFileSystem: faultySync(faults) })
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual((err as { method?: string }).method, "append")
      const cause = (err as { cause?: unknown }).cause as SystemError
      assert.instanceOf(cause, SystemError)
      assert.strictEqual(cause.reason, "PermissionDenied")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(yield* fs.exists(lock))
      faults.failStat = false
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scoped("a lock that cannot be created (not EEXIST) is StoreFailure (append); nothing written", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf, lock } = yield* withSession()
      const faults: Faults = { ...noFaults(), failLink: true }
      const store = yield* another({ syncFileSystem: faultySync(faults) })
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual((err as { method?: string }).method, "append")
      assert.isUndefined(rule(err))
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(yield* fs.exists(lock))
    }).pipe(provide))
})

// ---------------------------------------------------------------------------------------------
// Large batches are streamed through the platform FileSystem: the same S7/S8 outcomes

/** A FileSystem whose append-mode files fail to write (after half the bytes), fsync or truncate. */
const faultyFileSystem = (fs: FileSystem.FileSystem, faults: Faults): FileSystem.FileSystem => ({
  ...fs,
  open: (path, options) =>
    Effect.map(fs.open(path, options), (file): FileSystem.File => {
      if (options?.flag !== "a") return file
      const injected = (method: string) =>
        new SystemError({ reason: "Unknown", module: "FileSystem", method, description: `injected ${method} failure` })
      return {
        [FileSystem.FileTypeId]: FileSystem.FileTypeId,
        fd: file.fd,
        get stat() {
          return file.stat
        },
        seek: (offset, from) => file.seek(offset, from),
        get sync() {
          if (faults.syncFailures > 0) {
            faults.syncFailures--
            return Effect.fail(injected("sync"))
          }
          return file.sync
        },
        read: (buffer) => file.read(buffer),
        readAlloc: (size) => file.readAlloc(size),
        truncate: (length) => (faults.failTruncate ? Effect.fail(injected("truncate")) : file.truncate(length)),
        write: (buffer) => file.write(buffer),
        writeAll: (buffer) =>
          faults.failWrite
            ? Effect.zipRight(file.writeAll(buffer.subarray(0, Math.ceil(buffer.length / 2))), Effect.fail(injected("write")))
            : file.writeAll(buffer)
      }
    })
})

const streamingStore = (root: string, faults: Faults) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    return yield* makeJsonlStore({ root }).pipe(
      Effect.provideService(FileSystem.FileSystem, faultyFileSystem(fs, faults)),
      Effect.provideService(Path.Path, path)
    )
  })

/** A user message event of about 300 KiB (above the streamed-write threshold). */
const big = (seq: number) => userMessage(seq, "é".repeat(100_000) + "x".repeat(100_000))

describe("JsonlStore write failures of large (streamed) batches (S7, S8)", () => {
  it.scoped("S7: a failed streamed write is truncated back; a retry succeeds", () =>
    Effect.gen(function*() {
      const { fs, fileOf, root, lock } = yield* withSession()
      const faults: Faults = { ...noFaults(), failWrite: true }
      const store = yield* streamingStore(root, faults)
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [big(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S7")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(yield* fs.exists(lock))
      faults.failWrite = false
      yield* store.append("s", [big(3)], { expectedSeq: 3 })
      const loaded = yield* store.load("s")
      assert.strictEqual(loaded.events.length, 4)
      assert.isUndefined(loaded.tornTail)
    }).pipe(provide))

  it.scoped("S8: a streamed write whose rollback fails leaves the session suspect until a load", () =>
    Effect.gen(function*() {
      const { root } = yield* withSession()
      const faults: Faults = { ...noFaults(), syncFailures: 2 }
      const store = yield* streamingStore(root, faults)
      const err = yield* Effect.flip(store.append("s", [big(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [big(3)], { expectedSeq: 3 }))), "S8")
      yield* store.load("s")
      yield* store.append("s", [big(3)], { expectedSeq: 3 })
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))
})
