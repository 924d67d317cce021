/**
 * Core benchmark (`npm run bench:core`): the issue-16 workload (bench/workload.ts: about 100,000
 * events over 658 turns, 92 % streamed chunks) measured in one run as (i) a JSON copy baseline,
 * (ii) `Session.appendUnknown` on the memory store (durable, then batched), (iii) a full
 * `foldSurface`, (iv) message derivation, and reads of `messages` / `transcript`; median of 3 runs
 * after a warm-up. Then the heap the session retains per event against the events' JSON text.
 */
import * as Effect from "effect/Effect"
import { performance } from "node:perf_hooks"
import { pathToFileURL } from "node:url"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { layer as layerMemoryStore } from "../src/layers/memory/MemoryStore.js"
import { encodeEvent } from "../src/schema/EventCodec.js"
import type { AppendOptions, Event } from "../src/schema/Events.js"
import { utf8Length } from "../src/schema/Json.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import { deriveEventMessage, foldSurface } from "../src/services/SurfaceManager.js"
import { workload } from "./workload.js"
import { fmt, median } from "./stats.js"

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 3)
/** Reads of `messages` and `transcript` timed after the appends. */
const READS = 1_000

setFlagsFromString("--expose-gc")
const gc: () => void = runInNewContext("gc")
const heapBytes = () => {
  gc()
  gc()
  return process.memoryUsage().heapUsed
}
const heapMiB = () => process.memoryUsage().heapUsed / 1024 / 1024

// ---------------------------------------------------------------------------------------------
// Workload: the issue-16 generator (bench/workload.ts): 658 turns, about 100,000 events, 92 %
// streamed chunks, a compaction every 25 turns.

interface Payload {
  readonly type: string
  readonly data: unknown
  readonly opts: AppendOptions
}

/** The first `n` events of the workload (as many turns as it takes), as append arguments. */
export const buildWorkload = (n: number): Array<Payload> => {
  const out: Array<Payload> = []
  for (const e of workload({ turns: Number.MAX_SAFE_INTEGER, maxEvents: n })) {
    if (out.length === n) break
    out.push({ type: e.type, data: e.data, opts: e.options ?? {} })
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// One measured run

interface Figures {
  readonly baselineMs: number
  readonly appendMs: number
  readonly batchedMs: number
  readonly foldMs: number
  readonly deriveMs: number
  readonly messagesMs: number
  readonly messagesReadUs: number
  readonly transcriptReadUs: number
  readonly peakHeapMiB: number
  readonly nodes: number
  readonly messages: number
  readonly transcript: number
  readonly replacements: number
}

const envelope = (p: Payload, seq: number, time: number): Record<string, unknown> => {
  const e: Record<string, unknown> = { type: p.type, seq, time, data: p.data }
  if (p.opts.sourceEventSeqs !== undefined) e.sourceEventSeqs = p.opts.sourceEventSeqs
  if (p.opts.surfaceOp !== undefined) e.surfaceOp = p.opts.surfaceOp
  return e
}

/** Microseconds per run of `read` over READS runs. */
const perCall = <A>(read: Effect.Effect<A>): Effect.Effect<number> =>
  Effect.gen(function*() {
    const t = performance.now()
    for (let i = 0; i < READS; i++) yield* read
    return (performance.now() - t) * 1000 / READS
  })

const runOnce = (payloads: ReadonlyArray<Payload>): Promise<Figures> => {
  // (i) baseline: detached JSON copies of the same envelopes pushed into an array
  const envelopes = payloads.map((p, i) => envelope(p, i, 1_700_000_000_000 + i))
  gc()
  let t = performance.now()
  let copies: Array<unknown> | undefined = []
  for (const e of envelopes) copies.push(JSON.parse(JSON.stringify(e)))
  const baselineMs = performance.now() - t
  if (copies.length !== envelopes.length) throw new Error("baseline lost copies") // keeps them live until here
  copies = undefined
  gc()

  const program = Effect.gen(function*() {
    // (ii) appends through the full pipeline (walk, shapes, plan, serialisation, store, commit)
    const s = yield* SessionLive.create({ id: `bench-${Date.now()}` })
    const start = performance.now()
    for (const p of payloads) yield* s.appendUnknown(p.type, p.data, p.opts)
    const appendMs = performance.now() - start
    const peakHeapMiB = heapMiB()
    const events: ReadonlyArray<Event> = yield* s.events

    // (ii-b) the same appends on a batched handle (write-behind to the memory store)
    gc()
    const batchedMs = yield* Effect.scoped(Effect.gen(function*() {
      const b = yield* SessionLive.create({ id: `bench-b-${Date.now()}`, persistence: { mode: "batched" } })
      const t0 = performance.now()
      for (const p of payloads) yield* b.appendUnknown(p.type, p.data, p.opts)
      yield* b.flush
      return performance.now() - t0
    }))

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
    // later reads of an unchanged session
    const messagesReadUs = yield* perCall(s.messages)
    const transcriptReadUs = yield* perCall(s.transcript)
    return {
      baselineMs,
      appendMs,
      batchedMs,
      foldMs,
      deriveMs,
      messagesMs,
      messagesReadUs,
      transcriptReadUs,
      peakHeapMiB,
      nodes: folded.nodes.length,
      messages: derived.length,
      transcript: (yield* s.transcript).length,
      replacements: folded.replacements.length
    }
  })
  return Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(layerMemoryStore())))
}

