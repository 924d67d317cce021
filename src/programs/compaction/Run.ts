/**
 * One compaction (SPEC §9.3): select, open the bracket under the lock of §9.4, summarise and
 * price, check stability and commit summary, checkpoint and end in one exclusive section, or write
 * exactly one failure end.
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { CompactionRejected } from "../../schema/Errors.js"
import type { TextBlock, UserMessage } from "../../schema/Messages.js"
import { nextId } from "../../services/IdGenerator.js"
import { type AppendError, Session, type SessionShape } from "../../services/Session.js"
import {
  frameCheckpoint,
  Summarizer,
  type SummarizerShape,
  type SummaryOutput,
  type SummaryRoute
} from "../../services/Summarizer.js"
import { deriveEventMessage } from "../../services/SurfaceManager.js"
import { bracketState, lockHolder, openTurn } from "./Lock.js"
import {
  type CompactionRange,
  reject,
  selectCompactionRange,
  selectExplicitRegion,
  sessionBalance
} from "./Range.js"
import { defaultEstimator, type Measurement, measureSurface, sameMeasurement, type TokenEstimator } from "./Tokens.js"

/**
 * Options of one compaction.
 *
 * @since 0.1.0
 * @category models
 */
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

/**
 * The result of a successful compaction (SPEC §9.3).
 *
 * @since 0.1.0
 * @category models
 */
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

/**
 * Everything a compaction can fail with.
 *
 * @since 0.1.0
 * @category errors
 */
export type CompactError = CompactionRejected | AppendError

/** A non-negative safe integer (token counts and retry counts of the compaction options). */
export const isNonNegInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0

/** P13 on options that contradict each other; undefined when they are usable. */
const checkOptions = (options: CompactOptions): CompactionRejected | undefined => {
  if (options.retainTokens !== undefined && !isNonNegInt(options.retainTokens)) {
    return reject("P13", "config", "retainTokens must be a non-negative integer")
  }
  if (options.region !== undefined && options.mode !== "manual") {
    return reject("P13", "config", "an explicit region is only valid for a manual compaction")
  }
  if (options.region !== undefined && options.retainTokens !== undefined) {
    return reject("P13", "config", "give either an explicit region or retainTokens, not both")
  }
  return undefined
}

/** The failure text of a cause: failure messages, "interrupted", or defect texts. */
const causeText = (cause: Cause.Cause<unknown>): string => {
  const parts: Array<string> = []
  for (const e of Cause.failures(cause)) parts.push(e instanceof Error ? e.message : String(e))
  for (const d of Cause.defects(cause)) parts.push(`defect: ${d instanceof Error ? d.message : String(d)}`)
  if (parts.length === 0 && Cause.isInterrupted(cause)) parts.push("interrupted")
  return parts.length === 0 ? "unknown failure" : parts.join("; ")
}

/** One compaction in progress: what was selected, and the bracket state its finaliser reads. */
interface Run {
  readonly session: SessionShape
  readonly options: CompactOptions
  readonly estimator: TokenEstimator
  readonly withCommand: { readonly sourceCommandId?: string }
  readonly compactionId: string
  readonly measurement: Measurement
  readonly range: CompactionRange
  owner: number | null
  endWritten: boolean
}

/** The opened bracket: the `compaction/start` seq and its owner. */
interface Opened {
  readonly seq: number
  readonly owner: number | null
}

/** What the summariser produced: its output, the kept text blocks and the framed checkpoint. */
interface Summary {
  readonly output: SummaryOutput
  readonly kept: ReadonlyArray<TextBlock>
  readonly checkpoint: UserMessage
}

/** Step 1: measure the surface and select the span (P4–P6, nothing written). */
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

/** Step 2: inside `session.exclusive`, check the lock (P1) and ownership (P2/P3), then append the start. */
const openBracket = (run: Run): Effect.Effect<Opened, CompactionRejected | AppendError> =>
  run.session.exclusive(Effect.gen(function*() {
    const events = yield* run.session.events
    const holder = lockHolder(events)
    if (holder !== undefined) {
      return yield* reject("P1", "busy", `compaction/start at seq ${holder} is unmatched`)
    }
    const turn = openTurn(events)
    if (run.options.mode === "automatic") {
      if (turn === undefined) return yield* reject("P3", "no-turn", "automatic compaction needs an open turn")
      run.owner = turn
    } else {
      if (turn !== undefined) return yield* reject("P2", "busy", `manual compaction while turn ${turn} is open`)
      run.owner = null
    }
    const ev = yield* run.session.append("compaction/start", {
      compactionId: run.compactionId,
      ...run.withCommand,
      turn: run.owner
    })
    return { seq: ev.seq, owner: run.owner }
  }))

