/**
 * The viewer's index of one session (docs/viewer.md "Scale"): built once per session per server by
 * one validated streamed read, then extended from the store's `follow` as the log grows. It keeps
 * numbers, not events: the count, the list's summary, the pairing of tool calls with their results,
 * the replacement history (provenance both ways) and the surface; plus the last `TAIL` events (the
 * live page). Pages, time travel and provenance read only the stored records of their range or
 * the seqs they name (`readSpan`, `readNamed`: a streamed read from a seq, which seeks where the
 * store can), or else the log up to the end of their range (`readRange`).
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { Event } from "../../schema/Events.js"
import type { SessionLogError } from "../../schema/Errors.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import { checkVocabulary, isRecord } from "../../schema/Validation.js"
import { readEach } from "../../services/ReadEach.js"
import { checkSeedRecord, wrapL9 } from "../../services/Seed.js"
import type { SessionStoreShape } from "../../services/SessionStore.js"
import { applyPlan, isPlan, planSurface, type Replacement } from "../../services/SurfaceManager.js"
import { errorReport } from "../Verify.js"

/**
 * Why a log did not load: the rule, the seq and (JSONL) the line of the first rejection.
 *
 * @since 0.2.0
 * @category models
 */
export interface LoadProblem {
  readonly tag: string
  readonly rule: string | null
  readonly seq: number | null
  readonly line: number | null
  readonly message: string
}

/**
 * A torn tail a read left out (not an error: `repair` removes it): where it starts and, from
 * JSONL, its line.
 *
 * @since 0.2.0
 * @category models
 */
export interface TornTailNote {
  readonly fromSeq: number
  readonly reason: string
  readonly line: number | null
}

/**
 * The problem a read error reports.
 *
 * @since 0.2.0
 * @category utils
 */
export const problemOf = (e: unknown): LoadProblem => {
  const tagged = typeof e === "object" && e !== null && "_tag" in e
  if (!tagged) return { tag: "Unknown", rule: null, seq: null, line: null, message: String(e) }
  const r = errorReport(e as SessionLogError)
  const lineOf = (e as { readonly line?: unknown }).line
  const line = typeof lineOf === "number" ? lineOf : null
  return { tag: r._tag, rule: r.rule, seq: r.seq, line, message: r.message }
}

/**
 * How many of the last events the index keeps (the app's last page: live appends are served
 * from memory).
 *
 * @since 0.2.0
 * @category constants
 */
export const TAIL = 200

const PREVIEW_CHARS = 120

type Rec = Record<string, unknown>
const isRec = (u: unknown): u is Rec => typeof u === "object" && u !== null && !Array.isArray(u)

/** The call id a tool call names, or a tool result answers. */
const callIdOf = (e: Event): { readonly call?: string; readonly result?: string } => {
  const d = e.data as unknown
  if (!isRec(d)) return {}
  if (e.type === "tool/call" && typeof d.callId === "string") return { call: d.callId }
  if (e.type === "tool/result" && isRec(d.message) && Array.isArray(d.message.content)) {
    const block = d.message.content[0]
    if (isRec(block) && typeof block.toolCallId === "string") return { result: block.toolCallId }
  }
  return {}
}

/** How many of the ascending `seqs` are at or before `seq` (a binary search). */
const countAtOrBefore = (seqs: ReadonlyArray<number>, seq: number): number => {
  let lo = 0
  let hi = seqs.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (seqs[mid] <= seq) lo = mid + 1
    else hi = mid
  }
  return lo
}

/**
 * One session's index: numbers, not events (but the last `TAIL` of them).
 *
 * @since 0.2.0
 * @category models
 */
