/**
 * Compaction (SPEC §9.1–§9.4, §9.7), the public module: a compaction summarises a head span of
 * the surface into one checkpoint `user/message` that replaces it, between a `compaction/start`
 * and a `compaction/end`. Implemented in `Range` (§9.1 balance, §9.2 selection),
 * `Lock` (§9.4 lock and ownership), `Run` (§9.3) and
 * `Policy` (§9.7: the pre-step pressure hook and the context-overflow retry).
 *
 * @since 0.1.0
 */
export {
  type Balance,
  BalanceCache,
  balanceCacheOf,
  balancedAfter,
  balancedBefore,
  type CompactionRange,
  selectCompactionRange,
  selectExplicitRegion,
  sessionBalance,
  toolPairingBalance
} from "./Range.js"
export { lockHolder, openTurn } from "./Lock.js"
export { compact, type CompactError, type CompactionResult, type CompactOptions } from "./Run.js"
export {
  type CompactionPolicy,
  defaultIsContextOverflow,
  type HookContext,
  type Limits,
  onOverflow,
  type OverflowHandler,
  type PolicyOverride,
  preStepHook,
  type ResolvedPolicy,
  resolveLimits,
  validatePolicy
} from "./Policy.js"
