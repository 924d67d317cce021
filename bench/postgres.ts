/**
 * The PostgreSQL part of `bench:store`: a server of its own (test/helpers/postgres.ts: initdb into a
 * temporary directory, 127.0.0.1 only, fsync on), a fresh schema per measurement, and the raw
 * node-postgres baselines: one client, named prepared statements, and the transaction shape of the
 * store's append (BEGIN; UPDATE sessions ... WHERE next_seq = expected; one multi-row INSERT;
 * COMMIT), the resume as one SELECT of a session's rows plus `JSON.parse` of each JSON column, and
 * aggregate appends/s of N sessions appending concurrently (ours over one pool; raw with N clients).
 */
import * as Effect from "effect/Effect"
import pg from "pg"
import { performance } from "node:perf_hooks"
import { CANONICAL_SCHEMA, make as makePostgresStore } from "../src/layers/sql/postgres/PostgresStore.js"
import type { Event } from "../src/schema/Events.js"
import { type Cluster, createSchema, findBinaries, startCluster, withClient } from "../test/helpers/postgres.js"

let cluster: Cluster | undefined

/** Why PostgreSQL rows are not measured here, or undefined when they are (BENCH_PG=0 skips them). */
export const postgresUnavailable = (): string | undefined => {
  if (process.env.BENCH_PG === "0") return "BENCH_PG=0"
  const found = findBinaries()
  return "missing" in found ? found.missing : undefined
}

/** Start the bench's server (fsync on: the durability point of SPEC §7.1 costs what it costs). */
export const startServer = async (): Promise<void> => {
  cluster = await startCluster({ fsync: true })
}

/** Stop and remove the bench's server. */
export const stopServer = (): void => {
  cluster?.remove()
  cluster = undefined
}

/** A fresh, empty schema of the bench's server: the URL that uses it. */
export const freshUrl = async (): Promise<string> => (await createSchema(cluster!.url)).url

/**
 * The raw baselines' tables: a `sessions` row per session and one `events` row per event, its
 * JSON fields as text (the plain layout a hand-written event store would use).
 */
const RAW_TABLES = [
  CANONICAL_SCHEMA.find((t) => t.name === "sessions")!.sql,
  `CREATE TABLE events (
     session_id TEXT NOT NULL REFERENCES sessions(id), seq BIGINT NOT NULL, type TEXT NOT NULL, time BIGINT NOT NULL,
     data TEXT NOT NULL, source_event_seqs TEXT, surface_op TEXT, ignorable BOOLEAN, PRIMARY KEY (session_id, seq))`
]

/** A fresh schema holding the raw baselines' tables, with the session `bench` row. */
const freshTables = async (sessions: ReadonlyArray<string>): Promise<string> => {
  const url = await freshUrl()
  await withClient(url, async (c) => {
    for (const table of RAW_TABLES) await c.query(table)
    for (const id of sessions) {
      await c.query("INSERT INTO sessions (id, version, created_at, next_seq, revision) VALUES ($1, 1, 0, 0, 0)", [id])
    }
  })
  return url
}

const COLUMNS = 8

const insertText = (rows: number): string => {
  const tuples: Array<string> = []
  for (let r = 0; r < rows; r++) {
    tuples.push(`(${Array.from({ length: COLUMNS }, (_, c) => `$${r * COLUMNS + c + 1}`).join(", ")})`)
  }
  return "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) VALUES " +
    tuples.join(", ")
}

const ADVANCE = "UPDATE sessions SET next_seq = $1, revision = revision + 1 WHERE id = $2 AND next_seq = $3"

