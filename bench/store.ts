/**
 * Store benchmark (`npm run bench:store`): per durable backend (SQLite, JSONL, PostgreSQL on a
 * server the bench starts itself: bench/postgres.ts), in one run and on the same disk, (a) durable per-append writes (`SessionStore.append` of one event; also through
 * `Session.append`), (b) batches of 100 (`SessionStore.append` of 100 events; also a batched
 * `Session` flushed every 100 events), and (c) the resume of a 100,000-event
 * session (`SessionLive.open`: load, read pipeline, validation, repair scan, fold, derive) — each
 * beside a raw baseline: better-sqlite3 prepared inserts in one transaction per batch with the same
 * pragmas; `fs.writeSync` of the batch plus `fsyncSync` on an open file; node-postgres with
 * prepared statements in the store's transaction shape; reading and `JSON.parse` of every row or
 * line. PostgreSQL adds aggregate appends/s of 1, 4 and 16 sessions appending concurrently. The write baselines serialise their events with `JSON.stringify` inside the
 * timed loop (as the read baseline parses inside it): writing events costs their serialisation.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import Database from "better-sqlite3"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { performance } from "node:perf_hooks"
import { fileURLToPath } from "node:url"
import { layer as layerJsonlStore } from "../src/layers/jsonl/JsonlStore.js"
import { layer as layerPostgresStore } from "../src/layers/sql/postgres/PostgresStore.js"
import { layer as layerSqliteStore } from "../src/layers/sql/sqlite/SqliteStore.js"
import { encodeEvent } from "../src/schema/EventCodec.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../src/schema/Format.js"
import { prepareValidated } from "../src/services/PrepareEvent.js"
import type { Event } from "../src/schema/Events.js"
import { encodeSessionId } from "../src/schema/SessionIdEncoding.js"
import * as Session from "../src/services/Session.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { buildWorkload } from "./core.js"
import * as Pg from "./postgres.js"
import { fmt, median } from "./stats.js"

const PER_APPEND = Number(process.env.BENCH_PER_APPEND ?? 1_000)
const BATCHED = Number(process.env.BENCH_BATCHED ?? 20_000)
const RESUME = Number(process.env.BENCH_RESUME ?? 100_000)
const BATCH = 100
const RUNS = Number(process.env.BENCH_RUNS ?? 3)

type Backend = "sqlite" | "jsonl" | "postgres"

/** Concurrent sessions of the aggregate rows, and appends per session (BENCH_PG_CONCURRENT). */
const CONCURRENCY = [1, 4, 16]
const CONCURRENT_APPENDS = Number(process.env.BENCH_PG_CONCURRENT ?? 200)

const tmp = fs.mkdtempSync(nodePath.join(os.tmpdir(), "esl-bench-"))
let counter = 0
const fresh = (backend: "sqlite" | "jsonl") => {
  const dir = nodePath.join(tmp, `${backend}-${++counter}`)
  fs.mkdirSync(dir)
  return backend === "sqlite" ? nodePath.join(dir, "s.db") : dir
}

/** A fresh location of any backend (a schema of the bench's server for PostgreSQL). */
const freshAny = (backend: Backend): Promise<string> => backend === "postgres" ? Pg.freshUrl() : Promise.resolve(fresh(backend))

const storeLayer = (backend: Backend, location: string): Layer.Layer<SessionStore, unknown> =>
  backend === "sqlite"
    ? layerSqliteStore({ filename: location })
    : backend === "postgres"
    ? layerPostgresStore({ url: location })
    : layerJsonlStore({ root: location }).pipe(Layer.provide(NodeContext.layer))

const run = <A, E>(effect: Effect.Effect<A, E, SessionStore | Scope.Scope>, backend: Backend, location: string) =>
  Effect.runPromise(Effect.scoped(effect).pipe(Effect.provide(storeLayer(backend, location))))

/** Built on first use (the resume child process never needs it). */
let workloadCache: ReturnType<typeof buildWorkload> | undefined
const workload = () => (workloadCache ??= buildWorkload(Math.max(PER_APPEND, BATCHED, RESUME)))

/** Append the workload's first `n` payloads through a session (durable or batched, flushing every BATCH). */
const appendThroughSession = (n: number, batched: boolean, timing?: { ms: number }) =>
  Effect.gen(function*() {
    const s = yield* SessionLive.create({
      id: "bench",
      persistence: batched ? { mode: "batched", windowMs: 2_147_483_647 } : { mode: "durable" }
    })
    const t0 = performance.now()
    for (let i = 0; i < n; i++) {
      const p = workload()[i]
      yield* s.appendUnknown(p.type, p.data, p.opts)
      if (batched && (i + 1) % BATCH === 0) yield* s.flush
    }
    yield* s.flush
    if (timing !== undefined) timing.ms = performance.now() - t0
    return yield* s.events
  })

