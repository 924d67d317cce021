import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/TestClock"
import { StoreFailure } from "../../src/schema/Errors.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { eventOf } from "../../src/services/PrepareEvent.js"
import { todo } from "../helpers/events.js"

/** A real memory store whose appends can be made to fail (fault injection), recording each batch. */
const faultyStore = Effect.gen(function*() {
  const inner = yield* makeMemoryStore()
  const control = { failing: false, batches: [] as Array<Array<number>> }
  const store: SessionStoreShape = {
    ...inner,
    append: (id, events, options) =>
      control.failing
        ? Effect.fail(new StoreFailure({ method: "append", cause: "injected fault" }))
        : inner.append(id, events, options).pipe(
          Effect.tap(() => Effect.sync(() => void (events.length > 0 && control.batches.push(events.map((e) => eventOf(e).seq)))))
        )
  }
  return { store, control }
})


const storedSeqs = (store: SessionStoreShape, id: string) =>
  store.load(id).pipe(
    Effect.map((l) => l.events.map((e) => (e as { seq: number }).seq)),
    Effect.orElseSucceed(() => [] as Array<number>)
  )

describe("batched persistence (SPEC 7.3)", () => {
  it.scoped("a fixed 200 ms window, not reset by later events, writes the pending prefix as one batch", () =>
    Effect.gen(function*() {
      const { control, store } = yield* faultyStore
      const s = yield* SessionLive.create({ id: "b1", persistence: { mode: "batched" } }).pipe(
        Effect.provideService(SessionStore, store)
      )
      yield* s.append("todo/write", todo(0))
      yield* TestClock.adjust("150 millis")
      yield* s.append("todo/write", todo(1))
      yield* TestClock.adjust("49 millis")
      assert.deepStrictEqual(yield* storedSeqs(store, "b1"), [])
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(control.batches, [[0, 1]])
      assert.deepStrictEqual(yield* storedSeqs(store, "b1"), [0, 1])
    }))

  it.scoped("flush drains everything, a failed batch is kept in order and retried, close flushes", () =>
    Effect.gen(function*() {
      const { control, store } = yield* faultyStore
      const s = yield* SessionLive.create({ id: "b2", persistence: { mode: "batched", windowMs: 1000 } }).pipe(
        Effect.provideService(SessionStore, store)
      )
      yield* s.append("todo/write", todo(0))
      yield* s.flush
      assert.deepStrictEqual(control.batches, [[0]])
      control.failing = true
      yield* s.append("todo/write", todo(1))
      yield* s.append("todo/write", todo(2))
      const e1 = yield* Effect.flip(s.flush)
      assert.strictEqual(e1._tag, "StoreFailure")
      const e2 = yield* Effect.flip(s.flush)
      assert.strictEqual(e2._tag, "StoreFailure")
      // the in-memory session keeps every committed event
      assert.strictEqual((yield* s.events).length, 3)
      control.failing = false
      yield* s.append("todo/write", todo(3))
      yield* s.close
      assert.deepStrictEqual(yield* storedSeqs(store, "b2"), [0, 1, 2, 3])
      assert.deepStrictEqual(control.batches, [[0], [1, 2, 3]])
      // N10: a closed handle rejects appends and flushes
      const closed = yield* Effect.flip(s.append("todo/write", todo(4)))
      assert.strictEqual(closed._tag, "SessionNotFound")
      assert.strictEqual((closed as { rule: string }).rule, "N10")
    }))

  it.scoped("a background write failure pauses retry until the next enqueue re-arms the timer", () =>
    Effect.gen(function*() {
      const { control, store } = yield* faultyStore
      const s = yield* SessionLive.create({ id: "b3", persistence: { mode: "batched" } }).pipe(
        Effect.provideService(SessionStore, store)
      )
      control.failing = true
      yield* s.append("todo/write", todo(0))
      yield* TestClock.adjust("200 millis")
      control.failing = false
      yield* TestClock.adjust("1 seconds")
      assert.deepStrictEqual(yield* storedSeqs(store, "b3"), [], "no automatic retry while paused")
      yield* s.append("todo/write", todo(1))
      yield* TestClock.adjust("200 millis")
      assert.deepStrictEqual(yield* storedSeqs(store, "b3"), [0, 1])
    }))

  it.scoped("write failures are reported: one warning per run of failed background writes, an error when a scope ends with events unwritten", () =>
    Effect.gen(function*() {
      const { control, store } = yield* faultyStore
      const logs: Array<{ level: string; message: string }> = []
      const logger = Logger.make(({ logLevel, message }) => {
        const parts = Array.isArray(message) ? message : [message]
        logs.push({ level: logLevel.label, message: String(parts[0]) })
      })
      const scope = yield* Scope.make()
      const s = yield* Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "b5", persistence: { mode: "batched" } }).pipe(
          Effect.provideService(SessionStore, store),
          Scope.extend(scope)
        )
        yield* s.append("todo/write", todo(0))
        yield* TestClock.adjust("200 millis")
        assert.deepStrictEqual(control.batches, [[0]])
        control.failing = true
        yield* s.append("todo/write", todo(1))
        yield* TestClock.adjust("200 millis")
        yield* s.append("todo/write", todo(2))
        yield* TestClock.adjust("200 millis")
        assert.deepStrictEqual(logs, [{ level: "WARN", message: "session b5: background write failed" }], "warned once")
        return s
      }).pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      // the handle's scope ends while the store still fails: nothing is written, and it is said
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(yield* storedSeqs(store, "b5"), [0])
      assert.strictEqual(logs.length, 2)
      assert.strictEqual(logs[1].level, "ERROR")
      assert.strictEqual(
        logs[1].message,
        "session b5: its scope closed before its pending events were written (2 event(s), seq 1–2); " +
          "flush or close the session before its scope ends to handle the failure"
      )
      assert.strictEqual(yield* s.state, "closed")
    }))

  it.scoped("N11: an AppendConflict fails a batched handle; its pending events are never written", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const a = yield* SessionLive.create({ id: "b4", persistence: { mode: "batched" } })
      yield* a.append("todo/write", todo(0))
      yield* a.flush
      const b = yield* SessionLive.open("b4")
      yield* b.append("todo/write", todo(1)) // b writes seq 1 and 2 (open wrote the end-seed at 1)
      yield* a.append("todo/write", todo(9))
      const err = yield* Effect.flip(a.flush)
      assert.strictEqual(err._tag, "AppendConflict")
      const again = yield* Effect.flip(a.append("todo/write", todo(10)))
      assert.strictEqual(again._tag, "AppendConflict")
      assert.strictEqual((again as { rule: string }).rule, "N11")
      const stored = yield* store.load("b4")
      assert.deepStrictEqual(stored.events.map((e) => (e as { type: string }).type), [
        "todo/write",
        "session/end-seed",
        "todo/write"
      ])
    }).pipe(Effect.provide(Layer.effect(SessionStore, makeMemoryStore()))))
})

