/**
 * A separate OS process of the follow tests (issue 31). Usage:
 *   child.js write <kind> <location> <sessionId> <count> <seed>
 *     appends `count` plugin events (count -1: until killed) after what the session holds, in
 *     batches of 1–8 events, printing `ack <next seq>` after each acknowledged batch;
 *   child.js write-behind <kind> <location> <sessionId> <count>
 *     opens the session through a batched (write-behind) handle, appends `count` user messages,
 *     closes the handle (its last flush) and exits;
 *   child.js follow <kind> <location> <sessionId> <fromSeq> <count>
 *     prints each event `follow` delivers as one JSON line, and exits after `count` (-1: never).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { type Kind, storeAt } from "./layers.js"

const [mode, kind, location, sessionId, a, b] = process.argv.slice(2)

/** mulberry32 (as test/helpers/processes.ts; that module needs the test runner's paths). */
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

const storeLayer = storeAt(kind as Kind, location)

const write = (count: number, seed: number) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const random = prng(seed)
    let next = (yield* store.load(sessionId)).events.length
    for (let written = 0; count < 0 || written < count;) {
      const size = Math.min(1 + random(8), count < 0 ? 8 : count - written)
      const batch = Array.from({ length: size }, (_, k) =>
        ({ type: "test/plugin", seq: next + k, time: 1_000 + next + k, data: { pid: process.pid, n: next + k }, ignorable: true }) as unknown as Event)
      yield* store.append(sessionId, batch, { expectedSeq: next })
      next += size
      written += size
      yield* Console.log(`ack ${next}`)
    }
  })

const follow = (fromSeq: number, count: number) =>
  Effect.flatMap(SessionStore, (store) => {
    const stream = store.follow(sessionId, { fromSeq })
    // FOLLOW_STAMP=1 (bench:follow): each line starts with the wall-clock time of its delivery, in ms
    const stamp = process.env.FOLLOW_STAMP === "1"
    return Stream.runForEach(count < 0 ? stream : Stream.take(stream, count), (e) =>
      Effect.sync(() => void process.stdout.write((stamp ? `${performance.timeOrigin + performance.now()} ` : "") + JSON.stringify(e) + "\n")))
  })

const writeBehind = (count: number) =>
  Effect.scoped(Effect.gen(function*() {
    const session = yield* SessionLive.open(sessionId, { persistence: { mode: "batched", windowMs: 5 } })
    for (let n = 0; n < count; n++) {
      const text = `message ${n} of ${process.pid}`
      yield* session.append("user/message", { id: `u${n}`, role: "user", content: [{ type: "text", text }], source: { kind: "user" } }, {
        surfaceOp: "append"
      })
      if (n % 7 === 0) yield* Effect.sleep("2 millis")
    }
  }))

const program: Effect.Effect<void, unknown, SessionStore> = mode === "write"
  ? write(Number(a), Number(b))
  : mode === "write-behind"
  ? writeBehind(Number(a))
  : follow(Number(a), Number(b))

NodeRuntime.runMain(program.pipe(Effect.provide(storeLayer)), { disableErrorReporting: false })
