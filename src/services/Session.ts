/**
 * One open session (SPEC §3, §7.2, §11.2): the `Session` Tag and the shape of a handle — typed
 * appends that validate, persist, then commit; the log, surface, derived messages, transcript,
 * request folds and the feed of committed events. Handles are built by `SessionLive` (`create`,
 * `fromSeed`, `open`, `fork`, `layerCreate`, `layerOpen`) over any `SessionStore`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type {
  AppendConflict,
  InvalidEnvelope,
  InvariantViolation,
  LegacyFormRefused,
  MessageShapeInvalid,
  NotLosslessJson,
  ProvenanceInvalid,
  ReplaceRangeInvalid,
  RequestHeaderInvalid,
  SeqNotContiguous,
  SessionExists,
  SessionNotFound,
  StoreCorrupt,
  StoreFailure,
  SurfaceMarkerInvalid,
  ToolResultRewriteInvalid,
  UnknownEventType
} from "../schema/Errors.js"
import type {
  AppendOptions,
  Event,
  KnownEventType,
  LogOnlyIntent,
  PayloadOf,
  SurfaceEventType,
  SurfaceIntent
} from "../schema/Events.js"
import type { Message } from "../schema/Messages.js"
import type { RequestContext, RequestHeader } from "../schema/RequestHeader.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import type { StoreAppendError } from "./SessionStore.js"

/**
 * Everything an append can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export type AppendError =
  | NotLosslessJson
  | InvalidEnvelope
  | LegacyFormRefused
  | UnknownEventType
  | RequestHeaderInvalid
  | MessageShapeInvalid
  | SurfaceMarkerInvalid
  | ProvenanceInvalid
  | ReplaceRangeInvalid
  | ToolResultRewriteInvalid
  | InvariantViolation
  | SessionNotFound
  | SessionExists
  | AppendConflict
  | StoreCorrupt
  | StoreFailure

/**
 * Errors of `flush` and `close` (what a store append can fail with).
 *
 * @since 0.1.0
 * @category errors
 */
export type FlushError = StoreAppendError

/**
 * Typed append: a surface-eligible type cannot be written without its `SurfaceOp`.
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendFn {
  <T extends SurfaceEventType>(
    type: T,
    data: PayloadOf<T>,
    intent: SurfaceIntent
  ): Effect.Effect<Event<T, PayloadOf<T>>, AppendError>
  <T extends Exclude<KnownEventType, SurfaceEventType>>(
    type: T,
    data: PayloadOf<T>,
    options?: LogOnlyIntent
  ): Effect.Effect<Event<T, PayloadOf<T>>, AppendError>
  <T extends string>(
    type: T extends KnownEventType ? never : T,
    data: unknown,
    options?: LogOnlyIntent
  ): Effect.Effect<Event<T>, AppendError>
}

/**
 * The request in force right after an event (SPEC §5.4).
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestSnapshot {
  readonly header: RequestHeader | undefined
  readonly context: RequestContext | undefined
  readonly messages: ReadonlyArray<Message>
}

/**
 * A read-only view of the session's surface.
 *
 * @since 0.1.0
 * @category models
 */
export interface SurfaceView {
  readonly nodes: Effect.Effect<ReadonlyArray<number>>
  readonly replaceGeneration: Effect.Effect<number>
}

/**
 * What the agent loop and the header snapshotter ask per turn and per model call, kept as events
 * commit (reading `events` copies the log after every append).
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionCounts {
  /** The number of events in the log (the next seq). */
  readonly events: number
  /** The number of `turn/start` events in the log. */
  readonly turnStarts: number
  /** R5: a replacement surface event was committed after the latest `request/header` (SPEC §5.3). */
  readonly replacedSinceHeader: boolean
}

/**
 * One open session handle.
 *
 * @since 0.1.0
 * @category models
 */
