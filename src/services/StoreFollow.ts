/**
 * The follow machinery that `SessionStore.make` builds every backend's `follow` from
 * (docs/follow.md): the shared watchers of one store instance (one run of a backend's wake-ups
 * per followed session, however many followers) and the follower itself, which reads committed
 * events back through `readFrom` after each wake-up. Internal: `SessionStore` re-exports what is
 * public of it.
 *
 * @since 0.2.0
 */
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { AppendConflict, type SeqNotContiguous, type StoreFailure } from "../schema/Errors.js"

/**
 * Options of `follow`.
 *
 * @since 0.2.0
 * @category models
 */
export interface FollowOptions {
  /** The seq of the first event to deliver (default 0); at or past the end, the stream waits for it. */
  readonly fromSeq?: number
}

/**
 * The interval of the polls that stand in for a backend's wake-ups (its default, and the fallback
 * after a watch failed), in milliseconds.
 *
 * @since 0.2.0
 * @category constants
 */
export const FOLLOW_POLL_MILLIS = 100

/**
 * A wake-up every `millis` (the first at once): the poll that stands in for a backend's signal.
 *
 * @since 0.2.0
 * @category utils
 */
export const pollWakeups = (millis: number = FOLLOW_POLL_MILLIS): Stream.Stream<void> =>
  Stream.map(Stream.tick(`${millis} millis`), () => undefined)

interface Watcher {
  readonly pubsub: PubSub.PubSub<void>
  readonly fiber: Fiber.RuntimeFiber<void>
  refs: number
}

/**
 * A subscription to the wake-ups of one session, released with its scope.
 *
 * @since 0.2.0
 * @category models
 */
export type Subscribe = (id: string) => Effect.Effect<Queue.Dequeue<void>, never, Scope.Scope>

/**
 * The shared watchers of one store instance: the first follower of a session starts its wake-ups
 * in a daemon fiber publishing to a sliding one-element PubSub (wake-ups coalesce: memory stays
 * bounded whatever the followers' pace), the last one to leave stops it. A run of `wakeups` that
 * fails logs a warning and is replaced by `pollWakeups()`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeWatchers = (name: string, wakeups: (id: string) => Stream.Stream<void, StoreFailure>): Subscribe => {
  const watchers = new Map<string, Watcher>()
  const lock = Effect.unsafeMakeSemaphore(1)
  const start = (id: string) =>
    Effect.gen(function*() {
      const pubsub = yield* PubSub.sliding<void>(1)
      const fiber = yield* wakeups(id).pipe(
        Stream.catchAll((failure) =>
          Stream.concat(
            Stream.drain(Stream.fromEffect(Effect.logWarning(`${name}.follow: the watch of ${id} failed; polling instead`, failure))),
            pollWakeups()
          )
        ),
        Stream.runForEach(() => PubSub.publish(pubsub, undefined)),
        // started inside an acquire (uninterruptible): the watcher itself must stay interruptible
        Effect.interruptible,
        Effect.forkDaemon
      )
      return { pubsub, fiber, refs: 0 }
    })
  const acquire = (id: string) =>
    lock.withPermits(1)(Effect.gen(function*() {
      const watcher = watchers.get(id) ?? (yield* start(id))
      watchers.set(id, watcher)
      watcher.refs++
      return watcher
    }))
  const release = (id: string, watcher: Watcher) =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (--watcher.refs > 0) return Effect.void
      watchers.delete(id)
      return Effect.zipRight(Fiber.interrupt(watcher.fiber), PubSub.shutdown(watcher.pubsub))
    }))
  return (id) =>
    Effect.flatMap(
      Effect.acquireRelease(acquire(id), (watcher) => release(id, watcher)),
      (watcher) => PubSub.subscribe(watcher.pubsub)
    )
}

/**
 * What a follower is built from.
 *
 * @since 0.2.0
 * @category models
 */
export interface FollowParts<E> {
  /** The store's `readFrom`: committed events from a seq, through the read pipeline. */
  readonly readFrom: (id: string, fromSeq: number) => Effect.Effect<ReadonlyArray<unknown>, E>
  /** The wake-ups of a session (`makeWatchers`). */
  readonly subscribe: Subscribe
  /** L10: the refusal of a bad `fromSeq`, checked before anything is watched. */
  readonly checkFromSeq: (fromSeq: number) => SeqNotContiguous | undefined
  /**
   * The reads of one follower, when the backend can read only what is new
   * (`SessionStoreImpl.followReader`); `undefined` from a read: `readFrom` answers it.
   */
  readonly reader?: (id: string) => (fromSeq: number) => Effect.Effect<ReadonlyArray<unknown> | undefined, E>
}

/**
 * `follow` over `readFrom` and a wake-up subscription (docs/follow.md "The guarantee"): subscribe
 * first, then read from the next seq to deliver; after each read wait for a wake-up. Each read
 * first re-reads the event delivered last: a log replaced by one without it fails the stream (L8).
 *
 * @since 0.2.0
 * @category constructors
 */
export const followOver = <E>({ checkFromSeq, readFrom, reader, subscribe }: FollowParts<E>) =>
(id: string, options?: FollowOptions): Stream.Stream<unknown, E | SeqNotContiguous | AppendConflict> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const fromSeq = options?.fromSeq ?? 0
    const bad = checkFromSeq(fromSeq)
    if (bad !== undefined) return yield* bad
    const wake = yield* subscribe(id)
    const own = reader?.(id)
    const readSince = own === undefined
      ? readFrom
      : (id: string, from: number) => Effect.flatMap(own(from), (events) => events === undefined ? readFrom(id, from) : Effect.succeed(events))
    let next = fromSeq
    let last: string | undefined
    let waiting = false
    const read = Effect.gen(function*() {
      const overlap = last === undefined ? 0 : 1
      const events = yield* readSince(id, next - overlap)
      if (last !== undefined && (events.length === 0 || JSON.stringify(events[0]) !== last)) {
        return yield* new AppendConflict({
          rule: "L8",
          sessionId: id,
          expectedSeq: next,
          storedSeq: next - 1 + Math.min(events.length, 1),
          detail: `the followed log was replaced: event ${next - 1} is not the one delivered`
        })
      }
      const fresh = overlap === 0 ? events : events.slice(1)
      if (fresh.length > 0) {
        next += fresh.length
        last = JSON.stringify(fresh[fresh.length - 1])
      }
      return fresh
    })
    const pull: Effect.Effect<Chunk.Chunk<unknown>, E | AppendConflict> = Effect.gen(function*() {
      while (true) {
        if (waiting) yield* Queue.take(wake)
        waiting = true
        const fresh = yield* read
        if (fresh.length > 0) return Chunk.unsafeFromArray(fresh)
      }
    })
    return Stream.repeatEffectChunk(pull)
  }))
