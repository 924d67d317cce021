/**
 * SPEC §1.1 key order of every event a session holds, whatever order its record arrived in: the
 * seed pipeline keeps a frozen record that is already in order and rebuilds any other one.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { encodeEvent, isOrderedEnvelope } from "../../src/schema/EventCodec.js"
import { encodeSessionId } from "../../src/schema/SessionIdEncoding.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { anyValidLog } from "../arbitraries.js"

const ORDER = ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"]
const inOrder = (e: object) => {
  const keys = Object.keys(e)
  return keys.every((k, i) => i === 0 || ORDER.indexOf(keys[i - 1]) < ORDER.indexOf(k))
}
/** The same record with its keys in reverse order. */
const reversed = (e: object): Record<string, unknown> =>
  Object.fromEntries(Object.entries(e).reverse())

describe("isOrderedEnvelope", () => {
  const base = { type: "turn/start", seq: 0, time: 1, data: { turn: 1 } }
  it("is true only for a frozen record whose keys are envelope keys in §1.1 order", () => {
    assert.isTrue(isOrderedEnvelope(Object.freeze({ ...base })))
    assert.isTrue(isOrderedEnvelope(Object.freeze({ ...base, surfaceOp: "append", ignorable: true })))
    assert.isFalse(isOrderedEnvelope({ ...base }), "not frozen")
    assert.isFalse(isOrderedEnvelope(Object.freeze(reversed(base))), "out of order")
    assert.isFalse(isOrderedEnvelope(Object.freeze({ ...base, surfaceOp: undefined })), "an undefined value")
    assert.isFalse(isOrderedEnvelope(Object.freeze({ ...base, extra: 1 })), "a foreign key")
    assert.isFalse(isOrderedEnvelope(Object.freeze({ ...base, toString: 1 })), "an inherited name")
    assert.isFalse(isOrderedEnvelope(Object.freeze(JSON.parse(`{"type":"x","__proto__":1}`))), "own __proto__")
    assert.isFalse(isOrderedEnvelope(Object.freeze({ type: "x", type2: 1 })))
  })
})

describe("§1.1 key order of held events", () => {
  it.effect.prop(
    "a seed whose records have their keys reversed is held and serialised in §1.1 order",
    [anyValidLog],
    ([log]) =>
      Effect.gen(function*() {
        const seed = log.events.map((e) => reversed(e))
        const s = yield* SessionLive.fromSeed({ header: { version: 1, id: "s", createdAt: 0 }, seed })
        const events = yield* s.events
        // the seed, then possibly the end-seed marker (SPEC §2.4)
        assert.deepStrictEqual(events.slice(0, log.events.length).map((e) => e.seq), log.events.map((e) => e.seq))
        for (const e of events) {
          assert.isTrue(inOrder(e), Object.keys(e).join(","))
          assert.isTrue(Object.isFrozen(e) && Object.isFrozen(e.data))
          assert.strictEqual(encodeEvent(e), JSON.stringify(Object.fromEntries(ORDER.filter((k) => k in e).map((k) => [k, (e as never)[k]]))))
        }
      }).pipe(Effect.scoped, Effect.provide(layerMemoryStore())),
    { fastCheck: { numRuns: 40 } }
  )

  it.scoped("a JSONL file written with keys out of order opens with every event in §1.1 order", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const log = fc.sample(anyValidLog, { numRuns: 1, seed: 7 })[0]
      const lines = [
        JSON.stringify({ type: "session", version: 1, id: "s", createdAt: 0 }),
        ...log.events.map((e) => JSON.stringify(reversed(e)))
      ]
      yield* fs.writeFileString(`${root}/${encodeSessionId("s")}.jsonl`, lines.join("\n") + "\n")
      const store = yield* makeJsonlStore({ root })
      const s = yield* SessionLive.open("s").pipe(Effect.provideService(SessionStore, store))
      const events = yield* s.events
      assert.isAtLeast(events.length, log.events.length)
      for (const e of events) assert.isTrue(inOrder(e), Object.keys(e).join(","))
      assert.deepStrictEqual(events.slice(0, log.events.length).map((e) => e.seq), log.events.map((e) => e.seq))
    }).pipe(Effect.provide(NodeContext.layer)))
})
