/**
 * `npm run bench:follow` (issue 31, docs/follow.md): for each backend, the latency from an
 * append's acknowledgement in this process to its delivery by `SessionStore.follow` in another
 * process (p50 and p99 of single-event appends, one at a time), and the CPU an idle follower
 * process uses. Both processes read the same wall clock (`performance.timeOrigin + now()`); a
 * delivery can precede the writer's return from `append` (a negative latency).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { Event } from "../src/schema/Events.js"
import { SessionStore } from "../src/services/SessionStore.js"
import { bundleScript, childEnv } from "../test/helpers/processes.js"
import { type Kind, storeAt } from "../test/follow/layers.js"
import { fmt } from "./stats.js"
import { freshUrl, postgresUnavailable, startServer, stopServer } from "./postgres.js"

const APPENDS = Number(process.env.BENCH_FOLLOW_APPENDS ?? 300)
const IDLE_SECONDS = 5
const work = mkdtempSync(join(tmpdir(), "bench-follow-"))
const script = bundleScript("test/follow/child.ts", join(work, "child.cjs"))

const event = (seq: number): Event =>
  ({ type: "test/plugin", seq, time: 1_000 + seq, data: { n: seq, text: "x".repeat(200) }, ignorable: true }) as unknown as Event

/** utime + stime of `pid`, in seconds (Linux /proc; 100 ticks a second). */
const cpuSeconds = (pid: number): number => {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

const now = () => performance.timeOrigin + performance.now()

const percentile = (xs: ReadonlyArray<number>, p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]

const measure = async (kind: Kind, at: string) => {
  // the store must outlive this function's steps: one scope for the whole measurement
  return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const store = Context.get(yield* Layer.build(storeAt(kind, at)), SessionStore)
    const id = "followed"
    yield* store.create({ version: 1, id, createdAt: 0 })
    yield* store.append(id, [event(0)], { expectedSeq: 0 })
    const proc = spawn(process.execPath, [script, "follow", kind, at, id, "0", "-1"], {
      env: childEnv({ FOLLOW_STAMP: "1" }),
      stdio: ["ignore", "pipe", "inherit"]
    })
    const delivered = new Map<number, number>()
    const waiters: Array<() => void> = []
    let rest = ""
    proc.stdout.setEncoding("utf8").on("data", (text: string) => {
      const parts = (rest + text).split("\n")
      rest = parts.pop()!
      for (const line of parts) {
        const space = line.indexOf(" ")
        delivered.set((JSON.parse(line.slice(space + 1)) as { seq: number }).seq, Number(line.slice(0, space)))
      }
      waiters.splice(0).forEach((wake) => wake())
    })
    const delivery = (seq: number) =>
      Effect.promise(() => new Promise<number>((resolve) => {
        const check = () => delivered.has(seq) ? resolve(delivered.get(seq)!) : waiters.push(check)
        check()
      }))
    yield* delivery(0)
    // idle: nothing written for IDLE_SECONDS
    const before = cpuSeconds(proc.pid!)
    yield* Effect.sleep(`${IDLE_SECONDS} seconds`)
    const idleCpu = (cpuSeconds(proc.pid!) - before) / IDLE_SECONDS
    const latencies: Array<number> = []
    for (let seq = 1; seq <= APPENDS; seq++) {
      yield* store.append(id, [event(seq)], { expectedSeq: seq })
      const acked = now()
      latencies.push((yield* delivery(seq)) - acked)
      yield* Effect.sleep(`${seq % 7} millis`)
    }
    proc.kill("SIGKILL")
    return { p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), idleCpu }
  })))
}

const main = async () => {
  const kinds: Array<Kind> = ["jsonl-plain", "jsonl-packed", "jsonl-compressed", "sqlite"]
  const pgSkip = postgresUnavailable()
  if (pgSkip === undefined) {
    await startServer()
    kinds.push("postgres")
  }
  const rows: Array<string> = []
  try {
    for (const kind of kinds) {
      const at = kind === "postgres" ? await freshUrl() : kind === "sqlite" ? join(mkdtempSync(join(work, "db-")), "s.db") : mkdtempSync(join(work, "dir-"))
      const r = await measure(kind, at)
      rows.push(`| ${kind} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${fmt(r.idleCpu * 100, 2)} % |`)
      console.error(`${kind} done`)
    }
  } finally {
    if (pgSkip === undefined) stopServer()
    rmSync(work, { recursive: true, force: true })
  }
  console.log(`bench:follow: ${APPENDS} single-event appends, each awaited by a follower in another process; idle CPU over ${IDLE_SECONDS} s`)
  if (pgSkip !== undefined) console.log(`(PostgreSQL not measured: ${pgSkip})`)
  console.log("| backend | ack → delivery p50 (ms) | p99 (ms) | idle follower CPU |")
  console.log("|---|---|---|---|")
  for (const row of rows) console.log(row)
}

void main()
