/**
 * fast-check generators of random VALID session logs as an agent writes them (turns, steps,
 * message batches, chunk streams, tool calls, compaction, prunes, headers, log-only noise),
 * built from a list of intents by a builder that keeps its own model of the surface, plus
 * single mutations that each break exactly one named SPEC rule.
 */
import * as fc from "effect/FastCheck"
import type { Event } from "../src/schema/Events.js"

/** A plain, mutable event record (what a generator or a mutation produces). */
export interface LogEvent {
  type: string
  seq: number
  time: number
  data: any
  sourceEventSeqs?: Array<number>
  surfaceOp?: unknown
  ignorable?: true
}

/** What the builder knows about one event besides the record itself. */
export type Role =
  | "plain"
  | "compaction-replace" // user/message replacing a span; anchor = its compaction/start seq
  | "prune-replace" // tool/result rewrite; anchor = its compaction/prune seq

/** A generated log and the generator's own model of its surface. */
export interface BuiltLog {
  readonly events: ReadonlyArray<LogEvent>
  /** The surface after the last event, by the generator's model (independent of src). */
  readonly nodes: ReadonlyArray<number>
  /** The surface just before each event was added. */
  readonly nodesBefore: ReadonlyArray<ReadonlyArray<number>>
  /** Number of replacements (the expected `replaceGeneration`). */
  readonly replacements: number
  readonly roles: ReadonlyArray<Role>
  /** For replacements: a log-only seq before them tied to the replacement (never on the surface). */
  readonly anchors: ReadonlyArray<number | undefined>
  /** The derived messages by the generator's model of SPEC §4.6. */
  readonly messages: ReadonlyArray<unknown>
}

// ---------------------------------------------------------------------------------------------
// Intents

type Text = string

interface UserIntent {
  readonly kind: "user" | "plugin" | "context"
  readonly texts: ReadonlyArray<Text>
  readonly meta: boolean
}

interface ToolIntent {
  readonly name: string
  readonly args: string
  readonly output: Text
  readonly isError: boolean
  readonly aborted: boolean
  readonly meta: boolean
}

interface HeaderIntent {
  readonly provider: string
  readonly model: string
  readonly reasoningEffort: string | null
  readonly maxTokens: number | null
  readonly adapterMaxTokens: boolean
  readonly system: string | null
  readonly tools: boolean
  readonly reason: "change" | "series" | "resume"
}

interface AnswerIntent {
  readonly reasoning: Text | null
  readonly texts: ReadonlyArray<ReadonlyArray<Text>> // text blocks, each streamed as deltas
  readonly bare: boolean // with empty content: no chunks at all (sourceEventSeqs [])
  readonly usage: boolean
}

/** A replacement of the positional span [at, at + len] (both modulo the surface), compaction-style. */
export interface CompactionIntent {
  readonly _tag: "compaction"
  readonly at: number
  readonly len: number
  readonly minSpan: number
  readonly summary: Text
  readonly failed: boolean
}

/** A content-only rewrite of the `pick`-th tool/result node on the surface. */
export interface PruneIntent {
  readonly _tag: "prune"
  readonly pick: number
  readonly kept: Text
}

/** A log-only event. */
export interface NoiseIntent {
  readonly _tag: "noise"
  readonly kind: "todo" | "plugin" | "pluginNull" | "requestContext" | "endSeed" | "header"
  readonly text: Text
  readonly header: HeaderIntent
}

interface StepIntent {
  readonly pre: ReadonlyArray<CompactionIntent | PruneIntent>
  readonly users: ReadonlyArray<UserIntent>
  readonly noise: ReadonlyArray<NoiseIntent>
  readonly header: HeaderIntent | null
  readonly requestContext: boolean
  readonly failedAttempt: ReadonlyArray<Text> | null
  readonly answer: AnswerIntent
  readonly tools: ReadonlyArray<ToolIntent>
}

/** One turn of the agent loop. */
export interface TurnIntent {
  readonly _tag: "turn"
  readonly steps: ReadonlyArray<StepIntent>
  readonly reason: unknown
  readonly open: boolean // left unclosed (a crash); only honoured for the last turn
}

export type TopIntent = TurnIntent | CompactionIntent | PruneIntent | NoiseIntent

// ---------------------------------------------------------------------------------------------
// Arbitraries of intents

const word = fc.constantFrom("read", "the", "file", "src/index.ts", "ok", "done", "λx", "🙂", "\"q\"", "a\nb", "")
/** Short texts, mostly words, sometimes arbitrary code points (lone surrogates included). */
export const text: fc.Arbitrary<Text> = fc.oneof(
  { arbitrary: fc.array(word, { maxLength: 4 }).map((ws) => ws.join(" ")), weight: 5 },
  { arbitrary: fc.string({ unit: "binary", maxLength: 6 }), weight: 1 }
)

const userIntent: fc.Arbitrary<UserIntent> = fc.record({
  kind: fc.constantFrom("user", "user", "plugin", "context"),
  texts: fc.array(text, { minLength: 1, maxLength: 2 }),
  meta: fc.boolean()
})

const toolIntent: fc.Arbitrary<ToolIntent> = fc.record({
  name: fc.constantFrom("read_file", "bash", "grep"),
  args: fc.constantFrom("{}", "{\"path\":\"a.ts\"}", "{\"cmd\":\"ls\"}", "{\"q\":"),
  output: text,
  isError: fc.boolean(),
  aborted: fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 }),
  meta: fc.boolean()
})

