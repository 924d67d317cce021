/**
 * The surface (SPEC §4): the ordered seqs of the events that currently project to model
 * messages. Owns the incremental tracker (validate-before-commit plans, O(new events) catch-up,
 * `replaceGeneration`), the pure full fold with replacement history, and message derivation.
 * The `SurfaceManager` service of SPEC §4.1 hands each session its tracker and folds whole logs;
 * its default (`live`) is this pure code, read by the session constructors when no layer provides
 * another (a `Context.Reference`), so no user has to. A replacement must keep the rules of §4 (an instrumented or cached
 * surface, say): the surface is normative.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Layer from "effect/Layer"
import {
  ProvenanceInvalid,
  ReplaceRangeInvalid,
  SeqNotContiguous,
  SurfaceMarkerInvalid,
  ToolResultRewriteInvalid
} from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import { jsonEquals, type Json } from "../schema/Json.js"
import type { Message } from "../schema/Messages.js"
import { checkMarkers, isRecord } from "../schema/Validation.js"

/**
 * The defect of a broken invariant: the tracker's catch-up met a committed event its surface
 * rejects (committed events are planned before they are committed, so this is a bug, never a
 * verdict on a caller's input). Thrown by the tracker's synchronous methods: inside an Effect it is
 * that Effect's defect (`Cause.die`), matched by its `_tag`.
 *
 * @since 0.2.0
 * @category errors
 */
export class SurfaceInvariantBroken extends Data.TaggedError("SurfaceInvariantBroken")<{
  readonly seq: number
  readonly error: PlanError
}> {
  override get message(): string {
    return `surface catch-up met an invalid committed event at seq ${this.seq}: ${this.error.message}`
  }
}

/**
 * Errors of a surface transition (D, E, F, G).
 *
 * @since 0.1.0
 * @category errors
 */
export type PlanError = SurfaceMarkerInvalid | ProvenanceInvalid | ReplaceRangeInvalid | ToolResultRewriteInvalid

/**
 * Errors of the full fold: transitions and contiguity (C2, C3).
 *
 * @since 0.1.0
 * @category errors
 */
export type SurfaceError = PlanError | SeqNotContiguous

/**
 * What committing an event does to the surface.
 *
 * @since 0.1.0
 * @category models
 */
export type SurfacePlan =
  | { readonly _tag: "None" }
  | { readonly _tag: "Append" }
  | {
    readonly _tag: "Replace"
    readonly startIdx: number
    readonly endIdx: number
    readonly start: number
    readonly end: number
    readonly shadowed: ReadonlyArray<number>
  }

const NONE: SurfacePlan = { _tag: "None" }
const APPEND: SurfacePlan = { _tag: "Append" }

/**
 * One recorded replacement of the full fold.
 *
 * @since 0.1.0
 * @category models
 */
export interface Replacement {
  readonly seq: number
  readonly start: number
  readonly end: number
  readonly shadowedSeqs: ReadonlyArray<number>
}

/**
 * The full fold's result (SPEC §4.5): detached data.
 *
 * @since 0.1.0
 * @category models
 */
export interface SurfaceFold {
  readonly nodes: Array<number>
  readonly replacements: Array<Replacement>
}

type Rec = Record<string, unknown>

/** Structural equality of two records except one key (G3 helper). */
const equalExcept = (a: unknown, b: unknown, skip: string): boolean => {
  if (!isRecord(a) || !isRecord(b)) return false
  const ka = Object.keys(a)
  const kb = Object.keys(b)
  if (ka.length !== kb.length) return false
  for (const key of ka) {
    if (!Object.prototype.hasOwnProperty.call(b, key)) return false
    if (key === skip) continue
    if (!jsonEquals(a[key] as Json, b[key] as Json)) return false
  }
  return true
}

/** G3: a tool/result rewrite may change only `message.content[0].content`. */
const onlyContentDiffers = (next: unknown, prev: unknown): boolean => {
  if (!equalExcept(next, prev, "message")) return false
  const nm = (next as Rec).message
  const pm = (prev as Rec).message
  if (!equalExcept(nm, pm, "content")) return false
  const nc = (nm as Rec).content
  const pc = (pm as Rec).content
  if (!Array.isArray(nc) || !Array.isArray(pc) || nc.length !== 1 || pc.length !== 1) return false
  return equalExcept(nc[0], pc[0], "content")
}

/**
 * Plan one event against a surface without mutating it: D1–D5, E1–E6, then F1–F4, then G1–G3.
 * `eventAt(seq)` returns a committed event of the log (undefined below a window).
 *
 * @since 0.1.0
 * @category utils
 */
