/**
 * The model-free tool-result pruner (SPEC §9.6): cuts the middle out of long tool results
 * (counted in code points, surrogate pairs never split), leaving a head, `PRUNE_MARKER` and a
 * tail, and writes each cut as `compaction/prune` immediately followed by a content-only
 * `tool/result` replacement. One pass converges.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { CompactionRejected } from "../../schema/Errors.js"
import { EventPayloads, type PayloadOf } from "../../schema/Events.js"
import type { ContentBlock } from "../../schema/Messages.js"
import { isRecord } from "../../schema/Validation.js"
import { type AppendError, Session } from "../../services/Session.js"
import { corrupt, defaultEstimator, type TokenEstimator } from "./Tokens.js"

/**
 * The text put where the middle of a tool result was removed (51 code points).
 *
 * @since 0.1.0
 * @category constants
 */
export const PRUNE_MARKER = "\n\n[... middle of this tool result was pruned ...]\n\n"

const MARKER_POINTS = Array.from(PRUNE_MARKER).length

/**
 * Pruner configuration, in code points.
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneConfig {
  readonly thresholdChars: number
  readonly headChars: number
  readonly tailChars: number
}

/**
 * The defaults: 8192 / 4096 / 1024.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_PRUNE_CONFIG: PruneConfig = { thresholdChars: 8192, headChars: 4096, tailChars: 1024 }

const PRUNE_KEYS: ReadonlySet<string> = new Set(["thresholdChars", "headChars", "tailChars"])

const p13 = (detail: string): CompactionRejected => new CompactionRejected({ rule: "P13", reason: "config", detail })

const isNonNegInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0

/**
 * Validate a pruner configuration (P13): known keys only; `thresholdChars` an integer ≥ 1;
 * `headChars`, `tailChars` non-negative integers; `headChars + |PRUNE_MARKER| + tailChars ≤ thresholdChars`.
 *
 * @since 0.1.0
 * @category utils
 */
export const validatePruneConfig = (input: unknown = {}): PruneConfig | CompactionRejected => {
  if (!isRecord(input)) return p13("pruner config must be an object")
  const rec = input
  for (const key of Object.keys(rec)) if (!PRUNE_KEYS.has(key)) return p13(`unknown pruner config key "${key}"`)
  const config: PruneConfig = {
    thresholdChars: rec.thresholdChars === undefined ? DEFAULT_PRUNE_CONFIG.thresholdChars : (rec.thresholdChars as number),
    headChars: rec.headChars === undefined ? DEFAULT_PRUNE_CONFIG.headChars : (rec.headChars as number),
    tailChars: rec.tailChars === undefined ? DEFAULT_PRUNE_CONFIG.tailChars : (rec.tailChars as number)
  }
  if (!isNonNegInt(config.thresholdChars) || config.thresholdChars < 1) {
    return p13("thresholdChars must be an integer >= 1")
  }
  if (!isNonNegInt(config.headChars)) return p13("headChars must be a non-negative integer")
  if (!isNonNegInt(config.tailChars)) return p13("tailChars must be a non-negative integer")
  if (config.headChars + MARKER_POINTS + config.tailChars > config.thresholdChars) {
    return p13(`headChars + ${MARKER_POINTS} + tailChars must not exceed thresholdChars`)
  }
  return config
}

const isTextBlock = (b: ContentBlock): b is ContentBlock & { readonly text: string } =>
  b.type === "text" && typeof b.text === "string"

/**
 * Prune the inner content of a tool result: `undefined` when its text has at most
 * `thresholdChars` code points; otherwise the blocks with code points `[headChars, N − tailChars)`
 * removed, `PRUNE_MARKER` inserted once where the removed span starts, text blocks left empty
 * (without the marker) dropped and non-text blocks kept in place.
 *
 * @since 0.1.0
 * @category utils
 */
export const pruneContent = (
  inner: ReadonlyArray<ContentBlock>,
  config: PruneConfig
): ReadonlyArray<ContentBlock> | undefined => {
  const points: Array<Array<string> | undefined> = inner.map((b) => (isTextBlock(b) ? Array.from(b.text) : undefined))
  let total = 0
  for (const p of points) if (p !== undefined) total += p.length
  if (total <= config.thresholdChars) return undefined
  const cutStart = config.headChars
  const cutEnd = total - config.tailChars
  const out: Array<ContentBlock> = []
  let offset = 0
  for (let i = 0; i < inner.length; i++) {
    const block = inner[i]
    const cps = points[i]
    if (cps === undefined) {
      out.push(block)
      continue
    }
    let text = ""
    let hasMarker = false
    for (let j = 0; j < cps.length; j++) {
      const g = offset + j
      if (g === cutStart) {
        text += PRUNE_MARKER
        hasMarker = true
      }
      if (g < cutStart || g >= cutEnd) text += cps[j]
    }
    offset += cps.length
    if (text.length === 0 && !hasMarker) continue
    out.push({ ...block, text })
  }
  return out
}

