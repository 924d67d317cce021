/**
 * A session handle's append lock (SPEC §3.1 step 1, §11.2 `exclusive`): one permit, re-entrant for
 * the fiber holding it, so a program inside `exclusive` appends without waiting for itself. An
 * append that completes in one synchronous step may run without taking the permit when no other
 * fiber is inside the lock (`admits`): nothing can interleave with a step that never yields.
 */
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"

/** Run an effect holding the lock (at once when the current fiber holds it already). */
export interface AppendLock {
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R>
  /**
   * True when `fiber` may run a critical section that never yields right now, without the
   * permit: no fiber is inside the lock, or `fiber` is the one inside it.
   */
  readonly admits: (fiber: Fiber.RuntimeFiber<unknown, unknown>) => boolean
}

/** A fresh, re-entrant append lock. */
export const makeAppendLock: Effect.Effect<AppendLock> = Effect.map(Effect.makeSemaphore(1), (lock) => {
  // the fiber running a locked effect (set once it holds the permit, cleared when it ends)
  let owner: Fiber.RuntimeFiber<unknown, unknown> | undefined
  const release = Effect.sync(() => {
    owner = undefined
  })
  const withLock = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withFiberRuntime((fiber) => {
      if (owner === fiber) return effect
      return lock.withPermits(1)(Effect.suspend(() => {
        owner = fiber
        return Effect.ensuring(effect, release)
      }))
    })
  const admits = (fiber: Fiber.RuntimeFiber<unknown, unknown>): boolean => owner === undefined || owner === fiber
  return Object.assign(withLock, { admits })
})
