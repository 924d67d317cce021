/**
 * The checkpoint policy (SPEC §7.3) over a batched session with a long window (TestClock never
 * advances, so only checkpoints write): flush before the model stream is pulled, before a
 * top-level tool body and at pre-step; fail-closed; interruption during the tool checkpoint
 * yields ABORTED_BEFORE_DISPATCH without running the body; nested calls reuse the checkpoint.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as Checkpoint from "../../src/programs/agent/Checkpoint.js"
import { StoreFailure } from "../../src/schema/Errors.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { todo } from "../helpers/events.js"

/** A memory store that counts appends, can fail them, and can hold one until released. */
const instrumented = Effect.gen(function*() {
  const inner = yield* makeMemoryStore()
  const control = {
    appends: 0,
    failing: false,
    hold: undefined as undefined | { started: Deferred.Deferred<void>; release: Deferred.Deferred<void> }
  }
  const store: SessionStoreShape = {
    ...inner,
    append: (id, events, options) =>
      Effect.gen(function*() {
        if (events.length === 0) return
        control.appends++
        if (control.failing) return yield* new StoreFailure({ method: "append", cause: "injected fault" })
        const hold = control.hold
        if (hold !== undefined) {
          yield* Deferred.succeed(hold.started, undefined)
          yield* Deferred.await(hold.release)
        }
        yield* inner.append(id, events, options)
      })
  }
  const stored = (id: string) => inner.load(id).pipe(Effect.map((l) => l.events.length), Effect.orElseSucceed(() => 0))
  return { store, control, stored }
})


const batched = (store: SessionStoreShape, id: string) =>
  SessionLive.create({ id, persistence: { mode: "batched", windowMs: 60_000 } }).pipe(Effect.provideService(SessionStore, store))

