/**
 * SPEC §1.1 / §3.4 families B (envelope) and C1–C4 (contiguity): B1–B6, B8 on seeds; B2, B6,
 * B10 at append; B1, B6, B7, B9, B10 in store batches; C1 in seeds, C2/C3 in the fold, C4 at
 * append.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"
import {
  acceptsAtAppend,
  acceptsInSeed,
  asEvents,
  assertError,
  foldError,
  headerFor,
  listedIds,
  record,
  records,
  rejectsAfter,
  rejectsAtAppend,
  rejectsInSeed,
  rejectsInStoreBatch,
  sessionWith,
  type Step,
  todo,
  uid,
  user,
  withStore
} from "../helpers/state.js"

type Rec = Record<string, unknown>

const prefix: ReadonlyArray<Step> = [user("u0")]
const u0 = record(prefix[0], 0)
const env = (rule: string, seq: number, field: string) => ({ _tag: "InvalidEnvelope", rule, seq, field })

class Rec1 {
  type = "todo/write"
  seq = 0
  time = 0
  data = {}
}

describe("B1 record not an object or with an unknown top-level key", () => {
  const nonObjects: ReadonlyArray<readonly [string, unknown]> = [
    ["null", null],
    ["an array", [1, 2]],
    ["a number", 42],
    ["a string", "todo/write"]
  ]
  for (const [name, value] of nonObjects) {
    it.scoped(`B1 rejects ${name} as a seed record`, () =>
      withStore(rejectsInSeed([u0, value], { ...env("B1", 1, "") })))
    it.scoped(`B1 rejects ${name} in a store batch`, () =>
      withStore(rejectsInStoreBatch(prefix, value, { _tag: "InvalidEnvelope", rule: "B1", seq: 1 })))
  }

  it.scoped("B1 rejects an unknown top-level key in a seed record, naming it", () =>
    withStore(rejectsInSeed([u0, { type: "todo/write", seq: 1, time: 0, data: {}, extra: 1 }], env("B1", 1, "extra"))))

  it.scoped("B1 rejects an unknown top-level key in a store batch", () =>
    withStore(rejectsInStoreBatch(prefix, { type: "todo/write", seq: 1, time: 0, data: {}, meta: {} }, env("B1", 1, "meta"))))

  it.scoped("B1 rejects a seed that is not an array", () =>
    withStore(rejectsInSeed({ 0: u0 }, { _tag: "InvalidEnvelope", rule: "B1" })))
})

describe("B2 type not a string", () => {
  it.scoped("B2 rejects a non-string type at append", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsAfter(prefix, [42 as unknown as string, {}], env("B2", 1, "type"))
      yield* rejectsAfter(prefix, [undefined as unknown as string, {}], env("B2", 1, "type"))
    })))

  it.scoped("B2 rejects a non-string or absent type in a seed", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsInSeed([u0, { type: 7, seq: 1, time: 0, data: {} }], env("B2", 1, "type"))
      yield* rejectsInSeed([u0, { seq: 1, time: 0, data: {} }], env("B2", 1, "type"))
    })))

  it.scoped("B2 rejects a non-string type in a store batch", () =>
    withStore(rejectsInStoreBatch(prefix, { type: null, seq: 1, time: 0, data: {} }, env("B2", 1, "type"))))
})

describe("B3 seq not a non-negative safe integer (seeds)", () => {
  const bad: ReadonlyArray<readonly [string, unknown]> = [
    ["a string", "1"],
    ["fractional", 1.5],
    ["negative", -1],
    ["unsafe", 2 ** 53],
    ["absent", undefined]
  ]
  for (const [name, seq] of bad) {
    it.scoped(`B3 rejects a ${name} seq in a seed (error seq = index)`, () =>
      withStore(rejectsInSeed(
        [u0, seq === undefined ? { type: "todo/write", time: 0, data: {} } : { type: "todo/write", seq, time: 0, data: {} }],
        env("B3", 1, "seq")
      )))
  }
})

describe("B4 time not a safe integer", () => {
  const bad: ReadonlyArray<readonly [string, unknown]> = [
    ["a string", "0"],
    ["fractional", 0.5],
    ["unsafe", 2 ** 53],
    ["absent", undefined]
  ]
  for (const [name, time] of bad) {
    it.scoped(`B4 rejects a ${name} time in a seed`, () =>
      withStore(rejectsInSeed(
        [u0, time === undefined ? { type: "todo/write", seq: 1, data: {} } : { type: "todo/write", seq: 1, time, data: {} }],
        env("B4", 1, "time")
      )))
  }

  it.scoped("B4 accepts a negative time and stores it", () =>
    withStore(Effect.gen(function*() {
      const { events, stored } = yield* acceptsInSeed([{ type: "todo/write", seq: 0, time: -5, data: { todos: [] } }])
      assert.strictEqual(events[0].time, -5)
      assert.include(stored, `\\"time\\":-5`)
    })))
})

describe("B5 data absent", () => {
  it.scoped("B5 rejects a seed record without data", () =>
    withStore(rejectsInSeed([u0, { type: "todo/write", seq: 1, time: 0 }], env("B5", 1, "data"))))

  it.scoped("B5 rejects a store batch record without data", () =>
    withStore(rejectsInStoreBatch(prefix, { type: "todo/write", seq: 1, time: 0 }, env("B5", 1, "data"))))
})

describe("B6 ignorable other than true", () => {
  for (const value of [false, "yes", 1, null]) {
    const name = JSON.stringify(value)
    it.scoped(`B6 rejects ignorable ${name} at append`, () =>
      withStore(rejectsAfter(prefix, ["plugin/note", {}, { ignorable: value }], env("B6", 1, "ignorable"))))
    it.scoped(`B6 rejects ignorable ${name} in a seed`, () =>
      withStore(rejectsInSeed([u0, { type: "plugin/note", seq: 1, time: 0, data: {}, ignorable: value }], env("B6", 1, "ignorable"))))
    it.scoped(`B6 rejects ignorable ${name} in a store batch`, () =>
      withStore(rejectsInStoreBatch(prefix, { type: "plugin/note", seq: 1, time: 0, data: {}, ignorable: value }, env("B6", 1, "ignorable"))))
  }
})

describe("B7 ignorable: true is accepted and preserved", () => {
  it.scoped("B7 at append, in the store encoding", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const e = yield* acceptsAtAppend(s, ["plugin/note", { n: 1 }, { ignorable: true }])
      assert.strictEqual(e.ignorable, true)
      assert.strictEqual(encodeEvent(e), `{"type":"plugin/note","seq":1,"time":0,"data":{"n":1},"ignorable":true}`)
    })))

  it.scoped("B7 in a seed and a store batch", () =>
    withStore(Effect.gen(function*() {
      const { events } = yield* acceptsInSeed([{ type: "plugin/note", seq: 0, time: 0, data: {}, ignorable: true }])
      assert.strictEqual(events[0].ignorable, true)
      const s = yield* sessionWith(prefix)
      const store = yield* SessionStore
      yield* store.append(s.id, [{ ignorable: true, data: {}, time: 0, seq: 1, type: "plugin/note" } as unknown as Event], {
        expectedSeq: 1
      })
      const loaded = yield* store.load(s.id)
      // readers accept any key order; writers emit §1.1 order
      assert.strictEqual(
        encodeEvent(loaded.events[1] as Event),
        `{"type":"plugin/note","seq":1,"time":0,"data":{},"ignorable":true}`
      )
    })))
})

describe("B8 non-plain seed records", () => {
  it.scoped("B8 rejects a class-instance seed record as NotLosslessJson (rule B8)", () =>
    withStore(rejectsInSeed([u0, new Rec1()], { _tag: "NotLosslessJson", rule: "B8", seq: 1, path: "" })))

  it.scoped("B8 rejects a Map or Date seed record", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsInSeed([new Map([["type", "todo/write"]])], { _tag: "NotLosslessJson", rule: "B8", seq: 0, path: "" })
      yield* rejectsInSeed([u0, new Date(0)], { _tag: "NotLosslessJson", rule: "B8", seq: 1, path: "" })
    })))

  it.scoped("B8 accepts a null-prototype record", () =>
    withStore(Effect.gen(function*() {
      const r = Object.assign(Object.create(null) as Rec, { type: "todo/write", seq: 0, time: 0, data: { todos: [] } })
      const { events } = yield* acceptsInSeed([r])
      assert.strictEqual(encodeEvent(events[0]), `{"type":"todo/write","seq":0,"time":0,"data":{"todos":[]}}`)
    })))
})

describe("B9 plugin type with data null", () => {
  it.scoped("B9 accepted at append, in a seed and in a store batch", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const e = yield* acceptsAtAppend(s, ["plugin/ping", null, { ignorable: true }])
      assert.strictEqual(e.data, null)
      assert.strictEqual(encodeEvent(e), `{"type":"plugin/ping","seq":1,"time":0,"data":null,"ignorable":true}`)
      const { events } = yield* acceptsInSeed([{ type: "plugin/ping", seq: 0, time: 0, data: null }])
      assert.strictEqual(events[0].data, null)
      const store = yield* SessionStore
      yield* store.append(s.id, [{ type: "plugin/ping", seq: 2, time: 0, data: null, ignorable: true } as unknown as Event], {
        expectedSeq: 2
      })
      assert.strictEqual(((yield* store.load(s.id)).events[2] as Event).data, null)
    })))
})

describe("B10 serialised event larger than maxEventBytes", () => {
  // an ignorable plugin type (K9 would refuse it unmarked before the size check)
  const line = (seq: number, data: unknown) => encodeEvent({ type: "plugin/blob", seq, time: 0, data, ignorable: true } as Event)
  const IGNORABLE = { ignorable: true } as const
  /** A string payload whose event line has exactly `bytes` UTF-8 bytes, using 2-byte characters. */
  const sized = (seq: number, bytes: number, ch = "é") => {
    const base = Buffer.byteLength(line(seq, ""), "utf8")
    const n = bytes - base
    const chars = ch.repeat(Math.floor(n / Buffer.byteLength(ch, "utf8")))
    return chars + "x".repeat(n - Buffer.byteLength(chars, "utf8"))
  }

  it.scoped("B10 rejects at append one byte over the cap (UTF-8 bytes); the cap itself is accepted", () =>
    withStore(Effect.gen(function*() {
      const cap = 400
      const s = yield* SessionLive.create({ id: uid(), maxEventBytes: cap })
      yield* s.appendUnknown(...user("u0"))
      const over = sized(1, cap + 1)
      assert.strictEqual(Buffer.byteLength(line(1, over), "utf8"), cap + 1)
      assert.isBelow(line(1, over).length, cap) // UTF-16 length is under the cap: bytes count
      yield* rejectsAtAppend(s, ["plugin/blob", over, IGNORABLE], env("B10", 1, "size"))
      // rejectsAtAppend appended todo/write at 1
      const exact = sized(2, cap)
      assert.strictEqual(Buffer.byteLength(line(2, exact), "utf8"), cap)
      const e = yield* acceptsAtAppend(s, ["plugin/blob", exact, IGNORABLE])
      assert.strictEqual(e.seq, 2)
    })))

  it.scoped("B10 rejects in a store batch; nothing written", () =>
    Effect.gen(function*() {
      const cap = 300
      yield* rejectsInStoreBatch(prefix, { type: "plugin/blob", seq: 1, time: 0, data: sized(1, cap + 1), ignorable: true }, env("B10", 1, "size"))
      const store = yield* SessionStore
      const s = yield* sessionWith(prefix)
      yield* store.append(s.id, [{ type: "plugin/blob", seq: 1, time: 0, data: sized(1, cap), ignorable: true } as unknown as Event], {
        expectedSeq: 1
      })
      assert.strictEqual((yield* store.load(s.id)).events.length, 2)
    }).pipe(Effect.provide(layerMemoryStore({ maxEventBytes: 300 }))))

  it.scoped("B10 a session append over the store's cap fails and leaves the session unchanged", () =>
    Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      yield* rejectsAtAppend(s, ["plugin/blob", "x".repeat(400), IGNORABLE], env("B10", 1, "size"))
    }).pipe(Effect.provide(layerMemoryStore({ maxEventBytes: 300 }))))
})