export interface SessionShape {
  readonly id: string
  readonly header: SessionHeader
  /** Length of the constructor seed; events below it are never published on the feed. */
  readonly firstLiveSeq: number
  readonly append: AppendFn
  /** Runtime-checked append for widened or loaded values (same pipeline, no static guarantees). */
  readonly appendUnknown: (type: unknown, data: unknown, options?: AppendOptions) => Effect.Effect<Event, AppendError>
  /** The log: a frozen array reused until the next append (N7). */
  readonly events: Effect.Effect<ReadonlyArray<Event>>
  /** Counts over the log, without copying it. */
  readonly counts: Effect.Effect<SessionCounts>
  readonly surface: SurfaceView
  /**
   * Derived model messages (SPEC §4.6): a frozen array of frozen messages, shared by every read
   * until the surface changes (not a fresh copy per call, issue 16); a kept array never changes.
   */
  readonly messages: Effect.Effect<ReadonlyArray<Message>>
  /** Human transcript: append-origin surface events in log order (SPEC §4.7); frozen, shared until it grows. */
  readonly transcript: Effect.Effect<ReadonlyArray<Event>>
  /** The latest request header, canonical and frozen. */
  readonly requestHeader: Effect.Effect<RequestHeader | undefined>
  /** The latest request context, frozen. */
  readonly requestContext: Effect.Effect<RequestContext | undefined>
  /** The request in force right after event `seq` (L10 outside the log). */
  readonly requestAt: (seq: number) => Effect.Effect<RequestSnapshot, SeqNotContiguous>
  /** Write everything pending (batched mode); a no-op in durable mode. */
  readonly flush: Effect.Effect<void, FlushError>
  /** Flush and close the handle; later appends fail with SessionNotFound (N10). */
  readonly close: Effect.Effect<void, FlushError>
  /** Committed live events from the moment the stream is run. */
  readonly feed: Stream.Stream<Event>
  /** Subscribe now (in the current scope); the stream then yields every later commit. */
  readonly subscribe: Effect.Effect<Stream.Stream<Event>, never, Scope.Scope>
  /** The log's events with `seq >= fromSeq`, then every later commit, without gap or duplicate. */
  readonly changes: (fromSeq: number) => Stream.Stream<Event>
  /** Run `effect` holding the append lock: its own appends proceed, other fibers wait. */
  readonly exclusive: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** "open", "failed" (after an AppendConflict) or "closed". */
  readonly state: Effect.Effect<"open" | "failed" | "closed">
}

/**
 * The current session of a program: provide it with `SessionLive.layerCreate` / `layerOpen`.
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { Session } from "effect-session-log"
 *
 * const greet = Effect.gen(function*() {
 *   const session = yield* Session.Session
 *   yield* session.append("user/message", {
 *     id: "u1",
 *     role: "user",
 *     content: [{ type: "text", text: "hi" }],
 *     source: { kind: "user" }
 *   }, { surfaceOp: "append" })
 *   return yield* session.messages
 * })
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Session extends Context.Tag("effect-session-log/Session")<Session, SessionShape>() {}

/**
 * Whether handles built in this context record a span per append (`Session.append`). Off by
 * default: Effect's span machinery costs about 5 µs per append, several times the append itself
 * on the memory store; every other operation is always traced. Read once when a handle is built.
 *
 * @since 0.1.0
 * @category models
 */
export class TraceAppends extends Context.Reference<TraceAppends>()("effect-session-log/TraceAppends", {
  defaultValue: () => false
}) {}

/**
 * A pre-commit validator (SPEC §11.2): `check` may veto a candidate, `apply` runs after commit.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreCommitValidator {
  readonly check: (candidate: Event, ctx: { readonly logLength: number }) => Effect.Effect<void, InvariantViolation>
  readonly apply: (event: Event) => void
}

/**
 * Builds a validator for one session.
 *
 * @since 0.1.0
 * @category models
 */
export type ValidatorFactory = (header: SessionHeader) => Effect.Effect<PreCommitValidator>
