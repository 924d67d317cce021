/**
 * The persistence backend contract (SPEC §7.1): lazy registration, atomic expected-seq appends,
 * never-mutating cold reads with torn-tail information, torn-tail truncation and whole-log
 * replacement under a revision check; the head every backend's append shares. Its parts live in
 * internal modules re-exported here: the cold read (StoreRead), the append head (StoreAppend), lazy
 * registration (StoreRegistry), listings (StoreEntries) and follow (StoreFollow).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { AppendConflict, SeqNotContiguous, SessionNotFound, StoreCorrupt, StoreFailure } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../schema/Format.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import type { PreparedBatch, PreparedEvent } from "./PrepareEvent.js"
import { appendPrepared, appendPreparedSync, type StoreAppendError } from "./StoreAppend.js"
import { byCreation, entriesByReading, type SessionEntry } from "./StoreEntries.js"
import * as StoreFollow from "./StoreFollow.js"
import type { FollowOptions } from "./StoreFollow.js"
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

export {
  /**
   * The interval of the polls that stand in for a backend's wake-ups (its default, and the fallback
   * after a watch failed), in milliseconds.
   *
   * @since 0.2.0
   * @category constants
   */
  FOLLOW_POLL_MILLIS,
  /**
   * Options of `follow`.
   *
   * @since 0.2.0
   * @category models
   */
  type FollowOptions,
  /**
   * A wake-up every `millis` (the first at once): the poll that stands in for a backend's signal.
   *
   * @since 0.2.0
   * @category utils
   */
  pollWakeups
} from "./StoreFollow.js"

export {
  /**
   * Where a stored log stops being committed-looking (SPEC §7.4.4).
   *
   * @since 0.1.0
   * @category models
   */
  type TornTail,
  /**
   * What a line-oriented store (JSONL) knows of a torn tail besides where it starts.
   *
   * @since 0.1.0
   * @category models
   */
  type TornTailExtent,
  /**
   * A cold read: never mutates storage (L8). Events are framing-valid and walked, not yet validated.
   *
   * @since 0.1.0
   * @category models
   */
  type LoadResult,
  /**
   * The receiver of a streamed cold read (`loadEach`): the header once it is read, then the
   * committed events in seq order, a chunk at a time. A failure of either stops the read.
   *
   * @since 0.1.0
   * @category models
   */
  type EventSink,
  /**
   * What a streamed cold read reports once every event was handed over: a `LoadResult` without the events.
   *
   * @since 0.1.0
   * @category models
   */
  type LoadSummary,
  /**
   * Options of a streamed cold read (`loadEach`): `fromSeq`.
   *
   * @since 0.2.0
   * @category models
   */
  type LoadEachOptions,
  /**
   * A sink that passes on only the events from position `fromSeq` of a streamed read from the start.
   *
   * @since 0.2.0
   * @category utils
   */
  sinkFrom,
  /**
   * Errors of a cold read.
   *
   * @since 0.1.0
   * @category errors
   */
  type LoadError,
  /**
   * Errors of a cold read through the read pipeline.
   *
   * @since 0.1.0
   * @category errors
   */
  type ReadError,
  /**
   * The read pipeline after the backend read (SPEC §8.2): version (K1, K2; version 0 is refused
   * until the v0→v1 edge lands) and vocabulary (K7).
   *
   * @since 0.1.0
   * @category utils
   */
  readPipeline,
  /**
   * How many events a streamed read hands over at a time when the backend has no pages of its own.
   *
   * @since 0.1.0
   * @category constants
   */
  LOAD_EACH_CHUNK,
  /**
   * `loadEach` on top of `load` (a backend that holds its log in memory anyway).
   *
   * @since 0.1.0
   * @category utils
   */
  loadEachFromLoad,
  /**
   * L10: `readFrom` needs a non-negative integer `fromSeq`.
   *
   * @since 0.1.0
   * @category utils
   */
  checkFromSeq,
  /**
   * `readFrom` on top of `load` and the read pipeline (backends may seek instead).
   *
   * @since 0.1.0
   * @category utils
   */
  readFromLoad
} from "./StoreRead.js"

