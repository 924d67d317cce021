/**
 * What the Claude Code and Codex importers share (docs/import.md): a streamed line reader with a
 * per-line cap, the `LogBuilder` that turns prompts, model messages, tool calls, results and
 * compactions into this log's turns, steps and surface events (so every rule holds), the
 * ignorable `import/origin` and `import/source` records that keep every source record, and the
 * `SessionWriter` that validates each batch as a seed (`SeedCursor`) before it reaches the store.
 *
 * @since 0.2.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Buffer } from "node:buffer"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { SessionExists, type SessionLogError, StoreFailure } from "../../schema/Errors.js"
import type { Event, SurfaceOp } from "../../schema/Events.js"
import { encodeJson } from "../../schema/Json.js"
import { parseJson } from "../../schema/JsonParse.js"
import type { ContentBlock, TokenUsage } from "../../schema/Messages.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { checkSeedRecord, type SeedError } from "../../services/Seed.js"
import { applyPlan, isPlan, planSurface } from "../../services/SurfaceManager.js"
import { SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"
import { type ErrorReport, errorReport } from "../Verify.js"

/**
 * The ignorable event type of a source record: mapped (its envelope, the message left out) or
 * kept aside whole, with the reason (docs/import.md "Everything else is kept").
 *
 * @since 0.2.0
 * @category constants
 */
export const IMPORT_SOURCE = "import/source"

/**
 * The ignorable event type at seq 0 of every imported session: which tool, file and source
 * session it came from. `--force` replaces only a session that starts with it.
 *
 * @since 0.2.0
 * @category constants
 */
export const IMPORT_ORIGIN = "import/origin"

/**
 * The ignorable event type that ends every imported session: the import finished. A session that
 * starts with `import/origin` and lacks it was interrupted, and the next import replaces it.
 *
 * @since 0.2.0
 * @category constants
 */
export const IMPORT_END = "import/end"

/**
 * A transcript format.
 *
 * @since 0.2.0
 * @category models
 */
export type TranscriptFormat = "claude-code" | "codex"

/**
 * Options of an import.
 *
 * @since 0.2.0
 * @category models
 */
export interface ImportOptions {
  /** Replace a session an earlier import created (never one written otherwise). */
  readonly force?: boolean
  /** A line longer than this many bytes is refused (default 64 MiB). */
  readonly maxLineBytes?: number
}

/**
 * A line longer than this is refused (the event size cap of SPEC B10).
 *
 * @since 0.2.0
 * @category constants
 */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

/**
 * What happened to one session of a transcript.
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionReport {
  readonly id: string
  readonly parentSession?: string
  /** `imported` (new), `replaced` (`--force`), `unchanged` (imported before), `refused`. */
  readonly status: "imported" | "replaced" | "unchanged" | "refused"
  readonly events: number
  readonly messages: number
  readonly toolCalls: number
  readonly toolResults: number
  readonly error?: ErrorReport
}

/**
 * One refused line: it could not be kept even as text (too long, not UTF-8).
 *
 * @since 0.2.0
 * @category models
 */
export interface RefusedLine {
  readonly line: number
  readonly reason: string
}

/**
 * The report of one transcript file (the CLI prints it for people and in `--json`).
 *
 * @since 0.2.0
 * @category models
 */
export interface FileReport {
  readonly file: string
  readonly format: TranscriptFormat
  readonly records: {
    readonly read: number
    readonly mapped: number
    readonly kept: number
    readonly refused: number
  }
  /** Records kept aside as `import/source`, counted by reason. */
  readonly keptReasons: Readonly<Record<string, number>>
  /** The first refused lines (at most 100). */
  readonly refused: ReadonlyArray<RefusedLine>
  readonly sessions: ReadonlyArray<SessionReport>
  /** Why no session could be written at all (e.g. no session id in the file). */
  readonly error?: ErrorReport
}

// ---------------------------------------------------------------------------------------------
// Lines

/**
 * One line of a transcript: its text, or why it has none.
 *
 * @since 0.2.0
 * @category models
 */
export type SourceLine =
  | { readonly _tag: "Text"; readonly line: number; readonly text: string }
  | { readonly _tag: "Refused"; readonly line: number; readonly reason: "too-long" | "not-utf8" }

const NEWLINE = 10

