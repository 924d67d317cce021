/**
 * The automatic compaction policy (SPEC §9.7): policy validation (P13), the limits in force for a
 * route, the pre-step pressure hook the agent loop runs before each step (prune, then compact, else
 * P12) and the context-overflow retry handler (prune, compact everything, retry at most N times).
 */
import * as Effect from "effect/Effect"
import { CompactionRejected } from "../../schema/Errors.js"
import type { RequestHeader } from "../../schema/RequestHeader.js"
import { isRecord } from "../../schema/Validation.js"
import { type AppendError, Session, type SessionShape } from "../../services/Session.js"
import type { Summarizer, SummaryRoute } from "../../services/Summarizer.js"
import { reject } from "./Range.js"
import { compact, isNonNegInt } from "./Run.js"
import { type PruneConfig, pruneToolResults, validatePruneConfig } from "./PruneToolResults.js"
import { defaultEstimator, measureRequest, type TokenEstimator } from "./Tokens.js"

type Rec = Record<string, unknown>

/**
 * A per-model override of the policy (exact provider and model).
 *
 * @since 0.1.0
 * @category models
 */
export interface PolicyOverride {
  readonly provider: string
  readonly model: string
  readonly contextWindow?: number | undefined
  readonly thresholdRatio?: number | undefined
  readonly retainTokens?: number | undefined
  readonly retainRatio?: number | undefined
}

/**
 * Automatic compaction policy. Every field is optional; `validatePolicy` checks it (P13).
 *
 * @example
 * ```ts
 * import type { Compact } from "effect-session-log"
 *
 * const policy: Compact.CompactionPolicy = {
 *   contextWindow: 128_000, // used when the route's request/context gives none
 *   thresholdRatio: 0.8, // compact at 80% of the window
 *   retainRatio: 0.16, // keep the newest 16% of the window verbatim
 *   prune: { thresholdChars: 8192, headChars: 4096, tailChars: 1024 },
 *   overrides: [{ provider: "anthropic", model: "claude-haiku", contextWindow: 200_000 }]
 * }
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface CompactionPolicy {
  /** Capacity used when the hook's context gives none. */
  readonly contextWindow?: number | undefined
  /** Pressure threshold ratio (default 0.8). */
  readonly thresholdRatio?: number | undefined
  /** Absolute retained tail (exclusive with `retainRatio`). */
  readonly retainTokens?: number | undefined
  /** Retained tail as a ratio of the context window (default 0.16). */
  readonly retainRatio?: number | undefined
  /** Extra compaction rounds under pressure (default 1, so 2 rounds). */
  readonly compactionRetries?: number | undefined
  /** Overflow retries per run (default 1). */
  readonly maxOverflowRetries?: number | undefined
  readonly overrides?: ReadonlyArray<PolicyOverride> | undefined
  /** Pruner configuration, or `false` to skip pruning. */
  readonly prune?: Partial<PruneConfig> | false | undefined
  readonly estimator?: TokenEstimator | undefined
  /** Classifies a model error as a context-window overflow. */
  readonly isContextOverflow?: ((error: unknown) => boolean) | undefined
}

/**
 * The default overflow classifier: the error text mentions an exceeded context window.
 *
 * @since 0.1.0
 * @category utils
 */
export const defaultIsContextOverflow = (error: unknown): boolean => {
  const text = error instanceof Error
    ? error.message
    : isRecord(error) && typeof error.message === "string"
    ? error.message
    : String(error)
  return /context[ _-]?(window|length)|maximum context|too many tokens|prompt is too long|context_length_exceeded/i
    .test(text)
}

