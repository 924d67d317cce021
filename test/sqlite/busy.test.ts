import { Command, FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { createRequire } from "node:module"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { Event } from "../../src/schema/Events.js"

const betterSqlite3 = createRequire(import.meta.url).resolve("better-sqlite3")

// Another process (better-sqlite3 directly) takes the write lock, appends seq n, holds the
// lock for argv[3] ms, then commits. It prints "locked" once it holds the lock.
const holder = `
const Database = require(process.argv[1])
const db = new Database(process.argv[2])
db.pragma("busy_timeout = 10000")
db.exec("BEGIN IMMEDIATE")
const n = db.prepare("SELECT next_seq FROM sessions WHERE id = ?").get("busy").next_seq
db.prepare("INSERT INTO event_rows (session_id, seq, members, type, time, data) VALUES (?, ?, 1, 'turn/start', 0, ?)")
  .run("busy", n, JSON.stringify({ turn: "child" }))
db.prepare("UPDATE sessions SET next_seq = ?, revision = revision + 1 WHERE id = ?").run(n + 1, "busy")
process.stdout.write("locked\\n")
setTimeout(() => { db.exec("COMMIT"); db.close() }, Number(process.argv[3]))
`

const ev = (seq: number, turn: unknown) => ({ type: "turn/start", seq, time: 0, data: { turn } }) as unknown as Event

const setup = (busyTimeoutMs: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const file = path.join(yield* fs.makeTempDirectoryScoped(), "busy.db")
    const store = yield* makeSqliteStore({ filename: file, busyTimeoutMs })
    yield* store.create({ version: 1, id: "busy", createdAt: 0 })
    yield* store.append("busy", [ev(0, "first")], { expectedSeq: 0 })
    return { file, store }
  })

/** Start the holder and wait until it holds BEGIN IMMEDIATE. */
const holdLock = (file: string, holdMs: number) =>
  Effect.gen(function*() {
    const proc = yield* Command.start(Command.make(process.execPath, "-e", holder, betterSqlite3, file, String(holdMs)))
    const first = yield* proc.stdout.pipe(Stream.decodeText(), Stream.splitLines, Stream.runHead)
    assert.deepStrictEqual(first, Option.some("locked"))
    return proc
  })

const turns = (events: ReadonlyArray<unknown>) => events.map((e) => (e as Event<string, { turn: unknown }>).data.turn)

describe("SqliteStore under another process's write lock", () => {
  it.scopedLive("S6 a lock held for less than busyTimeoutMs: the append waits and lands after the holder's", () =>
    Effect.gen(function*() {
      const { file, store } = yield* setup(5_000)
      const proc = yield* holdLock(file, 400)
      const started = performance.now()
      yield* store.append("busy", [ev(2, "ours")], { expectedSeq: 2 })
      const waited = performance.now() - started
      assert.isAtLeast(waited, 200)
      assert.strictEqual(yield* proc.exitCode, 0)
      const loaded = yield* store.load("busy")
      assert.deepStrictEqual(turns(loaded.events), ["first", "child", "ours"])
      assert.strictEqual(loaded.tornTail, undefined)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("issue 18: opening a store and reading while another process holds the write lock neither waits nor fails", () =>
    Effect.gen(function*() {
      const { file } = yield* setup(5_000)
      const proc = yield* holdLock(file, 60_000)
      // a busy timeout far below the hold: an open that needed the write lock would fail with S6
      const reader = yield* makeSqliteStore({ filename: file, busyTimeoutMs: 50 })
      const loaded = yield* reader.load("busy")
      assert.deepStrictEqual(turns(loaded.events), ["first"], "the holder's uncommitted row is not seen")
      assert.deepStrictEqual((yield* reader.list()).map((h) => h.id), ["busy"])
      yield* proc.kill("SIGKILL")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scopedLive("S6 a lock held longer than busyTimeoutMs: StoreFailure and no partial rows", () =>
    Effect.gen(function*() {
      const { file, store } = yield* setup(300)
      const proc = yield* holdLock(file, 2_500)
      const error = yield* Effect.flip(store.append("busy", [ev(2, "ours"), ev(3, "ours too")], { expectedSeq: 2 }))
      assert.strictEqual(error._tag, "StoreFailure")
      assert.strictEqual(error._tag === "StoreFailure" ? error.rule : undefined, "S6")
      assert.strictEqual(error._tag === "StoreFailure" ? error.method : undefined, "append")
      assert.strictEqual(yield* proc.exitCode, 0)
      const loaded = yield* store.load("busy")
      assert.deepStrictEqual(turns(loaded.events), ["first", "child"])
      // the same append retried once the lock is free succeeds
      yield* store.append("busy", [ev(2, "ours"), ev(3, "ours too")], { expectedSeq: 2 })
      assert.deepStrictEqual(turns((yield* store.load("busy")).events), ["first", "child", "ours", "ours too"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
