/**
 * Agent-loop persistence benchmark (`npm run bench:agent`, issue 16): a 500-turn conversation
 * through the real `AgentLoop` with its default persistence (a batched handle, window 200 ms, and
 * the SPEC §7.3 checkpoints) on the JSONL and SQLite stores (real files in a temporary directory)
 * and the memory store, driven by the scripted model replaying the turns of `bench/workload.ts`.
 * Per turn: bytes added to storage, time in appends and checkpoint flushes, durable writes and
 * fsyncs against the checkpoints the log implies; and the latency of every streamed chunk's append.
 */
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import Database from "better-sqlite3"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { performance } from "node:perf_hooks"
import * as HeaderSnapshotterLive from "../src/layers/session/HeaderSnapshotterLive.js"
import * as JsonlAppender from "../src/layers/jsonl/SyncFileSystem.js"
import { layer as layerJsonlStore } from "../src/layers/jsonl/JsonlStore.js"
import { layer as layerMemoryStore } from "../src/layers/memory/MemoryStore.js"
import { type CallScript, layer as layerScriptedLanguageModel, type ScriptPart } from "../src/layers/model/ScriptedLanguageModel.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import { layer as layerSqliteStore } from "../src/layers/sql/sqlite/SqliteStore.js"
import { layerDeterministic as layerSummarizerDeterministic } from "../src/layers/model/SummarizerLive.js"
import * as AgentLoop from "../src/programs/agent/AgentLoop.js"
import * as Compact from "../src/programs/compaction/Compact.js"
import { encodeEvent } from "../src/schema/EventCodec.js"
import type { Event } from "../src/schema/Events.js"
import { utf8Length } from "../src/schema/Json.js"
import * as IdGenerator from "../src/services/IdGenerator.js"
import { Session, type SessionShape } from "../src/services/Session.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { fmt, median } from "./stats.js"
import { DEFAULT_SEED, makeRandom, workload } from "./workload.js"

const TURNS = Number(process.env.BENCH_TURNS ?? 500)
/** Turns per row of the table; the flatness ratio compares the last row with the second. */
const WINDOW = Number(process.env.BENCH_WINDOW ?? (TURNS >= 100 ? 50 : Math.max(1, Math.floor(TURNS / 4))))
const SESSION_ID = "bench-agent"
/**
 * The context window the pre-step hook compacts against (at 80 %, keeping the newest 16 %): small
 * enough that this conversation compacts about every 25 turns, as the workload does.
 */
const CONTEXT_WINDOW = Number(process.env.BENCH_CONTEXT_WINDOW ?? 50_000)
const route = { provider: "scripted", model: "bench-model", maxTokens: 16_384, contextWindow: CONTEXT_WINDOW }

// ---------------------------------------------------------------------------------------------
// The conversation: the turns of the issue-16 workload as model scripts (the loop's own pre-step
// hook compacts, so the workload's scripted compactions are left out)

type Rec = Record<string, any>

/** What one turn replays: the user's prompt, one script per model call, the tool outputs in call order. */
interface TurnScript {
  prompt: string
  readonly calls: Array<CallScript>
  readonly outputs: Array<{ readonly name: string; readonly text: string }>
}

/**
 * The workload's turns turned back into what produced them: every streamed block with its own
 * deltas (tool-call arguments in their 2–6 pieces, as raw params parts), the usage and finish
 * reason of each call, and the text of each tool result. The loop writes its own headers.
 */