describe("checkpoint policy (SPEC 7.3)", () => {
  it.scoped("(c) atPreStep and (a) beforeModelRequest flush everything pending", () =>
    Effect.gen(function*() {
      const { store, stored } = yield* instrumented
      const s = yield* batched(store, "a")
      yield* s.append("todo/write", todo(0))
      yield* s.append("todo/write", todo(1))
      assert.strictEqual(yield* stored("a"), 0)
      yield* Checkpoint.atPreStep.pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual(yield* stored("a"), 2)
      yield* s.append("todo/write", todo(2))
      yield* Checkpoint.beforeModelRequest.pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual(yield* stored("a"), 3)
    }))

  it.scoped("(a) guardModelStream flushes lazily, when the model stream is first pulled", () =>
    Effect.gen(function*() {
      const { store, stored } = yield* instrumented
      const s = yield* batched(store, "m")
      yield* s.append("todo/write", todo(0))
      let storedWhenModelRan = -1
      const model = Stream.fromEffect(Effect.map(stored("m"), (n) => {
        storedWhenModelRan = n
        return "chunk"
      }))
      const guarded = Checkpoint.guardModelStream(model).pipe(Stream.provideService(Session.Session, s))
      yield* s.append("todo/write", todo(1))
      assert.strictEqual(yield* stored("m"), 0)
      const out = yield* Stream.runCollect(guarded)
      assert.deepStrictEqual([...out], ["chunk"])
      assert.strictEqual(storedWhenModelRan, 2)
    }))

  it.scoped("(b) beforeToolBody flushes, then runs the body and returns its value", () =>
    Effect.gen(function*() {
      const { store, stored } = yield* instrumented
      const s = yield* batched(store, "t")
      yield* s.append("todo/write", todo(0))
      const out = yield* Checkpoint.beforeToolBody(Effect.map(stored("t"), (n) => `stored ${n}`)).pipe(
        Effect.provideService(Session.Session, s)
      )
      assert.strictEqual(out, "stored 1")
    }))

  it.scoped("fail-closed: a failed checkpoint invokes neither the tool body nor the model", () =>
    Effect.gen(function*() {
      const { control, store } = yield* instrumented
      const s = yield* batched(store, "f")
      yield* s.append("todo/write", todo(0))
      control.failing = true
      let ran = 0
      const body = Effect.sync(() => ++ran)
      const e1 = yield* Effect.flip(Checkpoint.beforeToolBody(body).pipe(Effect.provideService(Session.Session, s)))
      assert.strictEqual(e1._tag, "StoreFailure")
      const model = Stream.fromEffect(body)
      const e2 = yield* Effect.flip(
        Stream.runDrain(Checkpoint.guardModelStream(model)).pipe(Effect.provideService(Session.Session, s))
      )
      assert.strictEqual(e2._tag, "StoreFailure")
      const e3 = yield* Effect.flip(Checkpoint.atPreStep.pipe(Effect.provideService(Session.Session, s)))
      assert.strictEqual(e3._tag, "StoreFailure")
      assert.strictEqual(ran, 0)
      // the pending event is kept and written once the store recovers
      control.failing = false
      yield* Checkpoint.beforeToolBody(body).pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual(ran, 1)
    }))

  it.scoped("interruption during the tool checkpoint: the body does not run, the marker is ABORTED_BEFORE_DISPATCH", () =>
    Effect.gen(function*() {
      const { control, store } = yield* instrumented
      const s = yield* batched(store, "i")
      yield* s.append("todo/write", todo(0))
      const hold = { started: yield* Deferred.make<void>(), release: yield* Deferred.make<void>() }
      control.hold = hold
      let ran = false
      let recorded: unknown = undefined
      const body = Effect.sync(() => {
        ran = true
        return "ran"
      })
      const fiber = yield* Effect.uninterruptibleMask((restore) =>
        Checkpoint.beforeToolBody(restore(body)).pipe(Effect.tap((out) => Effect.sync(() => void (recorded = out))))
      ).pipe(Effect.provideService(Session.Session, s), Effect.fork)
      yield* Deferred.await(hold.started)
      const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(hold.release, undefined)
      yield* Fiber.join(interrupting)
      assert.isFalse(ran)
      assert.isTrue(Checkpoint.isAbortedBeforeDispatch(recorded))
      assert.strictEqual((recorded as Checkpoint.AbortedBeforeDispatch).code, "ABORTED_BEFORE_DISPATCH")
      // the canonical result the loop then appends is a valid tool/result citing its tool/call
      control.hold = undefined
      const call = yield* s.append("tool/call", { turn: 1, step: 1, callId: "c1", name: "run", arguments: "{}" })
      const result = yield* s.append(
        "tool/result",
        Checkpoint.abortedBeforeDispatchResult({ turn: 1, step: 1, callId: "c1" }) as never,
        { surfaceOp: "append", sourceEventSeqs: [call.seq] }
      )
      assert.strictEqual((result.data as { error: { code: string } }).error.code, "ABORTED_BEFORE_DISPATCH")
    }))

  it.scoped("nested tool calls reuse the outer checkpoint (one flush)", () =>
    Effect.gen(function*() {
      const { control, store } = yield* instrumented
      const s = yield* batched(store, "n")
      yield* s.append("todo/write", todo(0))
      const out = yield* Checkpoint.beforeToolBody(Effect.gen(function*() {
        yield* s.append("todo/write", todo(1))
        const before = control.appends
        const inner = yield* Checkpoint.beforeToolBody(Effect.succeed("inner"))
        assert.strictEqual(control.appends, before)
        return inner
      })).pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual(out, "inner")
      assert.strictEqual(control.appends, 1)
      // after the body, a new top-level call checkpoints again
      yield* Checkpoint.beforeToolBody(Effect.void).pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual(control.appends, 2)
    }))

  it.scoped("with a durable handle every checkpoint is a no-op", () =>
    Effect.gen(function*() {
      const { control, store } = yield* instrumented
      const s = yield* SessionLive.create({ id: "d" }).pipe(Effect.provideService(SessionStore, store))
      yield* s.append("todo/write", todo(0))
      assert.strictEqual(control.appends, 1)
      yield* Effect.all([Checkpoint.atPreStep, Checkpoint.beforeModelRequest, Checkpoint.beforeToolBody(Effect.void)]).pipe(
        Effect.provideService(Session.Session, s)
      )
      assert.strictEqual(control.appends, 1)
    }))
})
