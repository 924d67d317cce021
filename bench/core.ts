/**
 * Core benchmark (`npm run bench:core`): 100,000 realistic events (mostly assistant/chunk text
 * deltas) measured in one run as (i) a JSON copy baseline, (ii) `Session.appendUnknown` on the
 * memory store, (iii) a full `foldSurface` and (iv) message derivation; median of 3 runs after a
 * warm-up, with throughput, the ratio to the baseline and heap figures.
 */
import * as Effect from "effect/Effect"
import { performance } from "node:perf_hooks"
import { pathToFileURL } from "node:url"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { layerMemoryStore } from "../src/layers/MemoryStore.js"
import type { Event } from "../src/schema/Events.js"
import * as Session from "../src/services/Session.js"
import * as SessionLive from "../src/layers/SessionLive.js"
import { deriveEventMessage, foldSurface } from "../src/services/SurfaceManager.js"

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 3)

setFlagsFromString("--expose-gc")
const gc: () => void = runInNewContext("gc")
const heapMiB = () => process.memoryUsage().heapUsed / 1024 / 1024

// ---------------------------------------------------------------------------------------------
// Workload: turns of 1–3 steps; each step streams ~40–80 text chunks, writes the assistant
// message citing its chunks and 0–2 tool calls with results; a compaction every 25 turns.

interface Payload {
  readonly type: string
  readonly data: unknown
  readonly opts: { readonly surfaceOp?: unknown; readonly sourceEventSeqs?: ReadonlyArray<number> }
}

const makeRandom = (seed: number) => () => {
  seed = (seed * 1664525 + 1013904223) >>> 0
  return seed / 0x1_0000_0000
}

const WORDS = ["the", "file", "src/index.ts", "function", "returns", "a", "value", "of", "type", "Effect", "we", "now"]

export const buildWorkload = (n: number): Array<Payload> => {
  const rnd = makeRandom(7)
  const int = (lo: number, hi: number) => lo + Math.floor(rnd() * (hi - lo + 1))
  const words = (k: number) => Array.from({ length: k }, () => WORDS[int(0, WORDS.length - 1)]).join(" ")
  const out: Array<Payload> = []
  const nodes: Array<number> = []
  const push = (type: string, data: unknown, opts: Payload["opts"] = {}): number => {
    const seq = out.length
    out.push({ type, data, opts })
    const op = opts.surfaceOp
    if (op === "append") nodes.push(seq)
    else if (typeof op === "object" && op !== null) {
      const { end, start } = op as { start: number; end: number }
      const s = nodes.indexOf(start)
      nodes.splice(s, nodes.indexOf(end) - s + 1, seq)
    }
    return seq
  }
  let turn = 0
  let ids = 0
  while (out.length < n) {
    turn++
    if (turn % 25 === 0 && nodes.length > 4) {
      const compactionId = `cmp-${turn}`
      const shadowed = nodes.slice(0, Math.floor(nodes.length / 2))
      const start = push("compaction/start", { compactionId, turn: null })
      const summary = push("compaction/summary", {
        compactionId,
        summary: [{ type: "text", text: words(40) }],
        shadowedRange: { start: shadowed[0], end: shadowed[shadowed.length - 1] },
        shadowedSeqs: shadowed,
        shadowedTokenCount: shadowed.length * 50,
        provider: "deterministic",
        model: "summary-v1"
      })
      push("user/message", {
        id: `ck${++ids}`,
        role: "user",
        content: [{ type: "text", text: words(60) }],
        source: { kind: "plugin", plugin: "compact", compactionId }
      }, {
        surfaceOp: { op: "replace", start: shadowed[0], end: shadowed[shadowed.length - 1] },
        sourceEventSeqs: [start, summary, ...shadowed]
      })
      push("compaction/end", { compactionId, turn: null })
    }
    push("turn/start", { turn })
    const steps = int(1, 3)
    for (let step = 1; step <= steps; step++) {
      push("step/start", { turn, step })
      if (step === 1) {
        push("user/message", {
          id: `u${++ids}`,
          role: "user",
          content: [{ type: "text", text: words(int(5, 40)) }],
          source: { kind: "user" }
        }, { surfaceOp: "append" })
      }
      if (turn === 1 && step === 1) {
        push("request/header", {
          header: { config: { provider: "anthropic", model: "m-large", maxTokens: 8192 }, system: words(200) },
          reason: "initial"
        })
      }
      const chunks: Array<number> = []
      const deltas = int(40, 80)
      const pieces: Array<string> = []
      chunks.push(push("assistant/chunk", { turn, step, chunk: { type: "block-start", index: 0, blockType: "text" } }))
      for (let k = 0; k < deltas; k++) {
        const piece = ` ${words(int(1, 6))}`
        pieces.push(piece)
        chunks.push(push("assistant/chunk", { turn, step, chunk: { type: "text-delta", index: 0, text: piece } }))
      }
      const textBlock = { type: "text", text: pieces.join("") }
      chunks.push(push("assistant/chunk", { turn, step, chunk: { type: "block-end", index: 0, block: textBlock } }))
      const calls = step < steps ? int(1, 2) : 0
      const content: Array<unknown> = [textBlock]
      const callIds: Array<string> = []
      for (let c = 0; c < calls; c++) {
        const id = `call_${++ids}`
        callIds.push(id)
        const block = { type: "tool-call", id, name: "read_file", arguments: `{"path":"src/f${c}.ts"}` }
        content.push(block)
        chunks.push(push("assistant/chunk", { turn, step, chunk: { type: "block-end", index: c + 1, block } }))
      }
      chunks.push(push("assistant/chunk", { turn, step, chunk: { type: "usage", usage: { inputTokens: 1000, outputTokens: 200 } } }))
      chunks.push(push("assistant/chunk", { turn, step, chunk: { type: "finish", reason: { kind: calls > 0 ? "tool-calls" : "stop" } } }))
      push("assistant/message", {
        turn,
        step,
        message: {
          id: `a${++ids}`,
          role: "assistant",
          content,
          source: { kind: "model", provider: "anthropic", model: "m-large" }
        },
        usage: { inputTokens: 1000, outputTokens: 200 }
      }, { surfaceOp: "append", sourceEventSeqs: chunks })
      for (const callId of callIds) {
        const call = push("tool/call", { turn, step, callId, name: "read_file", arguments: "{\"path\":\"src/f.ts\"}" })
        push("tool/result", {
          turn,
          step,
          message: {
            id: `r${++ids}`,
            role: "user",
            content: [{ type: "tool-result", toolCallId: callId, content: [{ type: "text", text: words(int(20, 200)) }] }],
            source: { kind: "tool", callId }
          }
        }, { surfaceOp: "append", sourceEventSeqs: [call] })
      }
      push("step/end", { turn, step })
    }
    push("turn/end", { turn, reason: { kind: "completed" } })
  }
  return out.slice(0, n)
}

