/**
 * Fleet benchmark (`npm run bench:fleet`, issue 34, docs/fleet.md): runner processes of the CLI
 * bundle (`session-log fleet runner`, the keyless scripted model: one model call per turn, 10
 * input and 5 output tokens) on a PostgreSQL server started for the bench (fsync on), and a client
 * in this process (`FleetRunner.layerClient`).
 *
 * - turns per second with 1, 2 and 3 runners: SESSIONS sessions, TURNS prompts each, one prompt
 *   in flight per session, every session at once (a fresh database per row), once the shards
 *   have settled over the runners;
 * - failover: with 3 runners, one killed with SIGKILL, then one prompt to each of its sessions:
 *   the time from the kill to each answer (`--lock-expiration` LOCK_MS);
 * - the overhead of a routed prompt (one session, one prompt at a time) against a local
 *   `AgentLoop` turn on the same store and model in this process, and a streamed prompt
 *   (`Fleet.promptStream`, following the session's log): its first update and its answer.
 */
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { execFileSync, spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { performance } from "node:perf_hooks"
import { layerClient } from "../src/layers/fleet/FleetRunner.js"
import * as HeaderSnapshotterLive from "../src/layers/session/HeaderSnapshotterLive.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"
import * as PostgresStore from "../src/layers/sql/postgres/PostgresStore.js"
import * as AgentLoop from "../src/programs/agent/AgentLoop.js"
import { keylessFleetModel } from "../src/programs/cli/FleetMain.js"
import * as Fleet from "../src/programs/fleet/Fleet.js"
import { Session } from "../src/services/Session.js"
import { type Cluster, startCluster, withClient } from "../test/helpers/postgres.js"
import { fmt, median } from "./stats.js"

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 24)
const TURNS = Number(process.env.BENCH_TURNS ?? 10)
const LOCK_MS = Number(process.env.BENCH_LOCK_MS ?? 3_000)
const SEQUENTIAL = Number(process.env.BENCH_SEQUENTIAL ?? 50)

const repo = resolve(import.meta.dirname, "..")
const work = mkdtempSync(join(tmpdir(), "bench-fleet-"))
execFileSync(process.execPath, [join(repo, "scripts/build-cli.mjs"), join(repo, "dist", `cli-bench-fleet-${process.pid}`)])
const bundle = join(repo, "dist", `cli-bench-fleet-${process.pid}`, "session-log.mjs")

const freePort = (): Promise<number> =>
  new Promise((ok, fail) => {
    const server = net.createServer()
    server.once("error", fail)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? ok(address.port) : fail(new Error("no port"))))
    })
  })

interface Runner {
  readonly address: string
  readonly child: ChildProcess
  readonly ready: Promise<void>
  readonly exited: Promise<void>
}

const startRunner = async (url: string): Promise<Runner> => {
  const address = `127.0.0.1:${await freePort()}`
  const child = spawn(process.execPath, [bundle, "fleet", "runner", "--store", url, "--listen", address, "--lock-expiration", String(LOCK_MS)], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { ...process.env, NODE_PATH: join(repo, "node_modules") }
  })
  let err = ""
  const exited = new Promise<void>((ok) => child.once("exit", () => ok()))
  const ready = new Promise<void>((ok, fail) => {
    child.stderr!.setEncoding("utf8").on("data", (t: string) => {
      err += t
      if (err.includes(`runner ${address} ready`)) ok()
    })
    void exited.then(() => fail(new Error(`runner ${address} exited: ${err}`)))
  })
  return { address, child, ready, exited }
}

const stop = async (runners: ReadonlyArray<Runner>) => {
  for (const r of runners) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill("SIGTERM")
  await Promise.all(runners.map((r) => r.exited))
}

let databases = 0
const freshDatabase = async (cluster: Cluster): Promise<string> => {
  const name = `bench_fleet_${++databases}`
  await withClient(cluster.adminUrl, (c) => c.query(`CREATE DATABASE ${name} OWNER session_log`))
  const u = new URL(cluster.url)
  u.pathname = `/${name}`
  return u.toString()
}

/** Run `program` with a fleet client of `url`. */
const withFleetClient = <A, E>(url: string, program: (client: Effect.Effect.Success<typeof Fleet.client>) => Effect.Effect<A, E>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Fleet.client, program).pipe(Effect.provide(layerClient({ url })))))

let prompts = 0
const ask = (client: Effect.Effect.Success<typeof Fleet.client>, session: string, text: string) =>
  client(session).prompt(new Fleet.PromptRequest({ promptId: `bench-${++prompts}`, text }))

/**
 * Warm-up: every session created, until the shards have settled over the `n` runners (runners
 * that start together take their shares over a few refreshes): the owners of the last round.
 */
const settle = (client: Effect.Effect.Success<typeof Fleet.client>, sessions: ReadonlyArray<string>, n: number) =>
  Effect.gen(function*() {
    for (let round = 0;; round++) {
      const answers = yield* Effect.forEach(sessions, (s) => ask(client, s, "warm"), { concurrency: "unbounded" })
      if (new Set(answers.map((a) => a.runner)).size >= Math.min(n, sessions.length) || round >= 30) return answers
      yield* Effect.sleep("500 millis")
    }
  })