export class SessionIndex {
  /**
   * Events that load (validated).
   *
   * @since 0.2.0
   */
  count = 0
  /**
   * Why the log stops loading, if it does.
   *
   * @since 0.2.0
   */
  problem: LoadProblem | null = null
  /**
   * The torn tail the read left out, if any.
   *
   * @since 0.2.0
   */
  tornTail: TornTailNote | null = null
  /**
   * The time of the latest event (the header's creation time before any).
   *
   * @since 0.2.0
   */
  lastActivity: number
  /**
   * The first user message's text, clipped (what people search for).
   *
   * @since 0.2.0
   */
  preview = ""
  /**
   * A tool call's seq to its result's seq and back (the first result answering the call).
   *
   * @since 0.2.0
   */
  readonly pairs = new Map<number, number>()
  /**
   * The replacement history, in seq order.
   *
   * @since 0.2.0
   */
  readonly replacements: Array<Replacement> = []
  /**
   * A shadowed seq to the replacements (indexes into `replacements`) that shadowed it.
   *
   * @since 0.2.0
   */
  readonly shadowedBy = new Map<number, Array<number>>()
  /**
   * The surface after the last event.
   *
   * @since 0.2.0
   */
  readonly nodes: Array<number> = []
  /**
   * The `sourceEventSeqs` of the events that name sources.
   *
   * @since 0.2.0
   */
  readonly sources = new Map<number, ReadonlyArray<number>>()
  /**
   * The seqs of the events that changed the surface (appended a node or replaced a range), in
   * seq order: with `replacements`, the surface at any seq is computed from numbers (`surfaceAt`).
   *
   * @since 0.2.0
   */
  readonly surfaceSeqs: Array<number> = []
  /**
   * The seqs of the `request/header` events, in seq order.
   *
   * @since 0.2.0
   */
  readonly headerSeqs: Array<number> = []
  /**
   * The last `tailSize` events (up to twice as many), in seq order.
   *
   * @since 0.2.0
   */
  tail: Array<Event> = []
  /**
   * The first `tailSize` events (the first page, served while the index is being built).
   *
   * @since 0.2.0
   */
  readonly head: Array<Event> = []
  /**
   * Whether the read that builds the index is over (until then `count` is how many events it
   * indexed so far, and what the index knows holds up to there).
   *
   * @since 0.2.0
   */
  complete = false
  private readonly openCalls = new Map<string, number>()
  private readonly replacementAt = new Map<number, number>()
  // the tool results on the surface (a rewrite of one is checked against it, G2)
  private readonly toolResults = new Map<number, Event>()

  /**
   * An empty index of session `id` keeping its last `tailSize` events.
   *
   * @since 0.2.0
   */
  constructor(readonly id: string, readonly header: SessionHeader | undefined, readonly tailSize: number = TAIL) {
    this.lastActivity = header?.createdAt ?? 0
  }

  /**
   * The replacement `seq` made, if it made one.
   *
   * @since 0.2.0
   */
  replacementOf(seq: number): Replacement | undefined {
    const i = this.replacementAt.get(seq)
    return i === undefined ? undefined : this.replacements[i]
  }

  /**
   * The replacements that shadowed `seq`.
   *
   * @since 0.2.0
   */
  replacementsShadowing(seq: number): Array<Replacement> {
    return (this.shadowedBy.get(seq) ?? []).map((i) => this.replacements[i])
  }

  /**
   * The surface right after event `seq` (`seq < count`), computed from the index's numbers as
   * the fold of the log computes it (SPEC §4.5): the nodes and the replacement history up to it.
   *
   * @since 0.2.0
   */
  surfaceAt(seq: number): { readonly nodes: Array<number>; readonly replacements: Array<Replacement> } {
    const nodes: Array<number> = []
    const ops = this.surfaceSeqs
    for (let k = 0; k < ops.length && ops[k] <= seq; k++) {
      const s = ops[k]
      const r = this.replacementOf(s)
      if (r === undefined) {
        nodes.push(s)
        continue
      }
      const startIdx = nodes.indexOf(r.start)
      nodes.splice(startIdx, nodes.indexOf(r.end) - startIdx + 1, s)
    }
    const replacements = this.replacements.slice(0, countAtOrBefore(this.replacements.map((r) => r.seq), seq))
    return { nodes, replacements }
  }

  /**
   * The seq of the request header in force right after event `seq` and of the one before it.
   *
   * @since 0.2.0
   */
  headersAt(seq: number): { readonly headerSeq: number | null; readonly previousSeq: number | null } {
    const n = countAtOrBefore(this.headerSeqs, seq)
    return { headerSeq: n > 0 ? this.headerSeqs[n - 1] : null, previousSeq: n > 1 ? this.headerSeqs[n - 2] : null }
  }

