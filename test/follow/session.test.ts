/**
 * `SessionLive.follow` (issue 31): a session written through a handle, durable or write-behind,
 * followed as checked `Event`s by a follower that does not write it; a write-behind handle's
 * events reach the follower once they are stored (a flush), never before.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { layer as memoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { readdirSync } from "node:fs"
import { freshStore } from "./stores.js"

const userMessage = (n: number) => ({
  id: `u${n}`,
  role: "user" as const,
  content: [{ type: "text" as const, text: `message ${n}` }],
  source: { kind: "user" as const }
})

describe("SessionLive.follow", () => {
  for (const mode of ["durable", "batched"] as const) {
    it.scopedLive(`a ${mode} handle's events, as the store holds them, checked as Events`, () =>
      Effect.gen(function*() {
        const id = `session-${mode}`
        const persistence = mode === "durable" ? { mode } as const : { mode, windowMs: 60_000 } as const
        const session = yield* SessionLive.create({ id, persistence })
        const follower = yield* Effect.fork(Stream.runCollect(Stream.take(SessionLive.follow(id), 6)))
        for (let n = 0; n < 6; n++) yield* session.append("user/message", userMessage(n), { surfaceOp: "append" })
        const store = yield* SessionStore
        if (mode === "batched") {
          // nothing is stored before the flush, so the follower cannot have it
          assert.deepStrictEqual(yield* Effect.either(store.readFrom(id, 0)).pipe(Effect.map((r) => r._tag === "Left" ? [] : r.right)), [])
          assert.isTrue(follower.unsafePoll() === null)
          yield* session.flush
        }
        const got = Chunk.toReadonlyArray(yield* Fiber.join(follower))
        assert.deepStrictEqual(got, yield* session.events)
        assert.deepStrictEqual(got.map((e) => e.seq), [0, 1, 2, 3, 4, 5])
      }).pipe(Effect.provide(memoryStore())))
  }

  it.scopedLive("on SQLite: a follower from the middle gets the rest as Events", () =>
    Effect.gen(function*() {
      const id = "session-sqlite"
      const session = yield* SessionLive.create({ id })
      for (let n = 0; n < 4; n++) yield* session.append("user/message", userMessage(n), { surfaceOp: "append" })
      const got = Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.take(SessionLive.follow(id, { fromSeq: 2 }), 2)))
      assert.deepStrictEqual(got, (yield* session.events).slice(2))
    }).pipe(Effect.provide(freshStore("sqlite"))))
})

describe("follow releases its watcher", () => {
  const plugin = (seq: number) => ({ type: "test/plugin", seq, time: seq, data: {}, ignorable: true }) as never
  /** A follower of `id`, and deferreds completed as it delivers seqs 0, 1 and 2. */
  const followerOf = (store: SessionStore["Type"], id: string) =>
    Effect.gen(function*() {
      const seen = [yield* Deferred.make<void>(), yield* Deferred.make<void>(), yield* Deferred.make<void>()]
      const fiber = yield* Effect.fork(Stream.runDrain(Stream.tap(store.follow(id), (e) => {
        const d = seen[(e as { seq: number }).seq]
        return d === undefined ? Effect.void : Deferred.succeed(d, undefined)
      })))
      return { fiber, seen }
    })

  it.scopedLive("SQLite: the followers of two sessions share one watcher connection; interrupting them closes it (no descriptor left per round)", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const openFds = () => readdirSync("/proc/self/fd").length
      for (const id of ["fds", "fds-2"]) {
        yield* store.create({ version: 1, id, createdAt: 0 })
        yield* store.append(id, [plugin(0)], { expectedSeq: 0 })
      }
      const before = openFds()
      const followers = yield* Effect.forEach([1, 2, 3, 4, 5], () => followerOf(store, "fds"))
      yield* Effect.forEach(followers, (f) => Deferred.await(f.seen[0]))
      // seq 1 reaches them only through a wake-up: the watcher is running by then
      yield* store.append("fds", [plugin(1)], { expectedSeq: 1 })
      yield* Effect.forEach(followers, (f) => Deferred.await(f.seen[1]))
      const one = openFds() - before
      assert.isAbove(one, 0, "the watcher holds a connection of its own")
      // a second session costs no descriptor: one watch of the database per store instance
      const second = yield* followerOf(store, "fds-2")
      yield* Deferred.await(second.seen[0])
      yield* store.append("fds-2", [plugin(1)], { expectedSeq: 1 })
      yield* Deferred.await(second.seen[1])
      assert.strictEqual(openFds() - before, one)
      yield* Effect.forEach([...followers, second], (f) => Fiber.interrupt(f.fiber))
      // SQLite keeps a closed connection's descriptors of a file another connection of the process
      // still locks until that one unlocks, and reuses them: a second round must not add any
      const afterFirst = openFds()
      const again = yield* followerOf(store, "fds")
      yield* Deferred.await(again.seen[1])
      // seq 2 reaches it only through a wake-up: its watcher (a new one) is running by then
      yield* store.append("fds", [plugin(2)], { expectedSeq: 2 })
      yield* Deferred.await(again.seen[2])
      assert.isAbove(openFds(), afterFirst)
      yield* Fiber.interrupt(again.fiber)
      assert.strictEqual(openFds(), afterFirst)
    }).pipe(Effect.provide(freshStore("sqlite"))))
})
