/**
 * SPEC §1.2 / §3.4 family A (lossless JSON): every A1–A9 value rejected at append, in a seed and
 * in a store batch with the JSON pointer of the first offending value; A10–A16 accepted with
 * the stored result asserted.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import {
  acceptsInSeed,
  assertUnchanged,
  headerFor,
  record,
  rejectsAfter,
  rejectsInSeed,
  rejectsInStoreBatch,
  sessionWith,
  snapshot,
  type Step,
  uid,
  user,
  withStore
} from "../helpers/state.js"

type Rec = Record<string, unknown>

/** A bad data value and the pointer of its first offending value, relative to `data`. */
interface BadCase {
  readonly name: string
  readonly make: () => unknown
  readonly path: string
}

class Point {
  constructor(readonly x: number) {}
}
class MyArray extends Array<number> {}

const cyclicSelf = () => {
  const o: Rec = { a: 1 }
  o.self = o
  return o
}
const cyclicAncestor = () => {
  const o: Rec = { a: { b: {} } }
  ;((o.a as Rec).b as Rec).c = o.a
  return o
}
const cyclicArray = () => {
  const a: Array<unknown> = [1]
  a.push(a)
  return { list: a }
}
/** A cycle 40 levels down (beyond the linear ancestor scan). */
const cyclicDeep = () => {
  const root: Rec = {}
  let cur = root
  for (let i = 0; i < 40; i++) {
    const next: Rec = {}
    cur.n = next
    cur = next
  }
  cur.back = root.n
  return root
}
const deepPath = "/n".repeat(40) + "/back"

const sparse = () => ({ arr: [1, , 3] }) // eslint-disable-line no-sparse-arrays
const extraNamed = () => {
  const arr = Object.assign([1, 2], { extra: 1 })
  return { arr }
}
const extraSymbol = () => {
  const arr: Array<number> = [1, 2]
  ;(arr as unknown as Record<symbol, unknown>)[Symbol("s")] = 1
  return { arr }
}
const compensated = () => {
  const arr: Array<number | undefined> = [1, , 3] // eslint-disable-line no-sparse-arrays
  ;(arr as unknown as Rec).x = 2
  return { arr }
}
const nonEnumerable = () => {
  const o: Rec = { visible: 1 }
  Object.defineProperty(o, "hidden", { value: 2, enumerable: false })
  return { o }
}
const symbolKeyed = () => {
  const o: Rec = { visible: 1 }
  ;(o as unknown as Record<symbol, unknown>)[Symbol("k")] = 2
  return { o }
}

const CASES: ReadonlyArray<readonly [rule: string, cases: ReadonlyArray<BadCase>]> = [
  ["A1", [
    { name: "BigInt property", make: () => ({ a: 1n }), path: "/a" },
    { name: "BigInt nested in an array", make: () => ({ list: [0, { b: 10n }] }), path: "/list/1/b" }
  ]],
  ["A2", [
    { name: "function", make: () => ({ f: () => 1 }), path: "/f" },
    { name: "symbol value", make: () => ({ s: Symbol("x") }), path: "/s" }
  ]],
  ["A3", [
    { name: "undefined property value", make: () => ({ u: undefined }), path: "/u" },
    { name: "undefined array element", make: () => ({ arr: [1, undefined] }), path: "/arr/1" },
    { name: "undefined as the whole value", make: () => undefined, path: "" }
  ]],
  ["A4", [
    { name: "NaN", make: () => ({ n: NaN }), path: "/n" },
    { name: "Infinity", make: () => ({ n: [Infinity] }), path: "/n/0" },
    { name: "-Infinity", make: () => ({ n: -Infinity }), path: "/n" },
    { name: "parsed 1e400", make: () => JSON.parse(`{"big":1e400}`), path: "/big" }
  ]],
  ["A5", [
    { name: "-0", make: () => ({ z: -0 }), path: "/z" },
    { name: "parsed -0", make: () => JSON.parse(`{"k":[-0]}`), path: "/k/0" }
  ]],
  ["A6", [
    { name: "self cycle", make: cyclicSelf, path: "/self" },
    { name: "ancestor cycle", make: cyclicAncestor, path: "/a/b/c" },
    { name: "array containing itself", make: cyclicArray, path: "/list/1" },
    { name: "cycle 40 levels deep", make: cyclicDeep, path: deepPath }
  ]],
  ["A7", [
    { name: "sparse array", make: sparse, path: "/arr" },
    { name: "array with an extra named property", make: extraNamed, path: "/arr" },
    { name: "array with a symbol-keyed property", make: extraSymbol, path: "/arr" },
    { name: "hole compensated by a named property", make: compensated, path: "/arr" }
  ]],
  ["A8", [
    { name: "Map", make: () => ({ m: new Map() }), path: "/m" },
    { name: "Set", make: () => ({ s: new Set([1]) }), path: "/s" },
    { name: "Date", make: () => ({ d: new Date(0) }), path: "/d" },
    { name: "class instance", make: () => ({ p: new Point(1) }), path: "/p" },
    { name: "Array subclass", make: () => ({ a: MyArray.from([1]) }), path: "/a" },
    { name: "object with another prototype", make: () => ({ o: Object.create({ inherited: 1 }) }), path: "/o" }
  ]],
  ["A9", [
    { name: "non-enumerable own property", make: nonEnumerable, path: "/o/hidden" },
    { name: "symbol-keyed own property", make: symbolKeyed, path: "/o" }
  ]]
]

