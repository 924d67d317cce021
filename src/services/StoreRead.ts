/**
 * The cold read of the store contract (SPEC §7.1, §8.2) that `SessionStore.make` and the backends
 * build on: what a read returns (the log, its torn tail, a streamed read's summary), its errors,
 * the read pipeline after the backend read (version, vocabulary), and `loadEach` and `readFrom`
 * over a whole-log `load`. Internal: `SessionStore` re-exports what is public of it.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import {
  FormatUnsupported,
  LegacyFormRefused,
  SeqNotContiguous,
  type SessionHeaderInvalid,
  type SessionNotFound,
  StoreCorrupt,
  type StoreFailure,
  type UnknownEventType
} from "../schema/Errors.js"
import { SESSION_FORMAT_VERSION } from "../schema/Format.js"
import { upgradeV0 } from "../schema/FormatV0.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import { checkVocabulary, isRecord } from "../schema/Validation.js"

/**
 * Where a stored log stops being committed-looking (SPEC §7.4.4).
 *
 * @since 0.1.0
 * @category models
 */
export interface TornTail {
  readonly fromSeq: number
  readonly reason: "fragment" | "unparsable" | "seq-gap" | "not-object"
  readonly position: number
}

/**
 * What a line-oriented store (JSONL) knows of a torn tail besides where it starts.
 *
 * @since 0.1.0
 * @category models
 */
export interface TornTailExtent {
  /** The 1-based line number of its first line. */
  readonly line: number
  /** How many complete (newline-terminated) lines it holds: records a repair would drop. */
  readonly completeLines: number
  /** How many bytes it holds. */
  readonly bytes: number
}

/**
 * A cold read: never mutates storage (L8). Events are framing-valid and walked, not yet validated.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoadResult {
  readonly header: SessionHeader
  readonly storedVersion: number
  readonly events: ReadonlyArray<unknown>
  readonly tornTail: TornTail | undefined
  /** The torn tail's extent, from stores that read lines (JSONL); absent elsewhere. */
  readonly tornTailExtent?: TornTailExtent
  readonly revision: string
}

/**
 * The receiver of a streamed cold read (`loadEach`): the header once it is read, then the
 * committed events in seq order, a chunk at a time. A failure of either stops the read.
 *
 * @since 0.1.0
 * @category models
 */
export interface EventSink<E = never, R = never> {
  readonly onHeader?: (header: SessionHeader, storedVersion: number) => Effect.Effect<void, E, R>
  readonly onEvents: (events: ReadonlyArray<unknown>) => Effect.Effect<void, E, R>
}

/**
 * What a streamed cold read reports once every event was handed over: a `LoadResult` without the events.
 *
 * @since 0.1.0
 * @category models
 */
export interface LoadSummary extends Omit<LoadResult, "events"> {
  /** How many events were handed over (the committed prefix: a torn tail is not counted). */
  readonly count: number
}

/**
 * Errors of a cold read.
 *
 * @since 0.1.0
 * @category errors
 */
export type LoadError =
  | SessionNotFound
  | StoreCorrupt
  | FormatUnsupported
  | SessionHeaderInvalid
  | UnknownEventType
  | StoreFailure

/**
 * Errors of a cold read through the read pipeline.
 *
 * @since 0.1.0
 * @category errors
 */
export type ReadError = LoadError | LegacyFormRefused | StoreCorrupt

/**
 * The read pipeline after the backend read (SPEC §8.2): version (K1, K2; version 0 is refused
 * until the v0→v1 edge lands) and vocabulary (K7).
 *
 * @since 0.1.0
 * @category utils
 */
export const readPipeline = (
  loaded: LoadResult
): Effect.Effect<
  { readonly header: SessionHeader; readonly events: ReadonlyArray<unknown>; readonly upgraded: boolean },
  ReadError
