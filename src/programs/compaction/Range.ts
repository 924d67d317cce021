/**
 * Where a compaction may cut (SPEC §9.1–§9.2): the tool-pairing balance of a surface (with the
 * per-session cache keyed by `replaceGeneration`) and the selection of the span to compact, either
 * head-anchored by a retained tail or an explicit region. Pure; nothing here writes.
 */
import * as Effect from "effect/Effect"
import { CompactionRejected } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { isRecord } from "../../schema/Validation.js"
import type { SessionShape } from "../../services/Session.js"
import { checkAligned, corrupt, type Measurement } from "./Tokens.js"

/** A compaction rejection with its SPEC §9 rule id (shared by the compaction modules). */
export const reject = (rule: string, reason: string, detail: string): CompactionRejected =>
  new CompactionRejected({ rule, reason, detail })

const invalidRange = (detail: string): CompactionRejected => reject("P5", "invalid-range", detail)

// ---------------------------------------------------------------------------------------------
// §9.1 Tool-pairing balance

/**
 * The k+1 cut counters of a surface of k nodes (`counters[i]` = in-progress calls before node i).
 *
 * @since 0.1.0
 * @category models
 */
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

/**
 * The tool-pairing balance of a surface over its log (P6 on a negative counter or a missing event).
 *
 * @since 0.1.0
 * @category utils
 */
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
  return i === -1 ? invalidRange(`seq ${seq} is not on the current surface`) : i
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

/**
 * A selected, head-anchored or explicit span of the surface.
 *
 * @since 0.1.0
 * @category models
 */
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
 *
 * @since 0.1.0
 * @category utils
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
 *
 * @since 0.1.0
 * @category utils
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
  if (si === -1) return invalidRange(`start seq ${start} is not on the current surface`)
  if (ei === -1) return invalidRange(`end seq ${end} is not on the current surface`)
  if (si > ei) return invalidRange(`start seq ${start} is after end seq ${end} on the surface`)
  if (balance.counters[si] !== 0) return invalidRange(`the cut before seq ${start} is unbalanced`)
  if (balance.counters[ei + 1] !== 0) return invalidRange(`the cut after seq ${end} is unbalanced`)
  return rangeOf(measurement, si, ei)
}