const buildConversation = (turns: number): { readonly system: string; readonly turns: Array<TurnScript> } => {
  const out: Array<TurnScript> = []
  let system = ""
  let turn: TurnScript | undefined
  let parts: Array<ScriptPart> = []
  let block: { kind: string; deltas: Array<string>; id?: string; name?: string } | undefined
  let usage: Rec | undefined
  const callNames = new Map<string, string>()
  for (const e of workload({ turns, compactEvery: Number.POSITIVE_INFINITY })) {
    const d = e.data as Rec
    switch (e.type) {
      case "turn/start":
        turn = { prompt: "", calls: [], outputs: [] }
        out.push(turn)
        break
      case "user/message":
        turn!.prompt = d.content[0].text
        break
      case "request/header":
        if (system === "") system = d.header.system
        break
      case "assistant/chunk": {
        const c = d.chunk as Rec
        switch (c.type) {
          case "block-start":
            block = { kind: c.blockType, deltas: [] }
            break
          case "text-delta":
          case "reasoning-delta":
            block!.deltas.push(c.text)
            break
          case "tool-call-delta":
            if (c.name !== undefined) Object.assign(block!, { id: c.id, name: c.name })
            block!.deltas.push(c.argumentsDelta)
            break
          case "block-end": {
            const b = block!
            if (b.kind === "tool-call") {
              const id = b.id!
              const name = b.name!
              callNames.set(id, name)
              const raw = (part: Rec): ScriptPart => ({ type: "raw", part: part as Response.StreamPartEncoded })
              parts.push(
                raw({ type: "tool-params-start", id, name }),
                ...b.deltas.map((delta) => raw({ type: "tool-params-delta", id, delta })),
                raw({ type: "tool-params-end", id }),
                raw({ type: "tool-call", id, name, params: JSON.parse(b.deltas.join("")) })
              )
            } else {
              parts.push({ type: b.kind as "text" | "reasoning", text: b.deltas.join(""), deltas: b.deltas })
            }
            block = undefined
            break
          }
          case "usage":
            usage = c.usage
            break
          case "finish":
            parts.push({
              type: "finish",
              reason: c.reason.kind === "tool-calls" ? "tool-calls" : "stop",
              usage: { inputTokens: usage!.inputTokens, outputTokens: usage!.outputTokens, cachedInputTokens: usage!.cacheReadTokens }
            })
            break
        }
        break
      }
      case "assistant/message":
        turn!.calls.push(parts)
        parts = []
        break
      case "tool/result":
        turn!.outputs.push({ name: callNames.get(d.message.source.callId)!, text: d.message.content[0].content[0].text })
        break
    }
  }
  return { system, turns: out }
}

// The workload's five tools; each answers with the next scripted output (checked by name)
const params = { path: Schema.String, pattern: Schema.String }
const description = "operates on the workspace of the session and returns its output as text; paths are relative " +
  "to the repository root, and large outputs are truncated to the configured limit."
const toolkit = Toolkit.make(
  Tool.make("read_file", { description: `read file: ${description}`, parameters: params, success: Schema.String }),
  Tool.make("grep", { description: `grep: ${description}`, parameters: params, success: Schema.String }),
  Tool.make("run_tests", { description: `run tests: ${description}`, parameters: params, success: Schema.String }),
  Tool.make("edit_file", { description: `edit file: ${description}`, parameters: params, success: Schema.String }),
  Tool.make("list_dir", { description: `list dir: ${description}`, parameters: params, success: Schema.String })
)

const handlersOf = (outputs: ReadonlyArray<{ readonly name: string; readonly text: string }>) => {
  let next = 0
  const answer = (name: string) =>
    Effect.suspend(() => {
      const out = outputs[next++]
      return out !== undefined && out.name === name
        ? Effect.succeed(out.text)
        : Effect.dieMessage(`tool ${name}: call ${next} does not follow the script`)
    })
  return toolkit.toLayer({
    read_file: () => answer("read_file"),
    grep: () => answer("grep"),
    run_tests: () => answer("run_tests"),
    edit_file: () => answer("edit_file"),
    list_dir: () => answer("list_dir")
  })
}

// ---------------------------------------------------------------------------------------------
// Probes: a timed Session handle, a counting store, counting fsyncs

/** What one turn cost. */
interface TurnFigures {
  /** Wall time of `runTurn`. */
  turnMs: number
  /** Time inside `Session.append` calls (in memory with a batched handle). */
  appendMs: number
  /** Time inside the checkpoint flushes (the durable writes). */
  flushMs: number
  flushes: number
  /** Non-empty `SessionStore.append` calls: each one durable write (a transaction, or a write + fsync). */
  storeWrites: number
  /** Store writes started outside a checkpoint flush (the write-behind timer). */
  backgroundWrites: number
  /** fsyncs of session data files (JSONL: the append port and the materialisation's temporary file). */
  fsyncs: number
  /** fsyncs of directories (JSONL: publishing the session file). */
  dirFsyncs: number
  /** The checkpoints the turn's events imply (SPEC §7.3; see `expectedCheckpoints`). */
  checkpoints: number
  events: number
  /** Compactions run by the pre-step hook in the turn. */
  compactions: number
  /** UTF-8 bytes of the turn's events as JSONL lines. */
  logBytes: number
  /** Growth of the backend's files over the turn (SQLite: database + WAL). */
  storageBytes: number
  /** SQLite: growth of the database's used pages (the WAL is reused after each checkpoint, so its file does not shrink). */
  pageBytes: number
  /** The latency of each `assistant/chunk` append of the turn, ms. */
  readonly chunkMs: Array<number>
}