describe("C1–C4 sequence contiguity", () => {
  const r = (seq: number): Rec => ({ type: "todo/write", seq, time: 0, data: { todos: [] } })
  const c = (rule: string, seq: number, expected: number, actual: unknown) => ({
    _tag: "SeqNotContiguous",
    rule,
    seq,
    expected,
    actual
  })

  it.scoped("C1 rejects a seed with a gap", () => withStore(rejectsInSeed([r(0), r(2)], c("C1", 1, 1, 2))))
  it.scoped("C1 rejects a seed with a duplicate seq", () => withStore(rejectsInSeed([r(0), r(1), r(1)], c("C1", 2, 2, 1))))
  it.scoped("C1 rejects a seed not starting at 0", () => withStore(rejectsInSeed([r(1), r(2)], c("C1", 0, 0, 1))))

  it("C2 the fold rejects a seq other than the expected one, naming it", () => {
    const e = foldError([r(0), r(1), r(3)])
    assertError(e, c("C2", 2, 2, 3))
    assert.include((e as Error).message, "expected 2")
    assertError(foldError([r(1)]), c("C2", 0, 0, 1))
  })

  it("C3 a windowed fold with base N requires seq N+k (absolute seqs)", () => {
    assertError(foldError([r(5), r(6), r(8)], 5), c("C3", 7, 7, 8))
    assertError(foldError([r(0)], 5), c("C3", 5, 5, 0))
    const ok = foldSurface(asEvents([
      record(user("a"), 5),
      record(["user/message", { id: "b", role: "user", content: [], source: { kind: "user" } }, {
        surfaceOp: { op: "replace", start: 5, end: 5 },
        sourceEventSeqs: [5]
      }], 6)
    ]), 5)
    assert.deepStrictEqual(ok, { nodes: [6], replacements: [{ seq: 6, start: 5, end: 5, shadowedSeqs: [5] }] })
  })

  it.scoped("C4 append assigns seq = log length and never takes a caller seq", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([])
      for (let i = 0; i < 3; i++) {
        const e = yield* s.appendUnknown("todo/write", { todos: [] }, { seq: 99 } as never)
        assert.strictEqual(e.seq, i)
      }
      yield* Effect.flip(s.appendUnknown(...user("")))
      const e = yield* s.appendUnknown(...todo)
      assert.strictEqual(e.seq, 3)
      assert.deepStrictEqual((yield* s.events).map((x) => x.seq), [0, 1, 2, 3])
      const store = yield* SessionStore
      assert.deepStrictEqual((yield* store.load(s.id)).events.map((x) => (x as Event).seq), [0, 1, 2, 3])
      assert.deepStrictEqual(yield* listedIds, [s.id])
    })))

  it.scoped("C1 seeded sessions keep seq = index and the marker follows", () =>
    withStore(Effect.gen(function*() {
      const { events } = yield* acceptsInSeed(records([todo, todo]), uid())
      assert.deepStrictEqual(events.map((e) => [e.seq, e.type]), [[0, "todo/write"], [1, "todo/write"], [2, "session/end-seed"]])
      const id = uid()
      const s = yield* SessionLive.fromSeed({ header: headerFor(id), seed: [] })
      assert.deepStrictEqual((yield* s.events).map((e) => [e.seq, e.type]), [[0, "session/end-seed"]])
    })))
})