describe("durable persistence", () => {
  it.scoped("F8/S7: a failed store append leaves the in-memory session unchanged and the next append reuses the seq", () =>
    Effect.gen(function*() {
      const { control, store } = yield* faultyStore
      const s = yield* SessionLive.create({ id: "d1" }).pipe(Effect.provideService(SessionStore, store))
      yield* s.append("turn/start", { turn: 1 })
      control.failing = true
      const err = yield* Effect.flip(
        s.append("user/message", { id: "u", role: "user", content: [], source: { kind: "user" } }, {
          surfaceOp: "append"
        })
      )
      assert.strictEqual(err._tag, "StoreFailure")
      assert.strictEqual((yield* s.events).length, 1)
      assert.deepStrictEqual(yield* s.surface.nodes, [])
      assert.deepStrictEqual(yield* s.messages, [])
      control.failing = false
      const ok = yield* s.append("user/message", { id: "u", role: "user", content: [], source: { kind: "user" } }, {
        surfaceOp: "append"
      })
      assert.strictEqual(ok.seq, 1)
      assert.deepStrictEqual(yield* storedSeqs(store, "d1"), [0, 1])
    }))
})

describe("feed and exclusive sections (SPEC 11.2)", () => {
  it.scoped("the feed publishes committed live events in order, never the seed or its end-seed marker", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.fromSeed({
        header: { version: 1, id: "f1", createdAt: 0 },
        seed: [{ type: "turn/start", seq: 0, time: 0, data: { turn: 1 } }]
      })
      assert.strictEqual(s.firstLiveSeq, 1)
      const feed = yield* s.subscribe
      const collected = yield* Stream.runCollect(Stream.take(feed, 2)).pipe(Effect.fork)
      yield* s.append("todo/write", todo(1))
      // a rejected append is never published
      yield* Effect.flip(s.appendUnknown("todo/write", 1n))
      yield* s.append("todo/write", todo(2))
      const got = Chunk.toReadonlyArray(yield* Fiber.join(collected)).map((e) => e.seq)
      assert.deepStrictEqual(got, [2, 3])
    }).pipe(Effect.provide(Layer.effect(SessionStore, makeMemoryStore()))))

  it.scoped("changes(fromSeq) replays the log then follows commits without gap or duplicate", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "f2" })
      yield* s.append("todo/write", todo(0))
      yield* s.append("todo/write", todo(1))
      const writer = yield* Effect.forEach([2, 3, 4, 5], (n) => s.append("todo/write", todo(n)), { discard: true }).pipe(
        Effect.fork
      )
      const seen = yield* Stream.runCollect(Stream.take(s.changes(1), 5))
      yield* Fiber.join(writer)
      assert.deepStrictEqual(Chunk.toReadonlyArray(seen).map((e) => e.seq), [1, 2, 3, 4, 5])
    }).pipe(Effect.provide(Layer.effect(SessionStore, makeMemoryStore()))))

  it.scoped("N6: a subscriber that appends is serialised after the published append", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "f3" })
      const feed = yield* s.subscribe
      const reactor = yield* feed.pipe(
        Stream.filter((e) => e.type === "turn/start"),
        Stream.take(1),
        Stream.mapEffect(() => s.append("todo/write", todo(1))),
        Stream.runDrain,
        Effect.fork
      )
      yield* s.append("turn/start", { turn: 1 })
      yield* Fiber.join(reactor)
      assert.deepStrictEqual((yield* s.events).map((e) => e.type), ["turn/start", "todo/write"])
    }).pipe(Effect.provide(Layer.effect(SessionStore, makeMemoryStore()))))

  it.scoped("exclusive sections are not interleaved by other fibers' appends", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "f4" })
      const section = s.exclusive(Effect.gen(function*() {
        yield* s.append("todo/write", todo(1))
        yield* Effect.sleep("10 millis")
        yield* s.append("todo/write", todo(2))
      }))
      const fiber = yield* Effect.fork(section)
      yield* Effect.yieldNow()
      const other = yield* Effect.fork(s.append("turn/start", { turn: 1 }))
      yield* TestClock.adjust("10 millis")
      yield* Fiber.join(fiber)
      yield* Fiber.join(other)
      assert.deepStrictEqual((yield* s.events).map((e) => e.type), ["todo/write", "todo/write", "turn/start"])
    }).pipe(Effect.provide(Layer.effect(SessionStore, makeMemoryStore()))))
})

describe("batched persistence under uninterruptible appends", () => {
  it.scoped("flush returns promptly after an append made in an uninterruptible region", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const s = yield* SessionLive.create({ id: "u1", persistence: { mode: "batched", windowMs: 1_000_000 } })
      yield* Effect.uninterruptible(s.append("turn/start", { turn: 1 }))
      yield* s.flush
      assert.strictEqual((yield* store.load("u1")).events.length, 1)
    }).pipe(Effect.provide(Layer.effect(SessionStore, makeMemoryStore()))))
})