const headerIntent: fc.Arbitrary<HeaderIntent> = fc.record({
  provider: fc.constantFrom("anthropic", "openai"),
  model: fc.constantFrom("m-small", "m-large"),
  reasoningEffort: fc.option(fc.constantFrom("low", "high"), { nil: null }),
  maxTokens: fc.option(fc.integer({ min: 1, max: 64000 }), { nil: null }),
  adapterMaxTokens: fc.boolean(),
  system: fc.option(text, { nil: null }),
  tools: fc.boolean(),
  reason: fc.constantFrom("change", "series", "resume")
})

const answerIntent: fc.Arbitrary<AnswerIntent> = fc.record({
  reasoning: fc.option(text, { nil: null, freq: 4 }),
  texts: fc.array(fc.array(text, { minLength: 1, maxLength: 3 }), { maxLength: 2 }),
  bare: fc.boolean(),
  usage: fc.boolean()
})

/** A compaction intent (span of at least `minSpan` nodes when the surface allows it). */
export const compactionIntent = (minSpan = 1): fc.Arbitrary<CompactionIntent> =>
  fc.record({
    _tag: fc.constant("compaction" as const),
    at: fc.nat(),
    len: fc.nat(),
    minSpan: fc.constant(minSpan),
    summary: text,
    failed: fc.constant(false)
  })

const compactionAttempt: fc.Arbitrary<CompactionIntent> = fc.record({
  _tag: fc.constant("compaction" as const),
  at: fc.nat(),
  len: fc.nat(),
  minSpan: fc.constant(1),
  summary: text,
  failed: fc.oneof({ arbitrary: fc.constant(false), weight: 4 }, { arbitrary: fc.constant(true), weight: 1 })
})

/** A prune intent. */
export const pruneIntent: fc.Arbitrary<PruneIntent> = fc.record({
  _tag: fc.constant("prune" as const),
  pick: fc.nat(),
  kept: text
})

const noiseKinds = ["todo", "plugin", "pluginNull", "requestContext", "header"] as const

/** A log-only intent (`endSeed` only where `withEndSeed`). */
export const noiseIntent = (withEndSeed: boolean): fc.Arbitrary<NoiseIntent> =>
  fc.record({
    _tag: fc.constant("noise" as const),
    kind: withEndSeed ? fc.constantFrom(...noiseKinds, "endSeed") : fc.constantFrom(...noiseKinds),
    text,
    header: headerIntent
  })

const turnEndReason: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constant({ kind: "completed" }), weight: 6 },
  { arbitrary: fc.constantFrom({ kind: "user" }, { kind: "parent" }, { kind: "disposed" }).map((reason) => ({ kind: "aborted", reason })), weight: 1 },
  { arbitrary: fc.constant({ kind: "blocked" }), weight: 1 },
  { arbitrary: text.map((message) => ({ kind: "error", error: { message, code: "UNKNOWN" } })), weight: 1 },
  { arbitrary: fc.constant({ kind: "max-tokens" }), weight: 1 },
  { arbitrary: fc.constant({ kind: "interrupted" }), weight: 1 },
  { arbitrary: fc.constant({ kind: "plugin-defined", extra: [1, "x"] }), weight: 1 }
)

const preStep: fc.Arbitrary<ReadonlyArray<CompactionIntent | PruneIntent>> = fc.oneof(
  { arbitrary: fc.constant([]), weight: 5 },
  { arbitrary: fc.array(fc.oneof(compactionAttempt, pruneIntent), { minLength: 1, maxLength: 2 }), weight: 1 }
)

const stepIntent: fc.Arbitrary<StepIntent> = fc.record({
  pre: preStep,
  users: fc.array(userIntent, { maxLength: 3 }),
  noise: fc.array(noiseIntent(false), { maxLength: 2 }),
  header: fc.option(headerIntent, { nil: null }),
  requestContext: fc.boolean(),
  failedAttempt: fc.oneof(
    { arbitrary: fc.constant(null), weight: 5 },
    { arbitrary: fc.array(text, { maxLength: 2 }), weight: 1 }
  ),
  answer: answerIntent,
  tools: fc.array(toolIntent, { maxLength: 3 })
})

const turnIntent: fc.Arbitrary<TurnIntent> = fc.record({
  _tag: fc.constant("turn" as const),
  steps: fc.array(stepIntent, { maxLength: 3 }),
  reason: turnEndReason,
  open: fc.oneof({ arbitrary: fc.constant(false), weight: 5 }, { arbitrary: fc.constant(true), weight: 1 })
})

/** Top-level intents: mostly turns, with manual compactions, prunes and noise between them. */
export const topIntent: fc.Arbitrary<TopIntent> = fc.oneof(
  { arbitrary: turnIntent, weight: 6 },
  { arbitrary: compactionAttempt, weight: 1 },
  { arbitrary: pruneIntent, weight: 1 },
  { arbitrary: noiseIntent(true), weight: 1 }
)

/**
 * A fixed tail that guarantees the structure every mutation kind needs: a turn with a header, a
 * user and a context message, an assistant message with two tool calls and their results, then
 * a prune and a compaction spanning at least two nodes.
 */