// ---------------------------------------------------------------------------------------------
// Heap retained per event

interface HeapFigures {
  readonly events: number
  /** Mean UTF-8 bytes of an event's JSON text (its JSONL line without the newline). */
  readonly jsonBytes: number
  /** Heap the session retains per event: log, surface, folds, memory store, and the payloads. */
  readonly sessionBytes: number
  /** Heap of `JSON.parse` copies of the same lines, per event. */
  readonly parsedBytes: number
}

/**
 * A fresh session fed from the generator one event at a time, so the session alone holds the
 * payloads (every string of an event included), as in an agent that keeps nothing it appended.
 */
const measureHeap = (n: number): Promise<HeapFigures> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const before = heapBytes()
    const s = yield* SessionLive.create({ id: `heap-${Date.now()}` })
    let count = 0
    for (const e of workload({ turns: Number.MAX_SAFE_INTEGER, maxEvents: n })) {
      if (count === n) break
      yield* s.appendUnknown(e.type, e.data, e.options)
      count++
    }
    const sessionBytes = heapBytes() - before
    const events = yield* s.events
    let jsonBytes = 0
    const lines: Array<string> = []
    for (const e of events) {
      const line = encodeEvent(e)
      jsonBytes += utf8Length(line)
      lines.push(line)
    }
    const beforeParse = heapBytes()
    const parsed = lines.map((l) => JSON.parse(l) as unknown)
    const parsedBytes = heapBytes() - beforeParse
    if (parsed.length !== count) throw new Error("lost parsed copies")
    return { events: count, jsonBytes: jsonBytes / count, sessionBytes: sessionBytes / count, parsedBytes: parsedBytes / count }
  })).pipe(Effect.provide(layerMemoryStore())))



const main = async () => {
  // first, in a heap holding nothing else of the bench
  const heap = await measureHeap(EVENTS)
  const payloads = buildWorkload(EVENTS)
  const counts = new Map<string, number>()
  for (const p of payloads) counts.set(p.type, (counts.get(p.type) ?? 0) + 1)
  const chunkShare = (counts.get("assistant/chunk") ?? 0) / payloads.length
  console.log(`effect-session-log core bench: ${fmt(payloads.length)} events, ${fmt(counts.get("turn/start") ?? 0)} turns ` +
    `(${fmt(chunkShare * 100, 1)}% assistant/chunk), node ${process.version}, median of ${RUNS} runs after a warm-up`)

  await runOnce(buildWorkload(Math.min(20_000, EVENTS))) // warm-up
  const runs: Array<Figures> = []
  for (let r = 0; r < RUNS; r++) runs.push(await runOnce(payloads))

  const m = (f: (x: Figures) => number) => median(runs.map(f))
  const n = payloads.length
  const baseline = m((x) => x.baselineMs)
  const rows: Array<[string, number, string]> = [
    ["(i) baseline: JSON copy + push", baseline, ""],
    ["(ii) Session.appendUnknown (memory store)", m((x) => x.appendMs), ">= 0.30x"],
    ["(ii-b) the same, batched handle + flush", m((x) => x.batchedMs), ""],
    ["(iii) foldSurface (full log)", m((x) => x.foldMs), ""],
    ["(iv) derive messages (fold + project)", m((x) => x.deriveMs), ""]
  ]
  const w = Math.max(...rows.map((r) => r[0].length))
  console.log("")
  console.log(
    `${"phase".padEnd(w)}  ${"ms".padStart(9)}  ${"events/s".padStart(12)}  ${"vs baseline".padStart(11)}  target`
  )
  for (const [name, ms, target] of rows) {
    const eps = n / (ms / 1000)
    const ratio = baseline / ms
    console.log(
      `${name.padEnd(w)}  ${fmt(ms, 1).padStart(9)}  ${fmt(eps).padStart(12)}  ${`${fmt(ratio, 2)}x`.padStart(11)}  ${target}`
    )
  }
  const last = runs[runs.length - 1]
  console.log("")
  console.log(`surface: ${fmt(last.nodes)} nodes, ${fmt(last.messages)} messages, ${last.replacements} replacements; ` +
    `transcript ${fmt(last.transcript)} events`)
  console.log(`reads after the appends: first handle.messages ${fmt(m((x) => x.messagesMs), 2)} ms; ` +
    `then messages ${fmt(m((x) => x.messagesReadUs), 2)} µs/call, transcript ${fmt(m((x) => x.transcriptReadUs), 2)} µs/call`)
  console.log("vs baseline = baseline time / phase time (above 1: faster than the JSON copy baseline)")
  console.log(`heap used right after the appends: ${fmt(m((x) => x.peakHeapMiB), 1)} MiB`)

  const ratio = heap.sessionBytes / heap.jsonBytes
  console.log("")
  console.log(`heap retained per event (${fmt(heap.events)} events fed one at a time; the session holds the only copy):`)
  console.log(`  event JSON text ${fmt(heap.jsonBytes, 1)} B; session ${fmt(heap.sessionBytes, 1)} B = ` +
    `${fmt(ratio, 2)}x the JSON text (target <= 1.50x); JSON.parse copies of the lines ${fmt(heap.parsedBytes, 1)} B = ` +
    `${fmt(heap.parsedBytes / heap.jsonBytes, 2)}x`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((e) => {
    console.error(e)
    process.exitCode = 1
  })
}
