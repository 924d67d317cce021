/**
 * Resume on read (SPEC §7.2 steps 1–3, §6, §8.2): a loaded session through the read pipeline,
 * its stored events validated as a seed (L9), and the repair closers of an interrupted turn
 * validated on top, in memory only: `inspect` never writes.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import type { Event } from "../schema/Events.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import { Repair } from "./Repair.js"
import { instantiateValidators, validateSeed, wrapL9 } from "./Seed.js"
import type { ValidatorFactory } from "./Session.js"
import { type LoadResult, type ReadError, readPipeline, SessionStore, type TornTail } from "./SessionStore.js"

/**
 * The result of `inspect`: a frozen, repaired view of a stored session; nothing is written.
 *
 * @since 0.1.0
 * @category models
 */
export interface InspectResult {
  readonly header: SessionHeader
  readonly storedVersion: number
  readonly events: ReadonlyArray<Event>
  readonly closers: ReadonlyArray<Event>
  readonly tornTail: TornTail | undefined
}

/**
 * Read pipeline, stored events validated as a seed (L9), then the repair closers validated on top.
 *
 * @since 0.1.0
 * @category utils
 */
export const repairLoaded = (loaded: LoadResult, extraValidators?: ReadonlyArray<ValidatorFactory>) =>
  Effect.gen(function*() {
    const { events: raw, header, upgraded } = yield* readPipeline(loaded)
    const id = header.id
    const validators = extraValidators === undefined ? [] : yield* instantiateValidators(header, extraValidators)
    const stored = yield* validateSeed(raw, { coldRead: true, validators }).pipe(Effect.mapError(wrapL9(id)))
    const repair = yield* Repair
    const closers = repair.closers(stored.events)
    const kept = stored.events.length
    const all = yield* validateSeed(closers, { coldRead: true, validators, continueFrom: stored }).pipe(
      Effect.mapError(wrapL9(id))
    )
    return { loaded, header, validators, upgraded, kept, all, closers: all.events.slice(kept) }
  })

/**
 * The repaired in-memory view of a loaded session (SPEC §7.2 steps 2–3); never writes.
 *
 * @since 0.1.0
 * @category utils
 */
export const inspectLoaded = (loaded: LoadResult): Effect.Effect<InspectResult, ReadError> =>
  Effect.map(Effect.withSpan(repairLoaded(loaded), "Session.repair"), (r) =>
    Object.freeze({
      header: r.header,
      storedVersion: r.loaded.storedVersion,
      events: Object.freeze(r.all.events),
      closers: Object.freeze(r.closers),
      tornTail: r.loaded.tornTail
    }))

/**
 * Cold-read a session with its repair closers, in memory only (SPEC §7.2); never writes.
 *
 * @since 0.1.0
 * @category utils
 */
export const inspect = (id: string): Effect.Effect<InspectResult, ReadError, SessionStore> =>
  Effect.flatMap(SessionStore, (store) => Effect.flatMap(store.load(id), inspectLoaded)).pipe(
    Effect.withSpan("Session.inspect", { attributes: { sessionId: id } })
  )