export const richSuffix: fc.Arbitrary<ReadonlyArray<TopIntent>> = fc.tuple(
  headerIntent,
  fc.tuple(userIntent, userIntent),
  answerIntent,
  fc.tuple(toolIntent, toolIntent),
  pruneIntent,
  compactionIntent(2)
).map(([header, [u, c], answer, [t1, t2], prune, compaction]): ReadonlyArray<TopIntent> => [
  {
    _tag: "turn",
    open: false,
    reason: { kind: "completed" },
    steps: [{
      pre: [],
      users: [{ ...u, kind: "user" }, { ...c, kind: "context" }],
      noise: [],
      header,
      requestContext: true,
      failedAttempt: null,
      answer,
      tools: [t1, t2]
    }]
  },
  prune,
  compaction
])

/** Intents of a log: random top-level intents, optionally followed by the rich suffix. */
export const logIntents = (options: { readonly rich?: boolean; readonly maxTurns?: number } = {}) =>
  fc.tuple(
    fc.array(topIntent, { maxLength: options.maxTurns ?? 6 }),
    options.rich === true ? richSuffix : fc.constant([] as ReadonlyArray<TopIntent>),
    fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 })
  ).map(([intents, suffix, t0]) => ({ intents: [...intents, ...suffix], t0 }))

/** A random valid log (with the rich suffix when `rich`). */
export const validLog = (options: { readonly rich?: boolean; readonly maxTurns?: number } = {}): fc.Arbitrary<BuiltLog> =>
  logIntents(options).map(({ intents, t0 }) => buildLog(intents, t0))

/** Valid logs, half of them with the rich suffix. */
export const anyValidLog: fc.Arbitrary<BuiltLog> = fc.oneof(validLog(), validLog({ rich: true }))

// ---------------------------------------------------------------------------------------------
// The builder

/** The exact pruner marker (SPEC §9.6). */
export const PRUNE_MARKER = "\n\n[... middle of this tool result was pruned ...]\n\n"

const clone = <A>(a: A): A => JSON.parse(JSON.stringify(a)) as A

class Builder {
  readonly events: Array<LogEvent> = []
  readonly nodesBefore: Array<ReadonlyArray<number>> = []
  readonly roles: Array<Role> = []
  readonly anchors: Array<number | undefined> = []
  readonly nodes: Array<number> = []
  replacements = 0
  private ids = 0
  private turn = 0
  private headers = 0
  private compactions = 0

  constructor(private readonly t0: number) {}

  id(prefix: string): string {
    return `${prefix}${++this.ids}`
  }

  emit(
    type: string,
    data: unknown,
    extra: {
      readonly surfaceOp?: "append" | { op: "replace"; start: number; end: number }
      readonly sourceEventSeqs?: Array<number>
      readonly ignorable?: true
      readonly role?: Role
      readonly anchor?: number
    } = {}
  ): number {
    const seq = this.events.length
    this.nodesBefore.push(this.nodes.slice())
    // keys in SPEC §1.1 order
    const e: LogEvent = { type, seq, time: this.t0 + seq * 7, data }
    if (extra.sourceEventSeqs !== undefined) e.sourceEventSeqs = extra.sourceEventSeqs
    if (extra.surfaceOp !== undefined) e.surfaceOp = extra.surfaceOp
    if (extra.ignorable === true) e.ignorable = true
    this.events.push(e)
    this.roles.push(extra.role ?? "plain")
    this.anchors.push(extra.anchor)
    const op = extra.surfaceOp
    if (op === "append") this.nodes.push(seq)
    else if (op !== undefined) {
      const s = this.nodes.indexOf(op.start)
      const en = this.nodes.indexOf(op.end)
      if (s < 0 || en < s) throw new Error(`generator bug: bad replace ${op.start}..${op.end} on [${this.nodes}]`)
      this.nodes.splice(s, en - s + 1, seq)
      this.replacements++
    }
    return seq
  }