export const planSurface = (
  nodes: ReadonlyArray<number>,
  event: Event,
  seq: number,
  eventAt: (seq: number) => Event | undefined
): PlanError | SurfacePlan => {
  const marker = checkMarkers(event.type, event.surfaceOp, event.sourceEventSeqs, seq)
  if (marker !== undefined) return marker
  const op = event.surfaceOp
  if (op === undefined) return NONE
  if (op === "append") return APPEND
  const { end, start } = op
  const startIdx = nodes.indexOf(start)
  if (startIdx < 0) {
    return new ReplaceRangeInvalid({ rule: "F1", seq, start, end, detail: `start seq ${start} not found on the surface` })
  }
  const endIdx = nodes.indexOf(end)
  if (endIdx < 0) {
    return new ReplaceRangeInvalid({ rule: "F2", seq, start, end, detail: `end seq ${end} not found on the surface` })
  }
  if (startIdx > endIdx) {
    return new ReplaceRangeInvalid({
      rule: "F3",
      seq,
      start,
      end,
      detail: `start is at surface position ${startIdx}, after end at position ${endIdx}`
    })
  }
  const shadowed = nodes.slice(startIdx, endIdx + 1)
  const cited = event.sourceEventSeqs
  const citedSet = new Set(cited ?? [])
  const missing = shadowed.filter((s) => !citedSet.has(s))
  if (cited === undefined || missing.length > 0) {
    return new ReplaceRangeInvalid({
      rule: "F4",
      seq,
      start,
      end,
      missing,
      detail: `sourceEventSeqs ${cited === undefined ? "is absent and " : ""}misses shadowed seqs [${missing.join(", ")}]`
    })
  }
  if (event.type === "tool/result") {
    if (shadowed.length !== 1) {
      return new ToolResultRewriteInvalid({
        rule: "G1",
        seq,
        detail: `must rewrite exactly one current node, the range shadows ${shadowed.length}`
      })
    }
    const target = eventAt(shadowed[0])
    if (target === undefined || target.type !== "tool/result") {
      return new ToolResultRewriteInvalid({
        rule: "G2",
        seq,
        detail: `shadowed node ${shadowed[0]} is not a tool/result`
      })
    }
    if (!onlyContentDiffers(event.data, target.data)) {
      return new ToolResultRewriteInvalid({
        rule: "G3",
        seq,
        detail: `may change only content: the rewrite of ${shadowed[0]} differs outside message.content[0].content`
      })
    }
  }
  return { _tag: "Replace", startIdx, endIdx, start, end, shadowed }
}

/**
 * Apply a plan to a nodes array in place. Returns true for a replacement.
 *
 * @since 0.1.0
 * @category utils
 */
export const applyPlan = (nodes: Array<number>, plan: SurfacePlan, seq: number): boolean => {
  switch (plan._tag) {
    case "None":
      return false
    case "Append":
      nodes.push(seq)
      return false
    case "Replace":
      nodes.splice(plan.startIdx, plan.endIdx - plan.startIdx + 1, seq)
      return true
  }
}

/**
 * The pure full fold (SPEC §4.5) over a contiguous log whose first event has seq `baseSeq`:
 * C2/C3 contiguity, then the same transitions and errors as the incremental manager.
 *
 * @since 0.1.0
 * @category utils
 */
export const foldSurface = (
  events: ReadonlyArray<Event>,
  baseSeq = 0
): SurfaceError | SurfaceFold => {
  const nodes: Array<number> = []
  const replacements: Array<Replacement> = []
  const eventAt = (s: number) => (s >= baseSeq ? events[s - baseSeq] : undefined)
  for (let k = 0; k < events.length; k++) {
    const event = events[k]
    const expected = baseSeq + k
    if (event.seq !== expected) {
      return new SeqNotContiguous({
        rule: baseSeq === 0 ? "C2" : "C3",
        seq: expected,
        expected,
        actual: event.seq,
        detail: `fold expected seq ${expected}`
      })
    }
    const plan = planSurface(nodes, event, expected, eventAt)
    if (!isPlan(plan)) return plan
    if (plan._tag === "Replace") {
      replacements.push({ seq: expected, start: plan.start, end: plan.end, shadowedSeqs: [...plan.shadowed] })
    }
    applyPlan(nodes, plan, expected)
  }
  return { nodes, replacements }
}

/**
 * Narrow a plan result.
 *
 * @since 0.1.0
 * @category utils
 */
export const isPlan = <E extends { readonly _tag: string }>(p: E | SurfacePlan): p is SurfacePlan =>
  p._tag === "None" || p._tag === "Append" || p._tag === "Replace"

const contextProjections = new WeakMap<object, Message>()

/**
 * The single-event projection (SPEC §4.6): user/message data verbatim; context/message
 * `{ id, role, content, source }`; assistant/message `data.message` unless its content is empty;
 * tool/result `data.message`; anything else none.
 *
 * @since 0.1.0
 * @category utils
 */
export const deriveEventMessage = (event: Event): Message | undefined => {
  const data = event.data as Rec
  switch (event.type) {
    case "user/message":
      return data as unknown as Message
    case "context/message": {
      const cached = contextProjections.get(data)
      if (cached !== undefined) return cached
      const projected = Object.freeze({ id: data.id, role: "user", content: data.content, source: data.source })
      contextProjections.set(data, projected as unknown as Message)
      return projected as unknown as Message
    }
    case "assistant/message": {
      const message = data.message as Message
      return message.content.length === 0 ? undefined : message
    }
    case "tool/result":
      return data.message as Message
    default:
      return undefined
  }
}

