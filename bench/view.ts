/**
 * Viewer benchmark (`npm run bench:view`, docs/viewer.md "Scale", bench/README.md "Viewer"): the
 * viewer's API over a session of 100,000 and 1,000,000 events (BENCH_VIEW_EVENTS overrides, comma
 * list) on the JSONL and the SQLite store (BENCH_VIEW_STORES: jsonl,sqlite), served in process on
 * 127.0.0.1 as `session-log view` serves it (the SQLite store opened read-only, as the command
 * does). Measured: the first open as the app asks for it (the sessions list and the first page
 * with `?wait=0`, while the index is built in the background), when the index is complete (the
 * head waits for it), a page turn (the next page), a page at the middle (read up to it), the last
 * page (the index's tail), provenance of the last event, time travel at the middle and the last
 * seq (from the index's numbers); with the resident memory after each and the peak (VmHWM).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import { createServer } from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import * as readline from "node:readline"
import { make as makeJsonlStore } from "../src/layers/jsonl/JsonlStore.js"
import { make as makeSqliteStore } from "../src/layers/sql/sqlite/SqliteStore.js"
import { makeApp } from "../src/programs/view/Server.js"
import type { Event } from "../src/schema/Events.js"
import { SessionStore, type SessionStoreShape } from "../src/services/SessionStore.js"
import { writeSession } from "../test/helpers/bigSession.js"

const TOKEN = "bench-token"

/** The viewer's app served on a free port of 127.0.0.1 over `store` for this scope: its base URL. */
const serve = (store: SessionStoreShape) =>
  Effect.gen(function*() {
    const app = makeApp({ token: TOKEN, assets: { appJs: "", appCss: "" } })
    const layer = Layer.unwrapScoped(Effect.map(app, (a) => HttpServer.serve(a))).pipe(
      Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
      Layer.provide(Layer.succeed(SessionStore, store))
    )
    const ctx = yield* Layer.build(layer)
    return yield* HttpServer.addressFormattedWith(Effect.succeed).pipe(Effect.provide(ctx))
  })

const SIZES = (process.env.BENCH_VIEW_EVENTS ?? "100000,1000000").split(",").map(Number)
const STORES = (process.env.BENCH_VIEW_STORES ?? "jsonl,sqlite").split(",")

const memory = (): { rss: number; peak: number } => {
  const status = fs.readFileSync("/proc/self/status", "utf8")
  const mb = (key: string) => Math.round(Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0) / 1024)
  return { rss: mb("VmRSS"), peak: mb("VmHWM") }
}

const timed = (base: string, what: string, p: string) =>
  Effect.promise(async () => {
    const t0 = performance.now()
    const res = await fetch(`${base}${p}`, { headers: { "x-session-log-token": TOKEN } })
    const body = await res.text()
    const ms = performance.now() - t0
    if (res.status !== 200) throw new Error(`${p}: ${res.status} ${body.slice(0, 200)}`)
    const { rss, peak } = memory()
    console.log(
      `  ${what.padEnd(30)} ${ms.toFixed(0).padStart(6)} ms  ${(body.length / 1024).toFixed(0).padStart(7)} KiB` +
        `  RSS ${rss} MB (peak ${peak} MB)`
    )
    return ms
  })

/** Copy a JSONL session into a SQLite store through the store's own append, 2,000 events a batch. */
const toSqlite = (jsonl: string, filename: string) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* makeSqliteStore({ filename })
    const lines = readline.createInterface({ input: fs.createReadStream(jsonl), crlfDelay: Infinity })
    const iterator = lines[Symbol.asyncIterator]()
    const first = yield* Effect.promise(() => iterator.next())
    const header = yield* store.create(JSON.parse(first.value as string))
    let batch: Array<Event> = []
    let next = 0
    const flush = Effect.suspend(() => {
      const events = batch
      batch = []
      const expectedSeq = next
      next += events.length
      return store.append(header.id, events, { expectedSeq })
    })
    while (true) {
      const r = yield* Effect.promise(() => iterator.next())
      if (r.done === true) break
      batch.push(JSON.parse(r.value as string) as Event)
      if (batch.length === 2_000) yield* flush
    }
    if (batch.length > 0) yield* flush
  }))

const program = Effect.gen(function*() {
  console.log(
    `viewer API on ${os.cpus().length} cores, Node ${process.version}, load ${os.loadavg()[0].toFixed(1)}, ${new Date().toISOString()}`
  )
  for (const n of SIZES) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-view-"))
    const jsonlDir = path.join(dir, "jsonl")
    fs.mkdirSync(jsonlDir)
    const file = path.join(jsonlDir, "big.jsonl")
    const count = writeSession(file, "big", n)
    for (const kind of STORES) {
      let label = `${count} events, JSONL (${(fs.statSync(file).size / 2 ** 20).toFixed(0)} MiB)`
      let open: Effect.Effect<SessionStoreShape, unknown, Scope.Scope>
      if (kind === "sqlite") {
        const db = path.join(dir, "big.db")
        const t0 = performance.now()
        yield* toSqlite(file, db)
        label = `${count} events, SQLite (${(fs.statSync(db).size / 2 ** 20).toFixed(0)} MiB; written in ${
          ((performance.now() - t0) / 1000).toFixed(0)
        } s)`
        open = makeSqliteStore({ filename: db, readOnly: true })
      } else {
        open = Effect.provide(makeJsonlStore({ root: jsonlDir }), NodeContext.layer)
      }
      console.log(`${label}:`)
      // the peak from here on (Linux: 5 resets VmHWM to the current RSS)
      try {
        fs.writeFileSync("/proc/self/clear_refs", "5")
      } catch {
        console.log("  (peak RSS not reset: it includes what came before)")
      }
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* open
        const base = yield* serve(store)
        // the app's first open: the list and the first page without waiting for the index
        const t0 = performance.now()
        const list = yield* timed(base, "sessions list (?wait=0)", "/api/sessions?wait=0")
        const first = yield* timed(base, "first page (?wait=0)", "/api/sessions/big/events?offset=0&limit=200&wait=0")
        console.log(`  ${"first open (list + first page)".padEnd(30)} ${(list + first).toFixed(0).padStart(6)} ms`)
        // the head waits for the whole index (the build started by the list)
        yield* timed(base, "head (waits for the index)", "/api/sessions/big/head")
        console.log(`  ${"index complete after".padEnd(30)} ${(performance.now() - t0).toFixed(0).padStart(6)} ms`)
        yield* timed(base, "sessions list (indexed)", "/api/sessions?wait=0&reread=0")
        yield* timed(base, "page turn (next page)", "/api/sessions/big/events?offset=200&limit=200")
        const middle = Math.floor(count / 400) * 200
        yield* timed(base, `page at the middle (${middle})`, `/api/sessions/big/events?offset=${middle}&limit=200`)
        const last = Math.floor((count - 1) / 200) * 200
        yield* timed(base, "last page", `/api/sessions/big/events?offset=${last}&limit=200`)
        yield* timed(base, `provenance of ${count - 1}`, `/api/sessions/big/provenance/${count - 1}`)
        yield* timed(base, `time travel at ${Math.floor(count / 2)}`, `/api/sessions/big/at/${Math.floor(count / 2)}`)
        yield* timed(base, `time travel at ${count - 1}`, `/api/sessions/big/at/${count - 1}`)
      }))
    }
    fs.rmSync(dir, { recursive: true, force: true })
  }
}).pipe(Effect.provide(NodeContext.layer))

Effect.runPromise(program).catch((e) => {
  console.error(e)
  process.exit(1)
})
