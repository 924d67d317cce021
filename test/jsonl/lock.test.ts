/**
 * JSONL concurrency and failure handling (SPEC §7.4.3 steps 5–7, §7.4.5, S6, S7, S8): the kernel
 * lock on the session file (held only while writing, no file left behind, never broken from a
 * live or paused holder, freed by a holder's death, followed across a replaced file), racing
 * appends from two store instances, and write/fsync failures rolled back (S7) or leaving the
 * session suspect (S8), injected through the store's synchronous file seam (the `SyncFileSystem` service)
 * and, for large streamed batches, through a wrapped FileSystem.
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
import { layerTest, nodeSyncFileSystem, type SyncFileSystem } from "../../src/layers/jsonl/SyncFileSystem.js"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import type { Event } from "../../src/schema/Events.js"
import { fixture, header, turn, turnEnd, turnStart, userMessage } from "./helpers.js"
import { holdInProcess, isLocked, spawnHolder } from "./holder.js"

const provide = Effect.provide(NodeContext.layer)
const rule = (e: unknown) => (e as { rule?: string }).rule
/** Build a store with these synchronous file calls in place of node:fs. */
const withFiles = (files: Partial<SyncFileSystem>) => Effect.provide(layerTest(files))

/** A pid that cannot be alive (above Linux's maximum pid_max). */
const DEAD_PID = 999_999_999

/** A materialised session `s` with one turn (seqs 0–2). */
const withSession = (options: Parameters<typeof fixture>[0] = {}) =>
  Effect.gen(function*() {
    const f = yield* fixture(options)
    yield* f.store.create(header("s"))
    yield* f.store.append("s", turn(0), { expectedSeq: 0 })
    return { ...f, file: f.fileOf("s") }
  })

/** The names in a directory, sorted. */
const namesIn = (fs: FileSystem.FileSystem, dir: string) =>
  Effect.map(fs.readDirectory(dir), (names) => [...names].sort())