const freshTurn = (): TurnFigures => ({
  turnMs: 0,
  appendMs: 0,
  flushMs: 0,
  flushes: 0,
  storeWrites: 0,
  backgroundWrites: 0,
  fsyncs: 0,
  dirFsyncs: 0,
  checkpoints: 0,
  compactions: 0,
  events: 0,
  logBytes: 0,
  storageBytes: 0,
  pageBytes: 0,
  chunkMs: []
})

/** Counters shared by the probes of one backend run. */
interface Probe {
  turn: TurnFigures
  inFlush: boolean
  /** Store writes started so far, and in flight now (to see whether one met a chunk's append). */
  writes: number
  inFlight: number
  /** Chunk appends that met a store write (in flight when they began, or begun before they ended). */
  chunkWaits: number
}

const makeProbe = (): Probe => ({ turn: freshTurn(), inFlush: false, writes: 0, inFlight: 0, chunkWaits: 0 })

/** The handle as the loop sees it, timing every append (chunks one by one) and every flush. */
const timedSession = (s: SessionShape, probe: Probe): SessionShape => {
  const append: SessionShape["appendUnknown"] = (type, data, options) =>
    Effect.suspend(() => {
      const t0 = performance.now()
      const writes = probe.inFlight > 0 ? -1 : probe.writes
      return Effect.map(s.appendUnknown(type, data, options), (event) => {
        const ms = performance.now() - t0
        probe.turn.appendMs += ms
        if (type === "assistant/chunk") {
          probe.turn.chunkMs.push(ms)
          // a store write was in flight when the append began, or began before it ended
          if (probe.writes !== writes) probe.chunkWaits++
        }
        return event
      })
    })
  const flush: SessionShape["flush"] = Effect.suspend(() => {
    const t0 = performance.now()
    probe.turn.flushes++
    probe.inFlush = true
    return Effect.ensuring(
      s.flush,
      Effect.sync(() => {
        probe.inFlush = false
        probe.turn.flushMs += performance.now() - t0
      })
    )
  })
  return { ...s, append: append as SessionShape["append"], appendUnknown: append, flush }
}

/** The store with every non-empty append counted (each is one durable write of the backend). */
const countingStore = <E>(store: Layer.Layer<SessionStore, E>, probe: Probe): Layer.Layer<SessionStore, E> =>
  Layer.effect(
    SessionStore,
    Effect.map(SessionStore, (inner) => ({
      ...inner,
      append: (id, events, options) =>
        events.length === 0 ? inner.append(id, events, options) : Effect.suspend(() => {
          probe.writes++
          probe.inFlight++
          probe.turn.storeWrites++
          if (!probe.inFlush) probe.turn.backgroundWrites++
          return Effect.ensuring(inner.append(id, events, options), Effect.sync(() => probe.inFlight--))
        })
    }))
  ).pipe(Layer.provide(store))

/**
 * The platform FileSystem with the `sync` of every opened file counted: the JSONL store uses it
 * to materialise a session (temporary file fsync, directory fsync) and for batches of 256 KiB or
 * more; its append path uses the `SyncFileSystem` port, counted separately.
 */
const countingFileSystem = (probe: Probe): Layer.Layer<FileSystem.FileSystem> =>
  Layer.effect(
    FileSystem.FileSystem,
    Effect.map(FileSystem.FileSystem, (inner): FileSystem.FileSystem => ({
      ...inner,
      open: (path, options) =>
        Effect.map(inner.open(path, options), (file) => {
          const isDirectory = fs.statSync(path).isDirectory()
          const sync = Effect.tap(file.sync, () =>
            Effect.sync(() => {
              if (isDirectory) probe.turn.dirFsyncs++
              else probe.turn.fsyncs++
            }))
          return new Proxy(file, { get: (target, key) => key === "sync" ? sync : Reflect.get(target, key, target) })
        })
    }))
  ).pipe(Layer.provide(NodeContext.layer))

