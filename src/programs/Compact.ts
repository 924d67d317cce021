/**
 * Compaction (SPEC §9.1–§9.4, §9.7): tool-pairing balance (with a per-session cache keyed by
 * `replaceGeneration`), range selection, the compaction transaction (lock, ownership, summary,
 * stability check, commit, failure end) and the automatic policy: the pre-step pressure hook and
 * the context-overflow retry handler used by the agent loop.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Schema from "effect/Schema"
import { CompactionRejected } from "../schema/Errors.js"
import { type Event, EventPayloads } from "../schema/Events.js"
import type { TextBlock } from "../schema/Messages.js"
import type { RequestHeader } from "../schema/RequestHeader.js"
import { nextId } from "../services/IdGenerator.js"
import { type AppendError, Session, type SessionShape } from "../services/Session.js"
import { frameCheckpoint, Summarizer, type SummaryRoute } from "../services/Summarizer.js"
import { deriveEventMessage } from "../services/SurfaceManager.js"
import { type PruneConfig, pruneToolResults, validatePruneConfig } from "./PruneToolResults.js"
import {
  checkAligned,
  corrupt,
  defaultEstimator,
  type Measurement,
  measureRequest,
  measureSurface,
  sameMeasurement,
  type TokenEstimator
} from "./Tokens.js"

type Rec = Record<string, unknown>
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v)

const reject = (rule: string, reason: string, detail: string): CompactionRejected =>
  new CompactionRejected({ rule, reason, detail })

// ---------------------------------------------------------------------------------------------
// §9.1 Tool-pairing balance

/** The k+1 cut counters of a surface of k nodes (`counters[i]` = in-progress calls before node i). */
export interface Balance {
  readonly nodes: ReadonlyArray<number>
  readonly counters: ReadonlyArray<number>
}

/** The in-progress-calls delta of one surface event (tool-call blocks; a result is −1). */
const delta = (event: Event): number => {
  if (event.type === "tool/result") return -1
  if (event.type !== "assistant/message") return 0
  const message = isRecord(event.data) ? event.data.message : undefined
  const content = isRecord(message) && Array.isArray(message.content) ? (message.content as ReadonlyArray<unknown>) : []
  let n = 0
  for (const b of content) if (isRecord(b) && b.type === "tool-call") n++
  return n
}

/** Extend `counters` (ending with the counter before `nodes[from]`) over `nodes[from..]`; P6 on corruption. */
const extendCounters = (
  counters: Array<number>,
  nodes: ReadonlyArray<number>,
  from: number,
  events: ReadonlyArray<Event>
): CompactionRejected | undefined => {
  let c = counters[counters.length - 1]
  for (let i = from; i < nodes.length; i++) {
    const seq = nodes[i]
    const event = events[seq]
    if (event === undefined || event.seq !== seq) return corrupt(`surface seq ${seq} has no log event`)
    c += delta(event)
    if (c < 0) return corrupt(`negative in-progress call counter after seq ${seq}`)
    counters.push(c)
  }
  return undefined
}

/** The tool-pairing balance of a surface over its log (P6 on a negative counter or a missing event). */
export const toolPairingBalance = (
  nodes: ReadonlyArray<number>,
  events: ReadonlyArray<Event>
): Balance | CompactionRejected => {
  const counters = [0]
  const failed = extendCounters(counters, nodes, 0, events)
  return failed ?? { nodes: [...nodes], counters }
}

const positionOf = (balance: Balance, seq: number): number | CompactionRejected => {
  const i = balance.nodes.indexOf(seq)
  return i === -1 ? reject("P5", "invalid-range", `seq ${seq} is not on the current surface`) : i
}

/** Is the cut before `seq` balanced? (P5 when `seq` is not on the surface.) */
export const balancedBefore = (balance: Balance, seq: number): boolean | CompactionRejected => {
  const i = positionOf(balance, seq)
  return typeof i === "number" ? balance.counters[i] === 0 : i
}

