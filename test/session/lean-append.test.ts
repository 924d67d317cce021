import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { StoreFailure } from "../../src/schema/Errors.js"
import { layerMemoryStore, makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape, syncAppendOf } from "../../src/services/SessionStore.js"
import { todo, userMessage as user } from "../helpers/events.js"


describe("the uncontended append (issue 16: one synchronous step)", () => {
  it.scoped("another fiber's append waits while exclusive holds the lock; the holder's own appends run at once", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "lean-exclusive" })
      const entered = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(s.exclusive(Effect.gen(function*() {
        yield* s.append("todo/write", todo(0))
        yield* Deferred.succeed(entered, void 0)
        yield* Deferred.await(release)
        yield* s.append("todo/write", todo(1))
      })))
      yield* Deferred.await(entered)
      const other = yield* Effect.fork(s.append("todo/write", todo(2)))
      // give the other fiber every chance to run (the test clock never advances on its own)
      for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
      // the other fiber is still waiting: nothing of it is committed
      assert.deepStrictEqual((yield* s.events).map((e) => e.seq), [0])
      yield* Deferred.succeed(release, void 0)
      yield* Fiber.join(holder)
      const e = yield* Fiber.join(other)
      assert.strictEqual(e.seq, 2)
      assert.deepStrictEqual(
        (yield* s.events).map((x) => (x.data as { todos: Array<{ content: string }> }).todos[0].content),
        ["t0", "t1", "t2"]
      )
    }).pipe(Effect.provide(layerMemoryStore())))

  it.scoped("a store wrapping the memory store sees every append; its failure rejects and changes nothing", () =>
    Effect.gen(function*() {
      const inner = yield* makeMemoryStore()
      const seen: Array<number> = []
      let failing = false
      const wrapped: SessionStoreShape = {
        ...inner,
        append: (id, events, options) =>
          failing
            ? Effect.fail(new StoreFailure({ method: "append", cause: "injected fault" }))
            : Effect.zipRight(Effect.sync(() => void seen.push(options.expectedSeq)), inner.append(id, events, options))
      }
      // the synchronous path belongs to the memory store's own append: the wrapper carries the
      // member along (a spread) but it is not used for it
      assert.isDefined(syncAppendOf(inner))
      assert.isDefined(wrapped.appendSync)
      assert.isUndefined(syncAppendOf(wrapped))
      yield* Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "lean-wrapped" })
        yield* s.append("todo/write", todo(0))
        yield* s.append("todo/write", todo(1))
        assert.deepStrictEqual(seen, [0, 1])
        failing = true
        const events = yield* s.events
        const err = yield* Effect.flip(s.append("todo/write", todo(2)))
        assert.strictEqual(err._tag, "StoreFailure")
        assert.strictEqual(yield* s.events, events)
        failing = false
        assert.strictEqual((yield* s.append("todo/write", todo(3))).seq, 2)
        assert.deepStrictEqual((yield* inner.load("lean-wrapped")).events.length, 3)
      }).pipe(Effect.provide(Layer.succeed(SessionStore, wrapped)))
    }))

  it.scoped("an append rejected on the synchronous path leaves the log, surface and store as they were", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "lean-reject" })
      yield* s.append("user/message", user("u1"), { surfaceOp: "append" })
      const events = yield* s.events
      const messages = yield* s.messages
      const err = yield* Effect.flip(s.appendUnknown("user/message", user("u2"), { surfaceOp: { op: "replace", start: 7, end: 7 } }))
      assert.strictEqual(err._tag, "ReplaceRangeInvalid")
      assert.strictEqual(yield* s.events, events)
      assert.strictEqual(yield* s.messages, messages)
      assert.strictEqual((yield* (yield* SessionStore).load("lean-reject")).events.length, 1)
      assert.strictEqual((yield* s.append("todo/write", todo(0))).seq, 1)
    }).pipe(Effect.provide(layerMemoryStore())))
})

describe("derived messages and transcript reads (SPEC 4.6, 4.7)", () => {
  it.scoped("messages: a frozen array that never changes, shared until the surface gains or replaces a message", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "lean-messages" })
      yield* s.append("user/message", user("u1"), { surfaceOp: "append" })
      const first = yield* s.messages
      assert.isTrue(Object.isFrozen(first))
      // log-only events leave the derived messages as they were: the same array
      yield* s.append("todo/write", todo(0))
      assert.strictEqual(yield* s.messages, first)
      yield* s.append("user/message", user("u2"), { surfaceOp: "append" })
      const second = yield* s.messages
      assert.notStrictEqual(second, first)
      assert.deepStrictEqual(first.map((m) => m.id), ["u1"])
      assert.deepStrictEqual(second.map((m) => m.id), ["u1", "u2"])
      // a replacement derives again
      yield* s.appendUnknown("user/message", user("c1"), {
        surfaceOp: { op: "replace", start: 0, end: 2 },
        sourceEventSeqs: [0, 2]
      })
      assert.deepStrictEqual((yield* s.messages).map((m) => m.id), ["c1"])
      assert.deepStrictEqual(second.map((m) => m.id), ["u1", "u2"])
    }).pipe(Effect.provide(layerMemoryStore())))

  it.scoped("transcript: append-origin events in log order, frozen; an earlier read never grows", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "lean-transcript" })
      yield* s.append("user/message", user("u1"), { surfaceOp: "append" })
      yield* s.append("todo/write", todo(0))
      const first = yield* s.transcript
      assert.isTrue(Object.isFrozen(first))
      assert.strictEqual(yield* s.transcript, first)
      yield* s.append("user/message", user("u2"), { surfaceOp: "append" })
      yield* s.appendUnknown("user/message", user("c1"), {
        surfaceOp: { op: "replace", start: 0, end: 2 },
        sourceEventSeqs: [0, 2]
      })
      // the replacement is model-only: the shadowed append-origin events stay
      assert.deepStrictEqual((yield* s.transcript).map((e) => e.seq), [0, 2])
      assert.deepStrictEqual(first.map((e) => e.seq), [0])
      const events = yield* s.events
      assert.deepStrictEqual(
        (yield* s.transcript).map((e) => e.seq),
        events.filter((e) => e.surfaceOp === "append").map((e) => e.seq)
      )
    }).pipe(Effect.provide(layerMemoryStore())))

  it.scoped("a reopened session serves the same transcript and messages as the handle that wrote it", () =>
    Effect.gen(function*() {
      const written = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "lean-reopen" })
        yield* s.append("user/message", user("u1"), { surfaceOp: "append" })
        yield* s.append("user/message", user("u2"), { surfaceOp: "append" })
        yield* s.appendUnknown("user/message", user("c1"), { surfaceOp: { op: "replace", start: 0, end: 0 }, sourceEventSeqs: [0] })
        return { transcript: (yield* s.transcript).map((e) => e.seq), messages: (yield* s.messages).map((m) => m.id) }
      }))
      const r = yield* SessionLive.open("lean-reopen")
      assert.deepStrictEqual((yield* r.transcript).map((e) => e.seq), written.transcript)
      assert.deepStrictEqual((yield* r.messages).map((m) => m.id), written.messages)
    }).pipe(Effect.provide(layerMemoryStore())))
})