/**
 * The clock of a run: every read of the time in milliseconds moves it 1–60 ms on (seeded), so
 * the events' times, and the bytes of layouts that store time deltas, are the same in every run.
 * Sleeps (the write-behind window) keep real time.
 */
const benchClock = (): Clock.Clock => {
  const rnd = makeRandom(DEFAULT_SEED)
  let now = 1_764_000_000_000
  const read = () => (now += 1 + Math.floor(rnd() * 60))
  return Object.assign(Object.create(Clock.make()) as Clock.Clock, {
    unsafeCurrentTimeMillis: read,
    currentTimeMillis: Effect.sync(read),
    // spans read nanoseconds: the current time, without moving it
    unsafeCurrentTimeNanos: () => BigInt(now) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n)
  })
}

// ---------------------------------------------------------------------------------------------
// Backends

interface Backend {
  readonly name: string
  readonly store: (dir: string, probe: Probe) => Layer.Layer<SessionStore, unknown>
  /** The files whose sizes make its storage (none for memory). */
  readonly files: (dir: string) => ReadonlyArray<string>
  /** SQLite: the bytes of the database's used pages, read through a second, read-only connection. */
  readonly pages?: (dir: string) => { readonly bytes: () => number; readonly close: () => void }
}

const ALL_BACKENDS: ReadonlyArray<Backend> = [
  { name: "memory", store: () => layerMemoryStore(), files: () => [] },
  {
    name: "JSONL",
    store: (dir, probe) =>
      layerJsonlStore({ root: dir }).pipe(
        // later layers win: the counting FileSystem replaces NodeContext's
        Layer.provide(Layer.mergeAll(
          NodeContext.layer,
          countingFileSystem(probe),
          Layer.succeed(
            JsonlAppender.SyncFileSystem,
            JsonlAppender.make({
              fsync: (fd) => {
                if (fs.fstatSync(fd).isDirectory()) probe.turn.dirFsyncs++
                else probe.turn.fsyncs++
                JsonlAppender.nodeSyncFileSystem.fsync(fd)
              }
            })
          )
        ))
      ),
    files: (dir) => fs.readdirSync(dir).map((f) => nodePath.join(dir, f))
  },
  {
    name: "SQLite",
    store: (dir) => layerSqliteStore({ filename: nodePath.join(dir, "sessions.db") }),
    files: (dir) => [nodePath.join(dir, "sessions.db"), nodePath.join(dir, "sessions.db-wal")],
    pages: (dir) => {
      let db: Database.Database | undefined
      const pragma = (name: string) => db!.pragma(name, { simple: true }) as number
      return {
        // between turns only: nothing is pending then, so the reader never meets a write
        bytes: () => {
          db ??= new Database(nodePath.join(dir, "sessions.db"), { readonly: true, fileMustExist: true })
          return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size")
        },
        close: () => db?.close()
      }
    }
  }
]

/** `BENCH_BACKENDS=memory,jsonl` (a comma list, any case) runs only those; the memory store always runs. */
const BACKENDS = ((only) =>
  only === undefined ? ALL_BACKENDS : ALL_BACKENDS.filter((b) => b.name === "memory" || only.includes(b.name.toLowerCase())))(
    process.env.BENCH_BACKENDS?.toLowerCase().split(",")
  )

const storageSize = (files: ReadonlyArray<string>): number => {
  let n = 0
  for (const f of files) n += fs.statSync(f, { throwIfNoEntry: false })?.size ?? 0
  return n
}

/**
 * The checkpoints of one turn from its events (SPEC §7.3, §1.6): a pre-step flush before every
 * step (each `step/start`), one before each model request (each attempt's `assistant/message`;
 * this conversation has no retries), one before each tool body (each `tool/call`; none is denied
 * or nested), and the flush after `turn/end`. Each finds events pending, so each is one write.
 */
const expectedCheckpoints = (events: ReadonlyArray<Event>): number => {
  let n = 0
  for (const e of events) {
    if (e.type === "step/start" || e.type === "assistant/message" || e.type === "tool/call" || e.type === "turn/end") n++
  }
  return n
}

interface RunResult {
  readonly backend: string
  readonly turns: ReadonlyArray<TurnFigures>
  readonly chunkWaits: number
  readonly events: number
  readonly totalBytes: number
  readonly totalPages: number
}