/**
 * Stream a file's lines (1-based numbers) to `onLine`, each decoded as UTF-8 on its own; a line
 * over `maxLineBytes` is dropped as it is read (never held whole) and handed on as refused.
 * Blank lines are skipped.
 *
 * @since 0.2.0
 * @category utils
 */
export const forEachLine = <E, R>(
  path: string,
  maxLineBytes: number,
  onLine: (line: SourceLine) => Effect.Effect<void, E, R>
): Effect.Effect<number, E | PlatformError, R | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const decoder = new TextDecoder("utf-8", { fatal: true })
    let parts: Array<Uint8Array> = []
    let size = 0
    let tooLong = false
    let lineNo = 0
    const take = (): SourceLine | undefined => {
      lineNo++
      const line = lineNo
      if (tooLong) {
        tooLong = false
        parts = []
        size = 0
        return { _tag: "Refused", line, reason: "too-long" }
      }
      const bytes = parts.length === 1 ? parts[0] : Buffer.concat(parts)
      parts = []
      size = 0
      let text: string
      try {
        text = decoder.decode(bytes)
      } catch {
        return { _tag: "Refused", line, reason: "not-utf8" }
      }
      return text.trim().length === 0 ? undefined : { _tag: "Text", line, text }
    }
    const add = (piece: Uint8Array) => {
      if (tooLong || piece.length === 0) return
      if (size + piece.length > maxLineBytes) {
        tooLong = true
        parts = []
        size = 0
        return
      }
      parts.push(piece)
      size += piece.length
    }
    yield* fs.stream(path, { chunkSize: 256 * 1024 }).pipe(
      Stream.runForEach((chunk) => {
        const lines: Array<SourceLine> = []
        let start = 0
        for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, start)) {
          add(chunk.subarray(start, i))
          const l = take()
          if (l !== undefined) lines.push(l)
          start = i + 1
        }
        // copied: the stream may reuse its buffer
        if (start < chunk.length) add(Uint8Array.prototype.slice.call(chunk, start))
        return lines.length === 0 ? Effect.void : Effect.forEach(lines, onLine, { discard: true })
      })
    )
    if (size > 0 || tooLong) {
      const l = take()
      if (l !== undefined) yield* onLine(l)
    }
    return lineNo
  })

/**
 * A parsed line: a lossless JSON value, or why it is not one.
 *
 * @since 0.2.0
 * @category models
 */
export type ParsedSource =
  | { readonly _tag: "Json"; readonly value: unknown }
  | { readonly _tag: "NotJson"; readonly reason: "not-json" | "not-lossless-json" }

/**
 * Parse one line as lossless JSON (SPEC §1.2): a `-0` or `1e400` is not kept as a number.
 *
 * @since 0.2.0
 * @category utils
 */
export const parseSourceLine = (text: string): ParsedSource => {
  const parsed = parseJson(text)
  if (parsed._tag === "Unparsable") return { _tag: "NotJson", reason: "not-json" }
  if (parsed._tag !== "Ok") return { _tag: "NotJson", reason: "not-lossless-json" }
  return { _tag: "Json", value: parsed.value }
}

/**
 * A plain JSON object.
 *
 * @since 0.2.0
 * @category utils
 */
export const isObject = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A string that is not empty, else `undefined`.
 *
 * @since 0.2.0
 * @category utils
 */
export const nonEmpty = (u: unknown): string | undefined => typeof u === "string" && u.length > 0 ? u : undefined

/**
 * An ISO timestamp as epoch ms, or `undefined`.
 *
 * @since 0.2.0
 * @category utils
 */
export const timeOf = (u: unknown): number | undefined => {
  if (typeof u !== "string") return undefined
  const t = Date.parse(u)
  return Number.isSafeInteger(t) ? t : undefined
}

/**
 * A copy of `record` without `keys`.
 *
 * @since 0.2.0
 * @category utils
 */
export const omit = (record: Readonly<Record<string, unknown>>, keys: ReadonlyArray<string>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(record)) {
    if (!keys.includes(k)) Object.defineProperty(out, k, { value: record[k], writable: true, enumerable: true, configurable: true })
  }
  return out
}

/**
 * A mapped block with the source block's other keys kept under `key` (lossless: a text block's
 * citations or annotations, a tool call's extra fields), or the block alone when there are none.
 *
 * @since 0.2.0
 * @category utils
 */