/** Is the cut after `seq` balanced? (P5 when `seq` is not on the surface.) */
export const balancedAfter = (balance: Balance, seq: number): boolean | CompactionRejected => {
  const i = positionOf(balance, seq)
  return typeof i === "number" ? balance.counters[i + 1] === 0 : i
}

/**
 * The balance cache of one session (SPEC §9.1): keyed by `replaceGeneration`; extended for new
 * tail nodes only; rebuilt on a new generation or when it holds more nodes than the surface; a
 * new tail is validated before it is committed.
 */
export class BalanceCache {
  private generation = -1
  private nodes: Array<number> = []
  private counters: Array<number> = [0]
  /** Number of full rebuilds (observable for tests). */
  rebuilds = 0
  /** Number of tail extensions. */
  extensions = 0

  /** The balance of `nodes` at `generation`. */
  get(nodes: ReadonlyArray<number>, generation: number, events: ReadonlyArray<Event>): Balance | CompactionRejected {
    const cached = this.nodes.length
    const reusable = generation === this.generation && cached <= nodes.length &&
      (cached === 0 || this.nodes[cached - 1] === nodes[cached - 1])
    if (!reusable) {
      const counters = [0]
      const failed = extendCounters(counters, nodes, 0, events)
      if (failed !== undefined) return failed
      this.generation = generation
      this.nodes = [...nodes]
      this.counters = counters
      this.rebuilds++
    } else if (cached < nodes.length) {
      const counters = [this.counters[this.counters.length - 1]]
      const failed = extendCounters(counters, nodes, cached, events)
      if (failed !== undefined) return failed
      for (let i = cached; i < nodes.length; i++) this.nodes.push(nodes[i])
      for (let i = 1; i < counters.length; i++) this.counters.push(counters[i])
      this.extensions++
    }
    return { nodes: [...this.nodes], counters: [...this.counters] }
  }
}

const caches = new WeakMap<SessionShape, BalanceCache>()

/** The balance cache owned by the compaction program for `session`. */
export const balanceCacheOf = (session: SessionShape): BalanceCache => {
  let cache = caches.get(session)
  if (cache === undefined) {
    cache = new BalanceCache()
    caches.set(session, cache)
  }
  return cache
}

/** The current balance of a session, through its cache. */
export const sessionBalance = (
  session: SessionShape
): Effect.Effect<Balance, CompactionRejected> =>
  Effect.gen(function*() {
    const nodes = yield* session.surface.nodes
    const generation = yield* session.surface.replaceGeneration
    const events = yield* session.events
    const balance = balanceCacheOf(session).get(nodes, generation, events)
    return balance instanceof CompactionRejected ? yield* balance : balance
  })

// ---------------------------------------------------------------------------------------------
// §9.2 Range selection

/** A selected, head-anchored or explicit span of the surface. */
export interface CompactionRange {
  readonly start: number
  readonly end: number
  /** The shadowed seqs, in surface order. */
  readonly seqs: ReadonlyArray<number>
  /** The sum of their tokens. */
  readonly tokens: number
}

const rangeOf = (measurement: Measurement, from: number, to: number): CompactionRange => {
  const seqs: Array<number> = []
  let tokens = 0
  for (let i = from; i <= to; i++) {
    seqs.push(measurement.nodes[i].seq)
    tokens += measurement.nodes[i].tokens
  }
  return { start: seqs[0], end: seqs[seqs.length - 1], seqs, tokens }
}

/**
 * Select the head-anchored range to compact (SPEC §9.2): walk from the tail until the retained
 * tokens reach `retainTokens` (that index is `keep`), snap `keep` toward the head to a balanced
 * cut, and return `[nodes[0], nodes[keep − 1]]`. P4 when nothing is left to compact; P6 when the
 * measurement is not aligned with the balance's surface.
 */
