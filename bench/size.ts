/**
 * Storage size benchmark (`npm run bench:size`): the issue-16 workload (bench/workload.ts), built
 * and validated by a `Session` on the memory store under a deterministic clock, written to each
 * storage layout in the batches an agent's checkpoints produce; bytes on disk as a ratio to plain
 * JSONL; the time of those appends (median of the runs) against a raw durable write of the same
 * batches (each batch's plain JSONL text written and fsynced onto one file) and against the packed
 * layout's; then the resume of the session (`SessionLive.open` plus its derived messages) from each
 * layout against a raw read + `JSON.parse` of the plain JSONL file, measured in the same run. The
 * compressed layout is measured with both codecs (deflate, what is written; brotli, the first
 * layout's). A new layout is one more entry of `LAYOUTS`.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { performance } from "node:perf_hooks"
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { type SegmentCodec, WriterCodec } from "../src/layers/jsonl/Compression.js"
import { layer as layerJsonlStore } from "../src/layers/jsonl/JsonlStore.js"
import { layer as layerMemoryStore } from "../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import { layer as layerSqliteStore } from "../src/layers/sql/sqlite/SqliteStore.js"
import type { Event } from "../src/schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../src/schema/Format.js"
import type { SessionHeader } from "../src/schema/SessionHeader.js"
import { type PreparedEvent, prepareValidated } from "../src/services/PrepareEvent.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { DEFAULT_TURNS, describeWorkload, workload } from "./workload.js"
import { fmt, median } from "./stats.js"

const TURNS = Number(process.env.BENCH_TURNS ?? DEFAULT_TURNS)
const RUNS = Number(process.env.BENCH_RUNS ?? 3)
/** The workload's clock starts here (2025-11-24T16:00:00Z) and advances by each event's `dtMs`. */
const EPOCH_MS = 1_764_000_000_000
const SESSION_ID = "bench-size"

setFlagsFromString("--expose-gc")
const gc: () => void = runInNewContext("gc")

// ---------------------------------------------------------------------------------------------
// Layouts: the first one is plain JSONL, the reference of every ratio

interface Layout {
  readonly name: string
  /** A store over `dir` (empty when the workload is written into it; the same one to resume). */
  readonly layer: (dir: string) => Layer.Layer<SessionStore, unknown>
  /** The codec new compressed segments are written with (`WriterCodec`), when not the default. */
  readonly codec?: SegmentCodec
}

const ALL_LAYOUTS: ReadonlyArray<Layout> = [
  {
    name: "JSONL plain",
    layer: (dir) => layerJsonlStore({ root: dir, packChunks: false }).pipe(Layer.provide(NodeContext.layer))
  },
  {
    name: "JSONL packed chunks (default)",
    layer: (dir) => layerJsonlStore({ root: dir }).pipe(Layer.provide(NodeContext.layer))
  },
  {
    name: "JSONL compressed (deflate)",
    layer: (dir) => layerJsonlStore({ root: dir, compress: true }).pipe(Layer.provide(NodeContext.layer))
  },
  {
    name: "JSONL compressed, brotli (before)",
    layer: (dir) => layerJsonlStore({ root: dir, compress: true }).pipe(Layer.provide(NodeContext.layer)),
    codec: "brotli"
  },
  {
    name: "SQLite",
    layer: (dir) => layerSqliteStore({ filename: nodePath.join(dir, "sessions.db") })
  }
]

/**
 * The layouts measured: all, or those whose name contains one of `BENCH_LAYOUTS` (comma-separated,
 * case-insensitive); plain JSONL is always measured (every ratio is against it).
 */
const LAYOUTS: ReadonlyArray<Layout> = ((filter) =>
  filter === undefined
    ? ALL_LAYOUTS
    : ALL_LAYOUTS.filter((l, i) => i === 0 || filter.some((f) => l.name.toLowerCase().includes(f))))(
    process.env.BENCH_LAYOUTS?.toLowerCase().split(",").map((f) => f.trim()).filter((f) => f !== "")
  )

// ---------------------------------------------------------------------------------------------
// The workload as stored events

