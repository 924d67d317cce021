/**
 * A fleet of agents on one PostgreSQL database (SPEC §7.1 optimistic concurrency, §7.6 "the
 * database decides the winner"): 4 OS processes × 8 shared sessions, appending in seeded random
 * interleavings with conflicting writers. Every acknowledged event is stored exactly once and
 * nothing else is; every agent's first append to a session races the others' at the same expected
 * seq, so exactly one wins and the losers get AppendConflict; every session validates afterwards.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { makePostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import type { Event } from "../../src/schema/Events.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { bundleScript, childEnv } from "../helpers/processes.js"
import { describePg, freshUrl } from "./helpers.js"

const AGENTS = 4
const SESSIONS = 8
/** 1 round in `npm test`, 4 in `npm run test:slow` (TEST_SUITE=slow). */
const ROUNDS = Number(process.env.FLEET_ROUNDS ?? (process.env.TEST_SUITE === "slow" ? "4" : "1"))
const SEED = Number(process.env.FLEET_SEED ?? "20261201")

const work = mkdtempSync(join(tmpdir(), "fleet-"))
afterAll(() => rmSync(work, { recursive: true, force: true }))

interface Agent {
  readonly ready: Promise<void>
  readonly exited: Promise<{ readonly code: number | null; readonly stdout: Array<string>; readonly stderr: string }>
}

const startAgent = (bundle: string, url: string, go: string, seed: number, ids: ReadonlyArray<string>): Agent => {
  const child = spawn(process.execPath, [bundle, url, go, String(seed), String(ROUNDS), ...ids], {
    env: childEnv(),
    stdio: ["ignore", "pipe", "pipe"]
  })
  const stdout: Array<string> = []
  let stderr = ""
  let pending = ""
  let onReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (onReady = resolve))
  child.stdout!.setEncoding("utf8").on("data", (text: string) => {
    pending += text
    const lines = pending.split("\n")
    pending = lines.pop()!
    for (const line of lines) {
      stdout.push(line)
      if (line === "ready") onReady()
    }
  })
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text))
  const exited = new Promise<Agent extends { exited: Promise<infer R> } ? R : never>((resolve) =>
    child.once("exit", (code) => setImmediate(() => resolve({ code, stdout, stderr })))
  )
  // an agent that dies before `ready` must not hang the test
  void exited.then(onReady)
  return { ready, exited }
}

describePg("PostgreSQL fleet", () => {
  it.scopedLive(
    "§7.6 4 OS processes × 8 shared sessions: acknowledged events stored exactly once, losers get AppendConflict, every session valid",
    () =>
      Effect.gen(function*() {
        const url = yield* freshUrl
        const store = yield* makePostgresStore({ url })
        const ids = Array.from({ length: SESSIONS }, (_, s) => `fleet-${s}`)
        for (const id of ids) {
          yield* store.create({ version: 1, id, createdAt: 1 })
          yield* store.append(id, [{ type: "test/fleet", seq: 0, time: 1, data: { writer: "parent" }, ignorable: true } as unknown as Event], {
            expectedSeq: 0
          })
        }
        const bundle = bundleScript("test/postgres/fleet-child.ts", join(work, "fleet-child.cjs"))
        const go = join(work, "go")
        const agents = Array.from({ length: AGENTS }, (_, a) => startAgent(bundle, url, go, SEED + a, ids))
        yield* Effect.promise(() => Promise.all(agents.map((a) => a.ready)))
        writeFileSync(go, "go")
        const results = yield* Effect.promise(() => Promise.all(agents.map((a) => a.exited)))

        // (session, seq) -> the agent and its counter n that acknowledged it
        const acked = new Map<string, { readonly agent: number; readonly n: number }>()
        const conflicts = new Array<number>(SESSIONS).fill(0)
        results.forEach((result, agent) => {
          assert.strictEqual(result.code, 0, result.stderr)
          let n = 0
          for (const line of result.stdout) {
            const [word, s, seq, count] = line.split(" ")
            if (word === "conflict") conflicts[Number(s)]++
            if (word !== "ack") continue
            for (let k = 0; k < Number(count); k++) {
              const key = `${s}/${Number(seq) + k}`
              assert.isFalse(acked.has(key), `${key} acknowledged twice`)
              acked.set(key, { agent, n: n++ })
            }
          }
        })
        const writers = new Map<number, unknown>()
        let storedTotal = 0
        for (let s = 0; s < SESSIONS; s++) {
          // each agent's first append to the session raced the others' at expected seq 1
          assert.isAtLeast(conflicts[s], AGENTS - 1, `conflicts on session ${s}`)
          const loaded = yield* store.load(ids[s])
          assert.strictEqual(loaded.tornTail, undefined)
          const stored = loaded.events as ReadonlyArray<{ readonly seq: number; readonly data: { writer: string; n: number } }>
          assert.strictEqual(stored.length, 1 + [...acked.keys()].filter((key) => key.startsWith(`${s}/`)).length)
          storedTotal += stored.length - 1
          for (const e of stored.slice(1)) {
            const owner = acked.get(`${s}/${e.seq}`)
            assert.isDefined(owner, `session ${s} seq ${e.seq} stored but never acknowledged`)
            assert.strictEqual(e.data.n, owner!.n)
            if (!writers.has(owner!.agent)) writers.set(owner!.agent, e.data.writer)
            assert.strictEqual(e.data.writer, writers.get(owner!.agent))
          }
          const inspected = yield* SessionLive.inspect(ids[s]).pipe(Effect.provideService(SessionStore, store))
          assert.strictEqual(inspected.events.length, stored.length)
        }
        assert.strictEqual(storedTotal, acked.size)
        assert.strictEqual(new Set(writers.values()).size, AGENTS)
      }),
    120_000
  )
})