/**
 * A validated policy.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResolvedPolicy {
  readonly base: CompactionPolicy
  readonly prune: PruneConfig | undefined
  readonly compactionRetries: number
  readonly maxOverflowRetries: number
  readonly estimator: TokenEstimator
  readonly isContextOverflow: (error: unknown) => boolean
}

const POLICY_KEYS: ReadonlySet<string> = new Set([
  "contextWindow",
  "thresholdRatio",
  "retainTokens",
  "retainRatio",
  "compactionRetries",
  "maxOverflowRetries",
  "overrides",
  "prune",
  "estimator",
  "isContextOverflow"
])
const OVERRIDE_KEYS: ReadonlySet<string> = new Set([
  "provider",
  "model",
  "contextWindow",
  "thresholdRatio",
  "retainTokens",
  "retainRatio"
])

const p13 = (detail: string): CompactionRejected => reject("P13", "config", detail)
const isRatio = (v: unknown): v is number => typeof v === "number" && v > 0 && v <= 1

const checkLimits = (where: string, c: Rec): CompactionRejected | undefined => {
  if (c.contextWindow !== undefined && (!isNonNegInt(c.contextWindow) || c.contextWindow < 1)) {
    return p13(`${where}contextWindow must be a positive integer`)
  }
  if (c.thresholdRatio !== undefined && !isRatio(c.thresholdRatio)) return p13(`${where}thresholdRatio must be in (0, 1]`)
  if (c.retainRatio !== undefined && !isRatio(c.retainRatio)) return p13(`${where}retainRatio must be in (0, 1]`)
  if (c.retainTokens !== undefined && !isNonNegInt(c.retainTokens)) {
    return p13(`${where}retainTokens must be a non-negative integer`)
  }
  if (c.retainTokens !== undefined && c.retainRatio !== undefined) {
    return p13(`${where}retainTokens and retainRatio are mutually exclusive`)
  }
  return undefined
}

/**
 * Limits in force for one request.
 *
 * @since 0.1.0
 * @category models
 */
export interface Limits {
  readonly contextWindow: number
  readonly threshold: number
  readonly retainTokens: number
}

/**
 * The limits for a route (SPEC §9.7): threshold ⌊window × 0.8⌋, retained tail `retainTokens` or
 * ⌊window × 0.16⌋; the retained tail must be below the threshold (P13). `undefined` when no
 * context window is known.
 *
 * @since 0.1.0
 * @category utils
 */
export const resolveLimits = (
  policy: CompactionPolicy,
  route: SummaryRoute | undefined,
  contextWindow: number | undefined
): Limits | undefined | CompactionRejected => {
  const override = route === undefined
    ? undefined
    : policy.overrides?.find((o) => o.provider === route.provider && o.model === route.model)
  const window = override?.contextWindow ?? contextWindow ?? policy.contextWindow
  if (window === undefined) return undefined
  if (!isNonNegInt(window) || window < 1) return p13("contextWindow must be a positive integer")
  const thresholdRatio = override?.thresholdRatio ?? policy.thresholdRatio ?? 0.8
  const overrideRetain = override !== undefined &&
    (override.retainTokens !== undefined || override.retainRatio !== undefined)
  const absolute = overrideRetain ? override.retainTokens : policy.retainTokens
  const ratio = overrideRetain ? override.retainRatio : policy.retainRatio
  const threshold = Math.floor(window * thresholdRatio)
  const retainTokens = absolute ?? Math.floor(window * (ratio ?? 0.16))
  if (retainTokens >= threshold) {
    return p13(`the retained tail (${retainTokens} tokens) must be below the pressure threshold (${threshold})`)
  }
  return { contextWindow: window, threshold, retainTokens }
}

/**
 * Validate a policy (P13): known keys, value ranges, exclusive options, pruner config.
 *
 * @since 0.1.0
 * @category utils
 */