  /**
   * The events of `[from, to)` when the tail holds all of them.
   *
   * @since 0.2.0
   */
  fromTail(from: number, to: number): Array<Event> | undefined {
    if (to <= this.head.length) return this.head.slice(from, to)
    const first = this.count - this.tail.length
    return from >= first && to <= this.count ? this.tail.slice(from - first, to - first) : undefined
  }

  /**
   * Take the next validated event (seq `count`) into the index; the surface rule it breaks, if
   * it breaks one (then nothing is taken).
   *
   * @since 0.2.0
   */
  add(e: Event) {
    const plan = planSurface(this.nodes, e, this.count, (s) => this.toolResults.get(s))
    if (!isPlan(plan)) return plan
    if (plan._tag === "Replace") {
      const i = this.replacements.length
      this.replacements.push({ seq: e.seq, start: plan.start, end: plan.end, shadowedSeqs: [...plan.shadowed] })
      this.replacementAt.set(e.seq, i)
      for (const s of plan.shadowed) {
        const by = this.shadowedBy.get(s)
        if (by === undefined) this.shadowedBy.set(s, [i])
        else by.push(i)
        this.toolResults.delete(s)
      }
    }
    if (plan._tag !== "None") {
      this.surfaceSeqs.push(e.seq)
      if (e.type === "tool/result") this.toolResults.set(e.seq, e)
    }
    if (e.type === "request/header") this.headerSeqs.push(e.seq)
    applyPlan(this.nodes, plan, e.seq)
    const { call, result } = callIdOf(e)
    if (call !== undefined && !this.openCalls.has(call)) this.openCalls.set(call, e.seq)
    if (result !== undefined) {
      const at = this.openCalls.get(result)
      if (at !== undefined) {
        this.openCalls.delete(result)
        this.pairs.set(at, e.seq)
        this.pairs.set(e.seq, at)
      }
    }
    if (Array.isArray(e.sourceEventSeqs) && e.sourceEventSeqs.length > 0) this.sources.set(e.seq, e.sourceEventSeqs)
    if (e.time > this.lastActivity) this.lastActivity = e.time
    if (this.preview === "" && e.type === "user/message") {
      const content = (e.data as { content?: ReadonlyArray<{ type?: string; text?: string }> }).content ?? []
      this.preview = content.map((b) => b.type === "text" ? b.text ?? "" : "").join(" ").slice(0, PREVIEW_CHARS)
    }
    if (this.tailSize > 0) {
      if (this.head.length < this.tailSize) this.head.push(e)
      this.tail.push(e)
      if (this.tail.length > 2 * this.tailSize) this.tail = this.tail.slice(-this.tailSize)
    }
    this.count++
    return undefined
  }

  /**
   * Records the store committed after the indexed ones (from `follow`): each checked as a cold
   * read checks it (K7, the per-record seed checks, the surface rules) and taken; the first
   * rejection becomes the index's problem and nothing after it is taken. Whether any was taken.
   *
   * @since 0.2.0
   */
  extend(records: ReadonlyArray<unknown>): boolean {
    let taken = false
    for (const raw of records) {
      if (this.problem !== null) break
      const seq = this.count
      const unknownType = isRecord(raw) && typeof raw.type === "string"
        ? checkVocabulary(raw.type, raw.ignorable, seq, "K7")
        : undefined
      const event = unknownType ?? checkSeedRecord(raw, seq, true)
      if ("_tag" in event) {
        this.problem = problemOf(event._tag === "UnknownEventType" ? event : wrapL9(this.id)(event))
        break
      }
      const rejected = this.add(event)
      if (rejected !== undefined) {
        this.problem = problemOf(wrapL9(this.id)(rejected))
        break
      }
      taken = true
    }
    return taken
  }
}

