/**
 * A separate OS process for the store contract's cross-process test (SPEC §7.1 optimistic
 * concurrency): appends `count` events one at a time with the store's expected-seq check.
 * Prints `ack <seq>` after each durable append and `conflict <seq>` on an AppendConflict, then
 * re-reads the stored next seq and retries. Usage:
 *   npx tsx test/store-contract/child-append.ts <jsonl|sqlite|postgres> <location> <sessionId> <count> <startSeq>
 * With `STORE_CONTRACT_GO=<path>` in the environment it prints `ready` once its store is open and
 * waits for that file to exist before the first append, so that two writers really overlap.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { layerPostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"

const [kind, location, sessionId, countArg, startArg] = process.argv.slice(2)
const count = Number(countArg)
const startSeq = Number(startArg)

/** Store failures (e.g. a lock timeout, S6) write nothing; retry a bounded number of times. */
const MAX_FAILURES = 50

/** Wait for the parent's go signal (the file named by STORE_CONTRACT_GO), if any. */
const barrier = Effect.gen(function*() {
  const go = process.env.STORE_CONTRACT_GO
  if (go === undefined || go === "") return
  const fs = yield* FileSystem.FileSystem
  yield* Console.log("ready")
  while (!(yield* fs.exists(go))) yield* Effect.sleep("2 millis")
}).pipe(Effect.provide(NodeContext.layer))

const program = Effect.gen(function*() {
  const store = yield* SessionStore
  yield* store.load(sessionId)
  yield* barrier
  const writer = `pid-${process.pid}`
  let expectedSeq = startSeq
  let failures = 0
  for (let n = 0; n < count;) {
    const event = {
      type: "test/child",
      seq: expectedSeq,
      time: yield* Clock.currentTimeMillis,
      data: { writer, n },
      ignorable: true
    } as unknown as Event
    const result = yield* Effect.either(store.append(sessionId, [event], { expectedSeq }))
    if (result._tag === "Right") {
      yield* Console.log(`ack ${expectedSeq}`)
      expectedSeq++
      n++
      // a little jitter so that the two writers interleave instead of running in bursts
      yield* Effect.sleep(yield* Random.nextIntBetween(0, 4))
      continue
    }
    const error = result.left
    if (error._tag === "AppendConflict") {
      yield* Console.log(`conflict ${expectedSeq}`)
    } else if (error._tag === "StoreFailure" && ++failures <= MAX_FAILURES) {
      yield* Console.log(`failure ${expectedSeq}`)
    } else {
      return yield* error
    }
    expectedSeq = (yield* store.load(sessionId)).events.length
  }
})

const storeLayer = kind === "sqlite"
  ? layerSqliteStore({ filename: location })
  : kind === "postgres"
  ? layerPostgresStore({ url: location })
  : layerJsonlStore({ root: location }).pipe(Layer.provide(NodeContext.layer))

if (kind !== "jsonl" && kind !== "sqlite" && kind !== "postgres") {
  process.stderr.write("usage: child-append.ts <jsonl|sqlite|postgres> <location> <sessionId> <count> <startSeq>\n")
  process.exit(2)
}

NodeRuntime.runMain(program.pipe(Effect.provide(storeLayer)))