  header(h: HeaderIntent, reasonOverride?: "initial"): void {
    const config: Record<string, unknown> = { provider: h.provider, model: h.model }
    if (h.reasoningEffort !== null) config.reasoningEffort = h.reasoningEffort
    if (h.maxTokens !== null) config.maxTokens = h.maxTokens
    const header: Record<string, unknown> = { config }
    if (h.maxTokens !== null && h.adapterMaxTokens) header.adapterDefaults = { maxTokens: true }
    if (h.system !== null) header.system = h.system
    if (h.tools) {
      header.tools = [{
        name: "read_file",
        description: "Read a file",
        parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] }
      }]
    }
    const reason = reasonOverride ?? (this.headers === 0 ? "initial" : h.reason)
    this.headers++
    this.emit("request/header", { header, reason })
  }

  noise(n: NoiseIntent): void {
    switch (n.kind) {
      case "todo":
        this.emit("todo/write", {
          todos: [{ content: n.text, status: "in_progress" }, { content: "ship", status: "pending" }]
        })
        return
      case "plugin":
        this.emit("plugin/title", { title: n.text }, { ignorable: true })
        return
      case "pluginNull":
        this.emit("plugin/heartbeat", null, { ignorable: true })
        return
      case "requestContext":
        this.emit("request/context", { provider: n.header.provider, model: n.header.model, contextWindow: 200000 })
        return
      case "endSeed":
        this.emit("session/end-seed", {})
        return
      case "header":
        this.header(n.header)
        return
    }
  }

  user(u: UserIntent): void {
    const content = u.texts.map((t) => ({ type: "text", text: t }))
    if (u.kind === "context") {
      const data: Record<string, unknown> = {
        id: this.id("ctx"),
        role: "user",
        content,
        source: { kind: "plugin", plugin: "git-status", form: "snapshot" }
      }
      if (u.meta) data.meta = { hidden: true, lines: [1, 2] }
      this.emit("context/message", data, { surfaceOp: "append" })
      return
    }
    const source = u.kind === "user" ? { kind: "user" } : { kind: "plugin", plugin: "reminder", form: "notice" }
    this.emit("user/message", { id: this.id("u"), role: "user", content, source }, { surfaceOp: "append" })
  }

  compaction(c: CompactionIntent, owner: number | null): void {
    const n = this.nodes.length
    if (n === 0) return
    const compactionId = `cmp-${++this.compactions}`
    const startSeq = this.emit("compaction/start", { compactionId, turn: owner })
    if (c.failed) {
      this.emit("compaction/end", { compactionId, turn: owner, error: "summary not smaller" })
      return
    }
    let s = c.at % n
    const span = Math.min(n, c.minSpan)
    if (n - s < span) s = n - span
    const e = s + span - 1 + (c.len % (n - s - span + 1))
    const shadowed = this.nodes.slice(s, e + 1)
    const start = this.nodes[s]
    const end = this.nodes[e]
    const summarySeq = this.emit("compaction/summary", {
      compactionId,
      summary: [{ type: "text", text: c.summary }],
      shadowedRange: { start, end },
      shadowedSeqs: shadowed,
      shadowedTokenCount: 10 * shadowed.length + 10,
      provider: "deterministic",
      model: "summary-v1"
    })
    this.emit("user/message", {
      id: this.id("ck"),
      role: "user",
      content: [
        { type: "text", text: "checkpoint\n\n<compacted-summary>" },
        { type: "text", text: c.summary },
        { type: "text", text: "</compacted-summary>" }
      ],
      source: { kind: "plugin", plugin: "compact", compactionId }
    }, {
      surfaceOp: { op: "replace", start, end },
      sourceEventSeqs: [startSeq, summarySeq, ...shadowed],
      role: "compaction-replace",
      anchor: startSeq
    })
    this.emit("compaction/end", { compactionId, turn: owner })
  }

  prune(p: PruneIntent): void {
    const results = this.nodes.filter((s) => this.events[s].type === "tool/result")
    if (results.length === 0) return
    const target = results[p.pick % results.length]
    const original = this.events[target].data
    const pruneSeq = this.emit("compaction/prune", {
      shadowedRange: { start: target, end: target },
      shadowedSeqs: [target],
      shadowedTokenCount: 100
    })
    const data = clone(original)
    data.message.content[0].content = [{ type: "text", text: `${p.kept}${PRUNE_MARKER}${p.kept}` }]
    this.emit("tool/result", data, {
      surfaceOp: { op: "replace", start: target, end: target },
      sourceEventSeqs: [target],
      role: "prune-replace",
      anchor: pruneSeq
    })
  }

  chunk(turn: number, step: number, chunk: Record<string, unknown>): number {
    return this.emit("assistant/chunk", { turn, step, chunk })
  }

  step(s: StepIntent, turn: number, step: number): void {
    for (const pre of s.pre) {
      if (pre._tag === "compaction") this.compaction(pre, turn)
      else this.prune(pre)
    }
    this.emit("step/start", { turn, step })
    for (const u of s.users) this.user(u)
    for (const n of s.noise) this.noise(n)
    if (s.header !== null) this.header(s.header)
    if (s.requestContext) {
      this.emit("request/context", { provider: s.header?.provider ?? "anthropic", model: "m-small" })
    }
    if (s.failedAttempt !== null) {
      s.failedAttempt.forEach((t, index) => this.chunk(turn, step, { type: "text-delta", index, text: t }))
      const retryId = this.id("retry")
      const failure = { message: "overloaded", code: "OVERLOADED", status: 529 }
      this.emit("llm/retry", {
        retryId,
        turn,
        step,
        provider: "anthropic",
        mode: "normal",
        policyKey: "overloaded",
        retry: 1,
        maxRetries: 3,
        delayMs: 500,
        failure
      })
      this.emit("llm/retry-started", { retryId, turn, step, retry: 1 })
    }
    // the successful attempt: chunks, then the assistant message citing exactly them
    const a = s.answer
    const chunkSeqs: Array<number> = []
    const content: Array<Record<string, unknown>> = []
    const calls = s.tools.map((t) => ({ ...t, callId: this.id("call_") }))
    const emptyAndBare = a.reasoning === null && a.texts.length === 0 && calls.length === 0 && a.bare
    if (!emptyAndBare) {
      let index = 0
      const block = (b: Record<string, unknown>, deltas: () => void) => {
        chunkSeqs.push(this.chunk(turn, step, { type: "block-start", index, blockType: b.type }))
        deltas()
        chunkSeqs.push(this.chunk(turn, step, { type: "block-end", index, block: b }))
        content.push(b)
        index++
      }
      if (a.reasoning !== null) {
        const r = a.reasoning
        block({ type: "reasoning", text: r }, () => {
          chunkSeqs.push(this.chunk(turn, step, { type: "reasoning-delta", index, text: r }))
        })
      }
      for (const pieces of a.texts) {
        block({ type: "text", text: pieces.join("") }, () => {
          for (const p of pieces) chunkSeqs.push(this.chunk(turn, step, { type: "text-delta", index, text: p }))
        })
      }
      for (const c of calls) {
        block({ type: "tool-call", id: c.callId, name: c.name, arguments: c.args }, () => {
          chunkSeqs.push(this.chunk(turn, step, {
            type: "tool-call-delta",
            index,
            id: c.callId,
            name: c.name,
            argumentsDelta: c.args
          }))
        })
      }
      if (a.usage) {
        chunkSeqs.push(this.chunk(turn, step, { type: "usage", usage: { inputTokens: 120, outputTokens: 30 } }))
      }
      chunkSeqs.push(this.chunk(turn, step, {
        type: "finish",
        reason: { kind: calls.length > 0 ? "tool-calls" : content.length === 0 ? "max-tokens" : "stop" }
      }))
    }
    const assistant: Record<string, unknown> = {
      turn,
      step,
      message: {
        id: this.id("a"),
        role: "assistant",
        content,
        source: { kind: "model", provider: "anthropic", model: "m-small" }
      }
    }
    if (a.usage) assistant.usage = { inputTokens: 120, outputTokens: 30, cacheReadTokens: 4 }
    this.emit("assistant/message", assistant, { surfaceOp: "append", sourceEventSeqs: chunkSeqs })
    for (const c of calls) {
      const callSeq = this.emit("tool/call", { turn, step, callId: c.callId, name: c.name, arguments: c.args })
      const block: Record<string, unknown> = {
        type: "tool-result",
        toolCallId: c.callId,
        content: [{ type: "text", text: c.aborted ? "aborted" : c.output }]
      }
      if (c.isError || c.aborted) block.isError = true
      const data: Record<string, unknown> = {
        turn,
        step,
        message: { id: this.id("r"), role: "user", content: [block], source: { kind: "tool", callId: c.callId } }
      }
      if (c.aborted) data.error = { name: "Aborted", code: "ABORTED_BEFORE_DISPATCH" }
      else if (c.isError) data.error = { name: "ToolError", code: "ENOENT" }
      if (c.meta) data.meta = { display: c.output, exitCode: 0 }
      this.emit("tool/result", data, { surfaceOp: "append", sourceEventSeqs: [callSeq] })
    }
    this.emit("step/end", { turn, step })
  }

  turnIntent(t: TurnIntent, last: boolean): void {
    const turn = ++this.turn
    this.emit("turn/start", { turn })
    t.steps.forEach((s, k) => this.step(s, turn, k + 1))
    if (!(last && t.open)) this.emit("turn/end", { turn, reason: t.reason })
  }

  top(i: TopIntent, last: boolean): void {
    switch (i._tag) {
      case "turn":
        return this.turnIntent(i, last)
      case "compaction":
        return this.compaction(i, null)
      case "prune":
        return this.prune(i)
      case "noise":
        return this.noise(i)
    }
  }

  /** SPEC §4.6 projection, written independently of src. */
  projection(seq: number): unknown {
    const e = this.events[seq]
    switch (e.type) {
      case "user/message":
        return e.data
      case "context/message":
        return { id: e.data.id, role: "user", content: e.data.content, source: e.data.source }
      case "assistant/message":
        return e.data.message.content.length === 0 ? undefined : e.data.message
      case "tool/result":
        return e.data.message
      default:
        return undefined
    }
  }
}