export {
  /**
   * Errors of `append`.
   *
   * @since 0.1.0
   * @category errors
   */
  type StoreAppendError,
  /**
   * Options shared by every backend's batch checks.
   *
   * @since 0.1.0
   * @category models
   */
  type BatchCheckOptions,
  /**
   * The common head of every backend's `append`: lazily (an untyped caller's bad `options` becomes
   * a defect, never a throw), an empty batch is a no-op, then `prepareBatch` (prepared events pass
   * with their line; plain ones are checked); `body` gets the checked batch and `expectedSeq`.
   *
   * @since 0.1.0
   * @category utils
   */
  appendPrepared
} from "./StoreAppend.js"

export {
  /**
   * Errors of `create`.
   *
   * @since 0.1.0
   * @category errors
   */
  type CreateError,
  /**
   * The sessions `create` registered in one store instance whose first append has not written them
   * yet (SPEC §7.1 lazy registration). The backend's first append materialises a registered
   * session and then calls `materialised`.
   *
   * @since 0.2.0
   * @category models
   */
  type Registry,
  /**
   * An empty registry for one store instance.
   *
   * @since 0.2.0
   * @category constructors
   */
  makeRegistry
} from "./StoreRegistry.js"

export {
  /**
   * A stored session as `listEntries` gives it: its header and where its log ends, known without
   * reading the log (docs/guide.md "Listing sessions").
   *
   * @since 0.2.0
   * @category models
   */
  type SessionEntry,
  /**
   * The last event of a stored log as `SessionEntry` gives it: a record's `seq` and `time` when both
   * are integers.
   *
   * @since 0.2.0
   * @category utils
   */
  lastOf
} from "./StoreEntries.js"

/**
 * Errors of `follow`: those of a read, L10 for a bad `fromSeq`, and `AppendConflict` (L8) when the
 * log it follows was replaced by one without the events it delivered.
 *
 * @since 0.2.0
 * @category errors
 */
export type FollowError = ReadError | SeqNotContiguous | AppendConflict