export const selectCompactionRange = (
  measurement: Measurement,
  balance: Balance,
  retainTokens: number
): CompactionRange | CompactionRejected => {
  const misaligned = checkAligned(measurement, balance.nodes)
  if (misaligned !== undefined) return misaligned
  const n = measurement.nodes.length
  let keep = 0
  let sum = 0
  for (let i = n - 1; i >= 0; i--) {
    sum += measurement.nodes[i].tokens
    if (sum >= retainTokens) {
      keep = i
      break
    }
  }
  if (keep === 0) return reject("P4", "nothing", "the retained tail covers the whole surface")
  while (keep > 0 && balance.counters[keep] !== 0) keep--
  if (keep === 0) return reject("P4", "nothing", "no balanced cut before the retained tail")
  return rangeOf(measurement, 0, keep - 1)
}

/**
 * Validate an explicit region `[start, end]` (P5): both on the surface, start not after end,
 * balanced before start and after end.
 */
export const selectExplicitRegion = (
  measurement: Measurement,
  balance: Balance,
  start: number,
  end: number
): CompactionRange | CompactionRejected => {
  const misaligned = checkAligned(measurement, balance.nodes)
  if (misaligned !== undefined) return misaligned
  const si = balance.nodes.indexOf(start)
  const ei = balance.nodes.indexOf(end)
  if (si === -1) return reject("P5", "invalid-range", `start seq ${start} is not on the current surface`)
  if (ei === -1) return reject("P5", "invalid-range", `end seq ${end} is not on the current surface`)
  if (si > ei) return reject("P5", "invalid-range", `start seq ${start} is after end seq ${end} on the surface`)
  if (balance.counters[si] !== 0) return reject("P5", "invalid-range", `the cut before seq ${start} is unbalanced`)
  if (balance.counters[ei + 1] !== 0) return reject("P5", "invalid-range", `the cut after seq ${end} is unbalanced`)
  return rangeOf(measurement, si, ei)
}

// ---------------------------------------------------------------------------------------------
// §9.4 Lock and ownership

const isStart = Schema.is(EventPayloads["compaction/start"])
const isEnd = Schema.is(EventPayloads["compaction/end"])
const isTurnStart = Schema.is(EventPayloads["turn/start"])
const isTurnEnd = Schema.is(EventPayloads["turn/end"])

/**
 * The compaction lock (SPEC §9.4): busy iff the newest bracket event is a `compaction/start`
 * and no `session/end-seed` is newer than it. Returns the unmatched start's seq when busy.
 */
export const lockHolder = (events: ReadonlyArray<Event>): number | undefined => {
  let unmatched: number | undefined
  let endSeed = -1
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (endSeed === -1 && e.type === "session/end-seed") endSeed = e.seq
    if (unmatched === undefined) {
      if (e.type === "compaction/start" && isStart(e.data)) {
        unmatched = e.seq
        if (endSeed !== -1) break
        continue
      }
      if (e.type === "compaction/end" && isEnd(e.data)) return undefined
    } else if (endSeed !== -1) break
  }
  if (unmatched === undefined) return undefined
  return endSeed > unmatched ? undefined : unmatched
}

/** The number of the open turn (the newest `turn/start` not followed by a `turn/end`), if any. */
export const openTurn = (events: ReadonlyArray<Event>): number | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type === "turn/end" && isTurnEnd(e.data)) return undefined
    if (e.type === "turn/start" && isTurnStart(e.data)) return e.data.turn
  }
  return undefined
}

// ---------------------------------------------------------------------------------------------
// §9.3 The compaction transaction

/** Options of one compaction. */
export interface CompactOptions {
  /** Automatic (inside the open turn, owner = its number) or manual (between turns, owner null). */
  readonly mode: "automatic" | "manual"
  /** Select a head-anchored range keeping this many tail tokens. */
  readonly retainTokens?: number | undefined
  /** Manual only: compact exactly this region. */
  readonly region?: { readonly start: number; readonly end: number } | undefined
  readonly sourceCommandId?: string | undefined
  readonly estimator?: TokenEstimator | undefined
  /** The agent's configured route (last fallback of the model summariser). */
  readonly agentRoute?: SummaryRoute | undefined
}

