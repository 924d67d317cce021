/**
 * The `LogBuilder` (docs/import.md "What maps to what"): turns a transcript's prompts, model
 * messages, tool calls, results and compactions into this log's turns, steps and surface events,
 * so every rule holds. Internal to the importers.
 *
 * @since 0.2.0
 */
import type { Event, SurfaceOp } from "../../schema/Events.js"
import type { ContentBlock, TokenUsage } from "../../schema/Messages.js"
import { IMPORT_END } from "./TranscriptImport.js"
import { jsonText } from "./SourceLines.js"

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
   * (every node cited, F4), or only the nodes before seq `keepFrom` (a preserved segment stays
   * after it), or appended when there is nothing to replace.
   *
   * @since 0.2.0
   */
  compaction(
    id: string,
    content: ReadonlyArray<ContentBlock>,
    compactionId: string,
    cites: ReadonlyArray<number> = [],
    source: Readonly<Record<string, unknown>> = {},
    keepFrom?: number
  ): number {
    const data = {
      id: this.uniqueId(id),
      role: "user",
      content,
      source: { kind: "plugin", plugin: "compact", compactionId, ...source }
    }
    // the nodes from seq `keepFrom` on stay after the summary (a segment the compaction preserved)
    const kept = keepFrom === undefined ? -1 : this.surface.findIndex((s) => s >= keepFrom)
    const cut = kept === -1 ? this.surface.length : kept
    if (cut === 0) return this.surfaceAppend("user/message", data)
    const shadowed = this.surface.slice(0, cut)
    const seen = new Set(shadowed)
    const sourceEventSeqs = [...cites.filter((s) => !seen.has(s)), ...shadowed]
    const seq = this.push("user/message", data, {
      sourceEventSeqs,
      surfaceOp: { op: "replace", start: shadowed[0], end: shadowed[shadowed.length - 1] }
    })
    this.surface.splice(0, cut, seq)
    this.counts.messages++
    return seq
  }

  /**
   * A further message a compaction put in place of the surface, after its first (`compaction`).
   *
   * @since 0.2.0
   */
  compactionPart(id: string, content: ReadonlyArray<ContentBlock>, compactionId: string, source: Readonly<Record<string, unknown>> = {}): number {
    return this.surfaceAppend("user/message", {
      id: this.uniqueId(id),
      role: "user",
      content,
      source: { kind: "plugin", plugin: "compact", compactionId, ...source }
    })
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
