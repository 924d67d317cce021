/**
 * The head every backend's append shares (SPEC §7.1): an empty batch is a no-op, then the batch
 * checks of `prepareBatch` (prepared events pass with their line; plain ones are checked), before
 * the backend writes; effectful (`append`) and synchronous (`appendSync`). Internal:
 * `SessionStore` re-exports what is public of it.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { SessionExists, SessionNotFound, StoreCorrupt, StoreFailure } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../schema/Format.js"
import { type BatchError, type PreparedBatch, type PreparedEvent, prepareBatch } from "./PrepareEvent.js"

/**
 * Errors of `append`.
 *
 * @since 0.1.0
 * @category errors
 */
export type StoreAppendError =
  | BatchError
  | SessionNotFound
  | SessionExists
  | StoreCorrupt
  | StoreFailure

/**
 * Options shared by every backend's batch checks.
 *
 * @since 0.1.0
 * @category models
 */
export interface BatchCheckOptions {
  /** The store's own B10 cap on a serialised event (default 64 MiB). */
  readonly maxEventBytes?: number
}

/**
 * The common head of every backend's `append`: lazily (an untyped caller's bad `options` becomes
 * a defect, never a throw), an empty batch is a no-op, then `prepareBatch` (prepared events pass
 * with their line; plain ones are checked); `body` gets the checked batch and `expectedSeq`.
 *
 * @since 0.1.0
 * @category utils
 */
export const appendPrepared = <E, R>(
  events: ReadonlyArray<Event | PreparedEvent>,
  options: { readonly expectedSeq: number },
  checkOptions: BatchCheckOptions,
  body: (batch: PreparedBatch, expectedSeq: number) => Effect.Effect<void, E, R>
): Effect.Effect<void, E | BatchError, R> =>
  Effect.suspend((): Effect.Effect<void, E | BatchError, R> => {
    const { expectedSeq } = options
    if (events.length === 0) return Effect.void
    const batch = prepareBatch(events, expectedSeq, checkOptions.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES)
    return "_tag" in batch ? Effect.fail(batch) : body(batch, expectedSeq)
  })

/**
 * The synchronous head of `append` over a backend's synchronous write of a checked, non-empty
 * batch: an empty batch is a no-op, then `prepareBatch`; the error, or `undefined` once stored.
 *
 * @since 0.2.0
 * @category utils
 */
export const appendPreparedSync = (
  maxEventBytes: number,
  appendBatchSync: (id: string, batch: PreparedBatch, expectedSeq: number) => StoreAppendError | undefined
) =>
(id: string, events: ReadonlyArray<Event | PreparedEvent>, expectedSeq: number): StoreAppendError | undefined => {
  if (events.length === 0) return undefined
  const batch = prepareBatch(events, expectedSeq, maxEventBytes)
  return "_tag" in batch ? batch : appendBatchSync(id, batch, expectedSeq)
}