export const keepRest = (
  block: Readonly<Record<string, unknown>>,
  source: Readonly<Record<string, unknown>>,
  mapped: ReadonlyArray<string>,
  key: string
): ContentBlock => {
  const rest = omit(source, mapped)
  return (Object.keys(rest).length === 0 ? block : { ...block, [key]: rest }) as ContentBlock
}

/**
 * A value as raw JSON text (tool arguments are stored as the string the model produced).
 *
 * @since 0.2.0
 * @category utils
 */
export const jsonText = (u: unknown): string => typeof u === "string" ? u : encodeJson(u as never)

// ---------------------------------------------------------------------------------------------
// Building the log

/**
 * Counts of what a builder wrote.
 *
 * @since 0.2.0
 * @category models
 */
export interface BuildCounts {
  messages: number
  toolCalls: number
  toolResults: number
}

interface Call {
  readonly seq: number
  readonly turn: number
  readonly step: number
  answered: boolean
}

/**
 * Builds one session's events from source messages, in order, so that the log validates: turns
 * and steps around prompts and model messages, `tool/call` after the message that asked for it,
 * `tool/result` citing its call, compaction as a `replace` of the whole surface citing every node
 * it shadows (F4). Events collect in `pending` until the writer takes them.
 *
 * @since 0.2.0
 * @category models
 */
export class LogBuilder {
  /**
   * The events not yet taken by the writer.
   *
   * @since 0.2.0
   */
  pending: Array<Event> = []
  /**
   * The next seq.
   *
   * @since 0.2.0
   */
  seq = 0
  /**
   * The time of the next event (the source's, when it has one).
   *
   * @since 0.2.0
   */
  time = 0
  /**
   * The surface nodes, in order.
   *
   * @since 0.2.0
   */
  readonly surface: Array<number> = []
  /**
   * What this builder wrote.
   *
   * @since 0.2.0
   */
  readonly counts: BuildCounts = { messages: 0, toolCalls: 0, toolResults: 0 }
  private turn = 0
  private headers = 0
  private step = 0
  private turnOpen = false
  private stepOpen = false
  private stepHasAssistant = false
  private readonly calls = new Map<string, Call>()
  private readonly ids = new Set<string>()

  /**
   * Set the time of the next events from a source timestamp (kept when there is none).
   *
   * @since 0.2.0
   */
  at(time: number | undefined): this {
    if (time !== undefined) this.time = time
    return this
  }

  /**
   * Append one event with its envelope keys in order.
   *
   * @since 0.2.0
   */
  private push(
    type: string,
    data: unknown,
    meta: { readonly sourceEventSeqs?: ReadonlyArray<number>; readonly surfaceOp?: SurfaceOp; readonly ignorable?: true } = {}
  ): number {
    const seq = this.seq++
    const event: Record<string, unknown> = { type, seq, time: this.time, data }
    if (meta.sourceEventSeqs !== undefined) event.sourceEventSeqs = meta.sourceEventSeqs
    if (meta.surfaceOp !== undefined) event.surfaceOp = meta.surfaceOp
    if (meta.ignorable === true) event.ignorable = true
    this.pending.push(event as unknown as Event)
    return seq
  }

  /**
   * A message id not used yet in this session (the source's, suffixed when repeated).
   *
   * @since 0.2.0
   */
  uniqueId(id: string): string {
    let out = id
    for (let n = 2; this.ids.has(out); n++) out = `${id}#${n}`
    this.ids.add(out)
    return out
  }

  /**
   * An ignorable record (`import/origin`, `import/source`).
   *
   * @since 0.2.0
   */
  ignorable(type: string, data: unknown): number {
    return this.push(type, data, { ignorable: true })
  }

  /**
   * A `request/header` (model and settings of the requests that follow).
   *
   * @since 0.2.0
   */
  requestHeader(header: Readonly<Record<string, unknown>>): number {
    const reason = this.headers++ === 0 ? "initial" : "change"
    return this.push("request/header", { header, reason })
  }

  /**
   * Close the open step.
   *
   * @since 0.2.0
   */
  private closeStep() {
    if (this.stepOpen) this.push("step/end", { turn: this.turn, step: this.step })
    this.stepOpen = false
    this.stepHasAssistant = false
  }

  /**
   * Close the open step and turn.
   *
   * @since 0.2.0
   */
  private closeTurn() {
    this.closeStep()
    if (this.turnOpen) this.push("turn/end", { turn: this.turn, reason: { kind: "completed" } })
    this.turnOpen = false
  }

