/**
 * Viewer benchmark (`npm run bench:view`, docs/viewer.md "Scale"): the time the viewer's API takes
 * to open a session of 100,000 and 1,000,000 events (BENCH_VIEW_EVENTS overrides, comma list) on
 * the JSONL store, served in process on 127.0.0.1 as `session-log view` serves it: the sessions
 * list, the first and the last page of the timeline, time travel at the middle seq; with the
 * server's peak resident memory after each (the page answers must not grow it with the log).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import { make as makeJsonlStore } from "../src/layers/jsonl/JsonlStore.js"
import { writeSession } from "../test/helpers/bigSession.js"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Layer from "effect/Layer"
import { createServer } from "node:http"
import { makeApp } from "../src/programs/view/Server.js"
import { SessionStore, type SessionStoreShape } from "../src/services/SessionStore.js"

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

const peakRssMb = (): number => {
  const status = fs.readFileSync("/proc/self/status", "utf8")
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0)
  return Math.round(kb / 1024)
}

const timed = (base: string, what: string, p: string) =>
  Effect.promise(async () => {
    const t0 = performance.now()
    const res = await fetch(`${base}${p}`, { headers: { "x-session-log-token": TOKEN } })
    const body = await res.text()
    const ms = performance.now() - t0
    console.log(`  ${what.padEnd(28)} ${ms.toFixed(0).padStart(6)} ms  ${(body.length / 1024).toFixed(0).padStart(7)} KiB  peak RSS ${peakRssMb()} MB`)
  })

const program = Effect.gen(function*() {
  console.log(`viewer open times on ${os.cpus().length} cores, Node ${process.version}, load ${os.loadavg()[0].toFixed(1)}`)
  for (const n of SIZES) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "bench-view-"))
    const count = writeSession(path.join(dir, "big.jsonl"), "big", n)
    const bytes = fs.statSync(path.join(dir, "big.jsonl")).size
    console.log(`${count} events (${(bytes / 2 ** 20).toFixed(0)} MiB of JSONL):`)
    yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* makeJsonlStore({ root: dir })
      const base = yield* serve(store)
      yield* timed(base, "sessions list", "/api/sessions")
      yield* timed(base, "first page (200 events)", "/api/sessions/big/events?offset=0&limit=200")
      yield* timed(base, "last page (200 events)", `/api/sessions/big/events?offset=${count - 200}&limit=200`)
      yield* timed(base, `time travel at ${Math.floor(count / 2)}`, `/api/sessions/big/at/${Math.floor(count / 2)}`)
    }))
    fs.rmSync(dir, { recursive: true, force: true })
  }
}).pipe(Effect.provide(NodeContext.layer))

Effect.runPromise(program).catch((e) => {
  console.error(e)
  process.exit(1)
})