/** A clock that reads `now()`: the workload's own timeline, so every run writes the same bytes. */
const clockOf = (now: () => number): Clock.Clock =>
  Object.assign(Object.create(Clock.make()) as Clock.Clock, {
    unsafeCurrentTimeMillis: now,
    currentTimeMillis: Effect.sync(now),
    unsafeCurrentTimeNanos: () => BigInt(now()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now()) * 1_000_000n)
  })

/** Append the workload through a `Session` (every rule checked) and return its header and log. */
const buildSession = Effect.gen(function*() {
  let now = EPOCH_MS
  const session = yield* SessionLive.create({ id: SESSION_ID, header: { createdAt: EPOCH_MS } })
  yield* Effect.gen(function*() {
    for (const e of workload({ turns: TURNS })) {
      now += e.dtMs
      yield* session.appendUnknown(e.type, e.data, e.options)
    }
  }).pipe(Effect.withClock(clockOf(() => now)))
  return { header: session.header, events: yield* session.events }
}).pipe(Effect.scoped, Effect.provide(layerMemoryStore()))

/**
 * The write batches of a batched agent handle with the checkpoint flushes of SPEC §7.3: before a
 * model request (the first chunk of a stream), after a `tool/call` (before the tool body), and at
 * each step, turn and compaction end.
 */
const checkpointBatches = (events: ReadonlyArray<PreparedEvent>): Array<ReadonlyArray<PreparedEvent>> => {
  const batches: Array<Array<PreparedEvent>> = []
  let batch: Array<PreparedEvent> = []
  const cut = () => {
    if (batch.length > 0) batches.push(batch)
    batch = []
  }
  let previous: string | undefined
  for (const p of events) {
    const type = p.event.type
    if (type === "assistant/chunk" && previous !== "assistant/chunk") cut()
    batch.push(p)
    if (type === "tool/call" || type === "step/end" || type === "turn/end" || type === "compaction/end") cut()
    previous = type
  }
  cut()
  return batches
}

const dirBytes = (dir: string): number => {
  let total = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += fs.statSync(nodePath.join(entry.parentPath ?? entry.path, entry.name)).size
  }
  return total
}

/** CPU time of the process so far (every thread: the thread pool's and the GC's too), in ms. */
const cpuMs = (): number => {
  const { system, user } = process.cpuUsage()
  return (user + system) / 1000
}

/** A write's wall-clock and CPU time. */
interface WriteTime {
  readonly ms: number
  readonly cpuMs: number
}

/** Write the session into a fresh store of `layout` (closed afterwards) and return the time taken. */
const writeLayout = (
  layout: Layout,
  dir: string,
  header: SessionHeader,
  batches: ReadonlyArray<ReadonlyArray<PreparedEvent>>
): Promise<WriteTime> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const t = performance.now()
    const c = cpuMs()
    yield* store.create(header)
    let next = 0
    for (const batch of batches) {
      yield* store.append(header.id, batch, { expectedSeq: next })
      next += batch.length
    }
    return { ms: performance.now() - t, cpuMs: cpuMs() - c }
  }).pipe(
    Effect.provide(layout.layer(dir)),
    layout.codec === undefined ? (e) => e : Effect.provideService(WriterCodec, layout.codec),
    Effect.runPromise
  )

/**
 * The raw durable write: each batch's plain JSONL text (its events' lines) appended to one file
 * and fsynced, as a store's append must at least do; returns the time taken.
 */
const rawWrite = (file: string, header: SessionHeader, batches: ReadonlyArray<ReadonlyArray<PreparedEvent>>): WriteTime => {
  const t = performance.now()
  const c = cpuMs()
  const fd = fs.openSync(file, "wx")
  try {
    fs.writeSync(fd, JSON.stringify({ type: "session", ...header }) + "\n")
    fs.fsyncSync(fd)
    for (const batch of batches) {
      let text = ""
      for (const p of batch) text += p.line + "\n"
      fs.writeSync(fd, text)
      fs.fsyncSync(fd)
    }
  } finally {
    fs.closeSync(fd)
  }
  return { ms: performance.now() - t, cpuMs: cpuMs() - c }
}