  /**
   * Open the next turn.
   *
   * @since 0.2.0
   */
  private openTurn() {
    this.turn++
    this.step = 0
    this.turnOpen = true
    this.push("turn/start", { turn: this.turn })
  }

  /**
   * Open the next step (and a turn when none is open).
   *
   * @since 0.2.0
   */
  private openStep() {
    if (!this.turnOpen) this.openTurn()
    this.step++
    this.stepOpen = true
    this.stepHasAssistant = false
    this.push("step/start", { turn: this.turn, step: this.step })
  }

  /**
   * Append a surface event.
   *
   * @since 0.2.0
   */
  private surfaceAppend(type: string, data: unknown, sourceEventSeqs?: ReadonlyArray<number>): number {
    const seq = this.push(type, data, { ...(sourceEventSeqs === undefined ? {} : { sourceEventSeqs }), surfaceOp: "append" })
    this.surface.push(seq)
    this.counts.messages++
    return seq
  }

  /**
   * A person's prompt: it closes the open turn and opens a new one with its first step.
   *
   * @since 0.2.0
   */
  prompt(id: string, content: ReadonlyArray<ContentBlock>): number {
    this.closeTurn()
    this.openStep()
    return this.surfaceAppend("user/message", { id: this.uniqueId(id), role: "user", content, source: { kind: "user" } })
  }

  /**
   * A person's message inside the open turn (text beside tool results).
   *
   * @since 0.2.0
   */
  userInTurn(id: string, content: ReadonlyArray<ContentBlock>): number {
    if (!this.stepOpen) this.openStep()
    return this.surfaceAppend("user/message", { id: this.uniqueId(id), role: "user", content, source: { kind: "user" } })
  }

  /**
   * Context the tool injected (instructions, environment, command output): a `context/message`.
   *
   * @since 0.2.0
   */
  context(id: string, content: ReadonlyArray<ContentBlock>, source: Readonly<Record<string, unknown>>, meta?: unknown): number {
    return this.surfaceAppend("context/message", {
      id: this.uniqueId(id),
      role: "user",
      content,
      source,
      ...(meta === undefined ? {} : { meta })
    })
  }

  /**
   * A model message: a step of its own (the first one after a prompt shares the prompt's step),
   * after the request header given (if any), then one `tool/call` per tool-call block, in order.
   *
   * @since 0.2.0
   */
  assistant(
    id: string,
    content: ReadonlyArray<ContentBlock>,
    source: { readonly provider: string; readonly model: string },
    usage?: TokenUsage,
    header?: Readonly<Record<string, unknown>>
  ): number {
    if (!this.stepOpen || this.stepHasAssistant) {
      this.closeStep()
      this.openStep()
    }
    this.stepHasAssistant = true
    // the request's header, when the transcript shows it changed, precedes the model's answer (§1.6)
    if (header !== undefined) this.requestHeader(header)
    const seq = this.surfaceAppend("assistant/message", {
      turn: this.turn,
      step: this.step,
      message: { id: this.uniqueId(id), role: "assistant", content, source: { kind: "model", ...source } },
      ...(usage === undefined ? {} : { usage })
    })
    for (const block of content) {
      if (block.type !== "tool-call" || typeof block.id !== "string" || typeof block.name !== "string") continue
      if (this.calls.has(block.id)) continue
      const callSeq = this.push("tool/call", {
        turn: this.turn,
        step: this.step,
        callId: block.id,
        name: block.name,
        arguments: typeof block.arguments === "string" ? block.arguments : jsonText(block.arguments)
      })
      this.calls.set(block.id, { seq: callSeq, turn: this.turn, step: this.step, answered: false })
      this.counts.toolCalls++
    }
    return seq
  }

  /**
   * Whether `toolResult` would map a result of `callId`, else the reason it is kept aside.
   *
   * @since 0.2.0
   */
  canAnswer(callId: string): true | "result-without-call" | "duplicate-result" {
    const call = this.calls.get(callId)
    return call === undefined ? "result-without-call" : call.answered ? "duplicate-result" : true
  }