type ToolResultData = PayloadOf<"tool/result">

const isToolResultData = Schema.is(EventPayloads["tool/result"])

/**
 * Prune one `tool/result` payload: the original with only `message.content[0].content` changed
 * (same id, turn, step, error, meta), or `undefined` when nothing is pruned.
 *
 * @since 0.1.0
 * @category utils
 */
export const pruneToolResult = (data: ToolResultData, config: PruneConfig): ToolResultData | undefined => {
  const block = data.message.content[0]
  const pruned = pruneContent(block.content, config)
  if (pruned === undefined) return undefined
  return {
    ...data,
    message: { ...data.message, content: [{ ...block, content: pruned }] }
  }
}

/**
 * One landed prune.
 *
 * @since 0.1.0
 * @category models
 */
export interface PrunedResult {
  /** The pruned node (the original tool result). */
  readonly seq: number
  readonly pruneSeq: number
  readonly replacementSeq: number
  readonly shadowedTokenCount: number
}

/**
 * The outcome of one pass.
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneReport {
  readonly pruned: ReadonlyArray<PrunedResult>
}

/**
 * Options of a pruning pass.
 *
 * @since 0.1.0
 * @category models
 */
export interface PruneOptions {
  /** Pruner configuration (validated, P13). */
  readonly config?: Partial<PruneConfig> | undefined
  readonly estimator?: TokenEstimator | undefined
}

/**
 * One pruning pass over a snapshot of the current surface. Each prune is written inside
 * `session.exclusive` as `compaction/prune` immediately followed by its replacement; an append
 * failure stops the pass (replacements already landed stay). An invalid config fails with P13
 * before anything is read; a second pass right after the first prunes nothing.
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { PruneToolResults, SessionLive, SqliteStore } from "effect-session-log"
 *
 * // keep the first 2,000 and the last 500 code points of every tool result over 4,000
 * const program = PruneToolResults.pruneToolResults({
 *   config: { thresholdChars: 4000, headChars: 2000, tailChars: 500 }
 * }).pipe(Effect.tap((report) => Effect.log(`pruned ${report.pruned.length} tool results`)))
 *
 * // run it with Effect.runPromise(main)
 * export const main = program.pipe(
 *   Effect.provide(SessionLive.layerOpen("s1")),
 *   Effect.provide(SqliteStore.layer({ filename: "./sessions.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 * @category programs
 */
export const pruneToolResults = Effect.fn("PruneToolResults.run")(function*(options: PruneOptions = {}) {
  const config = validatePruneConfig(options.config ?? {})
  if (config instanceof CompactionRejected) return yield* config
  const estimator = options.estimator ?? defaultEstimator
  const session = yield* Session
  const nodes = [...(yield* session.surface.nodes)]
  const events = yield* session.events
  const pruned: Array<PrunedResult> = []
  for (const seq of nodes) {
    const event = events[seq]
    if (event === undefined) return yield* corrupt(`surface seq ${seq} has no log event`)
    if (event.type !== "tool/result" || !isToolResultData(event.data)) continue
    const original = event.data
    const replacement = pruneToolResult(original, config)
    if (replacement === undefined) continue
    const shadowedTokenCount = estimator.message(original.message)
    const landed = yield* session.exclusive(Effect.uninterruptible(Effect.gen(function*() {
      // the snapshot may be stale: only rewrite a node that is still current
      if (!(yield* session.surface.nodes).includes(seq)) return undefined
      const prune = yield* session.append("compaction/prune", {
        shadowedRange: { start: seq, end: seq },
        shadowedSeqs: [seq],
        shadowedTokenCount
      })
      const rewritten = yield* session.append("tool/result", replacement, {
        surfaceOp: { op: "replace", start: seq, end: seq },
        sourceEventSeqs: [seq]
      })
      return { seq, pruneSeq: prune.seq, replacementSeq: rewritten.seq, shadowedTokenCount }
    })))
    if (landed !== undefined) pruned.push(landed)
  }
  return { pruned } as PruneReport
}) as (options?: PruneOptions) => Effect.Effect<PruneReport, CompactionRejected | AppendError, Session>