/** One backend's conversation: a session in its own temporary directory, advanced a turn at a time. */
interface Runner {
  readonly turn: (i: number, script: TurnScript) => Effect.Effect<void, unknown>
  readonly result: () => RunResult
}

/** Open a backend's store and session (in the current scope) for `conversation`. */
const openRunner = (
  backend: Backend,
  conversation: ReturnType<typeof buildConversation>,
  root: string
): Effect.Effect<Runner, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    const dir = fs.mkdtempSync(nodePath.join(root, `${backend.name.toLowerCase()}-`))
    const probe = makeProbe()
    const files = () => backend.files(dir)
    const pages = backend.pages?.(dir)
    yield* Effect.addFinalizer(() => Effect.sync(() => pages?.close()))
    const loop = AgentLoop.make({ toolkit, system: conversation.system, route, preStep: Compact.preStepHook({}) })
    const clock = benchClock()
    const context = yield* Layer.build(Layer.mergeAll(
      countingStore(backend.store(dir, probe), probe),
      HeaderSnapshotterLive.layer,
      layerSummarizerDeterministic,
      IdGenerator.layerCounter("id-"),
      handlersOf(conversation.turns.flatMap((t) => t.outputs))
    ))
    const session = yield* SessionLive.create({ id: SESSION_ID, persistence: { mode: "batched" } }).pipe(
      Effect.provide(context),
      Effect.withClock(clock)
    )
    const timed = timedSession(session, probe)
    const figures: Array<TurnFigures> = []
    let logged = 0
    let size = storageSize(files())
    let used = pages?.bytes() ?? 0

    const turn = (i: number, script: TurnScript) =>
      Effect.gen(function*() {
        probe.turn = freshTurn()
        const t0 = performance.now()
        // a scripted model per turn: it keeps every request it receives, which over 500 turns of a
        // growing context would retain O(turns²) prompt objects and tax every garbage collection
        const result = yield* loop.runTurn([{ type: "user", content: script.prompt }]).pipe(
          Effect.provideService(Session, timed),
          Effect.provide(layerScriptedLanguageModel({ scripts: script.calls })),
          Effect.provide(context),
          Effect.withClock(clock)
        )
        probe.turn.turnMs = performance.now() - t0
        if (result.reason.kind !== "completed") {
          return yield* Effect.dieMessage(`${backend.name}: turn ${i + 1} ended ${JSON.stringify(result.reason)}`)
        }
        const events = (yield* session.events).slice(logged)
        logged += events.length
        probe.turn.events = events.length
        probe.turn.checkpoints = expectedCheckpoints(events)
        probe.turn.compactions = events.filter((e) => e.type === "compaction/start").length
        for (const e of events) probe.turn.logBytes += utf8Length(encodeEvent(e)) + 1
        const now = storageSize(files())
        probe.turn.storageBytes = now - size
        size = now
        const nowUsed = pages?.bytes() ?? 0
        probe.turn.pageBytes = nowUsed - used
        used = nowUsed
        figures.push(probe.turn)
      })

    return {
      turn,
      result: () => ({
        backend: backend.name,
        turns: figures,
        chunkWaits: probe.chunkWaits,
        events: logged,
        totalBytes: size,
        totalPages: used
      })
    }
  })

/**
 * The conversation on every backend in lockstep: turn i on each before turn i + 1 on any, the
 * order rotating every turn, so a change of machine load falls on every backend's same turns.
 */
const runAll = (
  backends: ReadonlyArray<Backend>,
  conversation: ReturnType<typeof buildConversation>,
  root: string
): Effect.Effect<Array<RunResult>, unknown> =>
  Effect.scoped(Effect.gen(function*() {
    const runners: Array<Runner> = []
    for (const b of backends) runners.push(yield* openRunner(b, conversation, root))
    for (const [i, script] of conversation.turns.entries()) {
      for (let k = 0; k < runners.length; k++) yield* runners[(i + k) % runners.length].turn(i, script)
    }
    return runners.map((r) => r.result())
  }))

// ---------------------------------------------------------------------------------------------
// Report

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]

const sum = (xs: ReadonlyArray<number>): number => xs.reduce((a, b) => a + b, 0)

interface Window {
  readonly label: string
  readonly turns: (r: RunResult) => ReadonlyArray<TurnFigures>
}