  /**
   * The result of a call this session holds and has not answered yet: a `tool/result` citing the
   * `tool/call`. `"no-call"` or `"answered"` otherwise (the caller keeps the record aside).
   *
   * @since 0.2.0
   */
  toolResult(
    id: string,
    callId: string,
    content: ReadonlyArray<ContentBlock>,
    isError: boolean,
    meta?: unknown
  ): number | "no-call" | "answered" {
    const call = this.calls.get(callId)
    if (call === undefined) return "no-call"
    if (call.answered) return "answered"
    call.answered = true
    this.counts.toolResults++
    return this.surfaceAppend("tool/result", {
      turn: call.turn,
      step: call.step,
      message: {
        id: this.uniqueId(id),
        role: "user",
        content: [{ type: "tool-result", toolCallId: callId, content, ...(isError ? { isError: true } : {}) }],
        source: { kind: "tool", callId }
      },
      ...(meta === undefined ? {} : { meta })
    }, [call.seq])
  }

  /**
   * A compaction summary: a `user/message` from the `compact` plugin replacing the whole surface
   * (every node cited, F4), or appended when the surface is empty.
   *
   * @since 0.2.0
   */
  compaction(id: string, content: ReadonlyArray<ContentBlock>, compactionId: string, cites: ReadonlyArray<number> = []): number {
    const data = {
      id: this.uniqueId(id),
      role: "user",
      content,
      source: { kind: "plugin", plugin: "compact", compactionId }
    }
    if (this.surface.length === 0) return this.surfaceAppend("user/message", data)
    const shadowed = this.surface.splice(0, this.surface.length)
    const seen = new Set(shadowed)
    const sourceEventSeqs = [...cites.filter((s) => !seen.has(s)), ...shadowed]
    const seq = this.push("user/message", data, {
      sourceEventSeqs,
      surfaceOp: { op: "replace", start: shadowed[0], end: shadowed[shadowed.length - 1] }
    })
    this.surface.push(seq)
    this.counts.messages++
    return seq
  }

  /**
   * Close the open step and turn and write `import/end` (the transcript ended).
   *
   * @since 0.2.0
   */
  finish(): void {
    this.closeTurn()
    this.ignorable(IMPORT_END, {})
  }

  /**
   * Take the pending events.
   *
   * @since 0.2.0
   */
  take(): Array<Event> {
    const out = this.pending
    this.pending = []
    return out
  }
}

// ---------------------------------------------------------------------------------------------
// Writing

/** A session this import may write: new, replaced (`--force`), already imported, or refused. */
type Mode = "new" | "replace" | "unchanged" | "refused"

const BATCH_EVENTS = 4_096

/**
 * What the store holds under an id this import would write: a session written otherwise
 * (`foreign`), one an import finished (`complete`: `import/origin` first, `import/end` last), one
 * an import finished and something appended to since (`continued`: a person resumed it), or one
 * an import began and did not finish (`incomplete`: interrupted, or a write that failed).
 *
 * @since 0.2.0
 * @category models
 */
export type ImportState = "foreign" | "complete" | "continued" | "incomplete"

/**
 * The `ImportState` of the stored session `id`, by a streamed read (memory bounded by a chunk).
 *
 * @since 0.2.0
 * @category utils
 */
export const importState = (store: SessionStoreShape, id: string) =>
  Effect.suspend(() => {
    let first: unknown
    let last: unknown
    let ended = false
    return store.loadEach(id, {
      onEvents: (events) =>
        Effect.sync(() => {
          for (const e of events) {
            if (first === undefined) first = e
            if (isObject(e) && e.type === IMPORT_END) ended = true
            last = e
          }
        })
    }).pipe(Effect.map((): ImportState =>
      !isObject(first) || first.type !== IMPORT_ORIGIN
        ? "foreign"
        : !ended
        ? "incomplete"
        : isObject(last) && last.type === IMPORT_END
        ? "complete"
        : "continued"
    ))
  })

/**
 * The seed pipeline (SPEC §3.2) over a session being imported, one batch at a time: each event's
 * envelope, shape and surface plan. Unlike the stores' streamed reads it keeps no tool result
 * (an import never rewrites one, G1–G3), so memory holds the surface's seqs only, whatever the
 * transcript's length.
 *
 * @since 0.2.0
 * @category models
 */
export class LogCursor {
  /**
   * The surface nodes so far.
   *
   * @since 0.2.0
   */
  readonly nodes: Array<number> = []
  /**
   * How many events were accepted.
   *
   * @since 0.2.0
   */
  count = 0
  /**
   * The first rejection, after which no event is accepted.
   *
   * @since 0.2.0
   */
  error: SeedError | undefined

