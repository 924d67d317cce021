/**
 * The follow contract (issue 31, docs/follow.md), parameterised by layer like the store contract:
 * in one process, a follower receives exactly the committed log from its `fromSeq` (stored now,
 * then appended), in seq order, once each; refused appends are never delivered; a replaced log
 * continues when it keeps the delivered prefix and fails with L8 when it does not.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { headerFor, pluginEvent, pluginEvents } from "../store-contract/contract.js"

let counter = 0
/** A session id unique in this process. */
export const freshId = (prefix: string) => `${prefix}-${process.pid}-${++counter}`

/** The seqs of what a follower received. */
export const seqsOf = (events: ReadonlyArray<unknown>) => events.map((e) => (e as { seq: number }).seq)

/** Cut `events` into batches of the given sizes (the rest in batches of the last size). */
export const batchesOf = <A>(events: ReadonlyArray<A>, sizes: ReadonlyArray<number>): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  let i = 0
  let k = 0
  while (i < events.length) {
    const size = Math.max(1, sizes.length === 0 ? 1 : sizes[Math.min(k++, sizes.length - 1)])
    out.push(events.slice(i, i + size))
    i += size
  }
  return out
}

/** Append `events` to `id` (already holding `from` events) in batches of `sizes`. */
const appendInBatches = (id: string, events: ReadonlyArray<Event>, sizes: ReadonlyArray<number>, from: number) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    let next = from
    for (const batch of batchesOf(events, sizes)) {
      yield* store.append(id, batch, { expectedSeq: next })
      next += batch.length
      yield* Effect.yieldNow()
    }
  })

/** A session holding `count` plugin events. */
const seeded = (id: string, count: number) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    yield* store.create(headerFor(id))
    if (count > 0) yield* store.append(id, pluginEvents(0, count), { expectedSeq: 0 })
  })

/** What the store holds from `fromSeq`, as JSON text. */
const committedFrom = (id: string, fromSeq: number) =>
  Effect.map(Effect.flatMap(SessionStore, (store) => store.readFrom(id, fromSeq)), (events) => events.map((e) => JSON.stringify(e)))

/** A follower of `id` from `fromSeq` that stops after `count` events, forked. */
const follower = (id: string, fromSeq: number, count: number) =>
  Effect.flatMap(SessionStore, (store) =>
    Effect.fork(Stream.runCollect(Stream.take(store.follow(id, { fromSeq }), count)).pipe(
      Effect.map((chunk) => Chunk.toReadonlyArray(chunk).map((e) => JSON.stringify(e)))
    )))

/** Options of the follow contract. */
export interface FollowContractOptions {
  readonly numRuns?: number
}