describe("JsonlStore file lock (§7.4.5)", () => {
  it.scopedLive("an append holds an exclusive lock on the session file while it writes, and releases it", () =>
    Effect.gen(function*() {
      const { another, file } = yield* withSession()
      const lockedDuringWrite: Array<boolean> = []
      const probing: Partial<SyncFileSystem> = {
        writeString: (fd, text) => {
          lockedDuringWrite.push(isLocked(file))
          return nodeSyncFileSystem.writeString(fd, text)
        }
      }
      const store = yield* another().pipe(withFiles(probing))
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      yield* store.append("s", [userMessage(4)], { expectedSeq: 4 })
      assert.deepStrictEqual(lockedDuringWrite, [true, true])
      assert.isFalse(isLocked(file))
    }).pipe(provide))

  it.scopedLive("no lock, template or temporary file is left in the directory by appends, truncation or replacement", () =>
    Effect.gen(function*() {
      const { file, fs, root, store } = yield* withSession()
      for (let seq = 3; seq < 8; seq++) yield* store.append("s", [userMessage(seq)], { expectedSeq: seq })
      assert.deepStrictEqual(yield* namesIn(fs, root), ["s.jsonl"])
      yield* fs.writeFileString(file, (yield* fs.readFileString(file)) + `{"type":"turn/st`)
      const torn = yield* store.load("s")
      yield* store.truncateTornTail("s", torn.tornTail!, { revision: torn.revision })
      const loaded = yield* store.load("s")
      yield* store.replaceLog("s", loaded.header, loaded.events as ReadonlyArray<Event>, { revision: loaded.revision, backup: "jsonl" })
      assert.deepStrictEqual(yield* namesIn(fs, root), ["s.jsonl", "s.jsonl.v1.bak"])
      assert.isFalse(isLocked(file))
    }).pipe(provide))

  it.scopedLive("S6: a live holder blocks the append until it releases the lock; nothing is written meanwhile", () =>
    Effect.gen(function*() {
      const { file, fs, store } = yield* withSession({ lockTimeoutMs: 30_000 })
      const holder = holdInProcess(file)
      const before = yield* fs.readFile(file)
      const fiber = yield* Effect.fork(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      yield* Effect.sleep("150 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
      assert.deepStrictEqual(yield* fs.readFile(file), before)
      holder.release()
      yield* Fiber.join(fiber)
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scopedLive("S6: an append waiting for a held lock can be interrupted at once; the holder keeps its lock", () =>
    Effect.gen(function*() {
      const { file, fs, store } = yield* withSession({ lockTimeoutMs: 30_000 })
      const holder = holdInProcess(file)
      const before = yield* fs.readFile(file)
      const fiber = yield* Effect.fork(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      yield* Effect.sleep("100 millis")
      yield* Fiber.interrupt(fiber)
      assert.isTrue(isLocked(file))
      assert.deepStrictEqual(yield* fs.readFile(file), before)
      holder.release()
      assert.isFalse(isLocked(file))
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scopedLive("S6: a live holder makes append, truncateTornTail and replaceLog fail with StoreFailure after lockTimeoutMs", () =>
    Effect.gen(function*() {
      const { file, fs, store } = yield* withSession({ lockTimeoutMs: 150 })
      const holder = holdInProcess(file)
      const before = yield* fs.readFile(file)
      const err = yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual(rule(err), "S6")
      assert.strictEqual((err as { cause?: unknown }).cause, "lock timeout")
      const loaded = yield* store.load("s")
      const t = yield* Effect.flip(
        store.truncateTornTail("s", { fromSeq: 3, reason: "fragment", position: 1 }, { revision: loaded.revision })
      )
      assert.strictEqual(rule(t), "S6")
      const r = yield* Effect.flip(store.replaceLog("s", loaded.header, [], { revision: loaded.revision, backup: "jsonl" }))
      assert.strictEqual(rule(r), "S6")
      assert.deepStrictEqual(yield* fs.readFile(file), before)
      // the holder's lock was never taken from it
      assert.isTrue(isLocked(file))
      holder.release()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scopedLive("a holder in another process that is paused (SIGSTOP) is never broken into; once continued and released, appends go on", () =>
    Effect.gen(function*() {
      const { file, fs, store } = yield* withSession({ lockTimeoutMs: 300 })
      const holder = yield* spawnHolder(file)
      yield* holder.signal("SIGSTOP")
      const before = yield* fs.readFile(file)
      // far longer than any lease a lock file would have had: still held
      for (let i = 0; i < 3; i++) {
        const err = yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
        assert.strictEqual(rule(err), "S6")
      }
      assert.deepStrictEqual(yield* fs.readFile(file), before)
      yield* holder.signal("SIGCONT")
      yield* holder.release
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.strictEqual((yield* store.load("s")).events.length, 4)
    }).pipe(provide))

  it.scopedLive("a holder that dies (SIGKILL) frees the lock with its process: the next append needs no wait", () =>
    Effect.gen(function*() {
      const { file, store } = yield* withSession({ lockTimeoutMs: 100 })
      const holder = yield* spawnHolder(file)
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))), "S6")
      yield* holder.signal("SIGKILL")
      assert.isFalse(isLocked(file))
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scopedLive("a lock file of an older build (even of a dead pid) is neither needed nor broken: it is left exactly as it was", () =>
    Effect.gen(function*() {
      const { file, fs, root, store } = yield* withSession({ lockTimeoutMs: 100 })
      const legacy = file + ".lock"
      const content = JSON.stringify({ pid: DEAD_PID, host: "elsewhere", at: 0 })
      yield* fs.writeFileString(legacy, content)
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.strictEqual(yield* fs.readFileString(legacy), content)
      assert.deepStrictEqual(yield* namesIn(fs, root), ["s.jsonl", "s.jsonl.lock"])
    }).pipe(provide))

  it.scopedLive("a writer waiting on a file that is replaced meanwhile locks and checks the new file (C7 against its content)", () =>
    Effect.gen(function*() {
      const { another, file, fs, store } = yield* withSession({ lockTimeoutMs: 30_000 })
      const other = yield* another()
      // the store caches the file's state; then another writer holds the lock and replaces the file
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      const holder = holdInProcess(file)
      const fiber = yield* Effect.fork(store.append("s", [userMessage(4)], { expectedSeq: 4 }))
      yield* Effect.sleep("100 millis")
      const loaded = yield* other.load("s")
      const replacement = [...loaded.events, userMessage(4, "other"), userMessage(5, "other")]
      const temp = file + ".new"
      yield* fs.writeFileString(temp, (yield* fs.readFileString(file)).split("\n")[0] + "\n" +
        replacement.map((e) => JSON.stringify(e)).join("\n") + "\n")
      yield* fs.rename(temp, file)
      const oldInodeBytes = yield* fs.readFileString(file)
      holder.release()
      const err = yield* Effect.flip(Fiber.join(fiber))
      assert.strictEqual(rule(err), "C7")
      assert.strictEqual((err as { storedSeq?: number }).storedSeq, 6)
      assert.strictEqual(yield* fs.readFileString(file), oldInodeBytes)
      yield* store.append("s", [turnEnd(6, 2)], { expectedSeq: 6 })
      assert.strictEqual((yield* other.load("s")).events.length, 7)
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
      const { file, fs, root } = yield* withSession()
      const path = yield* Path.Path
      const reading = yield* Deferred.make<void>()
      // a FileSystem whose reads of the session file (the rescan of a cache miss) never finish
      const stuck: FileSystem.FileSystem = {
        ...fs,
        open: (name, options) =>
          name === file && options?.flag === "r"
            ? Effect.zipRight(Deferred.succeed(reading, undefined), Effect.never)
            : fs.open(name, options)
      }
      const store = yield* makeJsonlStore({ root }).pipe(
        Effect.provideService(FileSystem.FileSystem, stuck),
        Effect.provideService(Path.Path, path)
      )
      const before = yield* fs.readFile(file)
      const fiber = yield* Effect.fork(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      yield* Deferred.await(reading)
      assert.isTrue(isLocked(file))
      yield* Fiber.interrupt(fiber)
      assert.isFalse(isLocked(file))
      assert.deepStrictEqual(yield* fs.readFile(file), before)
    }).pipe(provide))

  it.scoped("L11: an append to a session file removed meanwhile is SessionNotFound", () =>
    Effect.gen(function*() {
      const { file, fs, root, store } = yield* withSession()
      yield* fs.remove(file)
      const err = yield* Effect.flip(store.append("s", [turnStart(3, 2)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "SessionNotFound")
      assert.strictEqual(rule(err), "L11")
      assert.deepStrictEqual(yield* namesIn(fs, root), [])
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
  /** Fail every lock attempt with ENOLCK. */
  failLock?: boolean
}

const errno = (code: string, syscall: string) =>
  Object.assign(new Error(`${code}: injected ${syscall} failure`), { code, syscall })

/** The node:fs seam with faults on append-mode descriptors. */
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
    tryLock: (fd) => {
      if (faults.failLock === true) throw errno("ENOLCK", "flock")
      return base.tryLock(fd)
    }
  }
}

const noFaults = (): Faults => ({ failWrite: false, syncFailures: 0, failTruncate: false })

describe("JsonlStore write failures (S7, S8)", () => {
  it.scoped("§7.4.3 step 5: short writes are continued until every byte of the batch is written", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf } = yield* withSession()
      const store = yield* another().pipe(withFiles(faultySync({ ...noFaults(), shortWrites: true })))
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
      const { another, fs, fileOf, file } = yield* withSession()
      const faults: Faults = { ...noFaults(), failWrite: true }
      const store = yield* another().pipe(withFiles(faultySync(faults)))
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3, "lost")], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual(rule(err), "S7")
      assert.strictEqual((err as { method?: string }).method, "append")
      const cause = (err as { cause?: unknown }).cause
      assert.instanceOf(cause, SystemError)
      assert.strictEqual((cause as SystemError).reason, "Unknown")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(isLocked(file))
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
      const store = yield* another().pipe(withFiles(faultySync(faults)))
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
      const store = yield* another().pipe(withFiles(faultySync(faults)))
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))), "S8")
      yield* store.load("s")
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scoped("S8: a failed rollback marks the session suspect until a load re-reads it", () =>
    Effect.gen(function*() {
      const { another, fileOf, fs, file } = yield* withSession()
      const faults: Faults = { ...noFaults(), failWrite: true, failTruncate: true }
      const store = yield* another().pipe(withFiles(faultySync(faults)))
      const size = Number((yield* fs.stat(fileOf("s"))).size)
      const err = yield* Effect.flip(store.append("s", [userMessage(3, "half")], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      const cause = (err as { cause?: { write?: unknown; rollback?: unknown } }).cause
      assert.instanceOf(cause?.write, SystemError)
      assert.instanceOf(cause?.rollback, SystemError)
      assert.isFalse(isLocked(file))
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
      const { another, fs, fileOf, file } = yield* withSession()
      const faults: Faults = { ...noFaults(), failStat: true }
      const store = yield* another().pipe(withFiles(faultySync(faults)))
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual((err as { method?: string }).method, "append")
      const cause = (err as { cause?: unknown }).cause as SystemError
      assert.instanceOf(cause, SystemError)
      assert.strictEqual(cause.reason, "PermissionDenied")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(isLocked(file))
      faults.failStat = false
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scoped("a lock that fails (not EWOULDBLOCK, e.g. ENOLCK) is StoreFailure (append); nothing written", () =>
    Effect.gen(function*() {
      const { another, fs, fileOf, file } = yield* withSession()
      const faults: Faults = { ...noFaults(), failLock: true }
      const store = yield* another().pipe(withFiles(faultySync(faults)))
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual((err as { method?: string }).method, "append")
      assert.isUndefined(rule(err))
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(isLocked(file))
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
      const { fs, fileOf, root, file } = yield* withSession()
      const faults: Faults = { ...noFaults(), failWrite: true }
      const store = yield* streamingStore(root, faults)
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [big(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S7")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      assert.isFalse(isLocked(file))
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