/** Build the events of a list of intents, knowing the surface as it goes. */
export const buildLog = (intents: ReadonlyArray<TopIntent>, t0 = 1_700_000_000_000): BuiltLog => {
  const b = new Builder(t0)
  intents.forEach((i, k) => b.top(i, k === intents.length - 1))
  const messages = b.nodes.map((s) => b.projection(s)).filter((m) => m !== undefined)
  return {
    events: b.events,
    nodes: b.nodes,
    nodesBefore: b.nodesBefore,
    replacements: b.replacements,
    roles: b.roles,
    anchors: b.anchors,
    messages: clone(messages)
  }
}

/** The envelope options `appendUnknown` takes for a generated event (only defined keys). */
export const appendOptions = (
  e: LogEvent | Event
): { surfaceOp?: unknown; sourceEventSeqs?: unknown; ignorable?: unknown } => {
  const o: { surfaceOp?: unknown; sourceEventSeqs?: unknown; ignorable?: unknown } = {}
  if (e.surfaceOp !== undefined) o.surfaceOp = e.surfaceOp
  if (e.sourceEventSeqs !== undefined) o.sourceEventSeqs = e.sourceEventSeqs
  if (e.ignorable !== undefined) o.ignorable = e.ignorable
  return o
}

/** View generated records as events (they are envelopes in §1.1 key order). */
export const asEvents = (events: ReadonlyArray<LogEvent>): ReadonlyArray<Event> =>
  events as unknown as ReadonlyArray<Event>

// ---------------------------------------------------------------------------------------------
// Inserting log-only events

/** A log-only event to insert before original index `at` (modulo length + 1). */
export interface Insertion {
  readonly at: number
  readonly type: string
  readonly data: unknown
  readonly ignorable: boolean
}