// ---------------------------------------------------------------------------------------------
// One measured run

interface Figures {
  readonly baselineMs: number
  readonly appendMs: number
  readonly foldMs: number
  readonly deriveMs: number
  readonly messagesMs: number
  readonly baselineHeapMiB: number
  readonly sessionHeapMiB: number
  readonly peakHeapMiB: number
  readonly nodes: number
  readonly messages: number
  readonly replacements: number
}

const envelope = (p: Payload, seq: number, time: number): Record<string, unknown> => {
  const e: Record<string, unknown> = { type: p.type, seq, time, data: p.data }
  if (p.opts.sourceEventSeqs !== undefined) e.sourceEventSeqs = p.opts.sourceEventSeqs
  if (p.opts.surfaceOp !== undefined) e.surfaceOp = p.opts.surfaceOp
  return e
}

const runOnce = (payloads: ReadonlyArray<Payload>): Promise<Figures> => {
  // (i) baseline: detached JSON copies of the same envelopes pushed into an array
  const envelopes = payloads.map((p, i) => envelope(p, i, 1_700_000_000_000 + i))
  gc()
  const heap0 = heapMiB()
  let t = performance.now()
  let copies: Array<unknown> | undefined = []
  for (const e of envelopes) copies.push(JSON.parse(JSON.stringify(e)))
  const baselineMs = performance.now() - t
  gc()
  const baselineHeapMiB = heapMiB() - heap0
  if (copies.length !== envelopes.length) throw new Error("baseline lost copies") // keeps them live until here
  copies = undefined
  gc()

  const program = Effect.gen(function*() {
    const heap1 = heapMiB()
    const s = yield* SessionLive.create({ id: `bench-${Date.now()}` })
    // (ii) appends through the full pipeline (walk, shapes, plan, store, commit)
    const start = performance.now()
    for (const p of payloads) yield* s.appendUnknown(p.type, p.data, p.opts)
    const appendMs = performance.now() - start
    const peakHeapMiB = heapMiB()
    gc()
    const sessionHeapMiB = heapMiB() - heap1
    const events: ReadonlyArray<Event> = yield* s.events

    // (iii) the pure full fold
    gc()
    t = performance.now()
    const folded = foldSurface(events)
    const foldMs = performance.now() - t
    if (!("nodes" in folded)) return yield* Effect.dieMessage(`fold failed: ${folded.message}`)

    // (iv) derived messages from scratch: fold, then project every node
    gc()
    t = performance.now()
    const refold = foldSurface(events)
    const derived: Array<unknown> = []
    if ("nodes" in refold) {
      for (const seq of refold.nodes) {
        const m = deriveEventMessage(events[seq])
        if (m !== undefined) derived.push(m)
      }
    }
    const deriveMs = performance.now() - t

    // the handle's derived messages (first read after the appends: incremental cache fill)
    t = performance.now()
    const msgs = yield* s.messages
    const messagesMs = performance.now() - t
    if (msgs.length !== derived.length) return yield* Effect.dieMessage("handle and fold disagree")
    return {
      baselineMs,
      appendMs,
      foldMs,
      deriveMs,
      messagesMs,
      baselineHeapMiB,
      sessionHeapMiB,
      peakHeapMiB,
      nodes: folded.nodes.length,
      messages: derived.length,
      replacements: folded.replacements.length
    }
  })
  return Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(layerMemoryStore())))
}