/** The raw append of `chunk` to session `id` at `expected`: the store's transaction shape, prepared statements. */
const rawAppendOne = async (client: pg.Client, id: string, chunk: ReadonlyArray<Event>, expected: number) => {
  // the JSON text of the columns is made inside the timed loop: any writer of events pays it
  const values: Array<unknown> = []
  for (const e of chunk) {
    values.push(
      id,
      e.seq,
      e.type,
      e.time,
      JSON.stringify(e.data),
      e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
      e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
      e.ignorable === true ? true : null
    )
  }
  await client.query("BEGIN")
  const advanced = await client.query({ name: "advance", text: ADVANCE, values: [expected + chunk.length, id, expected] })
  if (advanced.rowCount !== 1) throw new Error("raw baseline: conflict")
  await client.query({ name: `insert-${chunk.length}`, text: insertText(chunk.length), values })
  await client.query("COMMIT")
}

const connect = async (url: string): Promise<pg.Client> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  return client
}

/** Raw baseline of appending `events` to one session, `batch` at a time: elapsed ms. */
export const rawAppend = async (events: ReadonlyArray<Event>, batch: number): Promise<number> =>
  (await rawAppendAt(events, batch)).ms

/** `rawAppend` into a fresh schema, returning it too (the plain copy a raw resume reads). */
export const rawAppendAt = async (
  events: ReadonlyArray<Event>,
  batch: number
): Promise<{ readonly ms: number; readonly url: string }> => {
  const url = await freshTables(["bench"])
  const client = await connect(url)
  const t0 = performance.now()
  for (let i = 0; i < events.length; i += batch) await rawAppendOne(client, "bench", events.slice(i, i + batch), i)
  const ms = performance.now() - t0
  await client.end()
  return { ms, url }
}

/** Raw baseline of a resume: every row of session `bench` of a plain copy (`rawAppendAt`) in one SELECT, each JSON column parsed. */
export const rawResume = async (url: string): Promise<{ readonly ms: number; readonly rows: number }> => {
  const client = await connect(url)
  const t0 = performance.now()
  const result = await client.query<{ data: string; source_event_seqs: string | null; surface_op: string | null }>({
    name: "resume",
    text: "SELECT data, source_event_seqs, surface_op FROM events WHERE session_id = $1 ORDER BY seq",
    values: ["bench"]
  })
  for (const r of result.rows) {
    JSON.parse(r.data)
    if (r.source_event_seqs !== null) JSON.parse(r.source_event_seqs)
    if (r.surface_op !== null) JSON.parse(r.surface_op)
  }
  const ms = performance.now() - t0
  await client.end()
  return { ms, rows: result.rows.length }
}

const sessionIds = (n: number) => Array.from({ length: n }, (_, i) => `bench-${i}`)

/** Ours: `sessions` sessions appending `events` one at a time, concurrently, over one store (pool of `sessions`). */
export const concurrentAppends = async (events: ReadonlyArray<Event>, sessions: number): Promise<number> => {
  const url = await freshUrl()
  const program = Effect.gen(function*() {
    const store = yield* makePostgresStore({ url, maxConnections: sessions })
    const ids = sessionIds(sessions)
    for (const id of ids) yield* store.create({ version: 1, id, createdAt: 0 })
    const t0 = performance.now()
    yield* Effect.forEach(ids, (id) =>
      Effect.gen(function*() {
        for (let i = 0; i < events.length; i++) yield* store.append(id, [events[i]], { expectedSeq: i })
      }), { concurrency: "unbounded", discard: true })
    return performance.now() - t0
  })
  return Effect.runPromise(Effect.scoped(program))
}

/** Raw: `sessions` clients, each appending `events` one at a time to its own session, concurrently. */
export const rawConcurrentAppends = async (events: ReadonlyArray<Event>, sessions: number): Promise<number> => {
  const ids = sessionIds(sessions)
  const url = await freshTables(ids)
  const clients = await Promise.all(ids.map(() => connect(url)))
  const t0 = performance.now()
  await Promise.all(ids.map(async (id, s) => {
    for (let i = 0; i < events.length; i++) await rawAppendOne(clients[s], id, [events[i]], i)
  }))
  const elapsed = performance.now() - t0
  await Promise.all(clients.map((c) => c.end()))
  return elapsed
}