/** Log-only insertions of every kind (known log-only types and ignorable plugin events). */
export const insertion: fc.Arbitrary<Insertion> = fc.record({
  at: fc.nat(),
  kind: fc.constantFrom("todo", "ctx", "header", "plugin", "chunk", "endSeed", "call", "retry")
}).chain(({ at, kind }) =>
  text.map((t): Insertion => {
    switch (kind) {
      case "todo":
        return { at, type: "todo/write", data: { todos: [{ content: t, status: "completed" }] }, ignorable: false }
      case "ctx":
        return { at, type: "request/context", data: { provider: "openai", model: "m-large" }, ignorable: false }
      case "header":
        return {
          at,
          type: "request/header",
          data: { header: { config: { provider: "openai", model: "m-large" }, system: t }, reason: "change" },
          ignorable: false
        }
      case "plugin":
        return { at, type: "plugin/note", data: { note: t }, ignorable: true }
      case "chunk":
        return { at, type: "assistant/chunk", data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: t } }, ignorable: false }
      case "endSeed":
        return { at, type: "session/end-seed", data: {}, ignorable: false }
      case "call":
        return { at, type: "tool/call", data: { turn: 1, step: 1, callId: "x", name: "bash", arguments: t }, ignorable: false }
      default:
        return { at, type: "llm/retry-started", data: { retryId: t, turn: 1, step: 1, retry: 2 }, ignorable: false }
    }
  })
)

/**
 * Insert log-only events, renumbering seqs and every seq reference: `sourceEventSeqs`,
 * replace endpoints, and the shadow records of `compaction/summary` / `compaction/prune`.
 * Returns the new log and the old→new seq map.
 */
export const insertLogOnly = (
  events: ReadonlyArray<LogEvent>,
  inserts: ReadonlyArray<Insertion>
): { readonly events: Array<LogEvent>; readonly remap: (seq: number) => number } => {
  const n = events.length
  const before: Array<Array<Insertion>> = Array.from({ length: n + 1 }, () => [])
  for (const ins of inserts) before[ins.at % (n + 1)].push(ins)
  const newSeq: Array<number> = []
  let shift = 0
  for (let i = 0; i < n; i++) {
    shift += before[i].length
    newSeq.push(i + shift)
  }
  const remap = (s: number) => newSeq[s]
  const out: Array<LogEvent> = []
  const push = (e: LogEvent) => {
    e.seq = out.length
    out.push(e)
  }
  const time = (i: number) => (i < n ? events[i].time : n === 0 ? 0 : events[n - 1].time)
  for (let i = 0; i <= n; i++) {
    for (const ins of before[i]) {
      const e: LogEvent = { type: ins.type, seq: 0, time: time(i), data: clone(ins.data) }
      if (ins.ignorable) e.ignorable = true
      push(e)
    }
    if (i === n) break
    const e = clone(events[i])
    if (e.sourceEventSeqs !== undefined) e.sourceEventSeqs = e.sourceEventSeqs.map(remap)
    const op = e.surfaceOp as { start: number; end: number } | "append" | undefined
    if (typeof op === "object") e.surfaceOp = { op: "replace", start: remap(op.start), end: remap(op.end) }
    if (e.type === "compaction/summary" || e.type === "compaction/prune") {
      e.data.shadowedRange = { start: remap(e.data.shadowedRange.start), end: remap(e.data.shadowedRange.end) }
      e.data.shadowedSeqs = e.data.shadowedSeqs.map(remap)
    }
    push(e)
  }
  return { events: out, remap }
}

// ---------------------------------------------------------------------------------------------
// Single mutations

/** A log broken in exactly one place, with the error it must produce. */
export interface Mutation {
  readonly name: string
  readonly tag: string
  readonly rule: string
  /** The index (= seq) of the offending record. */
  readonly seq: number
  /** The rule `foldSurface` reports, when the fold checks it (C1 is C2 there). */
  readonly foldRule: string | undefined
  /** F4: the uncovered shadowed seqs, in surface order. */
  readonly missing?: ReadonlyArray<number>
  /** True when only `events[seq]` differs from the valid log (so the same event can be appended). */
  readonly inPlace: boolean
  readonly events: ReadonlyArray<LogEvent>
  readonly original: BuiltLog
}

interface Extra {
  readonly missing?: ReadonlyArray<number>
  readonly drop?: boolean
}

type Candidate = { readonly i: number; readonly apply: (e: LogEvent, v: number) => Extra | void }

/** One mutation kind: which events it can break and how. */
export interface MutationKind {
  readonly name: string
  readonly tag: string
  readonly rule: string
  readonly fold: boolean
  readonly candidates: (log: BuiltLog) => ReadonlyArray<Candidate>
}

const isSurface = (e: LogEvent) =>
  e.type === "user/message" || e.type === "assistant/message" || e.type === "tool/result" ||
  e.type === "context/message"

const each = (log: BuiltLog, pred: (e: LogEvent, i: number) => boolean, apply: Candidate["apply"]) =>
  log.events.flatMap((e, i) => (pred(e, i) ? [{ i, apply }] : []))

const replaceOf = (e: LogEvent) => e.surfaceOp as { op: "replace"; start: number; end: number }