/** Resume the session from `dir` (open: read, validate, repair, fold; then derive the messages). */
const resume = (layout: Layout, dir: string): Promise<{ readonly ms: number; readonly events: number }> =>
  Effect.gen(function*() {
    const t = performance.now()
    const session = yield* SessionLive.open(SESSION_ID)
    const messages = yield* session.messages
    const ms = performance.now() - t
    if (messages.length === 0) return yield* Effect.dieMessage("resumed session has no messages")
    return { ms, events: (yield* session.events).length }
  }).pipe(Effect.scoped, Effect.provide(layout.layer(dir)), Effect.runPromise)

/** The raw baseline: read the plain JSONL file and `JSON.parse` every line. */
const rawRead = (file: string): { readonly ms: number; readonly events: number } => {
  const t = performance.now()
  const text = fs.readFileSync(file, "utf8")
  let events = 0
  let start = 0
  for (;;) {
    const end = text.indexOf("\n", start)
    if (end < 0) break
    const record = JSON.parse(text.slice(start, end)) as unknown
    if (record !== null) events++
    start = end + 1
  }
  return { ms: performance.now() - t, events: events - 1 } // the header line is not an event
}



const main = async () => {
  const tmp = fs.mkdtempSync(nodePath.join(os.tmpdir(), "esl-bench-size-"))
  try {
    const shape = describeWorkload(workload({ turns: TURNS }))
    console.log(
      `effect-session-log size bench: ${fmt(shape.events)} events over ${fmt(shape.turns)} turns ` +
        `(${fmt(shape.chunkShare * 100, 1)}% assistant/chunk, ${shape.compactions} compactions), ` +
        `node ${process.version}; write and resume: median of ${RUNS} runs`
    )

    // writes: RUNS rounds alternating the order, each layout into a fresh directory (the last
    // round's is kept for the bytes and the resume), the raw durable write first in each round
    const dirs = new Map<Layout, string>()
    const writes = new Map<Layout, Array<WriteTime>>(LAYOUTS.map((l) => [l, []]))
    const rawWrites: Array<WriteTime> = []
    {
      let built: { readonly header: SessionHeader; readonly events: ReadonlyArray<Event> } | undefined =
        await Effect.runPromise(buildSession)
      const prepared = prepareValidated(built.events, DEFAULT_MAX_EVENT_BYTES)
      if ("_tag" in prepared) throw new Error(`workload event over the size cap: ${prepared.message}`)
      const batches = checkpointBatches(prepared)
      for (let r = 0; r < RUNS; r++) {
        const rawFile = nodePath.join(tmp, `raw-${r}.jsonl`)
        gc()
        rawWrites.push(rawWrite(rawFile, built.header, batches))
        fs.rmSync(rawFile)
        const order = r % 2 === 0 ? LAYOUTS : [...LAYOUTS].reverse()
        for (const layout of order) {
          const previous = dirs.get(layout)
          if (previous !== undefined) fs.rmSync(previous, { recursive: true, force: true })
          const dir = nodePath.join(tmp, `layout-${LAYOUTS.indexOf(layout)}-${r}`)
          fs.mkdirSync(dir)
          dirs.set(layout, dir)
          gc()
          writes.get(layout)!.push(await writeLayout(layout, dir, built.header, batches))
        }
      }
      console.log(`written in ${fmt(batches.length)} checkpoint batches (mean ${fmt(prepared.length / batches.length, 1)} events)`)
      built = undefined
    }
    const rows = LAYOUTS.map((layout) => ({
      layout,
      bytes: dirBytes(dirs.get(layout)!),
      writeMs: median(writes.get(layout)!.map((w) => w.ms)),
      writeCpuMs: median(writes.get(layout)!.map((w) => w.cpuMs))
    }))
    const rawWriteMs = median(rawWrites.map((w) => w.ms))
    const rawWriteCpuMs = median(rawWrites.map((w) => w.cpuMs))
    const packedRow = rows.find((r) => r.layout.name.startsWith("JSONL packed"))

    const plainDir = dirs.get(LAYOUTS[0])!
    const plainFile = fs.readdirSync(plainDir).filter((f) => f.endsWith(".jsonl")).map((f) => nodePath.join(plainDir, f))[0]
    if (plainFile === undefined) throw new Error("no plain JSONL file written")

    // resume: one untimed warm-up of each, then RUNS rounds alternating the order
    gc()
    rawRead(plainFile)
    for (const layout of LAYOUTS) await resume(layout, dirs.get(layout)!)
    const raw: Array<number> = []
    const resumes = new Map<Layout, Array<number>>(LAYOUTS.map((l) => [l, []]))
    let resumedEvents = 0
    for (let r = 0; r < RUNS; r++) {
      const order = r % 2 === 0 ? LAYOUTS : [...LAYOUTS].reverse()
      gc()
      raw.push(rawRead(plainFile).ms)
      for (const layout of order) {
        gc()
        const { events, ms } = await resume(layout, dirs.get(layout)!)
        resumes.get(layout)!.push(ms)
        resumedEvents = events
      }
    }
    const rawMs = median(raw)

    const plainBytes = rows[0].bytes
    const w = Math.max(...LAYOUTS.map((l) => l.name.length), "raw read + JSON.parse (plain)".length)
    const ratio = (x: number, of: number | undefined) => (of === undefined ? "" : `${fmt(x / of, 2)}x`)
    console.log("")
    console.log(
      `${"layout".padEnd(w)}  ${"bytes".padStart(12)}  ${"vs plain".padStart(8)}  ${"write ms".padStart(9)}  ` +
        `${"vs raw".padStart(7)}  ${"vs packed".padStart(9)}  ${"cpu ms".padStart(7)}  ${"vs packed".padStart(9)}  ` +
        `${"resume ms".padStart(9)}  ${"vs raw".padStart(7)}`
    )
    for (const { bytes, layout, writeCpuMs, writeMs } of rows) {
      const ms = median(resumes.get(layout)!)
      console.log(
        `${layout.name.padEnd(w)}  ${fmt(bytes).padStart(12)}  ${`${fmt(bytes / plainBytes, 3)}x`.padStart(8)}  ` +
          `${fmt(writeMs, 0).padStart(9)}  ${ratio(writeMs, rawWriteMs).padStart(7)}  ` +
          `${ratio(writeMs, packedRow?.writeMs).padStart(9)}  ${fmt(writeCpuMs, 0).padStart(7)}  ` +
          `${ratio(writeCpuMs, packedRow?.writeCpuMs).padStart(9)}  ${fmt(ms, 1).padStart(9)}  ${`${fmt(ms / rawMs, 2)}x`.padStart(7)}`
      )
    }
    console.log(
      `${"raw write + fsync (plain)".padEnd(w)}  ${"".padStart(12)}  ${"".padStart(8)}  ${fmt(rawWriteMs, 0).padStart(9)}  ` +
        `${"1.00x".padStart(7)}  ${"".padStart(9)}  ${fmt(rawWriteCpuMs, 0).padStart(7)}`
    )
    console.log(
      `${"raw read + JSON.parse (plain)".padEnd(w)}  ${"".padStart(12)}  ${"".padStart(8)}  ${"".padStart(9)}  ` +
        `${"".padStart(7)}  ${"".padStart(9)}  ${"".padStart(7)}  ${"".padStart(9)}  ${fmt(rawMs, 1).padStart(9)}  ${"1.00x".padStart(7)}`
    )
    console.log("")
    console.log(
      `bytes: every file of the layout's directory after its store closed; vs plain = bytes / plain JSONL bytes ` +
        `(targets: packed <= 0.45x, compressed JSONL <= 0.12x, SQLite <= 0.40x)`
    )
    console.log(
      `write: create + the checkpoint batches' appends, median of ${RUNS} runs; vs raw = time / raw write + fsync of each ` +
        `batch's plain text onto one file; vs packed = time / the packed layout's (target: compressed <= 1/0.85 = 1.18x); ` +
        `cpu = the process's CPU time meanwhile (every thread: brotli's thread pool included), which load on the machine disturbs less`
    )
    console.log(
      `resume: SessionLive.open + messages of ${fmt(resumedEvents)} events (read, validate, repair scan, fold, derive; ` +
        `each open appends its end-seed marker); vs raw = time / raw read + JSON.parse of the plain file (target <= 1.5x)`
    )
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