  /**
   * Check the next events; the accepted ones (none after a rejection).
   *
   * @since 0.2.0
   */
  push(events: ReadonlyArray<Event>): ReadonlyArray<Event> {
    const accepted: Array<Event> = []
    for (let k = 0; k < events.length && this.error === undefined; k++) {
      const i = this.count
      const checked = checkSeedRecord(events[k], i, true)
      if ("_tag" in checked) {
        this.error = checked
        break
      }
      const plan = planSurface(this.nodes, checked, i, () => undefined)
      if (!isPlan(plan)) {
        this.error = plan
        break
      }
      applyPlan(this.nodes, plan, i)
      accepted.push(checked)
      this.count++
    }
    return accepted
  }
}

/**
 * Writes one session: validates every batch as a seed (the log is checked before it is stored),
 * appends new sessions in batches, collects a `--force` replacement for one `replaceLog`, and
 * writes nothing for a session imported before or refused.
 *
 * @since 0.2.0
 * @category models
 */
export class SessionWriter {
  private readonly cursor = new LogCursor()
  private pending: Array<Event> = []
  private readonly all: Array<Event> = []
  private stored = 0
  private created = false
  /**
   * The first failure of this session, if any.
   *
   * @since 0.2.0
   */
  error: SessionLogError | undefined

  constructor(
    readonly store: SessionStoreShape,
    readonly header: SessionHeader,
    readonly mode: Mode,
    readonly refusal?: SessionLogError
  ) {
    this.error = refusal
  }

  /**
   * Validate and queue events; append a batch when one is full.
   *
   * @since 0.2.0
   */
  write(events: ReadonlyArray<Event>): Effect.Effect<void> {
    if (this.error !== undefined || events.length === 0) return Effect.void
    const accepted = this.cursor.push(events)
    if (this.cursor.error !== undefined) {
      this.error = this.cursor.error
      return Effect.void
    }
    if (this.mode === "replace") {
      for (const e of accepted) this.all.push(e)
      return Effect.void
    }
    if (this.mode !== "new") return Effect.void
    for (const e of accepted) this.pending.push(e)
    return this.pending.length >= BATCH_EVENTS ? this.flush() : Effect.void
  }

  /**
   * Append the queued batch.
   *
   * @since 0.2.0
   */
  private flush(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const batch = this.pending
      this.pending = []
      if (batch.length === 0 || this.error !== undefined) return Effect.void
      const at = this.stored
      this.stored += batch.length
      const create = this.created ? Effect.void : Effect.asVoid(this.store.create(this.header))
      this.created = true
      return Effect.zipRight(create, this.store.append(this.header.id, batch, { expectedSeq: at })).pipe(
        Effect.catchAll((e) => Effect.sync(() => void (this.error = e as SessionLogError)))
      )
    })
  }

  /**
   * Write what is left; the outcome of this session.
   *
   * @since 0.2.0
   */
  close(counts: BuildCounts): Effect.Effect<SessionReport> {
    return Effect.gen(this, function*() {
      if (this.mode === "new") yield* this.flush()
      if (this.mode === "replace" && this.error === undefined) {
        const loaded = yield* Effect.either(this.store.load(this.header.id))
        if (loaded._tag === "Left") this.error = loaded.left
        else {
          const replaced = yield* Effect.either(
            this.store.replaceLog(this.header.id, this.header, this.all, {
              revision: loaded.right.revision,
              backup: "import-force"
            })
          )
          if (replaced._tag === "Left") this.error = replaced.left
        }
      }
      const status = this.error !== undefined
        ? "refused"
        : this.mode === "replace"
        ? "replaced"
        : this.mode === "new"
        ? "imported"
        : "unchanged"
      return {
        id: this.header.id,
        ...(this.header.parentSession === undefined ? {} : { parentSession: this.header.parentSession }),
        status,
        events: this.cursor.count,
        ...counts,
        ...(this.error === undefined ? {} : { error: errorReport(this.error) })
      } satisfies SessionReport
    })
  }
}

/**
 * Open a writer for `header`: a new session, a replacement of one an import created (`force`)
 * or began and did not finish, `unchanged` when an import created it before (and when a person
 * continued it since, unless `force`, which refuses it then), refused (`SessionExists`, J14) when anything else
 * wrote it: this import never touches what it did not create.
 *
 * @since 0.2.0
 * @category constructors
 */