const prefix: ReadonlyArray<Step> = [user("u0")]

describe("A1–A9 rejected at append, in a seed and in a store batch", () => {
  for (const [rule, cases] of CASES) {
    for (const c of cases) {
      it.scoped(`${rule} rejects ${c.name} at append (path /data${c.path})`, () =>
        withStore(rejectsAfter(prefix, ["todo/write", c.make()], {
          _tag: "NotLosslessJson",
          rule,
          seq: 1,
          path: `/data${c.path}`
        })))

      it.scoped(`${rule} rejects ${c.name} in a seed (seq = index)`, () =>
        withStore(rejectsInSeed(
          [record(prefix[0], 0), { type: "todo/write", seq: 1, time: 0, data: c.make() }],
          { _tag: "NotLosslessJson", rule, seq: 1, path: `/data${c.path}` }
        )))

      it.scoped(`${rule} rejects ${c.name} in a SessionStore.append batch`, () =>
        withStore(rejectsInStoreBatch(prefix, { type: "todo/write", seq: 1, time: 0, data: c.make() }, {
          _tag: "NotLosslessJson",
          rule,
          seq: 1,
          path: `/data${c.path}`
        })))
    }
  }

  it.scoped("A1 reports the first violation in pre-order, own-key order", () =>
    withStore(rejectsAfter(prefix, ["todo/write", { a: { b: [1, NaN] }, c: 1n }], {
      _tag: "NotLosslessJson",
      rule: "A4",
      seq: 1,
      path: "/data/a/b/1"
    })))

  it.scoped("A1 a pointer escapes ~ and / in keys (RFC 6901)", () =>
    withStore(rejectsAfter(prefix, ["todo/write", { "a/b": { "c~d": 1n } }], {
      _tag: "NotLosslessJson",
      rule: "A1",
      seq: 1,
      path: "/data/a~1b/c~0d"
    })))

  it.scoped("A1 a bad envelope value in a seed record is pointed at from the record", () =>
    withStore(rejectsInSeed([{ type: "todo/write", seq: 0, time: 0, data: {}, ignorable: 1n }], {
      _tag: "NotLosslessJson",
      rule: "A1",
      seq: 0,
      path: "/ignorable"
    })))
})

