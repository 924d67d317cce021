/**
 * Building a store (SPEC §7.1): `make` fills, the same way for every backend, what a backend's
 * `SessionStoreImpl` leaves out. Internal: `SessionStore` re-exports what is public of it.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { SeqNotContiguous, StoreFailure } from "../schema/Errors.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../schema/Format.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import type { PreparedBatch } from "./PrepareEvent.js"
import { appendPrepared, appendPreparedSync, type StoreAppendError } from "./StoreAppend.js"
import { byCreation, entriesByReading, type SessionEntry } from "./StoreEntries.js"
import * as StoreFollow from "./StoreFollow.js"
import {
  checkFromSeq,
  type EventSink,
  type LoadEachOptions,
  type LoadError,
  type LoadResult,
  type LoadSummary,
  loadEachFromLoad,
  type ReadError,
  readPipeline,
  sinkFrom,
  type TornTail
} from "./StoreRead.js"
import { type CreateError, createOver, loadOver, type Registry, summaryOrUnwritten } from "./StoreRegistry.js"
import type { SessionStoreShape } from "./StoreShape.js"

/**
 * What a backend states to `make`: only what differs between backends. `make` fills the rest the
 * same way for all of them.
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionStoreImpl {
  /** The span prefix of the store's operations, e.g. `"JsonlStore"` (spans `JsonlStore.load`, ...). */
  readonly name: string
  readonly spanAttributes?: Record<string, unknown>
  /** The sessions registered and not yet written; the backend's first append consults it. */
  readonly registry: Registry
  /** The store's B10 cap on a serialised event (default 64 MiB). */
  readonly maxEventBytes?: number
  /** A check of a valid header beyond SPEC §1.1 (text the backend cannot store, ...). */
  readonly checkHeader?: (header: SessionHeader) => Effect.Effect<void, CreateError>
  /** J14: whether a session with this id is stored. */
  readonly isStored: (id: string) => Effect.Effect<boolean, StoreFailure>
  /** Write a checked, non-empty batch if the stored next seq is `expectedSeq` (the hot path: untraced). */
  readonly appendBatch: (id: string, batch: PreparedBatch, expectedSeq: number) => Effect.Effect<void, StoreAppendError>
  /** `appendBatch` as one synchronous step, when the backend can. */
  readonly appendBatchSync?: (id: string, batch: PreparedBatch, expectedSeq: number) => StoreAppendError | undefined
  /** A cold read of a stored session; `undefined` when none is stored (a registered one then reads as empty). */
  readonly load: (id: string) => Effect.Effect<LoadResult | undefined, LoadError>
  /** A streamed `load`; by default `load` handed over in chunks. */
  readonly loadEach?: <E, R>(id: string, sink: EventSink<E, R>) => Effect.Effect<LoadSummary | undefined, LoadError | E, R>
  /**
   * A streamed read from `fromSeq > 0` that seeks, for a backend that can where its prefix is known
   * good (as `readFrom`): the summary, or `"whole"` when only a read from the start can tell (the
   * sink was handed nothing), or `undefined` when the session is not stored. By default (and on
   * `"whole"`) `loadEach` from the start, passing on the events from `fromSeq`.
   */
  readonly loadEachFrom?: <E, R>(
    id: string,
    sink: EventSink<E, R>,
    fromSeq: number
  ) => Effect.Effect<LoadSummary | "whole" | undefined, LoadError | E, R>
  /**
   * The events from `fromSeq` of a loaded log; by default the whole log through the read
   * pipeline, then its suffix.
   */
  readonly suffix?: (loaded: LoadResult, fromSeq: number) => Effect.Effect<ReadonlyArray<unknown>, ReadError>
  /**
   * `readFrom` of a stored session by the backend itself, for one that can seek to `fromSeq`
   * instead of reading the whole log (SQL: `seq >= ?`) with the same events and errors as the
   * whole read through the pipeline; `undefined` when the session is not stored (then `load` and
   * `suffix` answer, as for a backend without one).
   */
  readonly readFrom?: (id: string, fromSeq: number) => Effect.Effect<ReadonlyArray<unknown> | undefined, ReadError>
  /** The headers of the stored sessions, in any order. */
  readonly list: () => Effect.Effect<ReadonlyArray<SessionHeader>, StoreFailure>
  /**
   * The stored sessions with their last event, in any order; by default `list`, then a read of
   * each log keeping only its last event (a session that cannot be read is left out).
   */
  readonly listEntries?: () => Effect.Effect<ReadonlyArray<SessionEntry>, StoreFailure>
  /**
   * The wake-ups of session `id` (docs/follow.md "Mechanisms"): an element once the watch is armed,
   * then at least one after each change of its log committed by any process (extra ones are
   * harmless: the follower reads and finds nothing new). `make` shares one run per session among
   * the followers of this instance and, should it fail (a dropped connection), polls instead. By
   * default a poll every `FOLLOW_POLL_MILLIS`.
   */
  readonly wakeups?: (id: string) => Stream.Stream<void, StoreFailure>
  /**
   * The reads of one follower of `id`, for a backend that can read what was committed since the
   * follower's last read without reading the whole log (JSONL: from the last byte offset read).
   * Each call returns the committed events from `fromSeq` (always the seq after the last one
   * returned, or the one before it), or `undefined` when the session is not stored (`readFrom`
   * then answers). By default every read is a `readFrom`.
   */
  readonly followReader?: (id: string) => (fromSeq: number) => Effect.Effect<ReadonlyArray<unknown> | undefined, ReadError>
  readonly truncateTornTail: SessionStoreShape["truncateTornTail"]
  readonly replaceLog: SessionStoreShape["replaceLog"]
  readonly discard: SessionStoreShape["discard"]
}