const median = (xs: ReadonlyArray<number>) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

const fmt = (x: number, digits = 0) =>
  x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })

const main = async () => {
  const payloads = buildWorkload(EVENTS)
  const counts = new Map<string, number>()
  for (const p of payloads) counts.set(p.type, (counts.get(p.type) ?? 0) + 1)
  const chunkShare = (counts.get("assistant/chunk") ?? 0) / payloads.length
  console.log(`effect-session-log core bench: ${fmt(payloads.length)} events ` +
    `(${fmt(chunkShare * 100, 1)}% assistant/chunk), node ${process.version}, median of ${RUNS} runs after a warm-up`)

  await runOnce(buildWorkload(Math.min(20_000, EVENTS))) // warm-up
  const runs: Array<Figures> = []
  for (let r = 0; r < RUNS; r++) runs.push(await runOnce(payloads))

  const m = (f: (x: Figures) => number) => median(runs.map(f))
  const n = payloads.length
  const baseline = m((x) => x.baselineMs)
  const rows: Array<[string, number]> = [
    ["(i) baseline: JSON copy + push", baseline],
    ["(ii) Session.appendUnknown (memory store)", m((x) => x.appendMs)],
    ["(iii) foldSurface (full log)", m((x) => x.foldMs)],
    ["(iv) derive messages (fold + project)", m((x) => x.deriveMs)]
  ]
  const w = Math.max(...rows.map((r) => r[0].length))
  console.log("")
  console.log(`${"phase".padEnd(w)}  ${"ms".padStart(9)}  ${"events/s".padStart(12)}  ${"vs baseline".padStart(11)}`)
  for (const [name, ms] of rows) {
    const eps = n / (ms / 1000)
    const ratio = baseline / ms
    console.log(
      `${name.padEnd(w)}  ${fmt(ms, 1).padStart(9)}  ${fmt(eps).padStart(12)}  ${`${fmt(ratio, 2)}x`.padStart(11)}`
    )
  }
  const last = runs[runs.length - 1]
  console.log("")
  console.log(`surface: ${fmt(last.nodes)} nodes, ${fmt(last.messages)} messages, ${last.replacements} replacements; ` +
    `handle.messages first read after the appends: ${fmt(m((x) => x.messagesMs), 2)} ms`)
  console.log("vs baseline = baseline time / phase time (above 1: faster than the JSON copy baseline)")
  console.log(`heap: baseline copies retain ${fmt(m((x) => x.baselineHeapMiB), 1)} MiB; ` +
    `the session (log + surface + store) retains ${fmt(m((x) => x.sessionHeapMiB), 1)} MiB; ` +
    `heap used right after the appends ${fmt(m((x) => x.peakHeapMiB), 1)} MiB`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((e) => {
    console.error(e)
    process.exitCode = 1
  })
}
