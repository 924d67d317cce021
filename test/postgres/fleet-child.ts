/**
 * One agent of the fleet test (fleet.test.ts): a separate OS process appending to shared
 * PostgreSQL sessions in a seeded random order, with expected seqs it read before the go signal
 * (so its first append to each session races the other agents'). Prints `ready` once it has read
 * every session, then `ack <session> <seq> <count>` per acknowledged batch and `conflict
 * <session>` per AppendConflict (after which it re-reads the session and retries the batch).
 * Usage: node fleet-child.cjs <url> <goFile> <seed> <rounds> <session>...
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { existsSync } from "node:fs"
import { makePostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import type { Event } from "../../src/schema/Events.js"

/** mulberry32 (as test/helpers/processes.ts, whose import.meta does not survive the CJS bundle). */
const prng = (seed: number) => {
  let s = seed >>> 0
  return (n: number): number => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n)
  }
}

const [url, go, seedArg, roundsArg, ...sessions] = process.argv.slice(2)
const random = prng(Number(seedArg))
const rounds = Number(roundsArg)
const writer = `pid-${process.pid}`

const batch = (from: number, count: number, n: number): Array<Event> =>
  Array.from({ length: count }, (_, k) =>
    ({ type: "test/fleet", seq: from + k, time: 1_000, data: { writer, n: n + k }, ignorable: true }) as unknown as Event)

const program = Effect.gen(function*() {
  const store = yield* makePostgresStore({ url, maxConnections: 2 })
  const next = new Map<string, number>()
  for (const id of sessions) next.set(id, (yield* store.load(id)).events.length)
  yield* Console.log("ready")
  while (!existsSync(go)) yield* Effect.sleep("2 millis")
  let n = 0
  for (let round = 0; round < rounds; round++) {
    const order = [...sessions.keys()]
    for (let i = order.length - 1; i > 0; i--) {
      const j = random(i + 1)
      ;[order[i], order[j]] = [order[j], order[i]]
    }
    for (const s of order) {
      const id = sessions[s]
      const count = 1 + random(3)
      for (;;) {
        const from = next.get(id)!
        const result = yield* Effect.either(store.append(id, batch(from, count, n), { expectedSeq: from }))
        if (result._tag === "Right") {
          yield* Console.log(`ack ${s} ${from} ${count}`)
          next.set(id, from + count)
          n += count
          break
        }
        if (result.left._tag !== "AppendConflict") return yield* result.left
        yield* Console.log(`conflict ${s}`)
        next.set(id, (yield* store.load(id)).events.length)
      }
      if (random(2) === 0) yield* Effect.sleep(random(3))
    }
  }
})

NodeRuntime.runMain(Effect.scoped(program))