export const validatePolicy = (policy: CompactionPolicy): ResolvedPolicy | CompactionRejected => {
  if (!isRecord(policy as unknown)) return p13("policy must be an object")
  for (const key of Object.keys(policy)) if (!POLICY_KEYS.has(key)) return p13(`unknown policy key "${key}"`)
  const limits = checkLimits("", policy as unknown as Rec)
  if (limits !== undefined) return limits
  for (const key of ["compactionRetries", "maxOverflowRetries"] as const) {
    if (policy[key] !== undefined && !isNonNegInt(policy[key])) return p13(`${key} must be a non-negative integer`)
  }
  if (policy.overrides !== undefined) {
    if (!Array.isArray(policy.overrides)) return p13("overrides must be an array")
    for (const [i, o] of policy.overrides.entries()) {
      if (!isRecord(o as unknown)) return p13(`overrides[${i}] must be an object`)
      for (const key of Object.keys(o)) if (!OVERRIDE_KEYS.has(key)) return p13(`unknown key "${key}" in overrides[${i}]`)
      if (typeof o.provider !== "string" || typeof o.model !== "string") {
        return p13(`overrides[${i}] needs a provider and a model`)
      }
      const bad = checkLimits(`overrides[${i}].`, o as unknown as Rec)
      if (bad !== undefined) return bad
      if (o.contextWindow !== undefined || policy.contextWindow !== undefined) {
        const r = resolveLimits(policy, o, undefined)
        if (r instanceof CompactionRejected) return r
      }
    }
  }
  if (policy.contextWindow !== undefined) {
    const r = resolveLimits(policy, undefined, undefined)
    if (r instanceof CompactionRejected) return r
  }
  let prune: PruneConfig | undefined
  if (policy.prune !== false) {
    const validated = validatePruneConfig(policy.prune ?? {})
    if (validated instanceof CompactionRejected) return validated
    prune = validated
  }
  if (policy.isContextOverflow !== undefined && typeof policy.isContextOverflow !== "function") {
    return p13("isContextOverflow must be a function")
  }
  return {
    base: policy,
    prune,
    compactionRetries: policy.compactionRetries ?? 1,
    maxOverflowRetries: policy.maxOverflowRetries ?? 1,
    estimator: policy.estimator ?? defaultEstimator,
    isContextOverflow: policy.isContextOverflow ?? defaultIsContextOverflow
  }
}

/**
 * What the agent loop passes to the pre-step hook and the overflow handler.
 *
 * @since 0.1.0
 * @category models
 */
export interface HookContext {
  readonly turn: number
  /** The header the next request will use (else the latest logged one is used). */
  readonly header: RequestHeader | undefined
  /** The route's context window (from `request/context`), if known. */
  readonly contextWindow?: number | undefined
}

const routeOf = (header: RequestHeader | undefined): SummaryRoute | undefined =>
  header === undefined ? undefined : { provider: header.config.provider, model: header.config.model }

const pressureOf = (session: SessionShape, header: RequestHeader | undefined, estimator: TokenEstimator) =>
  Effect.map(session.messages, (messages) => measureRequest(messages, header, estimator))