/** Every mutation kind (rule ids of SPEC §3.4). */
export const MUTATION_KINDS: ReadonlyArray<MutationKind> = [
  {
    name: "surface event without surfaceOp",
    tag: "SurfaceMarkerInvalid",
    rule: "D3",
    fold: true,
    candidates: (log) => each(log, isSurface, (e) => void delete e.surfaceOp)
  },
  {
    name: "surfaceOp on a log-only event",
    tag: "SurfaceMarkerInvalid",
    rule: "D1",
    fold: true,
    candidates: (log) =>
      each(log, (e) => !isSurface(e), (e, v) => {
        e.surfaceOp = v % 2 === 0 ? "append" : { op: "replace", start: 0, end: 0 }
      })
  },
  {
    name: "sourceEventSeqs on a log-only event",
    tag: "SurfaceMarkerInvalid",
    rule: "D2",
    fold: true,
    candidates: (log) => each(log, (e) => !isSurface(e), (e) => void (e.sourceEventSeqs = [0]))
  },
  {
    name: "surfaceOp neither append nor a replace object",
    tag: "SurfaceMarkerInvalid",
    rule: "D4",
    fold: true,
    candidates: (log) =>
      each(log, isSurface, (e, v) => {
        e.surfaceOp = ["prepend", null, 1, true, ["append"]][v % 5]
      })
  },
  {
    name: "replace marker with an extra key or a bad endpoint",
    tag: "SurfaceMarkerInvalid",
    rule: "D5",
    fold: true,
    candidates: (log) =>
      each(log, (_, i) => log.roles[i] !== "plain", (e, v) => {
        const op = replaceOf(e)
        e.surfaceOp = [
          { ...op, note: "x" },
          { op: "replace", start: op.start },
          { op: "splice", start: op.start, end: op.end },
          { op: "replace", start: -1, end: op.end },
          { op: "replace", start: op.start, end: 1.5 }
        ][v % 5]
      })
  },
  {
    name: "empty sourceEventSeqs on a non-assistant surface event",
    tag: "ProvenanceInvalid",
    rule: "E2",
    fold: true,
    candidates: (log) =>
      each(log, (e) => isSurface(e) && e.type !== "assistant/message", (e) => void (e.sourceEventSeqs = []))
  },
  {
    name: "duplicate citation",
    tag: "ProvenanceInvalid",
    rule: "E5",
    fold: true,
    candidates: (log) =>
      each(log, (e) => isSurface(e) && (e.sourceEventSeqs?.length ?? 0) > 0, (e, v) => {
        const list = e.sourceEventSeqs!
        list.push(list[v % list.length])
      })
  },
  {
    name: "forward or self citation",
    tag: "ProvenanceInvalid",
    rule: "E6",
    fold: true,
    candidates: (log) =>
      each(log, isSurface, (e, v) => {
        e.sourceEventSeqs = [...(e.sourceEventSeqs ?? []), e.seq + (v % 3)]
      })
  },
  {
    name: "replace start not on the surface",
    tag: "ReplaceRangeInvalid",
    rule: "F1",
    fold: true,
    candidates: (log) =>
      each(log, (_, i) => log.roles[i] !== "plain", (e, v) => {
        const op = replaceOf(e)
        // log-only seqs, shadowed seqs and seqs not yet in the log are all off the surface
        const shadowedEarlier = log.events.slice(0, e.seq).map((x) => x.seq).filter((s) =>
          isSurface(log.events[s]) && !log.nodesBefore[e.seq].includes(s)
        )
        const choices = [log.anchors[e.seq]!, e.seq, e.seq + 5, ...shadowedEarlier]
        e.surfaceOp = { op: "replace", start: choices[v % choices.length], end: op.end }
      })
  },
  {
    name: "replace end not on the surface",
    tag: "ReplaceRangeInvalid",
    rule: "F2",
    fold: true,
    candidates: (log) =>
      each(log, (_, i) => log.roles[i] !== "plain", (e, v) => {
        const op = replaceOf(e)
        const choices = [log.anchors[e.seq]!, e.seq, e.seq + 1]
        e.surfaceOp = { op: "replace", start: op.start, end: choices[v % choices.length] }
      })
  },
  {
    name: "replace start positioned after end",
    tag: "ReplaceRangeInvalid",
    rule: "F3",
    fold: true,
    candidates: (log) =>
      each(log, (e, i) => {
        if (log.roles[i] === "plain") return false
        const nodes = log.nodesBefore[i]
        const op = replaceOf(e)
        return nodes.indexOf(op.start) > 0 || nodes.indexOf(op.end) > nodes.indexOf(op.start)
      }, (e) => {
        const nodes = log.nodesBefore[e.seq]
        const op = replaceOf(e)
        const s = nodes.indexOf(op.start)
        e.surfaceOp = nodes.indexOf(op.end) > s
          ? { op: "replace", start: op.end, end: op.start }
          : { op: "replace", start: op.start, end: nodes[s - 1] }
      })
  },
  {
    name: "sourceEventSeqs missing a shadowed node",
    tag: "ReplaceRangeInvalid",
    rule: "F4",
    fold: true,
    candidates: (log) =>
      each(log, (_, i) => log.roles[i] !== "plain", (e, v) => {
        const nodes = log.nodesBefore[e.seq]
        const op = replaceOf(e)
        const shadowed = nodes.slice(nodes.indexOf(op.start), nodes.indexOf(op.end) + 1)
        if (v % 3 === 0) {
          delete e.sourceEventSeqs
          return { missing: shadowed }
        }
        if (log.roles[e.seq] === "prune-replace") {
          // [] would be E2: cite the compaction/prune marker instead of the shadowed result
          e.sourceEventSeqs = [log.anchors[e.seq]!]
          return { missing: shadowed }
        }
        const drop = shadowed[v % shadowed.length]
        e.sourceEventSeqs = e.sourceEventSeqs!.filter((s) => s !== drop)
        return { missing: [drop] }
      })
  },
  {
    name: "tool/result rewrite spanning two nodes",
    tag: "ToolResultRewriteInvalid",
    rule: "G1",
    fold: true,
    candidates: (log) =>
      each(log, (_, i) => log.roles[i] === "prune-replace" && log.nodesBefore[i].length > 1, (e) => {
        const nodes = log.nodesBefore[e.seq]
        const t = nodes.indexOf(replaceOf(e).start)
        const other = t + 1 < nodes.length ? nodes[t + 1] : nodes[t - 1]
        e.surfaceOp = t + 1 < nodes.length
          ? { op: "replace", start: nodes[t], end: other }
          : { op: "replace", start: other, end: nodes[t] }
        e.sourceEventSeqs = [...e.sourceEventSeqs!, other]
      })
  },
  {
    name: "tool/result rewrite of a node that is not a tool/result",
    tag: "ToolResultRewriteInvalid",
    rule: "G2",
    fold: true,
    candidates: (log) =>
      each(
        log,
        (_, i) =>
          log.roles[i] === "prune-replace" && log.nodesBefore[i].some((s) => log.events[s].type !== "tool/result"),
        (e, v) => {
          const others = log.nodesBefore[e.seq].filter((s) => log.events[s].type !== "tool/result")
          const x = others[v % others.length]
          e.surfaceOp = { op: "replace", start: x, end: x }
          e.sourceEventSeqs = [x]
        }
      )
  },
  {
    name: "tool/result rewrite changing more than content",
    tag: "ToolResultRewriteInvalid",
    rule: "G3",
    fold: true,
    candidates: (log) =>
      each(log, (_, i) => log.roles[i] === "prune-replace", (e, v) => {
        switch (v % 7) {
          case 0:
            e.data.turn += 1
            return
          case 1:
            e.data.step += 1
            return
          case 2:
            e.data.message.id += "-v2"
            return
          case 3:
            e.data.meta = { ...(e.data.meta ?? {}), extra: [1] }
            return
          case 4:
            e.data.error = e.data.error === undefined ? { name: "X", code: "Y" } : { ...e.data.error, code: "Z" }
            return
          case 5:
            e.data.message.content[0].isError = e.data.message.content[0].isError !== true
            return
          default:
            e.data.extra = null
        }
      })
  },
  {
    name: "message without an id (user/context)",
    tag: "MessageShapeInvalid",
    rule: "H1",
    fold: false,
    candidates: (log) =>
      each(log, (e) => e.type === "user/message" || e.type === "context/message", (e, v) => {
        if (v % 2 === 0) delete e.data.id
        else e.data.id = ""
      })
  },
  {
    name: "message without an id (assistant/tool)",
    tag: "MessageShapeInvalid",
    rule: "H2",
    fold: false,
    candidates: (log) =>
      each(log, (e) => e.type === "assistant/message" || e.type === "tool/result", (e, v) => {
        if (v % 2 === 0) delete e.data.message.id
        else e.data.message.id = ""
      })
  },
  {
    name: "context/message with a user source",
    tag: "MessageShapeInvalid",
    rule: "H11",
    fold: false,
    candidates: (log) => each(log, (e) => e.type === "context/message", (e) => void (e.data.source = { kind: "user" }))
  },
  {
    name: "request header without provider or model",
    tag: "RequestHeaderInvalid",
    rule: "I1",
    fold: false,
    candidates: (log) =>
      each(log, (e) => e.type === "request/header", (e, v) => {
        switch (v % 4) {
          case 0:
            delete e.data.header.config.provider
            return
          case 1:
            e.data.header.config.model = ""
            return
          case 2:
            delete e.data.header.config
            return
          default:
            e.data.header = null
        }
      })
  },
  {
    name: "seq gap",
    tag: "SeqNotContiguous",
    rule: "C1",
    fold: true,
    candidates: (log) =>
      log.events.length < 2 ? [] : each(log, (_, i) => i < log.events.length - 1, (e, v) => {
        if (v % 2 === 0) return { drop: true }
        e.seq = e.seq + 1 + (v % 3)
      })
  }
]

