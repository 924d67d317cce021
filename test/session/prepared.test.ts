/**
 * One append pipeline (SPEC §3.1, §7.1): the session hands the store `PreparedEvent`s (the frozen
 * event with its serialised line) and the store stores them as they are; plain events given to
 * a store directly get the same checks through `prepareBatch`; what only the store knows (its own
 * size cap, the expected seq) is still checked.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { InvalidEnvelope, NotLosslessJson } from "../../src/schema/Errors.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import {
  eventOf,
  isPreparedEvent,
  type PreparedEvent,
  prepareBatch,
  prepareEvent,
  prepareValidated
} from "../../src/services/PrepareEvent.js"
import { validateSeed } from "../../src/services/Seed.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { anyValidLog, appendOptions, asEvents } from "../arbitraries.js"
import { assertUnchanged, snapshot } from "../helpers/state.js"
import { runs } from "../suites.js"

const MAX = 64 * 1024 * 1024

/** A memory store that records every batch item it was handed. */
const recordingStore = (options: { readonly maxEventBytes?: number } = {}) =>
  Effect.gen(function*() {
    const inner = yield* makeMemoryStore(options)
    const seen: Array<Event | PreparedEvent> = []
    const store: SessionStoreShape = {
      ...inner,
      append: (id, events, o) => Effect.suspend(() => (seen.push(...events), inner.append(id, events, o)))
    }
    return { store, seen }
  })

describe("one pipeline: the store takes what the session prepared (SPEC §3.1, §7.1)", () => {
  it.effect("§7.1 each durable append hands the store the prepared event with its line", () =>
    Effect.gen(function*() {
      const { seen, store } = yield* recordingStore()
      const events = yield* Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "p" })
        yield* s.append("turn/start", { turn: 1 })
        yield* s.append("user/message", { role: "user", id: "u1", content: [{ type: "text", text: "hi" }], source: { kind: "user" } }, { surfaceOp: "append" })
        return yield* s.events
      }).pipe(Effect.scoped, Effect.provide(Layer.succeed(SessionStore, store)))
      assert.strictEqual(seen.length, 2)
      seen.forEach((item, i) => {
        assert.isTrue(isPreparedEvent(item))
        const p = item as PreparedEvent
        assert.strictEqual(p.event, events[i], "the very event the session committed")
        assert.strictEqual(p.line, encodeEvent(events[i]))
      })
    }))

  it.effect("§7.1 a batched handle's write-behind hands over prepared events too", () =>
    Effect.gen(function*() {
      const { seen, store } = yield* recordingStore()
      yield* Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "b", persistence: { mode: "batched" } })
        yield* s.append("turn/start", { turn: 1 })
        yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
        yield* s.flush
      }).pipe(Effect.scoped, Effect.provide(Layer.succeed(SessionStore, store)))
      assert.deepStrictEqual(seen.map((e) => isPreparedEvent(e)), [true, true])
      assert.deepStrictEqual(seen.map((e) => eventOf(e).seq), [0, 1])
    }))

  it.effect("B10 the store's own cap applies to prepared events: a smaller store cap refuses, nothing changes", () =>
    Effect.gen(function*() {
      const { store } = yield* recordingStore({ maxEventBytes: 200 })
      const result = yield* Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "cap" })
        yield* s.append("turn/start", { turn: 1 })
        const before = yield* snapshot(s)
        const e = yield* Effect.flip(s.append("todo/write", { todos: [{ content: "x".repeat(500), status: "pending" }] }))
        assertUnchanged(before, yield* snapshot(s))
        return e
      }).pipe(Effect.scoped, Effect.provide(Layer.succeed(SessionStore, store)))
      assert.instanceOf(result, InvalidEnvelope)
      assert.strictEqual(result.rule, "B10")
      assert.strictEqual(result.seq, 1)
      assert.strictEqual((yield* store.load("cap")).events.length, 1)
    }))

  it.effect("§7.1 an object shaped like a prepared event is not one: it is checked as a plain event", () =>
    Effect.gen(function*() {
      const store = yield* makeMemoryStore()
      yield* store.create({ version: 1, id: "f", createdAt: 0 })
      const good = { type: "turn/start", seq: 0, time: 0, data: { turn: 1 } }
      const forged = { event: good, line: encodeEvent(good as Event) }
      const e = yield* Effect.flip(store.append("f", [forged as never], { expectedSeq: 0 }))
      assert.instanceOf(e, InvalidEnvelope)
      const e2 = yield* Effect.flip(store.append("f", [{ ...good, data: { n: 1n } } as never], { expectedSeq: 0 }))
      assert.instanceOf(e2, NotLosslessJson)
      assert.strictEqual((yield* store.load("f")).events.length, 0)
    }))

  it.prop(
    "§3.1/§7.1 on random valid logs the three ways into a store give the same lines: prepareEvent, prepareValidated, prepareBatch of plain events",
    [anyValidLog],
    ([log]) => {
      const events = asEvents(log.events)
      const viaPipeline = events.map((e) => {
        const p = prepareEvent(e.type, e.data, appendOptions(e), { seq: e.seq, time: e.time, maxEventBytes: MAX })
        if ("_tag" in p) throw new Error(`prepareEvent refused seq ${e.seq}: ${p._tag}`)
        return p.line
      })
      const seeded = Effect.runSync(validateSeed(events))
      const validated = prepareValidated(seeded.events, MAX)
      if ("_tag" in validated) throw new Error(validated._tag)
      const batch = prepareBatch(events, 0, MAX)
      if ("_tag" in batch) throw new Error(batch._tag)
      const passed = prepareBatch(validated, 0, MAX)
      if ("_tag" in passed) throw new Error(passed._tag)
      assert.deepStrictEqual(validated.map((p) => p.line), viaPipeline)
      assert.deepStrictEqual(batch.lines, viaPipeline)
      assert.deepStrictEqual(passed.lines, viaPipeline)
      assert.deepStrictEqual(viaPipeline, log.events.map((e) => JSON.stringify(e)))
    },
    { fastCheck: { numRuns: runs(60) } }
  )
})
