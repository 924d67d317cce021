/**
 * JSONL concurrency and failure handling (SPEC §7.4.3 steps 5–7, §7.4.5, S6–S9): the lock file
 * (stale-lock breaking, timeout), racing appends from two store instances, and write/fsync
 * failures rolled back (S7) or leaving the session suspect (S8), through an injected FileSystem.
 */
import { SystemError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { hostname } from "node:os"
import { makeJsonlStore } from "../../src/layers/JsonlStore.js"
import { fixture, header, turn, turnEnd, turnStart, userMessage } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)
const rule = (e: unknown) => (e as { rule?: string }).rule

/** A pid that cannot be alive (above Linux's maximum pid_max). */
const DEAD_PID = 999_999_999

/** A materialised session `s` with one turn, plus the lock path. */
const withSession = (options: Parameters<typeof fixture>[0] = {}) =>
  Effect.gen(function*() {
    const f = yield* fixture(options)
    yield* f.store.create(header("s"))
    yield* f.store.append("s", turn(0), { expectedSeq: 0 })
    return { ...f, lock: f.fileOf("s") + ".lock" }
  })

const lockContent = (pid: number, host: string, at: number) => JSON.stringify({ pid, host, at })

describe("JsonlStore lock file (§7.4.5)", () => {
  it.scopedLive("the lock is created exclusively with {pid, host, at} and removed after the append", () =>
    Effect.gen(function*() {
      const { fs, lock, store, root } = yield* withSession()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.isFalse(yield* fs.exists(lock))
      assert.deepStrictEqual((yield* fs.readDirectory(root)).sort(), ["s.jsonl"])
    }).pipe(provide))

  it.scopedLive("S9: a lock held by a dead pid on this host is broken", () =>
    Effect.gen(function*() {
      const { fs, lock, store } = yield* withSession({ lockTimeoutMs: 200 })
      yield* fs.writeFileString(lock, lockContent(DEAD_PID, hostname(), Date.now()))
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
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
// Fault injection: a FileSystem whose append-mode files fail to write, fsync or truncate

interface Faults {
  failWrite: boolean
  /** How many fsyncs of append-mode files fail next. */
  syncFailures: number
  failTruncate: boolean
}

const injected = (method: string) =>
  new SystemError({ reason: "Unknown", module: "FileSystem", method, description: `injected ${method} failure` })

const faultyFileSystem = (fs: FileSystem.FileSystem, faults: Faults): FileSystem.FileSystem => ({
  ...fs,
  open: (path, options) =>
    Effect.map(fs.open(path, options), (file): FileSystem.File => {
      if (options?.flag !== "a") return file
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
        // a partial write, then the failure
        writeAll: (buffer) =>
          faults.failWrite
            ? Effect.zipRight(file.writeAll(buffer.subarray(0, Math.ceil(buffer.length / 2))), Effect.fail(injected("write")))
            : file.writeAll(buffer)
      }
    })
})

const faultyStore = (root: string, faults: Faults) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    return yield* makeJsonlStore({ root }).pipe(
      Effect.provideService(FileSystem.FileSystem, faultyFileSystem(fs, faults)),
      Effect.provideService(Path.Path, path)
    )
  })

describe("JsonlStore write failures (S7, S8)", () => {
  it.scoped("S7: a failed write is truncated back; a retry with the same expectedSeq succeeds", () =>
    Effect.gen(function*() {
      const { fs, fileOf, root } = yield* withSession()
      const faults: Faults = { failWrite: true, syncFailures: 0, failTruncate: false }
      const store = yield* faultyStore(root, faults)
      const before = yield* fs.readFile(fileOf("s"))
      const err = yield* Effect.flip(store.append("s", [userMessage(3, "lost")], { expectedSeq: 3 }))
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual(rule(err), "S7")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s")), before)
      faults.failWrite = false
      yield* store.append("s", [userMessage(3, "kept")], { expectedSeq: 3 })
      const loaded = yield* store.load("s")
      assert.strictEqual(loaded.events.length, 4)
      assert.isUndefined(loaded.tornTail)
    }).pipe(provide))

  it.scoped("S7: an fsync failure after a complete write is rolled back; a retry succeeds", () =>
    Effect.gen(function*() {
      const { fs, fileOf, root } = yield* withSession()
      const faults: Faults = { failWrite: false, syncFailures: 1, failTruncate: false }
      const store = yield* faultyStore(root, faults)
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
      const { root } = yield* withSession()
      const faults: Faults = { failWrite: false, syncFailures: 2, failTruncate: false }
      const store = yield* faultyStore(root, faults)
      const err = yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      assert.strictEqual(rule(yield* Effect.flip(store.append("s", [userMessage(3)], { expectedSeq: 3 }))), "S8")
      yield* store.load("s")
      yield* store.append("s", [userMessage(3)], { expectedSeq: 3 })
    }).pipe(provide))

  it.scoped("S8: a failed rollback marks the session suspect until a load re-reads it", () =>
    Effect.gen(function*() {
      const { fileOf, fs, root } = yield* withSession()
      const faults: Faults = { failWrite: true, syncFailures: 0, failTruncate: true }
      const store = yield* faultyStore(root, faults)
      const size = Number((yield* fs.stat(fileOf("s"))).size)
      const err = yield* Effect.flip(store.append("s", [userMessage(3, "half")], { expectedSeq: 3 }))
      assert.strictEqual(rule(err), "S8")
      const cause = (err as { cause?: { write?: unknown; rollback?: unknown } }).cause
      assert.isDefined(cause?.write)
      assert.isDefined(cause?.rollback)
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
})