/** The result of a successful compaction (SPEC §9.3). */
export interface CompactionResult {
  readonly compactionId: string
  readonly sourceCommandId?: string
  readonly startSeq: number
  readonly summarySeq: number
  readonly endSeq: number
  readonly summary: ReadonlyArray<TextBlock>
  readonly shadowedRange: { readonly start: number; readonly end: number }
  readonly shadowedSeqs: ReadonlyArray<number>
  readonly shadowedTokenCount: number
}

/** Everything a compaction can fail with. */
export type CompactError = CompactionRejected | AppendError

const isNonNegInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0

/** Whether this compaction's bracket is absent, open, or closed in the log. */
const bracketState = (events: ReadonlyArray<Event>, compactionId: string): "absent" | "open" | "closed" => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type === "compaction/end" && isEnd(e.data) && e.data.compactionId === compactionId) return "closed"
    if (e.type === "compaction/start" && isStart(e.data) && e.data.compactionId === compactionId) return "open"
  }
  return "absent"
}

/** The failure text of a cause: failure messages, "interrupted", or defect texts. */
const causeText = (cause: Cause.Cause<unknown>): string => {
  const parts: Array<string> = []
  for (const e of Cause.failures(cause)) parts.push(e instanceof Error ? e.message : String(e))
  for (const d of Cause.defects(cause)) parts.push(`defect: ${d instanceof Error ? d.message : String(d)}`)
  if (parts.length === 0 && Cause.isInterrupted(cause)) parts.push("interrupted")
  return parts.length === 0 ? "unknown failure" : parts.join("; ")
}

const select = (
  session: SessionShape,
  options: CompactOptions,
  estimator: TokenEstimator
): Effect.Effect<{ readonly measurement: Measurement; readonly range: CompactionRange }, CompactionRejected> =>
  Effect.gen(function*() {
    const events = yield* session.events
    const balance = yield* sessionBalance(session)
    const measurement = measureSurface(balance.nodes, events, estimator)
    if (measurement instanceof CompactionRejected) return yield* measurement
    const range = options.region !== undefined
      ? selectExplicitRegion(measurement, balance, options.region.start, options.region.end)
      : selectCompactionRange(measurement, balance, options.retainTokens ?? 0)
    if (range instanceof CompactionRejected) return yield* range
    return { measurement, range }
  })

/** P8 check (SPEC §9.3 step 4); returns a failure detail or undefined. */
const unstable = (
  session: SessionShape,
  options: CompactOptions,
  estimator: TokenEstimator,
  before: Measurement,
  range: CompactionRange
): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    const events = yield* session.events
    const nodes = yield* session.surface.nodes
    const now = measureSurface(nodes, events, estimator)
    if (now instanceof CompactionRejected) return now.detail
    if (options.mode === "automatic") {
      return sameMeasurement(before, now) ? undefined : "the surface changed while the summary was produced"
    }
    const balance = yield* Effect.either(sessionBalance(session))
    if (balance._tag === "Left") return balance.left.detail
    const again = selectExplicitRegion(now, balance.right, range.start, range.end)
    if (again instanceof CompactionRejected) return `the selected span is no longer valid: ${again.detail}`
    if (again.seqs.length !== range.seqs.length || again.seqs.some((s, i) => s !== range.seqs[i])) {
      return "the selected span no longer has the same nodes"
    }
    if (again.tokens !== range.tokens) return "the selected span no longer prices identically"
    return undefined
  })

/**
 * Run one compaction (SPEC §9.3). Select (P4–P6, nothing written); open inside
 * `session.exclusive` (lock P1, ownership P2/P3); summarise and price (P7); check stability (P8)
 * and commit `compaction/summary`, the replacing checkpoint and `compaction/end` inside one
 * exclusive section (P10). Any failure after the start writes exactly one `compaction/end` with
 * `error` (interruption too, P9). Manual compactions flush after the end (P11).
 */
