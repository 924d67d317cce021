/**
 * A SQLite database that no connection has open for writing when a read-only store opens it is
 * read alone (immutable) at first; a writer that opens it later is seen: the read-only store's
 * next read opens it again, and its followers receive the writer's commits (docs/follow.md
 * "SQLite"), across writers that come and go.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import { layer as sqliteLayer } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"
import { freshId, seqsOf } from "./contract.js"
import { tempDir } from "./stores.js"

/** Append `count` events from `from` through a writing store opened for that and closed after. */
const writeThenClose = (filename: string, id: string, from: number, count: number) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    if (from === 0) yield* store.create(headerFor(id))
    yield* store.append(id, pluginEvents(from, count), { expectedSeq: from })
  }).pipe(Effect.provide(sqliteLayer({ filename })))

describe("SQLite follow of a database nobody writes when it starts", () => {
  it.scopedLive("a read-only follower started with no writer receives the commits of writers that open the database later", () =>
    Effect.gen(function*() {
      const filename = `${yield* tempDir}/sessions.db`
      const id = freshId("later")
      yield* writeThenClose(filename, id, 0, 2)
      // the last writer closed: no -wal file, so the read-only store reads the file alone
      assert.isFalse(NodeFs.existsSync(`${filename}-wal`))
      yield* Effect.gen(function*() {
        const reader = yield* SessionStore
        const two = yield* Deferred.make<void>()
        const follower = yield* Effect.fork(Stream.runCollect(reader.follow(id).pipe(
          Stream.tap((e) => seqsOf([e])[0] === 1 ? Deferred.succeed(two, undefined) : Effect.void),
          Stream.take(6)
        )))
        yield* Deferred.await(two)
        // a writer opens the database, appends and closes; then another one
        yield* writeThenClose(filename, id, 2, 2)
        yield* writeThenClose(filename, id, 4, 2)
        assert.deepStrictEqual(seqsOf(Chunk.toReadonlyArray(yield* Fiber.join(follower))), [0, 1, 2, 3, 4, 5])
        // the store's cold reads see them too
        assert.strictEqual((yield* reader.readFrom(id, 0)).length, 6)
      }).pipe(Effect.provide(sqliteLayer({ filename, readOnly: true })))
    }))

  it.scopedLive("changes: a wake-up once armed, then after a commit by another connection, to any session", () =>
    Effect.gen(function*() {
      const filename = `${yield* tempDir}/sessions.db`
      yield* writeThenClose(filename, "first", 0, 1)
      yield* Effect.gen(function*() {
        const reader = yield* SessionStore
        assert.isDefined(reader.changes)
        const woken = yield* Queue.unbounded<void>()
        yield* Effect.forkScoped(Stream.runForEach(reader.changes!(), () => Queue.offer(woken, undefined)))
        yield* Queue.take(woken)
        // a writer opens the database later, and writes another session
        yield* writeThenClose(filename, "second", 0, 1)
        yield* Queue.take(woken)
        const ids = (yield* reader.list()).map((h) => h.id)
        assert.deepStrictEqual(ids, ["first", "second"])
      }).pipe(Effect.provide(sqliteLayer({ filename, readOnly: true })))
    }))
})