const windows = (turns: number): Array<Window> => {
  const out: Array<Window> = []
  for (let start = 0; start < turns; start += WINDOW) {
    const end = Math.min(turns, start + WINDOW)
    out.push({ label: `${start + 1}–${end}`, turns: (r) => r.turns.slice(start, end) })
  }
  return out
}

const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): void => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i])).join("  ")
  console.log(line(header))
  for (const r of rows) console.log(line(r))
}

const report = (results: ReadonlyArray<RunResult>): boolean => {
  let ok = true
  const ws = windows(TURNS)
  const mem = results.find((r) => r.backend === "memory")!
  const durable = results.filter((r) => r !== mem)
  const ref = ws.length > 1 ? ws[1] : ws[0]
  const last = ws[ws.length - 1]
  const flatness = `last / ${ref.label}`
  /** The ratio of a measure in the last window to the reference window (turns 51–100). */
  const ratio = (f: (w: Window) => number) => `${fmt(f(last) / f(ref), 2)}x`
  const hasPages = (r: RunResult) => r.turns.some((t) => t.pageBytes !== 0)
  const mean = (r: RunResult, w: Window, f: (t: TurnFigures) => number) => sum(w.turns(r).map(f)) / w.turns(r).length
  const med = (r: RunResult, w: Window, f: (t: TurnFigures) => number) => median(w.turns(r).map(f))
  const chunkP = (r: RunResult, w: Window, p: number) =>
    percentile(w.turns(r).flatMap((t) => t.chunkMs).sort((a, b) => a - b), p) * 1000
  const stored = (t: TurnFigures) => t.pageBytes !== 0 ? t.pageBytes : t.storageBytes

  console.log("")
  console.log(`bytes added per turn (mean over windows of ${WINDOW} turns). log: the turn's events as JSONL lines; ` +
    "SQLite: used database pages; db+wal: the growth of the two files")
  const bytesColumns: Array<[string, (w: Window) => number]> = [
    ["log", (w) => mean(mem, w, (t) => t.logBytes)],
    ...durable.flatMap((r): Array<[string, (w: Window) => number]> => [
      [r.backend, (w) => mean(r, w, stored)],
      ...(hasPages(r) ? [[`${r.backend} db+wal`, (w: Window) => mean(r, w, (t) => t.storageBytes)] as [string, (w: Window) => number]] : [])
    ])
  ]
  table(["turns", ...bytesColumns.map(([h]) => h)], [
    ...ws.map((w) => [w.label, ...bytesColumns.map(([, f]) => fmt(f(w)))]),
    [flatness, ...bytesColumns.map(([, f]) => ratio(f))],
    [
      `per log byte, ${flatness}`,
      "",
      ...durable.flatMap((r) => {
        const perLog = (w: Window) => sum(w.turns(r).map(stored)) / sum(w.turns(r).map((t) => t.logBytes))
        return [`${fmt(perLog(ref), 3)} → ${fmt(perLog(last), 3)}`, ...(hasPages(r) ? [""] : [])]
      })
    ]
  ])

  console.log("")
  console.log("wall time per turn (median over each window, ms): appends + checkpoint flushes, and the appends " +
    "alone (in memory with a batched handle); the p50 of the window's chunk appends (µs)")
  type Column = [string, (w: Window) => number, number]
  const timeColumns: Array<Column> = results.flatMap((r): Array<Column> => [
    [r.backend, (w) => med(r, w, (t) => t.appendMs + t.flushMs), 2],
    ["appends", (w) => med(r, w, (t) => t.appendMs), 2],
    ["chunk p50", (w) => chunkP(r, w, 0.5), 1]
  ])
  table(["turns", ...timeColumns.map(([h]) => h)], [
    ...ws.map((w) => [w.label, ...timeColumns.map(([, f, d]) => fmt(f(w), d))]),
    [flatness, ...timeColumns.map(([, f]) => ratio(f))]
  ])

  console.log("")
  console.log("whole turn (runTurn wall time, median ms; includes deriving each request from the log):")
  const turnMs = (r: RunResult) => (w: Window) => med(r, w, (t) => t.turnMs)
  table(["turns", ...results.map((r) => r.backend)], [
    ...ws.map((w) => [w.label, ...results.map((r) => fmt(turnMs(r)(w), 2))]),
    [flatness, ...results.map((r) => ratio(turnMs(r)))]
  ])

  console.log("")
  console.log("durable writes against the checkpoints of SPEC §7.3 (steps + model requests + tool bodies + turn end):")
  const isOff = (r: RunResult) => (t: TurnFigures) =>
    t.flushes !== t.checkpoints || t.storeWrites !== t.checkpoints || (r.backend === "JSONL" && t.fsyncs !== t.checkpoints)
  table(
    ["backend", "checkpoints", "flushes", "store writes", "fsyncs", "timer writes", "turns off", "per turn"],
    results.map((r) => {
      const checkpoints = sum(r.turns.map((t) => t.checkpoints))
      const off = r.turns.filter(isOff(r)).length
      if (off > 0) ok = false
      return [
        r.backend,
        fmt(checkpoints),
        fmt(sum(r.turns.map((t) => t.flushes))),
        fmt(sum(r.turns.map((t) => t.storeWrites))),
        r.backend === "JSONL" ? `${fmt(sum(r.turns.map((t) => t.fsyncs)))} + ${sum(r.turns.map((t) => t.dirFsyncs))} dir` : "—",
        fmt(sum(r.turns.map((t) => t.backgroundWrites))),
        `${off} of ${r.turns.length}`,
        fmt(checkpoints / r.turns.length, 2)
      ]
    })
  )
  for (const r of results) {
    for (const [i, t] of r.turns.entries()) {
      if (!isOff(r)(t)) continue
      console.log(`  ${r.backend} turn ${i + 1}: checkpoints ${t.checkpoints}, flushes ${t.flushes}, store writes ` +
        `${t.storeWrites} (${t.backgroundWrites} by the timer), fsyncs ${t.fsyncs}`)
    }
  }

  console.log("")
  console.log("assistant/chunk append latency as the loop sees it, all turns (µs):")
  table(
    ["backend", "chunks", "p50", "p99", "max", "met a store write"],
    results.map((r) => {
      const sorted = r.turns.flatMap((t) => t.chunkMs).sort((a, b) => a - b)
      if (r.chunkWaits > 0) ok = false
      return [
        r.backend,
        fmt(sorted.length),
        fmt(percentile(sorted, 0.5) * 1000, 1),
        fmt(percentile(sorted, 0.99) * 1000, 1),
        fmt(sorted[sorted.length - 1] * 1000, 1),
        fmt(r.chunkWaits)
      ]
    })
  )
  console.log("")
  const total = (r: RunResult) => `${r.backend} ${fmt(r.totalBytes)} B` + (hasPages(r) ? ` (used pages ${fmt(r.totalPages)} B)` : "")
  console.log(`storage at the end: ${durable.map(total).join(", ")}; log ${fmt(sum(mem.turns.map((t) => t.logBytes)))} B ` +
    "of JSONL lines")
  return ok
}

