/**
 * SPEC §8.4 / §3.4 K7, K8, K9 (vocabulary): unknown types without `ignorable: true` are refused
 * at append (K9: session and store batch, nothing written) and on a cold read of a log another
 * writer produced (`SessionLive.open`, `SessionLive.inspect`: K7); marked `ignorable: true` they
 * are accepted, load and are preserved (K8).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import { type Event, KNOWN_EVENT_TYPES } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
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

/**
 * A stored session: `prefix` appended through a handle, then `extra` planted as if another writer
 * had written it (the memory store's whole-log replacement, which checks nothing: append would
 * refuse an unknown type, K9).
 */
const storedWith = (extra: ReadonlyArray<Rec>) =>
  Effect.gen(function*() {
    const id = uid("k")
    yield* Effect.scoped(sessionWith(prefix, id))
    const store = yield* SessionStore
    const loaded = yield* store.load(id)
    const events = [...loaded.events, ...extra] as unknown as ReadonlyArray<Event>
    yield* store.replaceLog(id, loaded.header, events, { revision: loaded.revision, backup: "planted" })
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

describe("K9 unknown types without ignorable are refused at append", () => {
  for (const type of ["title/set", "session/title", "plugin/x"]) {
    it.scoped(`K9 ${type} without ignorable is refused by Session.append and by a store batch; nothing written`, () =>
      withStore(Effect.gen(function*() {
        const id = uid("k")
        yield* Effect.scoped(Effect.gen(function*() {
          const s = yield* sessionWith(prefix, id)
          const before = yield* storedText(id)
          assertError(yield* Effect.flip(s.appendUnknown(type, { title: "t" })), unknown("K9", 2, type))
          assert.strictEqual((yield* s.events).length, 2)
          assert.strictEqual(yield* storedText(id), before)
          const next = yield* s.appendUnknown(...todo)
          assert.strictEqual(next.seq, 2, "the refused append took no seq")
        }))
        const store = yield* SessionStore
        const before = yield* storedText(id)
        const e = yield* Effect.flip(store.append(id, [{ type, seq: 3, time: 0, data: {} } as unknown as Event], { expectedSeq: 3 }))
        assertError(e, unknown("K9", 3, type))
        assert.strictEqual(yield* storedText(id), before)
      })))
  }

  it.scoped("K9 comes after B2/B6 and before the walk: an unknown type with bad data is K9", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      assertError(yield* Effect.flip(s.appendUnknown("title/set", { n: 1n })), unknown("K9", 2, "title/set"))
      assertError(yield* Effect.flip(s.appendUnknown("title/set", {}, { ignorable: false as never })), {
        _tag: "InvalidEnvelope",
        rule: "B6"
      })
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