export const compact = (options: CompactOptions): Effect.Effect<CompactionResult, CompactError, Session | Summarizer> =>
  Effect.gen(function*() {
    if (options.retainTokens !== undefined && !isNonNegInt(options.retainTokens)) {
      return yield* reject("P13", "config", "retainTokens must be a non-negative integer")
    }
    if (options.region !== undefined && options.mode !== "manual") {
      return yield* reject("P13", "config", "an explicit region is only valid for a manual compaction")
    }
    if (options.region !== undefined && options.retainTokens !== undefined) {
      return yield* reject("P13", "config", "give either an explicit region or retainTokens, not both")
    }
    const session = yield* Session
    const summarizer = yield* Summarizer
    const estimator = options.estimator ?? defaultEstimator
    const sourceCommandId = options.sourceCommandId
    const withCommand = sourceCommandId === undefined ? {} : { sourceCommandId }

    // 1. select (pure, nothing written)
    const { measurement, range } = yield* select(session, options, estimator)

    // the id is drawn first, so a failure end can find its bracket in the log whatever
    // instant an interruption hits
    const compactionId = yield* nextId
    let owner: number | null = null
    let endWritten = false

    const transaction = Effect.gen(function*() {
      // 2. open
      const open = yield* session.exclusive(Effect.gen(function*() {
        const events = yield* session.events
        const holder = lockHolder(events)
        if (holder !== undefined) {
          return yield* reject("P1", "busy", `compaction/start at seq ${holder} is unmatched`)
        }
        const turn = openTurn(events)
        if (options.mode === "automatic") {
          if (turn === undefined) return yield* reject("P3", "no-turn", "automatic compaction needs an open turn")
          owner = turn
        } else {
          if (turn !== undefined) return yield* reject("P2", "busy", `manual compaction while turn ${turn} is open`)
          owner = null
        }
        const ev = yield* session.append("compaction/start", { compactionId, ...withCommand, turn: owner })
        return { seq: ev.seq, compactionId, owner }
      }))

      // 3. price and summarise
      const events = yield* session.events
      const header = yield* session.requestHeader
      const messages = []
      for (const seq of range.seqs) {
        const m = deriveEventMessage(events[seq])
        if (m !== undefined) messages.push(m)
      }
      const output = yield* summarizer.summarize({
        system: header?.system,
        tools: header?.tools,
        messages,
        loggedRoute: header === undefined ? undefined : { provider: header.config.provider, model: header.config.model },
        agentRoute: options.agentRoute
      })
      const kept: Array<TextBlock> = []
      for (const b of output.blocks) if (b.type === "text" && typeof b.text === "string") kept.push(b)
      if (kept.every((b) => b.text.trim().length === 0)) {
        return yield* reject("P7", "summary", "the summariser returned no text")
      }
      const checkpoint = {
        id: yield* nextId,
        role: "user" as const,
        content: frameCheckpoint(kept),
        source: { kind: "plugin", plugin: "compact", compactionId: open.compactionId, ...withCommand }
      }
      const checkpointTokens = estimator.message(checkpoint)
      if (checkpointTokens >= range.tokens) {
        return yield* reject(
          "P7",
          "summary",
          `the framed summary (${checkpointTokens} tokens) is not smaller than the shadowed span (${range.tokens} tokens)`
        )
      }

      // 4. stability check and 5. commit, without yielding to other appenders
      return yield* session.exclusive(Effect.uninterruptible(Effect.gen(function*() {
        const changed = yield* unstable(session, options, estimator, measurement, range)
        if (changed !== undefined) return yield* reject("P8", "changed", changed)
        const commitStep = <A>(what: string, effect: Effect.Effect<A, AppendError>) =>
          Effect.mapError(effect, (e) => reject("P10", "commit", `append of ${what} failed: ${e.message}`))
        const summaryEvent = yield* commitStep(
          "compaction/summary",
          session.append("compaction/summary", {
            compactionId: open.compactionId,
            ...withCommand,
            summary: kept,
            shadowedRange: { start: range.start, end: range.end },
            shadowedSeqs: range.seqs,
            shadowedTokenCount: range.tokens,
            provider: output.provider,
            model: output.model,
            ...(output.maxTokens === undefined ? {} : { maxTokens: output.maxTokens }),
            ...(output.usage === undefined ? {} : { usage: output.usage }),
            ...(output.rawOutput === undefined ? {} : { rawOutput: output.rawOutput }),
            ...(output.llmStreamCall === true ? { llmStreamCall: true as const } : {})
          })
        )
        yield* commitStep(
          "the checkpoint user/message",
          session.append("user/message", checkpoint, {
            surfaceOp: { op: "replace", start: range.start, end: range.end },
            sourceEventSeqs: [open.seq, summaryEvent.seq, ...range.seqs]
          })
        )
        const endEvent = yield* commitStep(
          "compaction/end",
          session.append("compaction/end", { compactionId: open.compactionId, ...withCommand, turn: open.owner })
        )
        endWritten = true
        const result: CompactionResult = {
          compactionId: open.compactionId,
          ...withCommand,
          startSeq: open.seq,
          summarySeq: summaryEvent.seq,
          endSeq: endEvent.seq,
          summary: kept,
          shadowedRange: { start: range.start, end: range.end },
          shadowedSeqs: range.seqs,
          shadowedTokenCount: range.tokens
        }
        return result
      })))
    }).pipe(
      // 6. exactly one uninterruptible attempt at a failure end after a start
      Effect.onExit((exit) =>
        Exit.isSuccess(exit) ? Effect.void : Effect.gen(function*() {
          const events = yield* session.events
          if (bracketState(events, compactionId) !== "open") return
          yield* session.append("compaction/end", {
            compactionId,
            ...withCommand,
            turn: owner,
            error: causeText(exit.cause)
          }).pipe(
            Effect.tap(() => Effect.sync(() => (endWritten = true))),
            Effect.ignore
          )
        })
      )
    )

    const exit = yield* Effect.exit(transaction)
    // 7. manual: flush after any compaction/end
    if (options.mode === "manual" && endWritten) {
      const flushed = yield* Effect.either(session.flush)
      if (flushed._tag === "Left") {
        return yield* reject("P11", "persistence", `flush after compaction/end failed: ${flushed.left.message}`)
      }
    }
    return yield* exit
  }).pipe(Effect.withSpan("Compact.compact", { attributes: { mode: options.mode } }))