/**
 * A `SessionStore` from what a backend states (in the spirit of `KeyValueStore.make`): `create`
 * with the header checks (J13) and lazy registration (J14 against the registry and the stored
 * sessions), the shared head of `append` (an empty batch is a no-op; plain events are checked,
 * prepared ones pass), reads of a registered session that is not written yet (its header and no
 * events; L11 for an unknown id), `loadEach` and `readFrom` where the backend has none, and `list`
 * sorted by `(createdAt, id)`. Every operation but `append` runs in a span `<name>.<operation>`.
 *
 * @since 0.2.0
 * @category constructors
 */
export const make = (impl: SessionStoreImpl): SessionStoreShape => {
  const { registry } = impl
  const span = (operation: string, id?: string) =>
    Effect.withSpan(`${impl.name}.${operation}`, {
      attributes: id === undefined ? { ...impl.spanAttributes } : { ...impl.spanAttributes, sessionId: id }
    })
  const maxEventBytes = impl.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES
  const create = createOver(registry, impl)
  const load = loadOver(registry, impl)

  const shape: SessionStoreShape = {
    create: (input) => create(input).pipe(span("create")),

    append: (id, events, options) =>
      appendPrepared(events, options, { maxEventBytes }, (batch, expectedSeq) => impl.appendBatch(id, batch, expectedSeq)),

    load: (id) => load(id).pipe(span("load", id)),

    loadEach: (<E, R>(
      id: string,
      sink: EventSink<E, R>,
      options?: LoadEachOptions
    ): Effect.Effect<LoadSummary, LoadError | SeqNotContiguous | E, R> => {
      const fromSeq = options?.fromSeq ?? 0
      const bad = checkFromSeq(fromSeq)
      if (bad !== undefined) return Effect.fail(bad)
      const whole = impl.loadEach === undefined
        ? loadEachFromLoad(load)(id, sink, fromSeq)
        : Effect.flatMap(impl.loadEach(id, sinkFrom(sink, fromSeq)), summaryOrUnwritten(registry, id, sink))
      const read = fromSeq === 0 || impl.loadEachFrom === undefined
        ? whole
        : Effect.flatMap(
          impl.loadEachFrom(id, sink, fromSeq),
          (sought): Effect.Effect<LoadSummary, LoadError | E, R> =>
            sought === "whole" ? whole : summaryOrUnwritten(registry, id, sink)(sought)
        )
      return read.pipe(span("loadEach", id))
    }) as SessionStoreShape["loadEach"],

    readFrom: (id, fromSeq) =>
      Effect.gen(function*() {
        const bad = checkFromSeq(fromSeq)
        if (bad !== undefined) return yield* bad
        if (impl.readFrom !== undefined) {
          const sought = yield* impl.readFrom(id, fromSeq)
          if (sought !== undefined) return sought
        }
        const loaded = yield* load(id)
        if (impl.suffix !== undefined) return yield* impl.suffix(loaded, fromSeq)
        const { events } = yield* readPipeline(loaded)
        return events.slice(fromSeq)
      }).pipe(span("readFrom", id)),

    follow: (id, options) => follow(id, options),

    list: () => Effect.map(impl.list(), (headers) => [...headers].sort(byCreation)).pipe(span("list")),

    listEntries: () =>
      Effect.map(
        impl.listEntries === undefined ? entriesByReading(impl.list, load) : impl.listEntries(),
        (entries) => [...entries].sort((a, b) => byCreation(a.header, b.header))
      ).pipe(span("listEntries")),

    truncateTornTail: (id, tornTail, options) => impl.truncateTornTail(id, tornTail, options).pipe(span("truncateTornTail", id)),

    replaceLog: (id, header, events, options) => impl.replaceLog(id, header, events, options).pipe(span("replaceLog", id)),

    discard: (id, options) => impl.discard(id, options).pipe(span("discard", id))
  }
  const follow = StoreFollow.followOver({
    readFrom: shape.readFrom,
    subscribe: StoreFollow.makeWatchers(impl.name, impl.wakeups ?? (() => StoreFollow.pollWakeups())),
    checkFromSeq,
    ...(impl.followReader === undefined ? {} : { reader: impl.followReader })
  })
  const appendBatchSync = impl.appendBatchSync
  if (appendBatchSync === undefined) return shape
  const appendSync = Object.assign(appendPreparedSync(maxEventBytes, appendBatchSync), { append: shape.append })
  return { ...shape, appendSync }
}
