/**
 * The shape of the store contract (SPEC §7.1): `SessionStoreShape`, the operations every backend
 * offers, with `follow`'s errors and the synchronous append. Internal: `SessionStore` re-exports
 * what is public of it.
 *
 * @since 0.2.0
 */
import type * as Effect from "effect/Effect"
import type * as Stream from "effect/Stream"
import type { AppendConflict, SeqNotContiguous, SessionNotFound, StoreCorrupt, StoreFailure } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import type { PreparedEvent } from "./PrepareEvent.js"
import type { StoreAppendError } from "./StoreAppend.js"
import type { SessionEntry } from "./StoreEntries.js"
import type { FollowOptions } from "./StoreFollow.js"
import type {
  EventSink,
  LoadEachOptions,
  LoadError,
  LoadResult,
  LoadSummary,
  ReadError,
  TornTail
} from "./StoreRead.js"
import type { CreateError } from "./StoreRegistry.js"

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
