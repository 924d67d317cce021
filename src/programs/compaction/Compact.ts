/**
 * Compaction (SPEC §9.1–§9.4, §9.7), the public module: a compaction summarises a head span of
 * the surface into one checkpoint `user/message` that replaces it, between a `compaction/start`
 * and a `compaction/end`. Implemented in `Range` (§9.1 balance, §9.2 selection),
 * `Lock` (§9.4 lock and ownership), `Run` (§9.3) and
 * `Policy` (§9.7: the pre-step pressure hook and the context-overflow retry).
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { Compact, SessionLive, SqliteStore, SummarizerLive } from "effect-session-log"
 *
 * // between turns: summarise all but the newest ~2,000 tokens of the surface
 * const program = Compact.compact({ mode: "manual", retainTokens: 2000 }).pipe(
 *   Effect.tap((r) => Effect.log(`summarised ${r.shadowedSeqs.length} events (${r.shadowedTokenCount} tokens)`)),
 *   Effect.catchTag("CompactionRejected", (e) => Effect.log(`not compacted: ${e.message}`))
 * )
 *
 * // run it with Effect.runPromise(main)
 * export const main = program.pipe(
 *   Effect.provide(SessionLive.layerOpen("s1")),
 *   Effect.provide(SummarizerLive.layerDeterministic),
 *   Effect.provide(SqliteStore.layer({ filename: "./sessions.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 */
export {
  /**
   * The k+1 cut counters of a surface of k nodes (`counters[i]` = in-progress calls before node i).
   *
   * @since 0.1.0
   * @category models
   */
  type Balance,
  /**
   * The balance cache of one session (SPEC §9.1): keyed by `replaceGeneration`; extended for new
   * tail nodes only; rebuilt on a new generation or when it holds more nodes than the surface; a
   * new tail is validated before it is committed.
   *
   * @since 0.1.0
   * @category models
   */
  BalanceCache,
  /**
   * The balance cache owned by the compaction program for `session`.
   *
   * @since 0.1.0
   * @category utils
   */
  balanceCacheOf,
  /**
   * Is the cut after `seq` balanced? (P5 when `seq` is not on the surface.)
   *
   * @since 0.1.0
   * @category utils
   */
  balancedAfter,
  /**
   * Is the cut before `seq` balanced? (P5 when `seq` is not on the surface.)
   *
   * @since 0.1.0
   * @category utils
   */
  balancedBefore,
  /**
   * A selected, head-anchored or explicit span of the surface.
   *
   * @since 0.1.0
   * @category models
   */
  type CompactionRange,
  /**
   * Select the head-anchored range to compact (SPEC §9.2): walk from the tail until the retained
   * tokens reach `retainTokens` (that index is `keep`), snap `keep` toward the head to a balanced
   * cut, and return `[nodes[0], nodes[keep − 1]]`. P4 when nothing is left to compact; P6 when the
   * measurement is not aligned with the balance's surface.
   *
   * @since 0.1.0
   * @category utils
   */
  selectCompactionRange,
  /**
   * Validate an explicit region `[start, end]` (P5): both on the surface, start not after end,
   * balanced before start and after end.
   *
   * @since 0.1.0
   * @category utils
   */
  selectExplicitRegion,
  /**
   * The current balance of a session, through its cache.
   *
   * @since 0.1.0
   * @category utils
   */
  sessionBalance,
  /**
   * The tool-pairing balance of a surface over its log (P6 on a negative counter or a missing event).
   *
   * @since 0.1.0
   * @category utils
   */
  toolPairingBalance
} from "./Range.js"
export {
  /**
   * The compaction lock (SPEC §9.4): busy iff the newest bracket event is a `compaction/start`
   * and no `session/end-seed` is newer than it. Returns the unmatched start's seq when busy.
   *
   * @since 0.1.0
   * @category utils
   */
  lockHolder,
  /**
   * The number of the open turn (the newest `turn/start` not followed by a `turn/end`), if any.
   *
   * @since 0.1.0
   * @category utils
   */
  openTurn
} from "./Lock.js"
export {
  /**
   * Run one compaction (SPEC §9.3). Select (P4–P6, nothing written); open inside
   * `session.exclusive` (lock P1, ownership P2/P3); summarise and price (P7); check stability (P8)
   * and commit `compaction/summary`, the replacing checkpoint and `compaction/end` inside one
   * exclusive section (P10). Any failure after the start writes exactly one `compaction/end` with
   * `error` (interruption too, P9). Manual compactions flush after the end (P11).
   *
   * @since 0.1.0
   * @category programs
   */
  compact,
  /**
   * Everything a compaction can fail with.
   *
   * @since 0.1.0
   * @category errors
   */
  type CompactError,
  /**
   * The result of a successful compaction (SPEC §9.3).
   *
   * @since 0.1.0
   * @category models
   */
  type CompactionResult,
  /**
   * Options of one compaction.
   *
   * @since 0.1.0
   * @category models
   */
  type CompactOptions
} from "./Run.js"
export {
  /**
   * Automatic compaction policy. Every field is optional; `validatePolicy` checks it (P13).
   *
   * @since 0.1.0
   * @category models
   */
  type CompactionPolicy,
  /**
   * The default overflow classifier: the error text mentions an exceeded context window.
   *
   * @since 0.1.0
   * @category utils
   */
  defaultIsContextOverflow,
  /**
   * What the agent loop passes to the pre-step hook and the overflow handler.
   *
   * @since 0.1.0
   * @category models
   */
  type HookContext,
  /**
   * Limits in force for one request.
   *
   * @since 0.1.0
   * @category models
   */
  type Limits,
  /**
   * Make the overflow-retry handler of one loop run (an invalid policy fails `handle` with P13).
   * Pass it (or the policy itself) as `AgentLoop.make`'s `overflow` option; see `preStepHook`.
   *
   * @since 0.1.0
   * @category utils
   */
  onOverflow,
  /**
   * Handles context-overflow errors of one loop run (SPEC §9.7, second bullet).
   *
   * @since 0.1.0
   * @category models
   */
  type OverflowHandler,
  /**
   * A per-model override of the policy (exact provider and model).
   *
   * @since 0.1.0
   * @category models
   */
  type PolicyOverride,
  /**
   * The pre-step hook (SPEC §9.7, pressure): measure the request about to be built; at or above
   * the threshold prune first, re-measure, then run up to `compactionRetries + 1` automatic
   * compaction rounds until below it; otherwise P12. Compaction failures propagate (the loop ends
   * the turn `error`). An invalid policy fails every call with P13.
   *
   * @since 0.1.0
   * @category utils
   */
  preStepHook,
  /**
   * A validated policy.
   *
   * @since 0.1.0
   * @category models
   */
  type ResolvedPolicy,
  /**
   * The limits for a route (SPEC §9.7): threshold ⌊window × 0.8⌋, retained tail `retainTokens` or
   * ⌊window × 0.16⌋; the retained tail must be below the threshold (P13). `undefined` when no
   * context window is known.
   *
   * @since 0.1.0
   * @category utils
   */
  resolveLimits,
  /**
   * Validate a policy (P13): known keys, value ranges, exclusive options, pruner config.
   *
   * @since 0.1.0
   * @category utils
   */
  validatePolicy
} from "./Policy.js"
