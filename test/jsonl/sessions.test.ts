/**
 * The per-session state of a JSONL store instance (SPEC §7.4.3, §7.4.5): operations on one session
 * id run one at a time while other ids go on; a session's in-process lock exists only while an
 * operation holds or awaits it; the cache of stored states is bounded, dropping the least recently
 * written session first.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { CACHED_SESSIONS, make } from "../../src/layers/jsonl/SessionCache.js"

const state = (n: number) => ({ file: `/root/s${n}.jsonl`, ino: "7", size: 100 + n, nextSeq: n })

describe("JsonlSessions", () => {
  it.scoped("§7.4.5: operations on one id run one at a time, other ids are not held up; the lock is released when unused", () =>
    Effect.gen(function*() {
      const sessions = yield* make
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const order: Array<string> = []
      const first = yield* Effect.fork(
        sessions.serialised("a", Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)))
      )
      yield* Deferred.await(started)
      const second = yield* Effect.fork(sessions.serialised("a", Effect.sync(() => order.push("a2"))))
      yield* sessions.serialised("b", Effect.sync(() => order.push("b")))
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow()
      assert.deepStrictEqual(order, ["b"])
      assert.isTrue(yield* sessions.busy("a"))
      assert.isFalse(yield* sessions.busy("b"))
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      assert.deepStrictEqual(order, ["b", "a2"])
      assert.isFalse(yield* sessions.busy("a"))
    }))

  it.scoped("an operation interrupted while it waits for the lock leaves nothing held", () =>
    Effect.gen(function*() {
      const sessions = yield* make
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(
        sessions.serialised("a", Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release)))
      )
      yield* Deferred.await(started)
      const waiter = yield* Effect.fork(sessions.serialised("a", Effect.void))
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(waiter)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      assert.isFalse(yield* sessions.busy("a"))
      // and the id can be used again at once
      assert.strictEqual(yield* sessions.serialised("a", Effect.succeed(1)), 1)
    }))

  it.scoped(`the cache keeps at most ${CACHED_SESSIONS} sessions' states, dropping the least recently written`, () =>
    Effect.gen(function*() {
      const sessions = yield* make
      for (let n = 0; n < CACHED_SESSIONS; n++) sessions.remember(`s${n}`, state(n))
      // written again: s0 becomes the most recent, s1 the least
      sessions.remember("s0", state(0))
      sessions.remember("new", state(-1))
      assert.isUndefined(sessions.cached("s1"))
      assert.deepStrictEqual(sessions.cached("s0"), state(0))
      assert.deepStrictEqual(sessions.cached("new"), state(-1))
      let kept = 0
      for (let n = 0; n < CACHED_SESSIONS; n++) if (sessions.cached(`s${n}`) !== undefined) kept++
      assert.strictEqual(kept + 1, CACHED_SESSIONS)
      sessions.forget("new")
      assert.isUndefined(sessions.cached("new"))
    }))
})