> =>
  Effect.gen(function*() {
    const version = loaded.storedVersion
    let header = loaded.header
    let events = loaded.events
    if (version === 0) {
      const upgraded = upgradeV0(loaded.header.id, loaded.header, loaded.events)
      if (upgraded instanceof LegacyFormRefused || upgraded instanceof StoreCorrupt) return yield* upgraded
      header = upgraded.header
      events = upgraded.events
    } else if (version !== SESSION_FORMAT_VERSION) {
      const newer = typeof version === "number" && version > SESSION_FORMAT_VERSION
      return yield* new FormatUnsupported({
        rule: newer ? "K1" : "K2",
        found: version,
        supported: SESSION_FORMAT_VERSION,
        direction: newer ? "newer" : "older",
        sessionId: loaded.header.id
      })
    }
    for (let i = 0; i < events.length; i++) {
      const e = events[i]
      if (!isRecord(e) || typeof e.type !== "string") continue
      const unknown = checkVocabulary(e.type, e.ignorable, i, "K7")
      if (unknown !== undefined) return yield* unknown
    }
    return { header, events, upgraded: version === 0 }
  })

/**
 * How many events a streamed read hands over at a time when the backend has no pages of its own.
 *
 * @since 0.1.0
 * @category constants
 */
export const LOAD_EACH_CHUNK = 1_024

/**
 * Options of a streamed cold read (`loadEach`).
 *
 * @since 0.2.0
 * @category models
 */
export interface LoadEachOptions {
  /**
   * Hand over only the events with `seq >= fromSeq` (L10: a non-negative integer; default 0).
   * The summary still describes the whole log (its `count` is the log's committed events).
   */
  readonly fromSeq?: number
}

/**
 * `loadEach` on top of `load` (a backend that holds its log in memory anyway): from `fromSeq`, a
 * slice of the loaded events.
 *
 * @since 0.1.0
 * @category utils
 */
export const loadEachFromLoad = (
  load: (id: string) => Effect.Effect<LoadResult, LoadError>
) =>
<E, R>(id: string, sink: EventSink<E, R>, fromSeq = 0): Effect.Effect<LoadSummary, LoadError | E, R> =>
  Effect.gen(function*() {
    const { events, ...rest } = yield* load(id)
    if (sink.onHeader !== undefined) yield* sink.onHeader(rest.header, rest.storedVersion)
    for (let i = fromSeq; i < events.length; i += LOAD_EACH_CHUNK) yield* sink.onEvents(events.slice(i, i + LOAD_EACH_CHUNK))
    return { ...rest, count: events.length }
  })

/**
 * A sink that passes on only the events from position `fromSeq` of a streamed read from the
 * start (a read that could not seek: every event is still read and checked).
 *
 * @since 0.2.0
 * @category utils
 */
export const sinkFrom = <E, R>(sink: EventSink<E, R>, fromSeq: number): EventSink<E, R> => {
  if (fromSeq === 0) return sink
  let at = 0
  return {
    ...(sink.onHeader === undefined ? {} : { onHeader: sink.onHeader }),
    onEvents: (events) => {
      const start = at
      at += events.length
      if (at <= fromSeq) return Effect.void
      return sink.onEvents(start >= fromSeq ? events : events.slice(fromSeq - start))
    }
  }
}

/**
 * L10: `readFrom` needs a non-negative integer `fromSeq`.
 *
 * @since 0.1.0
 * @category utils
 */
export const checkFromSeq = (fromSeq: number): SeqNotContiguous | undefined =>
  Number.isSafeInteger(fromSeq) && fromSeq >= 0 ? undefined : new SeqNotContiguous({
    rule: "L10",
    expected: 0,
    actual: fromSeq,
    detail: "a read from a seq needs a non-negative integer fromSeq"
  })

/**
 * `readFrom` on top of `load` and the read pipeline (backends may seek instead).
 *
 * @since 0.1.0
 * @category utils
 */
export const readFromLoad = (
  load: (id: string) => Effect.Effect<LoadResult, LoadError>
) =>
(id: string, fromSeq: number): Effect.Effect<ReadonlyArray<unknown>, ReadError | SeqNotContiguous> =>
  Effect.gen(function*() {
    const bad = checkFromSeq(fromSeq)
    if (bad !== undefined) return yield* bad
    const { events } = yield* readPipeline(yield* load(id))
    return events.slice(fromSeq)
  })
