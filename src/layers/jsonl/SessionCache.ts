/**
 * What one JSONL store instance keeps per session (SPEC §7.1, §7.4.3, §7.4.5): headers registered
 * and not yet materialised, the `(size, nextSeq)` last seen under the lock (at most
 * `CACHED_SESSIONS`: a dropped entry only costs a rescan), sessions suspect after a failed rollback
 * (S8), and one in-process lock per session in an `RcMap`, alive only while an operation uses it.
 */
import * as Effect from "effect/Effect"
import * as RcMap from "effect/RcMap"
import type * as Scope from "effect/Scope"
import { makeRegistry, type Registry } from "../../services/SessionStore.js"

/** The stored state of a session file as this instance last saw it under the lock. */
export interface CachedState {
  readonly file: string
  readonly ino: string
  readonly size: number
  readonly nextSeq: number
  /** The file is in the compressed layout. */
  readonly compressed?: true
  /**
   * Set when the state comes from a read without the lock (a hint): the last record's offset and
   * first seq, which the first append checks under the lock before trusting `nextSeq`.
   */
  readonly lastRecord?: { readonly start: number; readonly seq: number }
  /** The hint of a compressed file: the last frame's offset and header, checked the same way. */
  readonly lastFrame?: { readonly start: number; readonly header: Uint8Array }
}

/** How many sessions' stored states are cached; the least recently written is dropped first. */
export const CACHED_SESSIONS = 1_024

/** The per-session state of one store instance. */
export interface JsonlSessions {
  /** The headers registered by `create` whose file does not exist yet (`SessionStore.make`). */
  readonly registry: Registry
  readonly cached: (id: string) => CachedState | undefined
  readonly remember: (id: string, state: CachedState) => void
  readonly forget: (id: string) => void
  /** S8: appends fail until a `load` re-reads the session. */
  readonly isSuspect: (id: string) => boolean
  readonly markSuspect: (id: string) => void
  readonly clearSuspect: (id: string) => void
  /** Run `effect` as the only operation on `id` in this instance (SPEC §7.4.5, last paragraph). */
  readonly serialised: <A, E>(id: string, effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
  /** True while an operation on `id` holds or awaits its in-process lock. */
  readonly busy: (id: string) => Effect.Effect<boolean>
}

/** Fresh per-session state; the in-process locks live as long as the scope. */
export const make: Effect.Effect<JsonlSessions, never, Scope.Scope> = Effect.gen(function*() {
  /** In insertion order: the least recently remembered first. */
  const cache = new Map<string, CachedState>()
  const suspect = new Set<string>()
  // one permit per session id; an entry is released as soon as no operation uses it
  const locks = yield* RcMap.make({ lookup: (_id: string) => Effect.makeSemaphore(1) })

  return {
    registry: makeRegistry(),
    cached: (id) => cache.get(id),
    remember: (id, state) => {
      cache.delete(id)
      cache.set(id, state)
      if (cache.size <= CACHED_SESSIONS) return
      for (const oldest of cache.keys()) {
        cache.delete(oldest)
        break
      }
    },
    forget: (id) => void cache.delete(id),
    isSuspect: (id) => suspect.has(id),
    markSuspect: (id) => void suspect.add(id),
    clearSuspect: (id) => void suspect.delete(id),
    serialised: (id, effect) =>
      Effect.scoped(Effect.flatMap(RcMap.get(locks, id), (semaphore) => semaphore.withPermits(1)(effect))),
    busy: (id) => RcMap.has(locks, id)
  }
})