/** The follow contract on the store `makeLayer` builds (a fresh, empty one per test or run). */
export const followContract = (
  name: string,
  makeLayer: () => Layer.Layer<SessionStore, unknown, Scope.Scope>,
  options: FollowContractOptions = {}
): void => {
  const fresh = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.provide(self, makeLayer())

  // live clocks: the wake-ups of durable backends are timed (polls, watches)
  describe(`SessionStore.follow: ${name}`, () => {
    it.scopedLive.prop(
      "a follower receives the committed log from fromSeq, in order, once each, whatever the batches",
      {
        before: fc.integer({ min: 0, max: 6 }),
        after: fc.integer({ min: 1, max: 12 }),
        sizes: fc.array(fc.integer({ min: 1, max: 5 }), { maxLength: 6 }),
        start: fc.integer({ min: 0, max: 20 })
      },
      ({ after, before, sizes, start }) =>
        Effect.gen(function*() {
          const id = freshId("prop")
          yield* seeded(id, before)
          const total = before + after
          const fromSeq = Math.min(start, total)
          const followers = yield* Effect.all([follower(id, fromSeq, total - fromSeq), follower(id, fromSeq, total - fromSeq)])
          yield* appendInBatches(id, pluginEvents(before, after, "live"), sizes, before)
          const expected = yield* committedFrom(id, fromSeq)
          assert.strictEqual(expected.length, total - fromSeq)
          for (const f of followers) assert.deepStrictEqual(yield* Fiber.join(f), expected)
        }).pipe(fresh),
      { fastCheck: { numRuns: options.numRuns ?? 10 } }
    )

    it.scopedLive("fromSeq 0, in the middle and at the end: the stored suffix first, then the new events", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = freshId("from")
        yield* seeded(id, 4)
        const fibers = yield* Effect.all([0, 2, 4, 6].map((fromSeq) => follower(id, fromSeq, 8 - fromSeq)))
        yield* store.append(id, pluginEvents(4, 2, "a"), { expectedSeq: 4 })
        yield* store.append(id, pluginEvents(6, 2, "b"), { expectedSeq: 6 })
        const all = yield* committedFrom(id, 0)
        const got = yield* Effect.forEach(fibers, Fiber.join)
        assert.deepStrictEqual(got, [all, all.slice(2), all.slice(4), all.slice(6)])
      }).pipe(fresh))

    it.scopedLive("a refused append (C5, C7, an invalid event) is never delivered", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = freshId("refused")
        yield* seeded(id, 2)
        const f = yield* follower(id, 0, 4)
        for (const [batch, expectedSeq] of [[pluginEvents(5, 1, "c5"), 5], [pluginEvents(0, 1, "c7"), 0]] as const) {
          assert.strictEqual((yield* Effect.flip(store.append(id, batch, { expectedSeq })))._tag, "AppendConflict")
        }
        const invalid = [pluginEvent(2), { ...pluginEvent(3), seq: 9 } as Event]
        yield* Effect.flip(store.append(id, invalid, { expectedSeq: 2 }))
        yield* store.append(id, pluginEvents(2, 2, "ok"), { expectedSeq: 2 })
        const got = yield* Fiber.join(f)
        assert.deepStrictEqual(got, yield* committedFrom(id, 0))
        assert.deepStrictEqual(seqsOf(got.map((t) => JSON.parse(t))), [0, 1, 2, 3])
      }).pipe(fresh))

    it.scopedLive("L10 a negative or fractional fromSeq fails the stream; L11 an unknown session fails it", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = freshId("bad")
        yield* seeded(id, 1)
        for (const fromSeq of [-1, 0.5]) {
          const e = yield* Effect.flip(Stream.runDrain(store.follow(id, { fromSeq })))
          assert.strictEqual(e._tag, "SeqNotContiguous")
          assert.strictEqual(e.rule, "L10")
        }
        const e = yield* Effect.flip(Stream.runDrain(store.follow(freshId("unknown"))))
        assert.strictEqual(e._tag, "SessionNotFound")
        assert.strictEqual(e.rule, "L11")
      }).pipe(fresh))

    it.scopedLive("a replaced log that keeps the delivered events is followed on; one that does not fails with L8", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = freshId("replaced")
        yield* seeded(id, 3)
        const kept = yield* Effect.fork(Stream.runCollect(Stream.take(store.follow(id), 5)))
        const received = yield* Stream.runCollect(Stream.take(store.follow(id), 3))
        assert.strictEqual(Chunk.size(received), 3)
        // the same prefix, rewritten (as migrate does), then two more events
        const loaded = yield* store.load(id)
        yield* store.replaceLog(id, loaded.header, pluginEvents(0, 3), { revision: loaded.revision, backup: "test" })
        yield* store.append(id, pluginEvents(3, 2, "after"), { expectedSeq: 3 })
        assert.deepStrictEqual(seqsOf(Chunk.toReadonlyArray(yield* Fiber.join(kept))), [0, 1, 2, 3, 4])

        // a follower that delivered all five, then the log replaced by a different one
        const delivered = yield* Deferred.make<void>()
        const changed = yield* Effect.fork(Stream.runDrain(
          store.follow(id).pipe(Stream.tap((e) => seqsOf([e])[0] === 4 ? Deferred.succeed(delivered, undefined) : Effect.void))
        ))
        yield* Deferred.await(delivered)
        const now = yield* store.load(id)
        yield* store.replaceLog(id, now.header, pluginEvents(0, 5, "other"), { revision: now.revision, backup: "test" })
        const e = yield* Effect.flip(Fiber.join(changed))
        assert.strictEqual(e._tag, "AppendConflict")
        assert.strictEqual(e.rule, "L8")
      }).pipe(fresh))

    it.scopedLive("a slow follower still receives every event once, and interrupted followers leave the others working", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = freshId("slow")
        yield* seeded(id, 0)
        const slow = yield* Effect.fork(
          Stream.runCollect(store.follow(id).pipe(Stream.take(60), Stream.tap(() => Effect.sleep("1 millis"))))
        )
        const quitters = yield* Effect.all(Array.from({ length: 5 }, () => Effect.fork(Stream.runDrain(store.follow(id)))))
        yield* appendInBatches(id, pluginEvents(0, 30), [3, 1, 7], 0)
        yield* Effect.forEach(quitters, Fiber.interrupt)
        yield* appendInBatches(id, pluginEvents(30, 30), [4, 2], 30)
        const late = yield* Stream.runCollect(Stream.take(store.follow(id, { fromSeq: 55 }), 5))
        assert.deepStrictEqual(seqsOf(Chunk.toReadonlyArray(late)), [55, 56, 57, 58, 59])
        const got = Chunk.toReadonlyArray(yield* Fiber.join(slow))
        assert.deepStrictEqual(got.map((e) => JSON.stringify(e)), yield* committedFrom(id, 0))
      }).pipe(fresh))
  })
}