const throughput = async (cluster: Cluster, n: number) => {
  const url = await freshDatabase(cluster)
  const runners = await Promise.all(Array.from({ length: n }, () => startRunner(url)))
  try {
    await Promise.all(runners.map((r) => r.ready))
    return await withFleetClient(url, (client) =>
      Effect.gen(function*() {
        const sessions = Array.from({ length: SESSIONS }, (_, i) => `t-${i}`)
        yield* settle(client, sessions, n)
        const start = performance.now()
        yield* Effect.forEach(sessions, (s) => Effect.forEach(Array.from({ length: TURNS }), (_, i) => ask(client, s, `turn ${i}`)), {
          concurrency: "unbounded"
        })
        const seconds = (performance.now() - start) / 1000
        return (SESSIONS * TURNS) / seconds
      }))
  } finally {
    await stop(runners)
  }
}

const failover = async (cluster: Cluster) => {
  const url = await freshDatabase(cluster)
  const runners = await Promise.all(Array.from({ length: 3 }, () => startRunner(url)))
  try {
    await Promise.all(runners.map((r) => r.ready))
    return await withFleetClient(url, (client) =>
      Effect.gen(function*() {
        const sessions = Array.from({ length: SESSIONS }, (_, i) => `f-${i}`)
        const warm = yield* settle(client, sessions, 3)
        const victim = runners[0]
        const theirs = warm.filter((a) => a.runner === victim.address).map((a) => a.sessionId)
        const killed = performance.now()
        victim.child.kill("SIGKILL")
        const times = yield* Effect.forEach(
          theirs,
          (s) => Effect.map(ask(client, s, "after the kill"), () => performance.now() - killed),
          { concurrency: "unbounded" }
        )
        return { sessions: theirs.length, median: median(times), max: Math.max(...times) }
      }))
  } finally {
    await stop(runners)
  }
}

const overhead = async (cluster: Cluster) => {
  const url = await freshDatabase(cluster)
  const [runner] = [await startRunner(url)]
  try {
    await runner.ready
    const routed = await withFleetClient(url, (client) =>
      Effect.gen(function*() {
        yield* ask(client, "o-routed", "warm")
        const times: Array<number> = []
        for (let i = 0; i < SEQUENTIAL; i++) {
          const t = performance.now()
          yield* ask(client, "o-routed", `turn ${i}`)
          times.push(performance.now() - t)
        }
        return median(times)
      }))
    const loop = AgentLoop.make({ toolkit: Toolkit.empty, system: "You are an agent of a session-log fleet.", route: { provider: "scripted", model: "keyless-fleet" } })
    const local = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const session = yield* SessionLive.create({ id: "o-local", persistence: { mode: "batched" } })
      const turn = loop.runTurn([{ type: "user", content: "warm" }]).pipe(Effect.provideService(Session, session))
      yield* turn
      const times: Array<number> = []
      for (let i = 0; i < SEQUENTIAL; i++) {
        const t = performance.now()
        yield* loop.runTurn([{ type: "user", content: `turn ${i}` }]).pipe(Effect.provideService(Session, session))
        times.push(performance.now() - t)
      }
      return median(times)
    })).pipe(
      Effect.provide(Layer.mergeAll(PostgresStore.layer({ url }), keylessFleetModel, HeaderSnapshotterLive.layer, Toolkit.empty.toLayer({})))
    ))
    // a streamed prompt: the client follows the session's log while the runner runs the turn
    const streamed = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const once = (text: string) =>
        Effect.gen(function*() {
          const t = performance.now()
          let first: number | undefined
          yield* Fleet.promptStream("o-streamed", new Fleet.PromptRequest({ promptId: `bench-${++prompts}`, text })).pipe(
            Stream.runForEach(() => Effect.sync(() => void (first ??= performance.now() - t)))
          )
          return { first: first!, answer: performance.now() - t }
        })
      yield* once("warm")
      const times: Array<{ first: number; answer: number }> = []
      for (let i = 0; i < SEQUENTIAL; i++) times.push(yield* once(`turn ${i}`))
      return { first: median(times.map((x) => x.first)), answer: median(times.map((x) => x.answer)) }
    })).pipe(Effect.provide(Layer.merge(layerClient({ url }), PostgresStore.layer({ url })))))
    return { routed, local, streamed }
  } finally {
    await stop([runner])
  }
}

const main = async () => {
  const cluster = await startCluster({ fsync: true, alsoRemove: work })
  try {
    console.log(`fleet bench: ${SESSIONS} sessions x ${TURNS} turns, lock expiration ${LOCK_MS} ms, Node ${process.version}`)
    console.log("\nrunners | turns/s")
    for (const n of [1, 2, 3]) console.log(`${n}       | ${fmt(await throughput(cluster, n), 1)}`)
    const f = await failover(cluster)
    console.log(`\nfailover: ${f.sessions} sessions of the killed runner answered again after ${fmt(f.median)} ms (median), ${fmt(f.max)} ms (max)`)
    const o = await overhead(cluster)
    console.log(`\none prompt at a time (median of ${SEQUENTIAL}): routed ${fmt(o.routed, 1)} ms, local AgentLoop turn ${fmt(o.local, 1)} ms, overhead ${fmt(o.routed - o.local, 1)} ms`)
    console.log(`streamed (Fleet.promptStream, median of ${SEQUENTIAL}): first update ${fmt(o.streamed.first, 1)} ms, answer ${fmt(o.streamed.answer, 1)} ms`)
  } finally {
    cluster.remove()
    rmSync(work, { recursive: true, force: true })
    rmSync(join(repo, "dist", `cli-bench-fleet-${process.pid}`), { recursive: true, force: true })
  }
}

await main()
