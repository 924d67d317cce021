/**
 * The write-behind controller of a batched session handle (SPEC §7.3): a fixed window after the
 * first pending event, one batch per expiry, `flush` to quiescence, a failed batch kept in order
 * and retried by the next enqueue or flush, an AppendConflict never retried.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type * as Scope from "effect/Scope"
import type { PreparedEvent } from "../../services/PrepareEvent.js"
import type { FlushError } from "../../services/Session.js"

/** A batched handle's write-behind controller. */
export interface WriteBehind {
  readonly enqueue: (event: PreparedEvent) => Effect.Effect<void>
  readonly flush: Effect.Effect<void, FlushError>
  /** The seqs of the events not written yet (kept after a failed batch), in order. */
  readonly unwritten: () => ReadonlyArray<number>
}

/**
 * The write-behind controller of a batched handle (SPEC §7.3): the first event into an idle
 * queue arms a fixed timer; on expiry the whole pending prefix is written as one batch; `flush`
 * cancels the timer and drains to quiescence; a failed batch goes back to the front and pauses
 * automatic retry until the next enqueue; an AppendConflict is never retried.
 */
export const makeWriteBehind = (options: {
  readonly windowMs: number
  readonly storedNext: number
  readonly write: (batch: ReadonlyArray<PreparedEvent>) => Effect.Effect<void, FlushError>
  readonly isFailed: () => boolean
  readonly sessionId: string
}): Effect.Effect<WriteBehind, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const writeLock = yield* Effect.makeSemaphore(1)
    let pending: Array<PreparedEvent> = []
    let storedNext = options.storedNext
    let timer: Fiber.RuntimeFiber<void> | undefined
    let firstPendingAt = 0
    let paused = false
    let warned = false

    // one batch: everything pending now; events arriving meanwhile form the next batch
    const writeOnce: Effect.Effect<void, FlushError> = writeLock.withPermits(1)(Effect.uninterruptible(
      Effect.suspend(() => {
        if (options.isFailed()) {
          pending = []
          return Effect.void
        }
        const batch = pending.filter((p) => p.event.seq >= storedNext)
        pending = []
        if (batch.length === 0) return Effect.void
        return options.write(batch).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              storedNext = batch[batch.length - 1].event.seq + 1
              warned = false
            })
          ),
          Effect.tapError(() =>
            Effect.sync(() => {
              // an AppendConflict failed the handle: its pending events are never written
              if (!options.isFailed()) pending = [...batch, ...pending]
              paused = true
            })
          )
        )
      })
    ))

    const arm = (delayMs: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        paused = false
        timer = yield* Effect.sleep(delayMs).pipe(
          Effect.zipRight(Effect.suspend(() => {
            timer = undefined
            return writeOnce
          })),
          Effect.zipRight(Effect.suspend(() => {
            if (pending.length === 0 || timer !== undefined) return Effect.void
            return Clock.currentTimeMillis.pipe(
              Effect.flatMap((now) => arm(Math.max(0, firstPendingAt + options.windowMs - now)))
            )
          })),
          Effect.catchAll((e) =>
            warned ? Effect.void : Effect.sync(() => {
              warned = true
            }).pipe(
              Effect.zipRight(Effect.logWarning(`session ${options.sessionId}: background write failed`, e))
            )
          ),
          // the timer must stay interruptible even when the append that armed it was not
          Effect.interruptible,
          Effect.forkIn(scope)
        )
      })

    const enqueue = (event: PreparedEvent): Effect.Effect<void> =>
      Effect.gen(function*() {
        const wasIdle = pending.length === 0
        pending.push(event)
        if (wasIdle) firstPendingAt = yield* Clock.currentTimeMillis
        if (timer === undefined && (wasIdle || paused)) yield* arm(options.windowMs)
      })

    const flush: Effect.Effect<void, FlushError> = Effect.gen(function*() {
      const t = timer
      timer = undefined
      if (t !== undefined) yield* Fiber.interrupt(t)
      while (pending.length > 0 && !options.isFailed()) yield* writeOnce
    })

    return { enqueue, flush, unwritten: () => pending.filter((p) => p.event.seq >= storedNext).map((p) => p.event.seq) }
  })