/**
 * `SessionStore.append` of prebuilt events, `batch` at a time, handed over as a session hands them:
 * prepared (event + line, untimed here as in the session's own pipeline), so the store does only its
 * own work. Plain events would be checked in full first (the Session rows include that pipeline).
 */
const appendThroughStore = (events: ReadonlyArray<Event>, batch: number, timing: { ms: number }) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    yield* store.create({ version: 1, id: "bench", createdAt: 0 })
    const prepared = prepareValidated(events, DEFAULT_MAX_EVENT_BYTES)
    if ("_tag" in prepared) return yield* Effect.die(prepared)
    const t0 = performance.now()
    for (let i = 0; i < events.length; i += batch) {
      yield* store.append("bench", prepared.slice(i, i + batch), { expectedSeq: i })
    }
    timing.ms = performance.now() - t0
  })

/** The events of the workload as built by a session (for the raw baselines). */
const eventsFor = (n: number): Promise<ReadonlyArray<Event>> =>
  Effect.runPromise(
    Effect.scoped(appendThroughSession(n, true)).pipe(
      Effect.provide(storeLayer("sqlite", fresh("sqlite")))
    )
  )

// --- raw baselines ---------------------------------------------------------------------------

const rawSqlite = (events: ReadonlyArray<Event>, batch: number, file = fresh("sqlite")) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.exec(
    "CREATE TABLE events (session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL, source_event_seqs TEXT, surface_op TEXT, ignorable INTEGER, PRIMARY KEY (session_id, seq)) STRICT"
  )
  const insert = db.prepare("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
  // the JSON text of the columns is made inside the timed loop: any writer of events pays it
  const tx = db.transaction((chunk: ReadonlyArray<Event>) => {
    for (const e of chunk) {
      insert.run(
        "bench",
        e.seq,
        e.type,
        e.time,
        JSON.stringify(e.data),
        e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
        e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
        e.ignorable === true ? 1 : null
      )
    }
  })
  const t0 = performance.now()
  for (let i = 0; i < events.length; i += batch) tx(events.slice(i, i + batch))
  const elapsed = performance.now() - t0
  db.close()
  return elapsed
}

const rawJsonl = (events: ReadonlyArray<Event>, batch: number, dir = fresh("jsonl")) => {
  const file = nodePath.join(dir, "raw.jsonl")
  const fd = fs.openSync(file, "a")
  // the lines are serialised inside the timed loop: any writer of events pays it
  const t0 = performance.now()
  for (let i = 0; i < events.length; i += batch) {
    let text = ""
    for (const e of events.slice(i, i + batch)) text += JSON.stringify(e) + "\n"
    fs.writeSync(fd, text)
    fs.fsyncSync(fd)
  }
  const elapsed = performance.now() - t0
  fs.closeSync(fd)
  return elapsed
}

const rawResume = async (backend: Backend, location: string) => {
  if (backend === "postgres") return Pg.rawResume(location)
  const t0 = performance.now()
  let n = 0
  if (backend === "sqlite") {
    const db = new Database(location, { readonly: true })
    for (const row of db.prepare("SELECT data, source_event_seqs, surface_op FROM events ORDER BY seq").iterate()) {
      const r = row as { data: string; source_event_seqs: string | null; surface_op: string | null }
      JSON.parse(r.data)
      if (r.source_event_seqs !== null) JSON.parse(r.source_event_seqs)
      if (r.surface_op !== null) JSON.parse(r.surface_op)
      n++
    }
    db.close()
  } else {
    const text = fs.readFileSync(nodePath.join(location, "raw.jsonl"), "utf8")
    for (const line of text.split("\n")) {
      if (line.length > 0) {
        JSON.parse(line)
        n++
      }
    }
  }
  return { ms: performance.now() - t0, rows: n }
}

// --- measurements ----------------------------------------------------------------------------

interface Row {
  readonly backend: Backend
  readonly phase: string
  readonly events: number
  readonly ms: number
  readonly rawMs: number
  readonly higherIsBetter: boolean
  readonly target: string
}


/** Ours and the raw baseline back to back, in alternating order from run to run (disk drift hits both). */
const pair = async (rawFirst: boolean, ours: () => Promise<number>, raw: () => number | Promise<number>) => {
  if (rawFirst) {
    const rawMs = await raw()
    return { ms: await ours(), rawMs }
  }
  const ms = await ours()
  return { ms, rawMs: await raw() }
}

