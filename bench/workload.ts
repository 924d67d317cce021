/**
 * The deterministic workload of issue 16 (`bench:core`, `bench:size`): an agent session of 658
 * turns and about 100,000 events, 92 % of them streamed `assistant/chunk`s, a compaction every 25
 * turns, realistic payload sizes (deltas of a few tokens, tool results of a few KiB, an 8 KiB
 * request header). Seeded PRNG only: the same options give the same events, byte for byte.
 */
import type { AppendOptions } from "../src/schema/Events.js"

/** One append of the workload: `session.appendUnknown(type, data, options)`. */
export interface WorkloadEvent {
  readonly type: string
  readonly data: unknown
  readonly options?: AppendOptions
  /** Milliseconds since the previous event (a clock for stores, never read by the append). */
  readonly dtMs: number
}

/** The knobs of the generator (defaults: the workload). */
export interface WorkloadOptions {
  readonly turns?: number
  readonly seed?: number
  readonly compactEvery?: number
  /** Stop after this many events (default: all events of `turns` turns). */
  readonly maxEvents?: number
}

export const DEFAULT_TURNS = 658
export const DEFAULT_SEED = 0x5e55_1016

/** sfc32: a small, fast, seeded PRNG with a 128-bit state. */
export const makeRandom = (seed: number): () => number => {
  let a = 0x9e37_79b9
  let b = 0x243f_6a88
  let c = 0xb7e1_5162
  let d = seed >>> 0
  const next = () => {
    const t = (((a + b) | 0) + d) | 0
    d = (d + 1) | 0
    a = b ^ (b >>> 9)
    b = (c + (c << 3)) | 0
    c = (c << 21) | (c >>> 11)
    c = (c + t) | 0
    return (t >>> 0) / 0x1_0000_0000
  }
  for (let i = 0; i < 12; i++) next()
  return next
}

const WORDS = (
  "the a of to in and is that for it with as on this be are we file function value type " +
  "returns error test module import export const let await async Effect Layer Session append " +
  "event log store seq surface message tool result call chunk stream model request header " +
  "now then next first check read write update fix change src/index.ts src/layers/Store.ts " +
  "README.md package.json line lines config option default path name id data should would " +
  "can will not but if when which this because so also only each every after before into"
).split(" ")

const CODE = [
  "import * as Effect from \"effect/Effect\"",
  "export const make = (options: Options) =>",
  "  Effect.gen(function*() {",
  "    const store = yield* SessionStore",
  "    if (events.length === 0) return Effect.void",
  "    for (const event of events) log.push(event)",
  "  })",
  "// the expected seq is checked under the lock",
  "const seq = log.length",
  "return yield* new AppendConflict({ rule: \"C5\", expectedSeq, storedSeq })",
  "}",
  "  readonly maxEventBytes?: number",
  "describe(\"append\", () => {",
  "  it.effect(\"rejects a stale seq\", () =>"
]

const TOOLS = ["read_file", "grep", "run_tests", "edit_file", "list_dir"] as const

/** The tool definitions of the request header (JSON Schema parameters, as providers take them). */
const toolDefinitions = TOOLS.map((name) => ({
  name,
  description: `${name.replace("_", " ")}: ` +
    "operates on the workspace of the session and returns its output as text; paths are relative " +
    "to the repository root, and large outputs are truncated to the configured limit.",
  parameters: {
    type: "object",
    properties: {
      path: { type: "string", description: "a path relative to the repository root" },
      pattern: { type: "string", description: "a regular expression (grep) or a glob (list_dir)" },
      limit: { type: "integer", minimum: 1, maximum: 10_000, description: "most lines or matches" }
    },
    required: ["path"],
    additionalProperties: false
  }
}))

/**
 * The events of the workload in append order. Each step streams an optional reasoning block, a
 * text block and (before the last step) 1–2 tool calls as chunks, then the `assistant/message`
 * citing exactly those chunks, then each `tool/call` and its `tool/result`. A compaction after
 * every `compactEvery` turns replaces all surface nodes but the last six with a summary message,
 * then the next request writes a `request/header` with reason `series` (SPEC R5).
 */