/** The validated streamed read of a session; a failure becomes its problem. */
const readValidated = (
  store: SessionStoreShape,
  id: string,
  onEvents: (events: ReadonlyArray<Event>) => Effect.Effect<void, ReadStop>
) =>
  readEach((sink) => store.loadEach(id, sink), store.load(id), onEvents).pipe(
    Effect.map((r) => ({
      header: r.header as SessionHeader | undefined,
      problem: null as LoadProblem | null,
      tornTail: r.tornTail === undefined ? null : {
        fromSeq: r.tornTail.fromSeq,
        reason: r.tornTail.reason as string,
        line: r.tornTailExtent?.line ?? null
      } as TornTailNote | null
    })),
    Effect.catchIf(
      (e): e is ReadStop => e instanceof ReadStop,
      () => Effect.succeed({ header: undefined, problem: null, tornTail: null })
    ),
    Effect.catchAll((e) => Effect.succeed({ header: undefined, problem: problemOf(e), tornTail: null as TornTailNote | null }))
  )

/** Ends a read once its range is read (not an error: the read is done). */
class ReadStop {
  readonly _tag = "ReadStop"
}
const STOP = new ReadStop()

/**
 * Build the index of `id` by one validated streamed read (memory bounded by a chunk and the
 * index's numbers). A session that fails to load is indexed up to its first rejection, with the
 * problem.
 *
 * @since 0.2.0
 * @category constructors
 */
export const buildIndex = (store: SessionStoreShape, id: string, header: SessionHeader | undefined, tailSize = TAIL) =>
  Effect.suspend(() => {
    const index = new SessionIndex(id, header, tailSize)
    return Effect.as(fillIndex(store, index), index)
  })

/**
 * Fill an empty index by one validated streamed read, calling `onChunk` after each chunk taken
 * (the index is usable up to its `count` meanwhile: a build in the background); `complete` once
 * the read is over.
 *
 * @since 0.2.0
 * @category constructors
 */
export const fillIndex = (store: SessionStoreShape, index: SessionIndex, onChunk: Effect.Effect<void> = Effect.void) =>
  Effect.gen(function*() {
    const read = yield* readValidated(store, index.id, (events) =>
      Effect.suspend(() => {
        for (const e of events) {
          // accepted by the read's seed validation: the surface plan cannot fail here
          if (index.add(e) !== undefined) break
        }
        return onChunk
      }))
    index.problem = read.problem
    index.tornTail = read.tornTail
    index.complete = true
  }).pipe(Effect.withSpan("ViewIndex.build", { attributes: { sessionId: index.id } }))

/**
 * The validated events of `id` in `[from, to)`: a streamed read that stops at `to` (the events
 * before `from` are read and checked, not kept).
 *
 * @since 0.2.0
 * @category utils
 */
export const readRange = (store: SessionStoreShape, id: string, from: number, to: number) =>
  Effect.gen(function*() {
    const out: Array<Event> = []
    if (to <= from) return out
    yield* readValidated(store, id, (events) =>
      Effect.suspend(() => {
        for (const e of events) {
          if (e.seq >= to) return Effect.fail(STOP)
          if (e.seq >= from) out.push(e)
        }
        return out.length > 0 && out[out.length - 1].seq >= to - 1 ? Effect.fail(STOP) : Effect.void
      }))
    return out
  }).pipe(Effect.withSpan("ViewIndex.readRange", { attributes: { sessionId: id, from, to } }))

/**
 * The validated events of `id` whose seqs are in `seqs` (a read up to the largest).
 *
 * @since 0.2.0
 * @category utils
 */
export const readSeqs = (store: SessionStoreShape, id: string, seqs: ReadonlySet<number>) =>
  Effect.gen(function*() {
    const out = new Map<number, Event>()
    if (seqs.size === 0) return out
    const last = Math.max(...seqs)
    yield* readValidated(store, id, (events) =>
      Effect.suspend(() => {
        for (const e of events) {
          if (seqs.has(e.seq)) out.set(e.seq, e)
          if (e.seq >= last) return Effect.fail(STOP)
        }
        return Effect.void
      }))
    return out
  }).pipe(Effect.withSpan("ViewIndex.readSeqs", { attributes: { sessionId: id } }))

/** A read by seqs that cannot answer (another format version, a record that fails its checks, a read error). */
class Unanswered {
  readonly _tag = "Unanswered"
}