/**
 * The resume measurement runs in a fresh child process (a resume is what a process does when it
 * starts on an existing session; the bench process's own heap of workloads would otherwise tax
 * every garbage collection of the phase): one untimed warm-up of each, then `RESUME_PAIRS`
 * alternating pairs of (raw read + parse, SessionLive.open + messages); the child prints the medians.
 */
const RESUME_PAIRS = 3

const resumeChild = async (backend: Backend, location: string, rawLocation: string) => {
  const ours = async () => {
    const timing = { ms: 0 }
    await run(
      Effect.gen(function*() {
        const t0 = performance.now()
        const s = yield* SessionLive.open("bench")
        yield* s.messages
        timing.ms = performance.now() - t0
      }),
      backend,
      location
    )
    return timing.ms
  }
  const raws: Array<number> = []
  const oursMs: Array<number> = []
  let rows = 0
  await rawResume(backend, rawLocation)
  await ours()
  for (let i = 0; i < RESUME_PAIRS; i++) {
    const p = await pair(i % 2 === 1, ours, async () => {
      const r = await rawResume(backend, rawLocation)
      rows = r.rows
      return r.ms
    })
    raws.push(p.rawMs)
    oursMs.push(p.ms)
  }
  process.stdout.write(JSON.stringify({ ms: median(oursMs), rawMs: median(raws), rows }))
}

const resumeInChild = (
  backend: Backend,
  location: string,
  rawLocation: string
): { ms: number; rawMs: number; rows: number } => {
  const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), "--resume-child", backend, location, rawLocation], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 1 << 20
  })
  if (child.status !== 0) throw new Error(`resume child failed with status ${child.status}`)
  return JSON.parse(child.stdout) as { ms: number; rawMs: number; rows: number }
}

const measure = async (runIndex: number): Promise<Array<Row>> => {
  const rows: Array<Row> = []
  const rawFirst = runIndex % 2 === 1
  const perAppendEvents = await eventsFor(PER_APPEND)
  const batchedEvents = await eventsFor(BATCHED)
  for (const backend of backends()) {
    const rawAppend = (events: ReadonlyArray<Event>, batch: number) => () =>
      backend === "sqlite" ? rawSqlite(events, batch) : backend === "postgres" ? Pg.rawAppend(events, batch) : rawJsonl(events, batch)
    const timed = (effect: (timing: { ms: number }) => Effect.Effect<unknown, unknown, SessionStore | Scope.Scope>) =>
    async () => {
      const timing = { ms: 0 }
      await run(effect(timing), backend, await freshAny(backend))
      return timing.ms
    }
    // (a) durable per-append: one SessionStore.append per event, and the same through Session.append
    {
      const store = await pair(rawFirst, timed((t) => appendThroughStore(perAppendEvents, 1, t)), rawAppend(perAppendEvents, 1))
      rows.push({ backend, phase: "durable per-append (store)", events: PER_APPEND, ...store, higherIsBetter: true, target: ">= 0.75" })
      const session = await pair(rawFirst, timed((t) => appendThroughSession(PER_APPEND, false, t)), rawAppend(perAppendEvents, 1))
      rows.push({ backend, phase: "durable per-append (Session)", events: PER_APPEND, ...session, higherIsBetter: true, target: "" })
    }
    // (b) batches of 100: SessionStore.append of 100 events, and a batched Session flushed every 100
    {
      const store = await pair(rawFirst, timed((t) => appendThroughStore(batchedEvents, BATCH, t)), rawAppend(batchedEvents, BATCH))
      rows.push({ backend, phase: `batched append ${BATCH}/batch (store)`, events: BATCHED, ...store, higherIsBetter: true, target: ">= 0.6" })
      const session = await pair(rawFirst, timed((t) => appendThroughSession(BATCHED, true, t)), rawAppend(batchedEvents, BATCH))
      rows.push({ backend, phase: `batched append ${BATCH}/batch (Session)`, events: BATCHED, ...session, higherIsBetter: true, target: "" })
    }
    // (c) resume of a RESUME-event session, measured in a fresh child process
    {
      const loc = await freshAny(backend)
      const resumed = await run(appendThroughSession(RESUME, true), backend, loc)
      // the raw baseline reads a plain copy of the same events, one row or line per event
      let rawLoc: string
      if (backend === "postgres") {
        rawLoc = (await Pg.rawAppendAt(resumed, BATCH)).url
      } else {
        rawLoc = fresh(backend)
        if (backend === "sqlite") rawSqlite(resumed, BATCH, rawLoc)
        else rawJsonl(resumed, BATCH, rawLoc)
      }
      const r = resumeInChild(backend, loc, rawLoc)
      rows.push({ backend, phase: "resume (open + derive)", events: r.rows, ms: r.ms, rawMs: r.rawMs, higherIsBetter: false, target: "<= 2x" })
    }
  }
  // (d) PostgreSQL: aggregate durable appends of N sessions appending one event at a time, concurrently
  if (backends().includes("postgres")) {
    const events = perAppendEvents.slice(0, CONCURRENT_APPENDS)
    for (const n of CONCURRENCY) {
      const p = await pair(rawFirst, () => Pg.concurrentAppends(events, n), () => Pg.rawConcurrentAppends(events, n))
      rows.push({
        backend: "postgres",
        phase: `concurrent per-append, ${n} session${n === 1 ? "" : "s"}`,
        events: n * events.length,
        ...p,
        higherIsBetter: true,
        target: ""
      })
    }
  }
  return rows
}


