/**
 * SPEC §8.4 / §3.4 K7, K8, K9 (vocabulary): unknown types are accepted at append (K9) and
 * refused on the next cold read (`SessionLive.open`, `SessionLive.inspect`) unless `ignorable: true`
 * (K7), in which case they load and are preserved (K8).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import { type Event, KNOWN_EVENT_TYPES } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import {
  assertError,
  sessionWith,
  type Step,
  storedText,
  todo,
  uid,
  user,
  withStore
} from "../helpers/state.js"

type Rec = Record<string, unknown>

const prefix: ReadonlyArray<Step> = [user("u0"), todo]

/** A stored session: `prefix` appended through a handle, then `extra` written by `store.append`. */
const storedWith = (extra: ReadonlyArray<Rec>) =>
  Effect.gen(function*() {
    const id = uid("k")
    yield* Effect.scoped(sessionWith(prefix, id))
    const store = yield* SessionStore
    yield* store.append(id, extra as unknown as ReadonlyArray<Event>, { expectedSeq: prefix.length })
    return id
  })

const unknown = (rule: string, seq: number, eventType: string) => ({ _tag: "UnknownEventType", rule, seq, eventType })

describe("K7 unknown required types refuse the cold read", () => {
  for (const type of ["title/set", "approval/request", "prompt/blocked", "plugin/x"]) {
    it.scoped(`K7 SessionLive.open and SessionLive.inspect refuse ${type} without ignorable, naming type and seq; nothing written`, () =>
      withStore(Effect.gen(function*() {
        const id = yield* storedWith([
          { type: "plugin/ok", seq: 2, time: 0, data: null, ignorable: true },
          { type, seq: 3, time: 0, data: { title: "x" } },
          { type: "other/unknown", seq: 4, time: 0, data: {} }
        ])
        const before = yield* storedText(id)
        const e = yield* Effect.flip(Effect.scoped(SessionLive.open(id)))
        assertError(e, unknown("K7", 3, type))
        assert.include(e.message, type)
        assert.include(e.message, "seq 3")
        assertError(yield* Effect.flip(SessionLive.inspect(id)), unknown("K7", 3, type))
        assert.strictEqual(yield* storedText(id), before)
      })))
  }

  it("K7 the known list is exactly the 20 types of §1.4", () => {
    assert.deepStrictEqual([...KNOWN_EVENT_TYPES].sort(), [
      "assistant/chunk",
      "assistant/message",
      "compaction/end",
      "compaction/prune",
      "compaction/start",
      "compaction/summary",
      "context/message",
      "llm/retry",
      "llm/retry-started",
      "request/context",
      "request/header",
      "session/end-seed",
      "step/end",
      "step/start",
      "todo/write",
      "tool/call",
      "tool/result",
      "turn/end",
      "turn/start",
      "user/message"
    ])
  })
})

describe("K8 unknown types with ignorable: true load and are preserved", () => {
  it.scoped("K8 SessionLive.open and SessionLive.inspect accept and preserve them (data may be null)", () =>
    withStore(Effect.gen(function*() {
      const extra = [
        { type: "title/set", seq: 2, time: 7, data: { title: "hello" }, ignorable: true },
        { type: "plugin/ping", seq: 3, time: 8, data: null, ignorable: true }
      ]
      const id = yield* storedWith(extra)
      const inspected = yield* SessionLive.inspect(id)
      assert.deepStrictEqual(inspected.events.slice(2).map(encodeEvent), [
        `{"type":"title/set","seq":2,"time":7,"data":{"title":"hello"},"ignorable":true}`,
        `{"type":"plugin/ping","seq":3,"time":8,"data":null,"ignorable":true}`
      ])
      const s = yield* SessionLive.open(id)
      const events = yield* s.events
      assert.deepStrictEqual(events.slice(2, 4).map(encodeEvent), inspected.events.slice(2).map(encodeEvent))
      assert.strictEqual(events[4].type, "session/end-seed")
      assert.deepStrictEqual(yield* s.surface.nodes, [0])
      assert.deepStrictEqual((yield* s.messages).map((m) => m.id), ["u0"])
      const loaded = yield* (yield* SessionStore).load(id)
      assert.deepStrictEqual(
        (loaded.events as ReadonlyArray<Event>).slice(2, 4).map(encodeEvent),
        inspected.events.slice(2).map(encodeEvent)
      )
    })))
})

describe("K9 unknown types are accepted at append", () => {
  it.scoped("K9 an unknown required type is accepted and stored at append; the next cold read refuses it (K7)", () =>
    withStore(Effect.gen(function*() {
      const id = uid("k")
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* sessionWith(prefix, id)
        const e = yield* s.appendUnknown("title/set", { title: "t" })
        assert.strictEqual(e.seq, 2)
        assert.isUndefined(e.ignorable)
        const next = yield* s.appendUnknown(...todo)
        assert.strictEqual(next.seq, 3)
        const loaded = yield* (yield* SessionStore).load(id)
        assert.strictEqual(encodeEvent(loaded.events[2] as Event), encodeEvent(e))
      }))
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.open(id))), unknown("K7", 2, "title/set"))
    })))

  it.scoped("K9 an unknown type appended with ignorable: true survives reopening", () =>
    withStore(Effect.gen(function*() {
      const id = uid("k")
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* sessionWith(prefix, id)
        yield* s.appendUnknown("title/set", { title: "t" }, { ignorable: true })
      }))
      const s = yield* SessionLive.open(id)
      const events = yield* s.events
      assert.strictEqual(encodeEvent(events[2]), `{"type":"title/set","seq":2,"time":0,"data":{"title":"t"},"ignorable":true}`)
    })))
})