describe("A10–A16 accepted", () => {
  const nullProto = () => {
    const inner = Object.assign(Object.create(null) as Rec, { k: 1 })
    return Object.assign(Object.create(null) as Rec, { inner, v: "x" })
  }
  const assertPlainCopy = (data: unknown) => {
    const d = data as Rec
    assert.strictEqual(Object.getPrototypeOf(d), Object.prototype)
    assert.strictEqual(Object.getPrototypeOf(d.inner), Object.prototype)
    assert.deepStrictEqual(JSON.parse(JSON.stringify(d)), { inner: { k: 1 }, v: "x" })
  }

  it.scoped("A10 a null-prototype object is accepted at append; the copy has Object.prototype", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const e = yield* s.appendUnknown("plugin/note", nullProto(), { ignorable: true })
      assertPlainCopy(e.data)
      const loaded = yield* (yield* SessionStore).load(s.id)
      assertPlainCopy((loaded.events[1] as Event).data)
    })))

  it.scoped("A10 null-prototype seed records and data are accepted", () =>
    withStore(Effect.gen(function*() {
      const rec = Object.assign(Object.create(null) as Rec, { type: "plugin/note", seq: 0, time: 0, data: nullProto() })
      const { events } = yield* acceptsInSeed([rec])
      assert.strictEqual(Object.getPrototypeOf(events[0]), Object.prototype)
      assertPlainCopy(events[0].data)
    })))

  it.scoped("A10 a null-prototype record in a store batch is stored as a plain copy", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const store = yield* SessionStore
      const rec = Object.assign(Object.create(null) as Rec, { type: "plugin/note", seq: 1, time: 0, data: nullProto(), ignorable: true })
      yield* store.append(s.id, [rec as unknown as Event], { expectedSeq: 1 })
      const loaded = yield* store.load(s.id)
      assertPlainCopy((loaded.events[1] as Event).data)
    })))

  const counting = () => {
    const counter = { reads: 0 }
    const data = {}
    Object.defineProperty(data, "v", { enumerable: true, get: () => ++counter.reads })
    return { counter, data }
  }

  it.scoped("A11 a getter is read once at append; its first value is checked and stored", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const { counter, data } = counting()
      const e = yield* s.appendUnknown("todo/write", data)
      assert.strictEqual(counter.reads, 1)
      assert.deepStrictEqual(e.data, { v: 1 })
      assert.isUndefined(Object.getOwnPropertyDescriptor(e.data, "v")?.get)
      const loaded = yield* (yield* SessionStore).load(s.id)
      assert.deepStrictEqual((loaded.events[1] as Event).data, { v: 1 })
    })))

  it.scoped("A11 a getter in a seed record is read once", () =>
    withStore(Effect.gen(function*() {
      const { counter, data } = counting()
      const { events, stored } = yield* acceptsInSeed([{ type: "todo/write", seq: 0, time: 0, data }])
      assert.strictEqual(counter.reads, 1)
      assert.deepStrictEqual(events[0].data, { v: 1 })
      assert.include(stored, `{\\"v\\":1}`)
    })))

  it.scoped("A11 a getter in a store batch is read once", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const store = yield* SessionStore
      const { counter, data } = counting()
      yield* store.append(s.id, [{ type: "todo/write", seq: 1, time: 0, data } as unknown as Event], { expectedSeq: 1 })
      assert.strictEqual(counter.reads, 1)
      const loaded = yield* store.load(s.id)
      assert.deepStrictEqual((loaded.events[1] as Event).data, { v: 1 })
    })))

  const throwing = () => {
    const boom = new Error("getter boom")
    const data = { before: 1 }
    Object.defineProperty(data, "bad", {
      enumerable: true,
      get: () => {
        throw boom
      }
    })
    return { boom, data }
  }
  /** A12 (issue 18; SPEC A12 said defect): the refusal is NotLosslessJson naming the getter's pointer. */
  const assertRefused = <A, E>(exit: Exit.Exit<A, E>, path: string) => {
    assert.isTrue(Exit.isFailure(exit))
    if (Exit.isFailure(exit)) {
      assert.isFalse(Cause.isDie(exit.cause), "not a defect")
      const e = Cause.squash(exit.cause) as { _tag?: string; rule?: string; path?: string }
      assert.strictEqual(e._tag, "NotLosslessJson")
      assert.strictEqual(e.rule, "A12")
      assert.strictEqual(e.path, path)
    }
  }

  it.scoped("A12 a throwing getter at append is NotLosslessJson; nothing committed, the handle goes on", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const before = yield* snapshot(s)
      const { data } = throwing()
      assertRefused(yield* Effect.exit(s.appendUnknown("todo/write", data)), "/data/bad")
      assertUnchanged(before, yield* snapshot(s))
      assert.strictEqual((yield* s.append("todo/write", { todos: [] })).seq, 1)
    })))

  it.scoped("A12 a throwing getter in a seed is NotLosslessJson; nothing written", () =>
    withStore(Effect.gen(function*() {
      const id = uid("seed")
      const { data } = throwing()
      const exit = yield* Effect.exit(
        Effect.scoped(SessionLive.fromSeed({ header: headerFor(id), seed: [{ type: "todo/write", seq: 0, time: 0, data }] }))
      )
      assertRefused(exit, "/data/bad")
      const store = yield* SessionStore
      assert.deepStrictEqual(yield* store.list(), [])
      assert.strictEqual((yield* Effect.flip(store.load(id)))._tag, "SessionNotFound")
    })))

  it.scoped("A12 a throwing getter in a store batch is NotLosslessJson; nothing stored", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const store = yield* SessionStore
      const before = yield* snapshot(s)
      const { data } = throwing()
      assertRefused(
        yield* Effect.exit(store.append(s.id, [{ type: "todo/write", seq: 1, time: 0, data } as unknown as Event], {
          expectedSeq: 1
        })),
        "/data/bad"
      )
      assertUnchanged(before, yield* snapshot(s))
    })))

  const protoData = () => JSON.parse(`{"a":1,"__proto__":{"polluted":true},"n":{"__proto__":[1]}}`) as Rec
  const assertProtoKept = (data: unknown) => {
    const d = data as Rec
    assert.isTrue(Object.hasOwn(d, "__proto__"))
    assert.strictEqual(Object.getPrototypeOf(d), Object.prototype)
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(d, "__proto__")?.value, { polluted: true })
    assert.isUndefined((d as { polluted?: unknown }).polluted)
    const n = d.n as Rec
    assert.isTrue(Object.hasOwn(n, "__proto__"))
    assert.strictEqual(Object.getPrototypeOf(n), Object.prototype)
    assert.isUndefined(({} as { polluted?: unknown }).polluted)
    assert.isFalse(Object.hasOwn(Object.prototype, "polluted"))
  }

  it.scoped("A13 an own __proto__ key is kept as data at append, in the store and its encoding", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const e = yield* s.appendUnknown("plugin/note", protoData(), { ignorable: true })
      assertProtoKept(e.data)
      assert.include(encodeEvent(e), `"__proto__":{"polluted":true}`)
      const loaded = yield* (yield* SessionStore).load(s.id)
      assertProtoKept((loaded.events[1] as Event).data)
    })))

  it.scoped("A13 an own __proto__ key survives a seed and a store batch", () =>
    withStore(Effect.gen(function*() {
      const { events } = yield* acceptsInSeed([{ type: "plugin/note", seq: 0, time: 0, data: protoData() }])
      assertProtoKept(events[0].data)
      const s = yield* sessionWith(prefix)
      const store = yield* SessionStore
      yield* store.append(s.id, [{ type: "plugin/note", seq: 1, time: 0, data: protoData(), ignorable: true } as unknown as Event], {
        expectedSeq: 1
      })
      assertProtoKept(((yield* store.load(s.id)).events[1] as Event).data)
    })))

  const DEPTH = 100_000
  const deepArrays = () => {
    let v: unknown = 0
    for (let i = 0; i < DEPTH; i++) v = [v]
    return v
  }
  const deepObjects = () => {
    let v: unknown = "leaf"
    for (let i = 0; i < DEPTH; i++) v = { a: v }
    return v
  }
  const depthOf = (v: unknown): number => {
    let d = 0
    let cur = v
    while (typeof cur === "object" && cur !== null) {
      cur = Array.isArray(cur) ? cur[0] : (cur as Rec).a
      d++
    }
    return d
  }

  it.scoped("A14 nesting depth 100,000 (arrays and objects) is accepted at append, stored and encoded", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const a = yield* s.appendUnknown("plugin/deep", { v: deepArrays() }, { ignorable: true })
      const o = yield* s.appendUnknown("plugin/deep", { v: deepObjects() }, { ignorable: true })
      assert.strictEqual(depthOf((a.data as Rec).v), DEPTH)
      assert.strictEqual(depthOf((o.data as Rec).v), DEPTH)
      assert.isTrue(Object.isFrozen((a.data as Rec).v))
      const line = encodeEvent(a)
      assert.isTrue(line.includes("[".repeat(DEPTH) + "0" + "]".repeat(DEPTH)))
      const loaded = yield* (yield* SessionStore).load(s.id)
      assert.strictEqual(loaded.events.length, 3)
      assert.strictEqual(depthOf(((loaded.events[2] as Event).data as Rec).v), DEPTH)
    })))

  it.scoped("A14 nesting depth 100,000 is accepted in a seed and in a store batch", () =>
    withStore(Effect.gen(function*() {
      const { events } = yield* acceptsInSeed([{ type: "plugin/deep", seq: 0, time: 0, data: deepObjects() }])
      assert.strictEqual(depthOf(events[0].data), DEPTH)
      const s = yield* sessionWith(prefix)
      const store = yield* SessionStore
      yield* store.append(s.id, [{ type: "plugin/deep", seq: 1, time: 0, data: deepArrays(), ignorable: true } as unknown as Event], {
        expectedSeq: 1
      })
      assert.strictEqual(depthOf(((yield* store.load(s.id)).events[1] as Event).data), DEPTH)
    })))

  it.scoped("A15 caller mutation after append never reaches the log or the store", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith(prefix)
      const data = { todos: [{ content: "a", status: "pending" }] }
      const e = yield* s.appendUnknown("todo/write", data)
      data.todos[0].content = "mutated"
      data.todos.push({ content: "b", status: "pending" })
      assert.deepStrictEqual(e.data, { todos: [{ content: "a", status: "pending" }] })
      assert.deepStrictEqual((yield* s.events)[1].data, { todos: [{ content: "a", status: "pending" }] })
      const loaded = yield* (yield* SessionStore).load(s.id)
      assert.deepStrictEqual((loaded.events[1] as Event).data, { todos: [{ content: "a", status: "pending" }] })
    })))

  it.scoped("A15 caller mutation of seed records and store batches after the call never reaches the log", () =>
    withStore(Effect.gen(function*() {
      const rec: Rec = { type: "todo/write", seq: 0, time: 0, data: { todos: [] } }
      const id = uid("seed")
      const seed = [rec]
      const s = yield* SessionLive.fromSeed({ header: headerFor(id), seed })
      ;(rec.data as { todos: Array<unknown> }).todos.push("x")
      rec.type = "mutated"
      seed.push({ type: "todo/write", seq: 1, time: 0, data: {} })
      const events = yield* s.events
      assert.strictEqual(events.length, 2) // seed + end-seed marker
      assert.strictEqual(events[0].type, "todo/write")
      assert.deepStrictEqual(events[0].data, { todos: [] })
      const store = yield* SessionStore
      assert.deepStrictEqual((yield* store.load(id)).events.map((e) => (e as Event).type), [
        "todo/write",
        "session/end-seed"
      ])
      const batch: Rec = { type: "todo/write", seq: 2, time: 0, data: { todos: [] } }
      yield* store.append(id, [batch as unknown as Event], { expectedSeq: 2 })
      ;(batch.data as { todos: Array<unknown> }).todos.push("y")
      assert.deepStrictEqual(((yield* store.load(id)).events[2] as Event).data, { todos: [] })
    })))

  it.scoped("A16 a shared acyclic sub-object is accepted and copied twice (append, seed, store)", () =>
    withStore(Effect.gen(function*() {
      const shared = { x: [1, 2] }
      const data = { a: shared, b: { c: shared }, d: [shared, shared] }
      const check = (d: unknown) => {
        const r = d as { a: Rec; b: { c: Rec }; d: Array<Rec> }
        assert.deepStrictEqual(JSON.parse(JSON.stringify(r)), JSON.parse(JSON.stringify(data)))
        assert.notStrictEqual(r.a, r.b.c)
        assert.notStrictEqual(r.d[0], r.d[1])
        assert.notStrictEqual(r.a, shared)
      }
      const s = yield* sessionWith(prefix)
      check((yield* s.appendUnknown("plugin/shared", data, { ignorable: true })).data)
      check(((yield* (yield* SessionStore).load(s.id)).events[1] as Event).data)
      check((yield* acceptsInSeed([{ type: "plugin/shared", seq: 0, time: 0, data }])).events[0].data)
      const store = yield* SessionStore
      yield* store.append(s.id, [{ type: "plugin/shared", seq: 2, time: 0, data, ignorable: true } as unknown as Event], {
        expectedSeq: 2
      })
      check(((yield* store.load(s.id)).events[2] as Event).data)
    })))
})