/**
 * The SessionStore service shape.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionStoreShape {
  /** Validate and register a header; nothing is written until the first non-empty append. */
  readonly create: (header: unknown) => Effect.Effect<SessionHeader, CreateError>
  /**
   * Atomically append a contiguous batch if the stored next seq equals `expectedSeq`. Prepared
   * events (`PrepareEvent`) are stored as they are; plain events are checked first.
   */
  readonly append: (
    id: string,
    events: ReadonlyArray<Event | PreparedEvent>,
    options: { readonly expectedSeq: number }
  ) => Effect.Effect<void, StoreAppendError>
  /** Cold read of header, framing-valid events and torn tail. */
  readonly load: (id: string) => Effect.Effect<LoadResult, LoadError>
  /**
   * A streamed cold read (never mutates, L8): what `load` reads, but the framing-valid events are
   * handed to `sink` in chunks as they are read and not kept, so memory stays bounded by a chunk
   * (SPEC §12: `verify`, `show`, `export` of any length). Events handed over before a failure
   * are not committed ones: the failure is the outcome. The sink ends the read early by failing
   * (with an error of its own, which is then the outcome).
   *
   * With `options.fromSeq` (L10: a non-negative integer, else `SeqNotContiguous`), only the events
   * with `seq >= fromSeq` are handed over, exactly those a read from the start would hand over
   * there (docs/guide.md "Reading from a seq"); the summary still describes the whole log (its
   * `count` is the log's committed events). As `readFrom`, a backend seeks only where this store
   * instance found the prefix good by a whole read (SQL: the rows from the one holding `fromSeq`;
   * plain and packed JSONL: from a byte checkpoint at or before it, recorded by an earlier whole
   * read of the unchanged file); otherwise the log is read, and checked, from its start.
   */
  readonly loadEach: <E, R, O extends LoadEachOptions | undefined = undefined>(
    id: string,
    sink: EventSink<E, R>,
    options?: O
  ) => Effect.Effect<LoadSummary, LoadError | (O extends undefined ? never : SeqNotContiguous) | E, R>
  /** Events with `seq >= fromSeq` through the read pipeline, without repair (L10 for a bad fromSeq). */
  readonly readFrom: (id: string, fromSeq: number) => Effect.Effect<ReadonlyArray<unknown>, ReadError | SeqNotContiguous>
  /**
   * The committed events with `seq >= fromSeq` (docs/follow.md): those stored now, then each one as
   * it is committed by any process, in seq order, each exactly once, until interrupted. Events are
   * read back from committed storage (`readFrom`) after the backend's wake-up, never taken from a
   * writer's batch. One watcher per session per store instance serves all its followers.
   */
  readonly follow: (id: string, options?: FollowOptions) => Stream.Stream<unknown, FollowError>
  /**
   * Wake-ups after commits to any session of the store by any process, where the backend has a
   * store-wide signal (SQLite's `data_version`, PostgreSQL's notifications, the JSONL directory;
   * docs/follow.md "Mechanisms"): one once armed, then at least one after each commit (extra ones
   * are harmless). Absent elsewhere: a watcher of the whole store polls (`session-log list --watch`).
   */
  readonly changes?: () => Stream.Stream<void, StoreFailure>
  /** Headers of materialised sessions sorted by (createdAt, id). */
  readonly list: () => Effect.Effect<ReadonlyArray<SessionHeader>, StoreFailure>
  /**
   * `list` with each session's last event (seq and time), which each backend knows without a
   * read of the log (docs/guide.md "Listing sessions"); sorted by (createdAt, id).
   */
  readonly listEntries: () => Effect.Effect<ReadonlyArray<SessionEntry>, StoreFailure>
  /** Durably remove the torn tail `load` reported, if the log is still at `revision`. */
  readonly truncateTornTail: (
    id: string,
    tornTail: TornTail,
    options: { readonly revision: string }
  ) => Effect.Effect<void, AppendConflict | SessionNotFound | StoreCorrupt | StoreFailure>
  /** Replace header and events (v0→v1 upgrade) if still at `revision`, keeping a backup. */
  readonly replaceLog: (
    id: string,
    header: SessionHeader,
    events: ReadonlyArray<Event>,
    options: { readonly revision: string; readonly backup: string }
  ) => Effect.Effect<void, AppendConflict | SessionNotFound | StoreCorrupt | StoreFailure>
  /**
   * Remove a whole session if its log is still at `revision` (L8 otherwise), no backup kept: only
   * for what the caller itself created and nobody else can have written to (an import that was
   * interrupted undoes its unfinished session with it, docs/cli.md "Large sessions: streamed reads").
   */
  readonly discard: (
    id: string,
    options: { readonly revision: string }
  ) => Effect.Effect<void, AppendConflict | SessionNotFound | StoreCorrupt | StoreFailure>
  /**
   * `append` as one synchronous step, for a store that can (the memory store): the session
   * handle completes an uncontended append without a fiber switch. It belongs to this `append`
   * only (`syncAppendOf`): a wrapper that replaces `append` leaves it unused.
   */
  readonly appendSync?: SyncAppend
}

/**
 * A synchronous append: the error, or `undefined` once the batch is stored. `append` is the
 * effectful append it stands for.
 *
 * @since 0.1.0
 * @category models
 */
export interface SyncAppend {
  (id: string, events: ReadonlyArray<Event | PreparedEvent>, expectedSeq: number): StoreAppendError | undefined
  readonly append: SessionStoreShape["append"]
}

/**
 * The synchronous append of `store`, when its `append` is the one that path belongs to: a store
 * spread into a wrapper that replaces `append` (to inject faults, to count calls) has none.
 *
 * @since 0.2.0
 * @category utils
 */
export const syncAppendOf = (store: SessionStoreShape): SyncAppend | undefined =>
  store.appendSync !== undefined && store.appendSync.append === store.append ? store.appendSync : undefined

/**
 * The persistence backend of sessions (SPEC §7.1): provide one of `MemoryStore.layer`,
 * `JsonlStore.layer`, `SqliteStore.layer`, `PostgresStore.layer`.
 *
 * @since 0.1.0
 * @category tags
 */
export class SessionStore extends Context.Tag("effect-session-log/SessionStore")<SessionStore, SessionStoreShape>() {}

// ---------------------------------------------------------------------------------------------
// Building a store

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