export const openWriter = (header: SessionHeader, existing: Set<string>, force: boolean) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    if (!existing.has(header.id)) {
      existing.add(header.id)
      return new SessionWriter(store, header, "new")
    }
    const state = yield* Effect.either(importState(store, header.id))
    if (state._tag === "Left") return new SessionWriter(store, header, "refused", state.left as SessionLogError)
    // J14: never replace what this import did not write (another writer's session, or events a
    // person appended to an imported one: those stay, even with --force)
    if (state.right === "foreign" || (state.right === "continued" && force)) {
      return new SessionWriter(store, header, "refused", new SessionExists({ rule: "J14", sessionId: header.id }))
    }
    // an import that did not finish is replaced, never taken for a complete one
    return new SessionWriter(
      store,
      header,
      state.right === "incomplete" || (state.right === "complete" && force) ? "replace" : "unchanged"
    )
  })

/**
 * The ids the store holds now (one listing per import).
 *
 * @since 0.2.0
 * @category utils
 */
export const storedIds = Effect.gen(function*() {
  const store = yield* SessionStore
  const headers = yield* store.list()
  return new Set(headers.map((h) => h.id))
})

/**
 * Counts of a file's records while it is mapped.
 *
 * @since 0.2.0
 * @category models
 */
export class RecordTally {
  /**
   * Records read.
   *
   * @since 0.2.0
   */
  read = 0
  /**
   * Records mapped.
   *
   * @since 0.2.0
   */
  mapped = 0
  /**
   * Records kept aside.
   *
   * @since 0.2.0
   */
  kept = 0
  /**
   * Lines refused.
   *
   * @since 0.2.0
   */
  refusedCount = 0
  /**
   * Records kept aside, by reason.
   *
   * @since 0.2.0
   */
  readonly keptReasons: Record<string, number> = {}
  /**
   * The first refused lines.
   *
   * @since 0.2.0
   */
  readonly refused: Array<RefusedLine> = []

  /**
   * Count a record kept aside.
   *
   * @since 0.2.0
   */
  keep(reason: string) {
    this.kept++
    this.keptReasons[reason] = (this.keptReasons[reason] ?? 0) + 1
  }

  /**
   * Count a refused line.
   *
   * @since 0.2.0
   */
  refuse(line: number, reason: string) {
    this.refusedCount++
    if (this.refused.length < 100) this.refused.push({ line, reason })
  }

  /**
   * The report of the file.
   *
   * @since 0.2.0
   */
  report(file: string, format: TranscriptFormat, sessions: ReadonlyArray<SessionReport>, error?: ErrorReport): FileReport {
    return {
      file,
      format,
      records: { read: this.read, mapped: this.mapped, kept: this.kept, refused: this.refusedCount },
      keptReasons: this.keptReasons,
      refused: this.refused,
      sessions,
      ...(error === undefined ? {} : { error })
    }
  }
}

/**
 * A failure to read a transcript, as a report error.
 *
 * @since 0.2.0
 * @category utils
 */
export const readFailure = (file: string, cause: unknown): ErrorReport =>
  errorReport(new StoreFailure({ method: "import", cause, detail: `cannot read ${file}` }))

/**
 * The transcripts at `path`: the file itself, or every `.jsonl` file under a directory (Claude
 * Code's project folders with their `subagents/` files, Codex's date tree), sorted, so a
 * session's file comes before its subagents'.
 *
 * @since 0.2.0
 * @category utils
 */
export const transcriptFiles = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(path)
    if (info.type !== "Directory") return [path]
    const names = yield* fs.readDirectory(path, { recursive: true })
    const files: Array<string> = []
    for (const name of names) {
      if (!name.endsWith(".jsonl")) continue
      const full = `${path.replace(/\/+$/, "")}/${name}`
      const st = yield* Effect.either(fs.stat(full))
      if (st._tag === "Right" && st.right.type === "File") files.push(full)
    }
    return files.sort()
  })

/**
 * Import every transcript at `path` with `importFile`, one report per file (a file that cannot be
 * read is reported, and the others go on).
 *
 * @since 0.2.0
 * @category utils
 */
export const importPath = <R>(
  path: string,
  importFile: (file: string, existing: Set<string>) => Effect.Effect<FileReport, never, R>
) =>
  Effect.gen(function*() {
    const files = yield* Effect.mapError(transcriptFiles(path), (cause) => new StoreFailure({ method: "import", cause, detail: `cannot read ${path}` }))
    const existing = yield* storedIds
    const reports: Array<FileReport> = []
    for (const file of files) reports.push(yield* importFile(file, existing))
    return reports
  })
