/**
 * The listing of the store contract (docs/guide.md "Listing sessions"): a stored session as
 * `listEntries` gives it, its last event, the `(createdAt, id)` order `SessionStore.make` sorts
 * listings in, and `listEntries` for a backend without its own (a read of each log). Internal:
 * `SessionStore` re-exports what is public of it.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { StoreFailure } from "../schema/Errors.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import { isRecord } from "../schema/Validation.js"
import type { LoadError, LoadResult } from "./StoreRead.js"

/**
 * A stored session as `listEntries` gives it: its header and where its log ends, known without
 * reading the log (docs/guide.md "Listing sessions").
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionEntry {
  readonly header: SessionHeader
  /** Its last committed event's seq and time (epoch ms); absent when it holds no event. */
  readonly last: { readonly seq: number; readonly time: number } | undefined
}

/**
 * The order of listings: by `createdAt`, then by id.
 *
 * @since 0.2.0
 * @category utils
 */
export const byCreation = (a: SessionHeader, b: SessionHeader) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * The last event of a stored log as `SessionEntry` gives it: a record's `seq` and `time` when both
 * are integers.
 *
 * @since 0.2.0
 * @category utils
 */
export const lastOf = (events: ReadonlyArray<unknown>): SessionEntry["last"] => {
  const e = events.at(-1)
  return isRecord(e) && Number.isSafeInteger(e.seq) && Number.isSafeInteger(e.time)
    ? { seq: e.seq as number, time: e.time as number }
    : undefined
}

/**
 * `listEntries` for a backend without its own: `list`, then a read of each log keeping only its
 * last event (a session that cannot be read is left out).
 *
 * @since 0.2.0
 * @category utils
 */
export const entriesByReading = (
  list: () => Effect.Effect<ReadonlyArray<SessionHeader>, StoreFailure>,
  load: (id: string) => Effect.Effect<LoadResult, LoadError>
) =>
  Effect.flatMap(list(), (headers) =>
    Effect.map(
      Effect.forEach(headers, (header) =>
        load(header.id).pipe(
          Effect.map(({ events }) => Option.some<SessionEntry>({ header, last: lastOf(events) })),
          Effect.orElseSucceed(() => Option.none<SessionEntry>())
        )),
      (found) => found.flatMap((o) => Option.isSome(o) ? [o.value] : [])
    ))