const main = async () => {
  const conversation = buildConversation(TURNS)
  const calls = sum(conversation.turns.map((t) => t.calls.length))
  const tools = sum(conversation.turns.map((t) => t.outputs.length))
  console.log(`effect-session-log agent bench: ${fmt(TURNS)} turns through AgentLoop (${fmt(calls)} model calls, ` +
    `${fmt(tools)} tool calls) on ${BACKENDS.map((b) => b.name).join(", ")} in lockstep; batched handles (window 200 ms) ` +
    `with the checkpoint policy, pre-step compaction at 80% of a ${fmt(CONTEXT_WINDOW)}-token window; node ${process.version}`)
  const root = fs.mkdtempSync(nodePath.join(os.tmpdir(), "esl-bench-agent-"))
  try {
    // an untimed warm-up, so the first window does not measure a cold JIT
    const warmUp = { system: conversation.system, turns: conversation.turns.slice(0, Math.min(20, TURNS)) }
    await Effect.runPromise(runAll(BACKENDS, warmUp, root))
    const t0 = performance.now()
    const results = await Effect.runPromise(runAll(BACKENDS, conversation, root))
    console.log(`${fmt(results[0].events)} events and ${sum(results[0].turns.map((t) => t.compactions))} compactions ` +
      `per backend, in ${fmt((performance.now() - t0) / 1000, 1)} s`)
    if (!report(results)) {
      console.log("\nFAILED: a turn's durable writes differ from its checkpoints, or a chunk append met a store write")
      process.exitCode = 1
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true })
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
