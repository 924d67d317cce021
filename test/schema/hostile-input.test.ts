/**
 * Hostile values at append (issue 18): a getter that throws and Proxies whose traps throw, in the
 * data (top level and nested) and on the envelope itself, are refused as `NotLosslessJson` A12
 * (SPEC §1.2: reading the value failed) on `Session.append` and `SessionStore.append` of every
 * local backend, nothing is written, and the handle keeps working. The packed-row tags of SPEC
 * Appendix A are refused as event types at append (K9), even with `ignorable: true`.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { FileSystem } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type { Event } from "../../src/schema/Events.js"
import { walkJson } from "../../src/schema/JsonWalk.js"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"

const boom = () => {
  throw new Error("boom")
}

/** Hostile values and where the walk meets them (relative to the value). */
const hostile: ReadonlyArray<{ readonly name: string; readonly make: () => unknown; readonly path: string }> = [
  { name: "a throwing getter", make: () => ({ get x() { return boom() } }), path: "/x" },
  { name: "a nested throwing getter", make: () => ({ a: [1, { get y() { return boom() } }] }), path: "/a/1/y" },
  { name: "a Proxy whose ownKeys throws", make: () => new Proxy({}, { ownKeys: boom }), path: "" },
  { name: "a Proxy whose getOwnPropertyDescriptor throws", make: () => new Proxy({ k: 1 }, { getOwnPropertyDescriptor: boom }), path: "/k" },
  { name: "a Proxy whose getPrototypeOf throws", make: () => new Proxy({}, { getPrototypeOf: boom }), path: "" },
  { name: "a nested revoked Proxy", make: () => ({ n: { m: (() => { const r = Proxy.revocable({}, {}); r.revoke(); return r.proxy })() } }), path: "/n/m" }
]

describe("A12 hostile values are NotLosslessJson, never a defect", () => {
  for (const h of hostile) {
    it(`A12 walkJson: ${h.name} is refused at ${h.path || "the root"}`, () => {
      const r = walkJson(h.make(), "/data")
      assert.strictEqual(r._tag, "Fail")
      if (r._tag === "Fail") assert.deepStrictEqual([r.rule, r.path], ["A12", `/data${h.path}`])
    })
  }

  it("A12 walkJson: a Proxy whose get and has traps throw is read through descriptors only, and copied", () => {
    const r = walkJson(new Proxy({ a: 1 }, { get: boom, has: boom }))
    assert.deepStrictEqual(r, { _tag: "Ok", value: { a: 1 } })
  })
})

const backends: ReadonlyArray<readonly [string, Effect.Effect<SessionStoreShape, unknown, any>]> = [
  ["memory", makeMemoryStore()],
  ["jsonl", Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.flatMap(fs.makeTempDirectoryScoped(), (root) => makeJsonlStore({ root })))],
  ["sqlite", Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.flatMap(fs.makeTempDirectoryScoped(), (root) => makeSqliteStore({ filename: `${root}/h.db` })))]
]

for (const [name, make] of backends) {
  describe(`${name}: hostile appends change nothing`, () => {
    it.scoped(`A12 Session.append: hostile data is NotLosslessJson A12; the next valid append succeeds (${name})`, () =>
      Effect.gen(function*() {
        const store = yield* make
        const s = yield* SessionLive.create({ id: `h-${name}` }).pipe(Effect.provideService(SessionStore, store))
        for (const h of hostile) {
          const e = yield* Effect.flip(s.appendUnknown("todo/write", h.make()))
          assert.deepStrictEqual([e._tag, (e as any).rule, (e as any).path], ["NotLosslessJson", "A12", `/data${h.path}`], h.name)
          const nested = yield* Effect.flip(s.appendUnknown("todo/write", { todos: [h.make()] }))
          assert.deepStrictEqual([nested._tag, (nested as any).rule], ["NotLosslessJson", "A12"], `nested ${h.name}`)
        }
        assert.strictEqual((yield* s.events).length, 0)
        assert.strictEqual((yield* s.append("todo/write", { todos: [] })).seq, 0)
        assert.strictEqual((yield* store.load(s.id)).events.length, 1)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped(`A12 SessionStore.append: a hostile envelope or data is NotLosslessJson A12, nothing stored (${name})`, () =>
      Effect.gen(function*() {
        const store = yield* make
        const id = `e-${name}`
        yield* store.create({ version: 1, id, createdAt: 0 })
        yield* store.append(id, [{ type: "turn/start", seq: 0, time: 0, data: { turn: 1 } } as Event], { expectedSeq: 0 })
        const envelopes: ReadonlyArray<readonly [string, unknown]> = [
          ["a getter on type", { get type() { return boom() }, seq: 1, time: 0, data: null }],
          ["a Proxy envelope whose ownKeys throws", new Proxy({ type: "todo/write", seq: 1, time: 0, data: { todos: [] } }, { ownKeys: boom })],
          ["a Proxy envelope whose getOwnPropertyDescriptor throws", new Proxy({ type: "todo/write", seq: 1, time: 0, data: { todos: [] } }, { getOwnPropertyDescriptor: boom })],
          ["a Proxy envelope whose getPrototypeOf throws", new Proxy({ type: "todo/write", seq: 1, time: 0, data: { todos: [] } }, { getPrototypeOf: boom })],
          ...hostile.map((h) => [`data: ${h.name}`, { type: "todo/write", seq: 1, time: 0, data: h.make() }] as const)
        ]
        for (const [what, envelope] of envelopes) {
          const e = yield* Effect.flip(store.append(id, [envelope as Event], { expectedSeq: 1 }))
          assert.deepStrictEqual([e._tag, (e as any).rule], ["NotLosslessJson", "A12"], what)
        }
        assert.strictEqual((yield* store.load(id)).events.length, 1)
        yield* store.append(id, [{ type: "turn/end", seq: 1, time: 0, data: { turn: 1, reason: { kind: "completed" } } } as Event], { expectedSeq: 1 })
        assert.strictEqual((yield* store.load(id)).events.length, 2)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped(`K9 the packed-row tags are refused as event types at append, even ignorable (Appendix A) (${name})`, () =>
      Effect.gen(function*() {
        const store = yield* make
        const s = yield* SessionLive.create({ id: `p-${name}` }).pipe(Effect.provideService(SessionStore, store))
        for (const type of ["text-chunks", "reasoning-chunks", "tool-call-chunks"]) {
          for (const options of [undefined, { ignorable: true as const }]) {
            const e = yield* Effect.flip(s.appendUnknown(type, null, options))
            assert.deepStrictEqual([e._tag, (e as any).rule, (e as any).eventType], ["UnknownEventType", "K9", type])
            const raw = yield* Effect.flip(store.append(s.id, [{ type, seq: 0, time: 0, data: null, ignorable: true } as unknown as Event], { expectedSeq: 0 }))
            assert.deepStrictEqual([raw._tag, (raw as any).rule], ["UnknownEventType", "K9"])
          }
        }
        assert.strictEqual((yield* s.append("todo/write", { todos: [] })).seq, 0)
        assert.deepStrictEqual((yield* store.load(s.id)).events.map((e: any) => e.type), ["todo/write"])
      }).pipe(Effect.provide(NodeContext.layer)))
  })
}
