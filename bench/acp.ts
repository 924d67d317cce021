/**
 * ACP load benchmark (`npx tsx bench/acp.ts`): a 10,000-event session (the realistic workload of
 * bench/core.ts) in a SQLite file; the time of an ACP `session/load` through the SDK's in-process
 * connection (open with repair check, stream the whole transcript as awaited updates, answer)
 * against reading and folding the session (`SessionLive.open` plus the derived messages). The
 * issue's target: under 2x. Median of the pairwise ratios of BENCH_RUNS (default 5) runs, after a
 * warm-up, alternating the order.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { performance } from "node:perf_hooks"
import * as HeaderSnapshotterLive from "../src/layers/session/HeaderSnapshotterLive.js"
import { layer as layerScriptedLanguageModel } from "../src/layers/model/ScriptedLanguageModel.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import { layer as layerSqliteStore } from "../src/layers/sql/sqlite/SqliteStore.js"
import * as Acp from "../src/programs/acp/Acp.js"
import { buildWorkload } from "./core.js"
import { median } from "./stats.js"

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000)
const RUNS = Number(process.env.BENCH_RUNS ?? 5)
const CWD = "/bench/project"

const ReadFile = Tool.make("read_file", { parameters: { path: Schema.String }, success: Schema.String })
const toolkit = Toolkit.make(ReadFile)
const handlers = toolkit.toLayer({ read_file: () => Effect.succeed("") })

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-bench-acp-"))
const store = layerSqliteStore({ filename: path.join(dir, "bench.db") })
const env = Layer.mergeAll(
  Acp.layerSessionFactory({ create: SessionLive.create, open: SessionLive.open }),
  layerScriptedLanguageModel({ scripts: [] }),
  HeaderSnapshotterLive.layer,
  handlers
).pipe(Layer.provideMerge(store))

const write = Effect.scoped(Effect.gen(function*() {
  const session = yield* SessionLive.create({ id: "bench", header: { cwd: CWD }, persistence: { mode: "batched" } })
  for (const p of buildWorkload(EVENTS)) yield* session.appendUnknown(p.type, p.data, p.opts)
  yield* session.flush
  return (yield* session.events).length
}))

/** Read and fold: open (read, validate, repair check, fold) and derive the messages. */
const readAndFold = Effect.scoped(Effect.gen(function*() {
  const start = performance.now()
  const session = yield* SessionLive.open("bench")
  const messages = yield* session.messages
  return { ms: performance.now() - start, size: messages.length }
}))

/** An ACP session/load on a fresh connection, until its answer. */
const acpLoad = Effect.scoped(Effect.gen(function*() {
  const app = yield* Acp.makeAgentApp({ toolkit, system: "bench", route: { provider: "p", model: "m" } })
  let updates = 0
  const client = acp.client().onNotification(acp.methods.client.session.update, () => {
    updates++
  })
  const connection = client.connect(app)
  connection.closed.catch(() => undefined)
  yield* Effect.addFinalizer(() => Effect.sync(() => connection.close()))
  yield* Effect.promise(() => connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION }))
  const start = performance.now()
  yield* Effect.promise(() => connection.agent.request("session/load", { sessionId: "bench", cwd: CWD, mcpServers: [] }))
  return { ms: performance.now() - start, size: updates }
}))


const main = Effect.gen(function*() {
  const events = yield* write
  yield* readAndFold
  yield* acpLoad
  const ratios: Array<number> = []
  const base: Array<number> = []
  const load: Array<number> = []
  let updates = 0
  for (let i = 0; i < RUNS; i++) {
    const first = i % 2 === 0
    const a = first ? yield* readAndFold : undefined
    const b = yield* acpLoad
    const c = first ? a! : yield* readAndFold
    base.push(c.ms)
    load.push(b.ms)
    updates = b.size
    ratios.push(b.ms / c.ms)
  }
  console.log(`events ${events}, replayed updates ${updates}`)
  console.log(`read + fold (open, derive): median ${median(base).toFixed(1)} ms`)
  console.log(`ACP session/load (open, replay, answer): median ${median(load).toFixed(1)} ms`)
  console.log(`ratio: ${median(ratios).toFixed(2)}x (target < 2x)`)
}).pipe(Effect.provide(env), Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))))

Effect.runPromise(main).catch((e) => {
  console.error(e)
  process.exit(1)
})
