/**
 * The default HeaderSnapshotter (SPEC §5.3): rules R1–R8 over a session handle's log, the
 * canonical header form of §5.1 and the equality of §5.2. `record` decides and appends while
 * holding the session's append lock, so no other append can slip between decision and write.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NotLosslessJson, type RequestHeaderInvalid } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { walkJson } from "../../schema/Json.js"
import {
  canonicalHeader,
  type HeaderReason,
  headerEquals,
  type RequestContext,
  type RequestHeader
} from "../../schema/RequestHeader.js"
import { checkRequestHeader } from "../../schema/Validation.js"
import {
  HeaderSnapshotter,
  type HeaderSnapshotterShape,
  type ModelRequestPlan,
  type SnapshotDecision
} from "../../services/HeaderSnapshotter.js"
import type { SessionShape } from "../../services/Session.js"

/**
 * Options of the default snapshotter (none yet; kept for the make/layer convention).
 *
 * @since 0.1.0
 * @category models
 */
export interface HeaderSnapshotterOptions {}

/**
 * R7: the context differs in provider, model or contextWindow (an absent window differs from a present one).
 *
 * @since 0.1.0
 * @category utils
 */
export const contextDiffers = (next: RequestContext, latest: RequestContext | undefined): boolean =>
  latest === undefined || next.provider !== latest.provider || next.model !== latest.model ||
  next.contextWindow !== latest.contextWindow

/** The `request/context` data written for a plan: exactly provider, model and contextWindow if present. */
const contextData = (c: RequestContext): RequestContext =>
  c.contextWindow === undefined
    ? { provider: c.provider, model: c.model }
    : { provider: c.provider, model: c.model, contextWindow: c.contextWindow }

/**
 * R1–R7 as a pure function of the handle's state: `latest` = the latest canonical snapshot B (or
 * none), `latestContext` = the latest context, `replacedSinceHeader` = R5 (a replacement surface
 * event committed after B, kept by the handle as events commit).
 *
 * @since 0.1.0
 * @category utils
 */
export const decideSnapshot = (
  plan: ModelRequestPlan,
  state: {
    readonly latest: RequestHeader | undefined
    readonly latestContext: RequestContext | undefined
    readonly replacedSinceHeader: boolean
  }
): SnapshotDecision => {
  const h = canonicalHeader(plan.header)
  let reason: HeaderReason | undefined
  if (plan.firstOfInstance) reason = state.latest === undefined ? "initial" : "resume" // R1, R2
  else if (state.latest === undefined || !headerEquals(h, state.latest)) reason = "change" // R3
  else if (plan.newSeries === true || state.replacedSinceHeader) reason = "series" // R6, R5
  const context = plan.context !== undefined && contextDiffers(plan.context, state.latestContext)
    ? contextData(plan.context)
    : undefined
  return {
    ...(reason === undefined ? {} : { header: { header: h, reason } }),
    ...(context === undefined ? {} : { context })
  }
}

const lossless = (fail: { readonly rule: string; readonly path: string; readonly detail: string }, seq: number) =>
  new NotLosslessJson({ rule: fail.rule, seq, path: fail.path, detail: fail.detail })

/**
 * Build the default snapshotter.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (_options: HeaderSnapshotterOptions = {}): HeaderSnapshotterShape => {
  const decide = Effect.fn("HeaderSnapshotter.decide")(function*(session: SessionShape, plan: ModelRequestPlan) {
    // counts kept by the handle: no copy of the log per model call
    const counts = yield* session.counts
    const seq = counts.events
    // the append pipeline's order (SPEC §3.1 steps 3 and 5): the lossless walk, then I1–I6, so a
    // bad plan fails before anything is appended; comparisons then run on the walked copies
    const header = walkJson(plan.header, "/data/header")
    if (header._tag === "Fail") return yield* lossless(header, seq)
    const invalid: RequestHeaderInvalid | undefined = checkRequestHeader({ header: header.value, reason: "initial" }, seq)
    if (invalid !== undefined) return yield* invalid
    let context: RequestContext | undefined
    if (plan.context !== undefined) {
      const walked = walkJson(plan.context, "/data")
      if (walked._tag === "Fail") return yield* lossless(walked, seq)
      context = walked.value as unknown as RequestContext
    }
    const checked: ModelRequestPlan = {
      header: header.value as unknown as RequestHeader,
      firstOfInstance: plan.firstOfInstance,
      ...(context === undefined ? {} : { context }),
      ...(plan.newSeries === undefined ? {} : { newSeries: plan.newSeries })
    }
    return decideSnapshot(checked, {
      latest: yield* session.requestHeader,
      latestContext: yield* session.requestContext,
      replacedSinceHeader: counts.replacedSinceHeader
    })
  })

  const record = Effect.fn("HeaderSnapshotter.record")(function*(session: SessionShape, plan: ModelRequestPlan) {
    return yield* session.exclusive(Effect.gen(function*() {
      const decision = yield* decide(session, plan)
      const written: Array<Event> = []
      if (decision.header !== undefined) {
        written.push(yield* session.append("request/header", decision.header))
      }
      if (decision.context !== undefined) {
        written.push(yield* session.append("request/context", decision.context))
      }
      return written as ReadonlyArray<Event>
    }))
  })

  return { decide, record }
}

/**
 * The default HeaderSnapshotter layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHeaderSnapshotter = (options: HeaderSnapshotterOptions = {}): Layer.Layer<HeaderSnapshotter> =>
  Layer.succeed(HeaderSnapshotter, make(options))

/**
 * The default HeaderSnapshotter layer (no options).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<HeaderSnapshotter> = layerHeaderSnapshotter()

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `HeaderSnapshotterLive.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makeHeaderSnapshotter = make
