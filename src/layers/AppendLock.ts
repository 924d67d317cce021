/**
 * A session handle's append lock (SPEC §3.1 step 1, §11.2 `exclusive`): one permit, re-entrant for
 * the fiber holding it, so a program inside `exclusive` appends without waiting for itself.
 */
import * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import type * as FiberId from "effect/FiberId"

/** Run an effect holding the lock (at once when the current fiber holds it already). */
export type AppendLock = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** A fresh, re-entrant append lock. */
export const makeAppendLock: Effect.Effect<AppendLock> = Effect.map(Effect.makeSemaphore(1), (lock) => {
  let owner: FiberId.FiberId | undefined
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.withFiberRuntime((fiber) => {
      const me = fiber.id()
      if (owner !== undefined && Equal.equals(owner, me)) return effect
      return lock.withPermits(1)(Effect.suspend(() => {
        owner = me
        return Effect.ensuring(
          effect,
          Effect.sync(() => {
            owner = undefined
          })
        )
      }))
    })
})
