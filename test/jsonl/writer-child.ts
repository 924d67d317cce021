/**
 * One writer process of the JSONL multi-writer test (test/jsonl/writers.test.ts): appends `count`
 * events one at a time to a session with the store's expected-seq check, and prints
 * `ack <seq> <writer>:<n>` once each append is durable. On an AppendConflict it re-reads the
 * stored next seq (and, when a killed writer left a torn tail, removes it as `SessionLive.open`
 * would); a lock timeout (S6) is retried. Usage:
 *   node writer-child.cjs <root> <sessionId> <count>
 * Environment: WRITER_PAUSE_AT=k stops this process (SIGSTOP to itself) on its k-th write, while
 * it holds the lock and after its expected-seq check, printing `paused <seq>` first.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import { layerTest, nodeSyncFileSystem } from "../../src/layers/jsonl/SyncFileSystem.js"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import type { Event } from "../../src/schema/Events.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"

const [root, sessionId, countArg] = process.argv.slice(2)
const count = Number(countArg)
const pauseAt = Number(process.env.WRITER_PAUSE_AT ?? "0")
const writer = `w${process.pid}`

let writes = 0
let seqInFlight = -1
const files = layerTest({
  writeString: (fd, text) => {
    if (++writes === pauseAt) {
      // pipes are synchronous on Linux: the parent has the line before the process stops
      process.stdout.write(`paused ${seqInFlight}\n`)
      process.kill(process.pid, "SIGSTOP")
    }
    return nodeSyncFileSystem.writeString(fd, text)
  }
})

const say = (line: string) => Effect.sync(() => void process.stdout.write(line + "\n"))

const program = Effect.gen(function*() {
  const store = yield* makeJsonlStore({ root, lockTimeoutMs: 60_000 }).pipe(Effect.provide(files))
  let expectedSeq = (yield* store.load(sessionId)).events.length
  for (let n = 0; n < count;) {
    const event = {
      type: "test/writer",
      seq: expectedSeq,
      time: expectedSeq,
      data: { writer, n },
      ignorable: true
    } as unknown as Event
    seqInFlight = expectedSeq
    const result = yield* Effect.either(store.append(sessionId, [event], { expectedSeq }))
    if (result._tag === "Right") {
      yield* say(`ack ${expectedSeq} ${writer}:${n}`)
      expectedSeq++
      n++
      continue
    }
    const error = result.left
    if (error._tag === "AppendConflict" || (error._tag === "StoreFailure" && error.rule === "S6")) {
      const loaded = yield* store.load(sessionId)
      if (loaded.tornTail !== undefined) {
        // a writer killed mid-write left an unacknowledged fragment: remove it (a conflict here
        // means someone else changed the file first; read again)
        yield* Effect.ignore(store.truncateTornTail(sessionId, loaded.tornTail, { revision: loaded.revision }))
      }
      expectedSeq = (yield* store.load(sessionId)).events.length
      continue
    }
    return yield* Effect.fail(error)
  }
  yield* say("done")
})

NodeRuntime.runMain(Effect.scoped(program).pipe(Effect.provide(NodeContext.layer)))
