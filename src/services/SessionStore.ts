/**
 * The persistence backend contract (SPEC §7.1): lazy registration, atomic expected-seq appends,
 * never-mutating cold reads with torn-tail information, torn-tail truncation and whole-log
 * replacement under a revision check; the head every backend's append shares. Its parts live in
 * internal modules re-exported here: the cold read (StoreRead), the append head (StoreAppend), lazy
 * registration (StoreRegistry), listings (StoreEntries), follow (StoreFollow), the service shape
 * (StoreShape) and `make` (StoreMake).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type { SessionStoreShape } from "./StoreShape.js"

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

export {
  /**
   * Errors of `follow`: those of a read, L10 for a bad `fromSeq`, and `AppendConflict` (L8) when the
   * log it follows was replaced by one without the events it delivered.
   *
   * @since 0.2.0
   * @category errors
   */
  type FollowError,
  /**
   * The SessionStore service shape.
   *
   * @since 0.1.0
   * @category models
   */
  type SessionStoreShape,
  /**
   * A synchronous append: the error, or `undefined` once the batch is stored. `append` is the
   * effectful append it stands for.
   *
   * @since 0.1.0
   * @category models
   */
  type SyncAppend,
  /**
   * The synchronous append of `store`, when its `append` is the one that path belongs to: a store
   * spread into a wrapper that replaces `append` (to inject faults, to count calls) has none.
   *
   * @since 0.2.0
   * @category utils
   */
  syncAppendOf
} from "./StoreShape.js"

export {
  /**
   * What a backend states to `make`: only what differs between backends. `make` fills the rest the
   * same way for all of them.
   *
   * @since 0.2.0
   * @category models
   */
  type SessionStoreImpl,
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
  make
} from "./StoreMake.js"

/**
 * The persistence backend of sessions (SPEC §7.1): provide one of `MemoryStore.layer`,
 * `JsonlStore.layer`, `SqliteStore.layer`, `PostgresStore.layer`.
 *
 * @since 0.1.0
 * @category tags
 */
export class SessionStore extends Context.Tag("effect-session-log/SessionStore")<SessionStore, SessionStoreShape>() {}