export function* workload(options: WorkloadOptions = {}): Generator<WorkloadEvent> {
  const turns = options.turns ?? DEFAULT_TURNS
  const compactEvery = options.compactEvery ?? 25
  const maxEvents = options.maxEvents ?? Number.POSITIVE_INFINITY
  const rnd = makeRandom(options.seed ?? DEFAULT_SEED)
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1))
  const pick = <A>(xs: ReadonlyArray<A>): A => xs[Math.floor(rnd() * xs.length)]
  // strings are built by `join`, so each is a fresh flat string like one from JSON.parse
  /** `k` words, each after a space (a streamed delta: " the file we"). */
  const delta = (k: number) => {
    const out: Array<string> = [""]
    for (let i = 0; i < k; i++) out.push(pick(WORDS))
    return out.join(" ")
  }
  /** Prose of about `chars` characters: sentences of 6–18 words. */
  const sentences = (chars: number) => {
    const out: Array<string> = []
    let n = 0
    while (n < chars) {
      const first = pick(WORDS)
      out.push(first.charAt(0).toUpperCase() + first.slice(1))
      n += first.length
      for (let k = int(5, 17); k > 0; k--) {
        const w = pick(WORDS)
        out.push(w)
        n += w.length + 1
      }
      out[out.length - 1] += "."
      n += 2
    }
    return out.join(" ")
  }
  const codeLines = (lines: number) => {
    const out: Array<string> = []
    for (let i = 0; i < lines; i++) out.push(`${String(i + 1).padStart(4)}  ${pick(CODE)}`)
    return out.join("\n")
  }
  const header = {
    config: { provider: "anthropic", model: "claude-sonnet-4", maxTokens: 16_384, temperature: 0 },
    system: sentences(6_000),
    tools: toolDefinitions
  }
  const model = { kind: "model", provider: "anthropic", model: "claude-sonnet-4" }

  let seq = 0
  let ids = 0
  let headerReason: "initial" | "series" | undefined = "initial"
  const nodes: Array<number> = []
  // the next event's time step; streamed chunks arrive a few ms apart, other events later
  const ev = (type: string, data: unknown, dtMs: number, opts?: AppendOptions): WorkloadEvent => {
    seq++
    return opts === undefined ? { type, data, dtMs } : { type, data, options: opts, dtMs }
  }
  const onSurface = (opts: AppendOptions) => {
    const op = opts.surfaceOp
    if (op === "append") nodes.push(seq)
    else if (typeof op === "object" && op !== null) {
      const { end, start } = op as { readonly start: number; readonly end: number }
      const s = nodes.indexOf(start)
      nodes.splice(s, nodes.indexOf(end) - s + 1, seq)
    }
    return opts
  }
  const stop = () => seq >= maxEvents

  for (let turn = 1; turn <= turns; turn++) {
    yield ev("turn/start", { turn }, int(2_000, 60_000))
    const r = rnd()
    const steps = r < 0.32 ? 1 : r < 0.76 ? 2 : r < 0.94 ? 3 : 4
    for (let step = 1; step <= steps; step++) {
      if (stop()) return
      yield ev("step/start", { turn, step }, 1)
      if (step === 1) {
        const opts = onSurface({ surfaceOp: "append" })
        yield ev("user/message", {
          id: `u-${++ids}`,
          role: "user",
          content: [{ type: "text", text: sentences(int(40, 600)) }],
          source: { kind: "user" }
        }, 1, opts)
      }
      if (headerReason !== undefined) {
        yield ev("request/header", { header, reason: headerReason }, 1)
        if (headerReason === "initial") {
          yield ev("request/context", { provider: "anthropic", model: "claude-sonnet-4", contextWindow: 200_000 }, 0)
        }
        headerReason = undefined
      }
      const chunks: Array<number> = []
      const content: Array<unknown> = []
      const chunk = (c: unknown, dtMs: number) => {
        chunks.push(seq)
        return ev("assistant/chunk", { turn, step, chunk: c }, dtMs)
      }
      let index = 0
      if (rnd() < 0.4) {
        const parts: Array<string> = []
        yield chunk({ type: "block-start", index, blockType: "reasoning" }, int(300, 2_500))
        for (let k = int(8, 30); k > 0; k--) {
          const text = delta(int(2, 7))
          parts.push(text)
          yield chunk({ type: "reasoning-delta", index, text }, int(10, 60))
        }
        const block = { type: "reasoning", text: parts.join("") }
        content.push(block)
        yield chunk({ type: "block-end", index, block }, 1)
        index++
      }
      {
        const parts: Array<string> = []
        yield chunk({ type: "block-start", index, blockType: "text" }, int(200, 1_500))
        for (let k = int(32, 84); k > 0; k--) {
          const text = delta(int(1, 6))
          parts.push(text)
          yield chunk({ type: "text-delta", index, text }, int(10, 60))
        }
        const block = { type: "text", text: parts.join("") }
        content.push(block)
        yield chunk({ type: "block-end", index, block }, 1)
        index++
      }
      const calls: Array<{ readonly id: string; readonly name: string; readonly args: string }> = []
      if (step < steps) {
        for (let c = rnd() < 0.7 ? 1 : 2; c > 0; c--) {
          const id = `toolu_${(++ids).toString(36).padStart(8, "0")}`
          const name = pick(TOOLS)
          const args = JSON.stringify({ path: `src/layers/${pick(WORDS)}.ts`, pattern: pick(WORDS) })
          const pieces = int(2, 6)
          const size = Math.ceil(args.length / pieces)
          yield chunk({ type: "block-start", index, blockType: "tool-call" }, int(50, 400))
          for (let k = 0; k < pieces; k++) {
            const argumentsDelta = args.slice(k * size, (k + 1) * size)
            yield chunk(
              k === 0 ? { type: "tool-call-delta", index, id, name, argumentsDelta } : { type: "tool-call-delta", index, id, argumentsDelta },
              int(10, 60)
            )
          }
          const block = { type: "tool-call", id, name, arguments: args }
          content.push(block)
          yield chunk({ type: "block-end", index, block }, 1)
          calls.push({ id, name, args })
          index++
        }
      }
      const usage = { inputTokens: int(2_000, 60_000), outputTokens: int(50, 1_500), cacheReadTokens: int(0, 50_000) }
      yield chunk({ type: "usage", usage }, 1)
      yield chunk({ type: "finish", reason: { kind: calls.length > 0 ? "tool-calls" : "stop" } }, 0)
      yield ev("assistant/message", {
        turn,
        step,
        message: { id: `msg_${++ids}`, role: "assistant", content, source: model },
        usage
      }, 1, onSurface({ surfaceOp: "append", sourceEventSeqs: chunks }))
      for (const call of calls) {
        const callSeq = seq
        yield ev("tool/call", { turn, step, callId: call.id, name: call.name, arguments: call.args }, 1)
        const output = call.name === "read_file" || call.name === "edit_file"
          ? codeLines(int(10, 120))
          : call.name === "run_tests"
          ? sentences(int(200, 3_000))
          : codeLines(int(2, 30))
        yield ev("tool/result", {
          turn,
          step,
          message: {
            id: `res_${++ids}`,
            role: "user",
            content: [{ type: "tool-result", toolCallId: call.id, content: [{ type: "text", text: output }] }],
            source: { kind: "tool", callId: call.id }
          }
        }, int(20, 3_000), onSurface({ surfaceOp: "append", sourceEventSeqs: [callSeq] }))
      }
      yield ev("step/end", { turn, step }, 1)
    }
    yield ev("turn/end", { turn, reason: { kind: "completed" } }, 1)
    if (stop()) return
    if (turn % compactEvery === 0 && nodes.length > 8) {
      const compactionId = `cmp-${turn}`
      const shadowed = nodes.slice(0, nodes.length - 6)
      const range = { start: shadowed[0], end: shadowed[shadowed.length - 1] }
      const start = seq
      yield ev("compaction/start", { compactionId, turn: null }, 100)
      const summary = seq
      const usage = { inputTokens: int(20_000, 120_000), outputTokens: int(400, 2_000) }
      const text = sentences(int(1_200, 3_000))
      yield ev("compaction/summary", {
        compactionId,
        summary: [{ type: "text", text }],
        shadowedRange: range,
        shadowedSeqs: shadowed,
        shadowedTokenCount: usage.inputTokens,
        provider: "anthropic",
        model: "claude-haiku-4",
        usage
      }, int(5_000, 30_000))
      const opts = onSurface({ surfaceOp: { op: "replace", ...range }, sourceEventSeqs: [...shadowed, start, summary] })
      yield ev("user/message", {
        id: `ck-${++ids}`,
        role: "user",
        content: [{ type: "text", text }],
        source: { kind: "plugin", plugin: "compact", compactionId }
      }, 1, opts)
      yield ev("compaction/end", { compactionId, turn: null }, 1)
      headerReason = "series"
    }
  }
}

/** The whole workload as an array. */
export const buildWorkload = (options: WorkloadOptions = {}): Array<WorkloadEvent> => Array.from(workload(options))

/** Counts of a workload: events, turns, chunk share, compactions. */
export const describeWorkload = (events: Iterable<WorkloadEvent>) => {
  let n = 0
  let chunks = 0
  let turns = 0
  let compactions = 0
  for (const e of events) {
    n++
    if (e.type === "assistant/chunk") chunks++
    else if (e.type === "turn/start") turns++
    else if (e.type === "compaction/summary") compactions++
  }
  return { events: n, turns, chunks, chunkShare: chunks / Math.max(1, n), compactions }
}