/**
 * The events of `id` at `seqs`, all of them below the index's count (so validated once by the
 * read that built it): for each run of seqs no more than 4,096 apart, a streamed read of the
 * stored records from its first seq (`SessionStore.loadEach` from a seq: a seek where the store
 * can) up to its last, that checks and keeps only those (each as a cold read checks a record:
 * K7 and the seed record checks) and folds nothing. `undefined` when it cannot answer so (a version-0 log, a record that fails its
 * checks, a read error): the caller then reads as `readRange` does.
 *
 * @since 0.2.0
 * @category utils
 */
export const readNamed = (store: SessionStoreShape, id: string, seqs: ReadonlySet<number>) =>
  Effect.gen(function*() {
    const out = new Map<number, Event>()
    for (const run of runsOf(seqs)) {
      const named = new Set(run)
      const read = yield* readStored(store, id, run[0], run[run.length - 1], (s) => named.has(s), run.length)
      if (read === undefined) return undefined
      for (const [s, e] of read) out.set(s, e)
    }
    return out
  }).pipe(Effect.withSpan("ViewIndex.readNamed", { attributes: { sessionId: id, seqs: seqs.size } }))

/** Seqs further apart than this are read by separate reads from a seq (the JSONL store's checkpoint spacing). */
const NAMED_GAP = 4_096

/** The ascending `seqs` cut where two neighbours are more than `NAMED_GAP` apart. */
const runsOf = (seqs: ReadonlySet<number>): Array<Array<number>> => {
  const sorted = [...seqs].sort((a, b) => a - b)
  const runs: Array<Array<number>> = []
  for (const s of sorted) {
    const run = runs[runs.length - 1]
    if (run !== undefined && s - run[run.length - 1] <= NAMED_GAP) run.push(s)
    else runs.push([s])
  }
  return runs
}

/**
 * The events of `id` in `[from, to)`, all of them below the index's count, read as `readNamed`
 * reads (from `from`, stopped after `to - 1`); `undefined` when that cannot answer.
 *
 * @since 0.2.0
 * @category utils
 */
export const readSpan = (store: SessionStoreShape, id: string, from: number, to: number) =>
  readStored(store, id, from, to - 1, (s) => s >= from && s < to, Math.max(0, to - from)).pipe(
    Effect.map((read) => read === undefined ? undefined : [...read.values()]),
    Effect.withSpan("ViewIndex.readSpan", { attributes: { sessionId: id, from, to } })
  )

/** The records at the seqs `wanted` names in `[first, last]` (`size` of them), each checked; see `readNamed`. */
const readStored = (
  store: SessionStoreShape,
  id: string,
  first: number,
  last: number,
  wanted: (seq: number) => boolean,
  size: number
) =>
  Effect.gen(function*() {
    const out = new Map<number, Event>()
    if (size === 0 || last < first) return out
    // the position of the next record: `first` when the store sought there, which the first
    // record's own seq tells (a store wrapper that passes no options reads from 0)
    let seq = -1
    const read = yield* store.loadEach<ReadStop | Unanswered, never, { readonly fromSeq: number }>(id, {
      onHeader: (_header, version) => version === SESSION_FORMAT_VERSION ? Effect.void : Effect.fail(new Unanswered()),
      onEvents: (records) =>
        Effect.suspend((): Effect.Effect<void, ReadStop | Unanswered> => {
          for (const raw of records) {
            if (seq === -1) seq = isRecord(raw) && raw.seq === first ? first : 0
            const at = seq++
            if (wanted(at)) {
              const unknownType = isRecord(raw) && typeof raw.type === "string"
                ? checkVocabulary(raw.type, raw.ignorable, at, "K7")
                : undefined
              const event = unknownType ?? checkSeedRecord(raw, at, true)
              if ("_tag" in event) return Effect.fail(new Unanswered())
              out.set(at, event)
            }
            if (at >= last) return Effect.fail(STOP)
          }
          return Effect.void
        })
    }, { fromSeq: first }).pipe(
      Effect.map(() => true),
      Effect.catchAll((e) => Effect.succeed(e instanceof ReadStop))
    )
    return read && out.size === size ? out : undefined
  })
