/**
 * The read pipeline of SPEC §8.2 and the cold-read seed validation of §3.2 over a streamed read
 * (`SessionStore.loadEach`): a session of any length is checked (and handed on, validated) while
 * only the surface is held, so `verify`, `show`, `export` and `import` run in memory bounded by a
 * chunk, not by the log (SPEC §12). The outcome and its errors are those of `load` followed by
 * `readPipeline` and `validateSeed`: a read error first, then the version (K1/K2), then an
 * unknown type (K7), then the first seed rejection (L9). A version-0 log is read whole and
 * upgraded in memory (the v0 edge needs the whole log).
 */
import * as Effect from "effect/Effect"
import type { Event } from "../schema/Events.js"
import type { UnknownEventType } from "../schema/Errors.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import { checkVocabulary, isRecord } from "../schema/Validation.js"
import { SeedCursor, validateSeed, wrapL9 } from "./Seed.js"
import {
  type EventSink,
  LOAD_EACH_CHUNK,
  type LoadError,
  type LoadResult,
  type LoadSummary,
  type ReadError,
  readPipeline
} from "./SessionStore.js"

/** What a validated streamed read reports once every event was handed on. */
export interface ReadEachResult extends Omit<LoadSummary, "header" | "count"> {
  /** The header as the read pipeline returns it (a version-0 header upgraded). */
  readonly header: SessionHeader
  /** How many events were validated and handed on: the stored log without its torn tail. */
  readonly count: number
  /** The surface after the last event. */
  readonly surface: ReadonlyArray<number>
}

/**
 * Read a session through `read` (a store's `loadEach`, or a file's) and validate it as a cold
 * read, handing the validated events to `onEvents` chunk by chunk until the first rejection.
 * `reload` reads the whole log for the version-0 edge. Nothing is written.
 */
export const readEach = <E = never, R = never, ReadE = LoadError, ReadR = never>(
  read: (sink: EventSink<E, R>) => Effect.Effect<LoadSummary, ReadE | E, ReadR | R>,
  reload: Effect.Effect<LoadResult, ReadE, ReadR>,
  onEvents: (events: ReadonlyArray<Event>) => Effect.Effect<void, E, R> = () => Effect.void
): Effect.Effect<ReadEachResult, ReadError | ReadE | E, R | ReadR> =>
  Effect.gen(function*() {
    const cursor = new SeedCursor()
    let seen = 0
    let unknownType: UnknownEventType | undefined
    let legacy = false
    const summary = yield* read({
      onHeader: (_header, storedVersion) => Effect.sync(() => void (legacy = storedVersion === 0)),
      onEvents: (events) =>
        Effect.suspend(() => {
          if (legacy) return Effect.void
          for (const e of events) {
            // K7 for every record, as the read pipeline checks the whole log before validation
            if (unknownType === undefined && isRecord(e) && typeof e.type === "string") {
              unknownType = checkVocabulary(e.type, e.ignorable, seen, "K7")
            }
            seen++
          }
          if (unknownType !== undefined || cursor.error !== undefined) return Effect.void
          const accepted = cursor.push(events)
          return accepted.length === 0 ? Effect.void : onEvents(accepted)
        })
    })
    if (legacy) return yield* readWhole(yield* reload, onEvents)
    const { header } = yield* readPipeline({ ...summary, events: [] })
    if (unknownType !== undefined) return yield* unknownType
    if (cursor.error !== undefined) return yield* wrapL9(header.id)(cursor.error)
    const { count: _, ...rest } = summary
    return { ...rest, header, count: cursor.count, surface: cursor.nodes }
  })

/** The whole-log path (version 0): read pipeline, seed validation, then the events handed on in chunks. */
const readWhole = <E, R>(
  loaded: LoadResult,
  onEvents: (events: ReadonlyArray<Event>) => Effect.Effect<void, E, R>
): Effect.Effect<ReadEachResult, ReadError | E, R> =>
  Effect.gen(function*() {
    const { events: raw, header } = yield* readPipeline(loaded)
    const { events, tracker } = yield* Effect.mapError(validateSeed(raw, { coldRead: true }), wrapL9(header.id))
    for (let i = 0; i < events.length; i += LOAD_EACH_CHUNK) yield* onEvents(events.slice(i, i + LOAD_EACH_CHUNK))
    const { events: _, ...rest } = loaded
    return { ...rest, header, count: events.length, surface: tracker.nodes.slice() }
  })