/** Step 3: summarise the span and frame the checkpoint; P7 when it has no text or is not smaller. */
const summarise = (run: Run, summarizer: SummarizerShape): Effect.Effect<Summary, CompactionRejected> =>
  Effect.gen(function*() {
    const events = yield* run.session.events
    const header = yield* run.session.requestHeader
    const messages = []
    for (const seq of run.range.seqs) {
      const m = deriveEventMessage(events[seq])
      if (m !== undefined) messages.push(m)
    }
    const output = yield* summarizer.summarize({
      system: header?.system,
      tools: header?.tools,
      messages,
      loggedRoute: header === undefined ? undefined : { provider: header.config.provider, model: header.config.model },
      agentRoute: run.options.agentRoute
    })
    const kept: Array<TextBlock> = []
    for (const b of output.blocks) if (b.type === "text" && typeof b.text === "string") kept.push(b)
    if (kept.every((b) => b.text.trim().length === 0)) {
      return yield* reject("P7", "summary", "the summariser returned no text")
    }
    const checkpoint: UserMessage = {
      id: yield* nextId,
      role: "user" as const,
      content: frameCheckpoint(kept),
      source: { kind: "plugin", plugin: "compact", compactionId: run.compactionId, ...run.withCommand }
    }
    const checkpointTokens = run.estimator.message(checkpoint)
    if (checkpointTokens >= run.range.tokens) {
      return yield* reject(
        "P7",
        "summary",
        `the framed summary (${checkpointTokens} tokens) is not smaller than the shadowed span (${run.range.tokens} tokens)`
      )
    }
    return { output, kept, checkpoint }
  })

/** P8 check (SPEC §9.3 step 4); returns a failure detail or undefined. */
const unstable = (run: Run): Effect.Effect<string | undefined> =>
  Effect.gen(function*() {
    const { range, session } = run
    const events = yield* session.events
    const nodes = yield* session.surface.nodes
    const now = measureSurface(nodes, events, run.estimator)
    if (now instanceof CompactionRejected) return now.detail
    if (run.options.mode === "automatic") {
      return sameMeasurement(run.measurement, now) ? undefined : "the surface changed while the summary was produced"
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
 * Steps 4 and 5, without yielding to other appenders: the stability check (P8), then
 * `compaction/summary`, the replacing checkpoint and `compaction/end` (a failed append is P10).
 */
const commit = (run: Run, opened: Opened, summary: Summary): Effect.Effect<CompactionResult, CompactionRejected> =>
  run.session.exclusive(Effect.uninterruptible(Effect.gen(function*() {
    const { compactionId, range, session, withCommand } = run
    const { checkpoint, kept, output } = summary
    const changed = yield* unstable(run)
    if (changed !== undefined) return yield* reject("P8", "changed", changed)
    const commitStep = <A>(what: string, effect: Effect.Effect<A, AppendError>) =>
      Effect.mapError(effect, (e) => reject("P10", "commit", `append of ${what} failed: ${e.message}`))
    const summaryEvent = yield* commitStep(
      "compaction/summary",
      session.append("compaction/summary", {
        compactionId,
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
        sourceEventSeqs: [opened.seq, summaryEvent.seq, ...range.seqs]
      })
    )
    const endEvent = yield* commitStep(
      "compaction/end",
      session.append("compaction/end", { compactionId, ...withCommand, turn: opened.owner })
    )
    run.endWritten = true
    const result: CompactionResult = {
      compactionId,
      ...withCommand,
      startSeq: opened.seq,
      summarySeq: summaryEvent.seq,
      endSeq: endEvent.seq,
      summary: kept,
      shadowedRange: { start: range.start, end: range.end },
      shadowedSeqs: range.seqs,
      shadowedTokenCount: range.tokens
    }
    return result
  })))

/** Step 6: exactly one uninterruptible attempt at a failure end when the bracket is still open. */
const failureEnd = (run: Run, cause: Cause.Cause<unknown>): Effect.Effect<void> =>
  Effect.gen(function*() {
    const events = yield* run.session.events
    if (bracketState(events, run.compactionId) !== "open") return
    yield* run.session.append("compaction/end", {
      compactionId: run.compactionId,
      ...run.withCommand,
      turn: run.owner,
      error: causeText(cause)
    }).pipe(
      Effect.tap(() => Effect.sync(() => (run.endWritten = true))),
      Effect.ignore
    )
  })

/**
 * Run one compaction (SPEC §9.3). Select (P4–P6, nothing written); open inside
 * `session.exclusive` (lock P1, ownership P2/P3); summarise and price (P7); check stability (P8)
 * and commit `compaction/summary`, the replacing checkpoint and `compaction/end` inside one
 * exclusive section (P10). Any failure after the start writes exactly one `compaction/end` with
 * `error` (interruption too, P9). Manual compactions flush after the end (P11).
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
 * @category programs
 */
export const compact = (options: CompactOptions): Effect.Effect<CompactionResult, CompactError, Session | Summarizer> =>
  Effect.gen(function*() {
    const invalid = checkOptions(options)
    if (invalid !== undefined) return yield* invalid
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
    const run: Run = {
      session,
      options,
      estimator,
      withCommand,
      compactionId,
      measurement,
      range,
      owner: null,
      endWritten: false
    }

    // 2. open, 3. price and summarise, 4. check and 5. commit; 6. a failure end after a start
    const transaction = Effect.gen(function*() {
      const opened = yield* openBracket(run)
      const summary = yield* summarise(run, summarizer)
      return yield* commit(run, opened, summary)
    }).pipe(Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : failureEnd(run, exit.cause)))

    const exit = yield* Effect.exit(transaction)
    // 7. manual: flush after any compaction/end
    if (options.mode === "manual" && run.endWritten) {
      const flushed = yield* Effect.either(session.flush)
      if (flushed._tag === "Left") {
        return yield* reject("P11", "persistence", `flush after compaction/end failed: ${flushed.left.message}`)
      }
    }
    return yield* exit
  }).pipe(Effect.withSpan("Compact.compact", { attributes: { mode: options.mode } }))