const ratioOf = (r: Row) => r.higherIsBetter ? r.rawMs / r.ms : r.ms / r.rawMs

/** One untimed round of each append path on a small workload, so no measured run starts with a cold JIT. */
const warmUp = async () => {
  const events = await eventsFor(Math.min(500, BATCHED))
  for (const backend of backends()) {
    for (const batch of [1, BATCH]) {
      await run(appendThroughStore(events, batch, { ms: 0 }), backend, await freshAny(backend))
      if (backend === "sqlite") rawSqlite(events, batch)
      else if (backend === "postgres") await Pg.rawAppend(events, batch)
      else rawJsonl(events, batch)
    }
    await run(appendThroughSession(events.length, false), backend, await freshAny(backend))
    await run(appendThroughSession(events.length, true), backend, await freshAny(backend))
  }
}

/** Why there are no PostgreSQL rows (no server binaries, BENCH_PG=0), or undefined. */
const pgSkipped = Pg.postgresUnavailable()

/** The measured backends: all available ones, or those BENCH_BACKENDS names (e.g. `postgres`). */
const backends = (): ReadonlyArray<Backend> => {
  const available: ReadonlyArray<Backend> = pgSkipped === undefined ? ["sqlite", "jsonl", "postgres"] : ["sqlite", "jsonl"]
  const chosen = process.env.BENCH_BACKENDS?.split(",")
  return chosen === undefined ? available : available.filter((b) => chosen.includes(b))
}

const main = async () => {
  if (backends().includes("postgres")) await Pg.startServer()
  else console.log(`(no PostgreSQL rows: ${pgSkipped})`)
  try {
    await measureAll()
  } finally {
    Pg.stopServer()
  }
}

const measureAll = async () => {
  await warmUp()
  const runs: Array<Array<Row>> = []
  for (let r = 0; r < RUNS; r++) runs.push(await measure(r))
  // medians over the runs (disk and scheduler noise is large here); the ratio is the median of
  // the per-run ratios, each taken between two measurements made back to back
  const rows = runs[0].map((row, i) => ({
    ...row,
    ms: median(runs.map((run) => run[i].ms)),
    rawMs: median(runs.map((run) => run[i].rawMs)),
    ratio: median(runs.map((run) => ratioOf(run[i])))
  }))
  console.log(`effect-session-log store bench, node ${process.version}, ${os.cpus().length} cores, median of ${RUNS} runs`)
  console.log("")
  const header = ["backend", "phase", "events", "ms", "events/s", "raw ms", "raw events/s", "ratio", "target"]
  const body = rows.map((r) => [
    r.backend,
    r.phase,
    fmt(r.events),
    fmt(r.ms, 1),
    fmt(r.events / (r.ms / 1000)),
    fmt(r.rawMs, 1),
    fmt(r.events / (r.rawMs / 1000)),
    r.higherIsBetter ? `${fmt(r.ratio, 2)}x` : `${fmt(r.ratio, 2)}x time`,
    r.target
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)))
  for (const line of [header, ...body]) console.log(line.map((c, i) => c.padEnd(widths[i])).join("  "))
  console.log("")
  console.log("ratio: raw time / our time for appends (1.00x = as fast as the raw baseline); our time / raw time for resume;")
  console.log("each ratio is the median over the runs of the ratio between two back-to-back measurements")
  fs.rmSync(tmp, { recursive: true, force: true })
}

const argv = process.argv.slice(2)
const entry = argv[0] === "--resume-child"
  ? resumeChild(argv[1] as Backend, argv[2], argv[3]).finally(() => fs.rmSync(tmp, { recursive: true, force: true }))
  : main()
entry.catch((e) => {
  console.error(e)
  process.exit(1)
})