/** Apply one mutation kind to a built log; undefined when the log has no candidate. */
export const mutate = (log: BuiltLog, kind: MutationKind, pick: number, variant: number): Mutation | undefined => {
  const cands = kind.candidates(log)
  if (cands.length === 0) return undefined
  const c = cands[pick % cands.length]
  const events = clone(log.events) as Array<LogEvent>
  const extra: Extra = c.apply(events[c.i], variant) ?? {}
  let inPlace = kind.rule !== "C1"
  if (extra.drop === true) {
    events.splice(c.i, 1)
    inPlace = false
  }
  return {
    name: kind.name,
    tag: kind.tag,
    rule: kind.rule,
    seq: c.i,
    foldRule: kind.fold ? (kind.rule === "C1" ? "C2" : kind.rule) : undefined,
    ...(extra.missing === undefined ? {} : { missing: extra.missing }),
    inPlace,
    events,
    original: log
  }
}

/** Single mutations of one kind over rich random logs. */
export const mutationOf = (kind: MutationKind): fc.Arbitrary<Mutation> =>
  fc.tuple(validLog({ rich: true, maxTurns: 4 }), fc.nat(), fc.nat())
    .map(([log, pick, variant]) => mutate(log, kind, pick, variant))
    .filter((m): m is Mutation => m !== undefined)

/** Single mutations of any kind. */
export const mutation: fc.Arbitrary<Mutation> = fc.constantFrom(...MUTATION_KINDS).chain(mutationOf)
