/**
 * The request-header writer (SPEC §5.3, rules R1–R8): per model-call attempt, decides whether a
 * canonical `request/header` snapshot (reason `initial`, `resume`, `change` or `series`) and a
 * `request/context` record must be appended before dispatch, and appends them. Swappable layer;
 * the default implementation is `layers/HeaderSnapshotterLive.ts`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { NotLosslessJson, RequestHeaderInvalid } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import type { HeaderReason, RequestContext, RequestHeader } from "../schema/RequestHeader.js"
import type { AppendError, SessionShape } from "./Session.js"

/**
 * What the agent loop is about to send (one model-call attempt).
 *
 * @since 0.1.0
 * @category models
 */
export interface ModelRequestPlan {
  /** H, the header the request will use (canonicalised by the snapshotter). */
  readonly header: RequestHeader
  /** Route and capacity of this request. */
  readonly context?: RequestContext
  /** The loop instance's first model request. */
  readonly firstOfInstance: boolean
  /** The caller declares a new message series (this request only). */
  readonly newSeries?: boolean
}

/**
 * What must be appended before the request is dispatched (nothing when both are absent).
 *
 * @since 0.1.0
 * @category models
 */
export interface SnapshotDecision {
  readonly header?: { readonly header: RequestHeader; readonly reason: HeaderReason }
  readonly context?: RequestContext
}

/**
 * The HeaderSnapshotter service shape.
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderSnapshotterShape {
  /**
   * Apply R1–R8 to the session's log; never writes. The plan is checked as an append would check
   * it: the lossless walk of header and context (A1–A9), then I1–I6 on the header.
   */
  readonly decide: (
    session: SessionShape,
    plan: ModelRequestPlan
  ) => Effect.Effect<SnapshotDecision, RequestHeaderInvalid | NotLosslessJson>
  /** `decide`, then append the request/header and request/context events; returns what it appended. */
  readonly record: (
    session: SessionShape,
    plan: ModelRequestPlan
  ) => Effect.Effect<ReadonlyArray<Event>, AppendError | RequestHeaderInvalid>
}

/**
 * Decides and writes request-header snapshots.
 *
 * @since 0.1.0
 * @category tags
 */
export class HeaderSnapshotter extends Context.Tag("effect-session-log/HeaderSnapshotter")<
  HeaderSnapshotter,
  HeaderSnapshotterShape
>() {}