// ---------------------------------------------------------------------------------------------
// §9.7 Policy

/** A per-model override of the policy (exact provider and model). */
export interface PolicyOverride {
  readonly provider: string
  readonly model: string
  readonly contextWindow?: number | undefined
  readonly thresholdRatio?: number | undefined
  readonly retainTokens?: number | undefined
  readonly retainRatio?: number | undefined
}

/** Automatic compaction policy. */
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

/** The default overflow classifier: the error text mentions an exceeded context window. */
export const defaultIsContextOverflow = (error: unknown): boolean => {
  const text = error instanceof Error
    ? error.message
    : isRecord(error) && typeof error.message === "string"
    ? error.message
    : String(error)
  return /context[ _-]?(window|length)|maximum context|too many tokens|prompt is too long|context_length_exceeded/i
    .test(text)
}

/** A validated policy. */
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

/** Limits in force for one request. */
export interface Limits {
  readonly contextWindow: number
  readonly threshold: number
  readonly retainTokens: number
}

/**
 * The limits for a route (SPEC §9.7): threshold ⌊window × 0.8⌋, retained tail `retainTokens` or
 * ⌊window × 0.16⌋; the retained tail must be below the threshold (P13). `undefined` when no
 * context window is known.
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

/** Validate a policy (P13): known keys, value ranges, exclusive options, pruner config. */
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

/** What the agent loop passes to the pre-step hook and the overflow handler. */
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

/** Handles context-overflow errors of one loop run (SPEC §9.7, second bullet). */
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

/** Make the overflow-retry handler of one loop run (an invalid policy fails `handle` with P13). */
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