/**
 * The pre-step hook (SPEC §9.7, pressure): measure the request about to be built; at or above
 * the threshold prune first, re-measure, then run up to `compactionRetries + 1` automatic
 * compaction rounds until below it; otherwise P12. Compaction failures propagate (the loop ends
 * the turn `error`). An invalid policy fails every call with P13.
 *
 * @example
 * ```ts
 * import * as Toolkit from "@effect/ai/Toolkit"
 * import { AgentLoop, Compact } from "effect-session-log"
 *
 * const loop = AgentLoop.make({
 *   toolkit: Toolkit.empty,
 *   system: "You are a careful assistant.",
 *   route: { provider: "openai", model: "gpt-4o", contextWindow: 128_000 },
 *   // before every step: prune long tool results, then compact while at 80% of the window or more
 *   preStep: Compact.preStepHook({ thresholdRatio: 0.8, retainRatio: 0.2 }),
 *   // when the provider still reports an overflow: compact everything and retry once
 *   overflow: Compact.onOverflow({ maxOverflowRetries: 1 })
 * })
 * // loop.runTurn(...) also needs a Summarizer now (e.g. SummarizerLive.layerDeterministic)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const preStepHook = (
  policy: CompactionPolicy
): (ctx: HookContext) => Effect.Effect<void, CompactionRejected | AppendError, Session | Summarizer> => {
  const resolved = validatePolicy(policy)
  return (ctx) =>
    Effect.gen(function*() {
      if (resolved instanceof CompactionRejected) return yield* resolved
      const session = yield* Session
      const header = ctx.header ?? (yield* session.requestHeader)
      const limits = resolveLimits(resolved.base, routeOf(header), ctx.contextWindow)
      if (limits instanceof CompactionRejected) return yield* limits
      if (limits === undefined) return
      const estimator = resolved.estimator
      let size = yield* pressureOf(session, header, estimator)
      if (size < limits.threshold) return
      if (resolved.prune !== undefined) {
        yield* pruneToolResults({ config: resolved.prune, estimator })
        size = yield* pressureOf(session, header, estimator)
        if (size < limits.threshold) return
      }
      for (let round = 0; round <= resolved.compactionRetries; round++) {
        const done = yield* compact({
          mode: "automatic",
          retainTokens: limits.retainTokens,
          estimator,
          agentRoute: routeOf(ctx.header)
        }).pipe(
          Effect.map(() => true),
          Effect.catchIf((e) => e._tag === "CompactionRejected" && e.rule === "P4", () => Effect.succeed(false))
        )
        size = yield* pressureOf(session, header, estimator)
        if (size < limits.threshold) return
        if (!done) break
      }
      return yield* reject(
        "P12",
        "pressure",
        `the request (${size} tokens) is still at or above the threshold (${limits.threshold})`
      )
    })
}

/**
 * Handles context-overflow errors of one loop run (SPEC §9.7, second bullet).
 *
 * @since 0.1.0
 * @category models
 */
export interface OverflowHandler {
  /** True iff `error` is a context-window overflow (the policy's predicate). */
  readonly isOverflow: (error: unknown) => boolean
  /**
   * After an overflow: prune, compact with `retainTokens = 0`, and answer whether the request may
   * be retried: at most `maxOverflowRetries` times per run and only if `replaceGeneration`
   * advanced. A compaction that finds nothing to compact (P4) means "no retry"; other compaction
   * failures propagate.
   */
  readonly handle: (ctx: HookContext) => Effect.Effect<boolean, CompactionRejected | AppendError, Session | Summarizer>
  /** Reset the counter (after a successful assistant message). */
  readonly reset: Effect.Effect<void>
  /** Overflow retries used since the last reset. */
  readonly attempts: Effect.Effect<number>
}

/**
 * Make the overflow-retry handler of one loop run (an invalid policy fails `handle` with P13).
 * Pass it (or the policy itself) as `AgentLoop.make`'s `overflow` option; see `preStepHook`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const onOverflow = (policy: CompactionPolicy): OverflowHandler => {
  const resolved = validatePolicy(policy)
  let attempts = 0
  return {
    isOverflow: (error) =>
      resolved instanceof CompactionRejected ? defaultIsContextOverflow(error) : resolved.isContextOverflow(error),
    reset: Effect.sync(() => {
      attempts = 0
    }),
    attempts: Effect.sync(() => attempts),
    handle: (ctx) =>
      Effect.gen(function*() {
        if (resolved instanceof CompactionRejected) return yield* resolved
        if (attempts >= resolved.maxOverflowRetries) return false
        attempts++
        const session = yield* Session
        const before = yield* session.surface.replaceGeneration
        if (resolved.prune !== undefined) {
          yield* pruneToolResults({ config: resolved.prune, estimator: resolved.estimator })
        }
        yield* compact({
          mode: "automatic",
          retainTokens: 0,
          estimator: resolved.estimator,
          agentRoute: routeOf(ctx.header)
        }).pipe(
          Effect.catchIf((e) => e._tag === "CompactionRejected" && e.rule === "P4", () => Effect.void)
        )
        const after = yield* session.surface.replaceGeneration
        return after > before
      })
  }
}