/**
 * Derive the messages of a surface over a log (from scratch).
 *
 * @since 0.1.0
 * @category utils
 */
export const deriveMessages = (
  nodes: ReadonlyArray<number>,
  eventAt: (seq: number) => Event | undefined
): Array<Message> => {
  const out: Array<Message> = []
  for (const seq of nodes) {
    const event = eventAt(seq)
    if (event === undefined) continue
    const m = deriveEventMessage(event)
    if (m !== undefined) out.push(m)
  }
  return out
}

/**
 * The incremental surface over a live log (SPEC §4.3–§4.4). The log array is owned by the
 * caller and only grows; reads catch up with committed events in O(new events). A candidate is
 * planned against the caught-up state without mutating it; when it later appears in the log at
 * the planned seq as the identical object, the remembered plan is applied.
 *
 * @since 0.1.0
 * @category models
 */
export class SurfaceTracker {
  private readonly nodesArr: Array<number> = []
  private generation = 0
  private processed: number
  // the last accepted candidate and its plan (three fields: no object per planned event)
  private pendingEvent: Event | undefined
  private pendingSeq = -1
  private pendingPlan: SurfacePlan = NONE

  constructor(
    private readonly log: ReadonlyArray<Event>,
    readonly baseSeq = 0
  ) {
    this.processed = baseSeq
  }

  private eventAt = (seq: number): Event | undefined =>
    seq >= this.baseSeq ? this.log[seq - this.baseSeq] : undefined

  /**
   * Fold the committed events not yet processed.
   *
   * @since 0.1.0
   */
  catchUp(): void {
    const end = this.baseSeq + this.log.length
    while (this.processed < end) {
      const seq = this.processed
      const event = this.log[seq - this.baseSeq]
      let plan: PlanError | SurfacePlan
      if (this.pendingEvent === event && this.pendingSeq === seq) {
        plan = this.pendingPlan
      } else {
        plan = planSurface(this.nodesArr, event, seq, this.eventAt)
      }
      this.pendingEvent = undefined
      if (!isPlan(plan)) {
        // Committed events were validated before commit; reaching this is a defect (the tracker's
        // methods are synchronous: thrown inside an Effect, it is that Effect's defect).
        throw new SurfaceInvariantBroken({ seq, error: plan })
      }
      if (applyPlan(this.nodesArr, plan, seq)) this.generation++
      this.processed = seq + 1
    }
  }

  /**
   * Plan a candidate that would receive `seq`, without mutating the surface.
   *
   * @since 0.1.0
   */
  plan(event: Event, seq: number): PlanError | SurfacePlan {
    this.catchUp()
    const plan = planSurface(this.nodesArr, event, seq, this.eventAt)
    if (isPlan(plan)) {
      this.pendingEvent = event
      this.pendingSeq = seq
      this.pendingPlan = plan
    } else {
      this.pendingEvent = undefined
    }
    return plan
  }

  /**
   * The current nodes (a live read-only view; copy before keeping).
   *
   * @since 0.1.0
   */
  get nodes(): ReadonlyArray<number> {
    this.catchUp()
    return this.nodesArr
  }

  /**
   * +1 per committed replacement.
   *
   * @since 0.1.0
   */
  get replaceGeneration(): number {
    this.catchUp()
    return this.generation
  }
}

// ---------------------------------------------------------------------------------------------
// The service

/**
 * The surface as a service (SPEC §4.1): the tracker each open session plans and folds its
 * surface through, the whole-log fold with replacement history, and message derivation.
 *
 * @since 0.2.0
 * @category models
 */
export interface SurfaceManagerShape {
  /** The incremental surface over a live log that only grows (one per open session, §4.3–§4.4). */
  readonly track: (log: ReadonlyArray<Event>, baseSeq?: number) => SurfaceTracker
  /** The surface of a whole log, with each replacement's history (§4.2). */
  readonly fold: typeof foldSurface
  /** The messages of a log's surface (§4.5). */
  readonly messages: typeof deriveMessages
}

/**
 * The surface of SPEC §4 as written in this module.
 *
 * @since 0.2.0
 * @category constructors
 */
export const live: SurfaceManagerShape = {
  track: (log, baseSeq) => new SurfaceTracker(log, baseSeq),
  fold: foldSurface,
  messages: deriveMessages
}

/**
 * The SurfaceManager service. A `Context.Reference`: the session constructors read `live` when
 * no layer provides another, so nobody has to provide it.
 *
 * @since 0.2.0
 * @category tags
 */
export class SurfaceManager extends Context.Reference<SurfaceManager>()("effect-session-log/SurfaceManager", {
  defaultValue: (): SurfaceManagerShape => live
}) {}

/**
 * The default SurfaceManager as a layer (`live`).
 *
 * @since 0.2.0
 * @category layers
 */
export const layer: Layer.Layer<SurfaceManager> = Layer.succeed(SurfaceManager, live)
