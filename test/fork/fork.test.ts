/**
 * Fork (SPEC §11.1, M1–M10): every rejection code in its precedence order, every boundary kind,
 * lineage metadata, the child's own end-seed, independence from the parent, and nothing
 * registered or written on rejection. Also the `fromSeed` fix: a failed construction registers
 * nothing.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as TestClock from "effect/TestClock"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { ForkRejected } from "../../src/schema/Errors.js"
import { layerCounter } from "../../src/services/IdGenerator.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { textContent as text } from "../helpers/events.js"

const userMsg = (id: string) => ({ id, role: "user" as const, content: text(id) as never, source: { kind: "user" as const } })

/** One closed turn: start, user message, end with `reason`. */
const closedTurn = (s: Session.SessionShape, turn: number, reason: Record<string, unknown> = { kind: "completed" }) =>
  Effect.gen(function*() {
    yield* s.append("turn/start", { turn })
    yield* s.append("user/message", userMsg(`u${turn}`), { surfaceOp: "append" })
    yield* s.append("turn/end", { turn, reason: reason as never })
  })

/** An open turn: start, step, user message, assistant message with a tool call, tool/call. */
const openTurn = (s: Session.SessionShape, turn: number) =>
  Effect.gen(function*() {
    yield* s.append("turn/start", { turn })
    yield* s.append("step/start", { turn, step: 1 })
    yield* s.append("user/message", userMsg(`open${turn}`), { surfaceOp: "append" })
    yield* s.append("assistant/message", {
      turn,
      step: 1,
      message: {
        id: `a${turn}`,
        role: "assistant",
        content: [{ type: "tool-call", id: `c${turn}`, name: "t", arguments: "{}" }] as never,
        source: { kind: "model", provider: "p", model: "m" }
      }
    }, { surfaceOp: "append" })
    yield* s.append("tool/call", { turn, step: 1, callId: `c${turn}`, name: "t", arguments: "{}" })
  })

const memory = Effect.provideServiceEffect(SessionStore, makeMemoryStore())

const rejected = <A, E>(effect: Effect.Effect<A, E, any>) =>
  Effect.gen(function*() {
    const e = yield* Effect.flip(effect)
    assert.instanceOf(e, ForkRejected)
    return e as unknown as ForkRejected
  })

/** M10: the id is neither registered nor stored afterwards. */
const assertAbsent = (id: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const e = yield* Effect.flip(store.load(id))
    assert.strictEqual(e._tag, "SessionNotFound")
  })

const types = (events: ReadonlyArray<Event>) => events.map((e) => e.type)

describe("fork checks in order (SPEC 11.1)", () => {
  it.scoped("M1 a registered child id is rejected before a bad boundary or a missing source", () =>
    Effect.gen(function*() {
      yield* SessionLive.create({ id: "taken" })
      const e1 = yield* rejected(SessionLive.fork("nowhere", { childId: "taken", at: -1 }))
      assert.strictEqual(e1.rule, "M1")
      assert.strictEqual(e1.code, "SESSION_ALREADY_EXISTS")
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1)
      yield* parent.close
      const e2 = yield* rejected(SessionLive.fork(parent, { childId: "taken", at: 99 }))
      assert.strictEqual(e2.rule, "M1")
    }).pipe(memory))

  it.scoped("M1 a stored child id (materialised by another store instance) is rejected", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const a = yield* makeJsonlStore({ root })
      const b = yield* makeJsonlStore({ root })
      const other = yield* SessionLive.create({ id: "child" }).pipe(Effect.provideService(SessionStore, a))
      yield* other.append("todo/write", { todos: [] })
      const parent = yield* SessionLive.create({ id: "parent" }).pipe(Effect.provideService(SessionStore, b))
      yield* closedTurn(parent, 1)
      const e = yield* rejected(SessionLive.fork(parent, { childId: "child" }).pipe(Effect.provideService(SessionStore, b)))
      assert.strictEqual(e.rule, "M1")
      // the stored child is untouched
      const loaded = yield* b.load("child")
      assert.strictEqual(loaded.events.length, 1)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("M2 an unknown id and a closed handle are SESSION_NOT_FOUND", () =>
    Effect.gen(function*() {
      const e1 = yield* rejected(SessionLive.fork("missing", { childId: "k1" }))
      assert.strictEqual(e1.rule, "M2")
      assert.strictEqual(e1.code, "SESSION_NOT_FOUND")
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1)
      yield* parent.close
      const e2 = yield* rejected(SessionLive.fork(parent, { childId: "k2", at: -5 }))
      assert.strictEqual(e2.rule, "M2")
      assert.strictEqual(e2.code, "SESSION_NOT_FOUND")
      yield* assertAbsent("k1")
      yield* assertAbsent("k2")
    }).pipe(memory))

  it.scoped("M3 a failed handle and a stale handle are SESSION_NOT_LIVE, checked before the boundary", () =>
    Effect.gen(function*() {
      const seedOwner = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(seedOwner, 1)
      const h1 = yield* SessionLive.open("p")
      const h2 = yield* SessionLive.open("p")
      yield* closedTurn(h1, 2)
      // h2 is stale: the store holds more events than it does
      const stale = yield* rejected(SessionLive.fork(h2, { childId: "k1", at: -1 }))
      assert.strictEqual(stale.rule, "M3")
      assert.strictEqual(stale.code, "SESSION_NOT_LIVE")
      // h2 fails on its next append (AppendConflict) and is then not live either
      const conflict = yield* Effect.flip(h2.append("todo/write", { todos: [] }))
      assert.strictEqual(conflict._tag, "AppendConflict")
      assert.strictEqual(yield* h2.state, "failed")
      const failed = yield* rejected(SessionLive.fork(h2, { childId: "k2" }))
      assert.strictEqual(failed.rule, "M3")
      // the live handle forks fine
      const child = yield* SessionLive.fork(h1, { childId: "k3" })
      assert.strictEqual(child.header.seedLength, (yield* h1.events).length)
      yield* assertAbsent("k1")
      yield* assertAbsent("k2")
    }).pipe(memory))

  it.scoped("M3 a batched handle is flushed first: the child never holds events its parent could lose", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const parent = yield* SessionLive.create({ id: "p", persistence: { mode: "batched", windowMs: 10_000 } })
      yield* closedTurn(parent, 1)
      assert.strictEqual((yield* Effect.flip(store.load("p").pipe(Effect.flatMap((l) => Effect.fail(l.events.length))))), 0)
      const child = yield* SessionLive.fork(parent, { childId: "c" })
      assert.strictEqual((yield* store.load("p")).events.length, 3)
      assert.strictEqual(child.header.seedLength, 3)
    }).pipe(memory))

  it.scoped("M4 a negative, fractional, unsafe or non-numeric boundary is INVALID_BOUNDARY", () =>
    Effect.gen(function*() {
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1)
      for (const at of [-1, 0.5, Number.MAX_SAFE_INTEGER + 1, Number.NaN, Infinity, "1" as unknown as number]) {
        const e = yield* rejected(SessionLive.fork(parent, { childId: "k", at }))
        assert.strictEqual(e.rule, "M4", String(at))
        assert.strictEqual(e.code, "INVALID_BOUNDARY")
      }
      yield* assertAbsent("k")
    }).pipe(memory))

  it.scoped("M5 a boundary at or past the end names the last seq, or \"none\" on an empty source", () =>
    Effect.gen(function*() {
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1)
      const e1 = yield* rejected(SessionLive.fork(parent, { childId: "k", at: 3 }))
      assert.strictEqual(e1.rule, "M5")
      assert.strictEqual(e1.code, "INVALID_BOUNDARY")
      assert.include(e1.message, "last seq: 2")
      const empty = yield* SessionLive.create({ id: "e" })
      const e2 = yield* rejected(SessionLive.fork(empty, { childId: "k", at: 0 }))
      assert.strictEqual(e2.rule, "M5")
      assert.include(e2.message, "none")
      // by id too (a registered, unmaterialised session is an empty source)
      const e3 = yield* rejected(SessionLive.fork("e", { childId: "k", at: 0 }))
      assert.strictEqual(e3.rule, "M5")
      yield* assertAbsent("k")
    }).pipe(memory))

  it.scoped("M6 (C8) an event whose seq differs from its index is INVALID_BOUNDARY", () =>
    Effect.gen(function*() {
      const inner = yield* makeMemoryStore()
      // a backend that returns a corrupted live log (seq 2 stored at index 2 claims seq 7)
      const store: SessionStoreShape = {
        ...inner,
        load: (id) =>
          Effect.map(inner.load(id), (l) => ({
            ...l,
            events: l.events.map((e, i) => i === 2 ? { ...(e as object), seq: 7 } : e)
          }))
      }
      yield* Effect.gen(function*() {
        const parent = yield* SessionLive.create({ id: "p" })
        yield* closedTurn(parent, 1)
        const e = yield* rejected(SessionLive.fork("p", { childId: "k", at: 2 }))
        assert.strictEqual(e.rule, "C8")
        assert.strictEqual(e.code, "INVALID_BOUNDARY")
        yield* assertAbsent("k")
      }).pipe(Effect.provideService(SessionStore, store))
    }))

  it.scoped("M7 every boundary inside an open turn is OPEN_TURN, also the default boundary", () =>
    Effect.gen(function*() {
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1) // seqs 0..2
      yield* openTurn(parent, 2) // seqs 3..7
      for (const at of [3, 4, 5, 6, 7]) {
        const e = yield* rejected(SessionLive.fork(parent, { childId: "k", at }))
        assert.strictEqual(e.rule, "M7", String(at))
        assert.strictEqual(e.code, "OPEN_TURN")
      }
      const d = yield* rejected(SessionLive.fork(parent, { childId: "k" }))
      assert.strictEqual(d.rule, "M7")
      // inside the first turn, before its end
      const e1 = yield* rejected(SessionLive.fork(parent, { childId: "k", at: 1 }))
      assert.strictEqual(e1.rule, "M7")
      yield* assertAbsent("k")
      // the first turn's end is a valid boundary
      const child = yield* SessionLive.fork(parent, { childId: "k", at: 2 })
      assert.deepStrictEqual(types(yield* child.events), ["turn/start", "user/message", "turn/end", "session/end-seed"])
    }).pipe(memory))

  it.scoped("a concurrent creation of the child id at materialisation is SESSION_ALREADY_EXISTS", () =>
    Effect.gen(function*() {
      const inner = yield* makeMemoryStore()
      // another writer registers and materialises the id right before fork's own create
      const store: SessionStoreShape = {
        ...inner,
        create: (header) =>
          Effect.gen(function*() {
            const h = header as { id: string }
            if (h.id === "race") {
              yield* Effect.orDie(inner.create({ version: 1, id: "race", createdAt: 0 }))
              yield* Effect.orDie(inner.append("race", [{ type: "todo/write", seq: 0, time: 0, data: { todos: [] } } as unknown as Event], { expectedSeq: 0 }))
            }
            return yield* inner.create(header)
          })
      }
      yield* Effect.gen(function*() {
        const parent = yield* SessionLive.create({ id: "p" })
        yield* closedTurn(parent, 1)
        const e = yield* rejected(SessionLive.fork(parent, { childId: "race" }))
        assert.strictEqual(e.rule, "M1")
        assert.strictEqual(e.code, "SESSION_ALREADY_EXISTS")
        assert.deepStrictEqual((yield* inner.load("race")).events.length, 1)
      }).pipe(Effect.provideService(SessionStore, store))
    }))
})

describe("fork children (SPEC 11.1)", () => {
  it.scoped("M8 an omitted boundary on an empty source gives [session/end-seed] and seedLength 0", () =>
    Effect.gen(function*() {
      const empty = yield* SessionLive.create({ id: "e" })
      const child = yield* SessionLive.fork(empty, { childId: "c" })
      assert.deepStrictEqual(types(yield* child.events), ["session/end-seed"])
      assert.strictEqual(child.header.seedLength, 0)
      assert.strictEqual(child.firstLiveSeq, 0)
      const byId = yield* SessionLive.fork("e", { childId: "c2" })
      assert.strictEqual(byId.header.seedLength, 0)
    }).pipe(memory))

  it.scoped("M9 every turn/end reason and a log-only event after a closed turn are valid boundaries", () =>
    Effect.gen(function*() {
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1, { kind: "completed" })
      yield* closedTurn(parent, 2, { kind: "interrupted" })
      yield* closedTurn(parent, 3, { kind: "error", message: "boom" })
      yield* closedTurn(parent, 4, { kind: "cancelled" })
      yield* parent.append("todo/write", { todos: [{ content: "x", status: "pending" }] })
      for (const at of [2, 5, 8, 11, 12]) {
        const child = yield* SessionLive.fork(parent, { childId: `c${at}`, at })
        const events = yield* child.events
        assert.strictEqual(child.header.seedLength, at + 1)
        assert.strictEqual(events.length, at + 2)
        assert.strictEqual(events[at + 1].type, "session/end-seed")
      }
    }).pipe(memory))

  it.scoped("lineage: header {version, id, createdAt: now, cwd, parentSession, seedLength}; seed copied byte for byte", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const parent = yield* SessionLive.create({ id: "p", header: { cwd: "/work/repo", agentPreset: "coder", origin: "subagent", delegationDepth: 1 } })
      yield* closedTurn(parent, 1)
      yield* closedTurn(parent, 2)
      yield* TestClock.adjust("1234 millis")
      const child = yield* SessionLive.fork(parent, { childId: "c", at: 2 })
      assert.deepStrictEqual({ ...child.header }, {
        version: 1,
        id: "c",
        createdAt: 1234,
        cwd: "/work/repo",
        parentSession: "p",
        seedLength: 3
      })
      const parentEvents = yield* parent.events
      const childEvents = yield* child.events
      assert.deepStrictEqual(childEvents.slice(0, 3).map(encodeEvent), parentEvents.slice(0, 3).map(encodeEvent))
      // its own end-seed marker, at seq seedLength with the current time, and the child is stored
      assert.deepStrictEqual(childEvents[3], { type: "session/end-seed", seq: 3, time: 1234, data: {} })
      assert.strictEqual(child.firstLiveSeq, 3)
      const stored = yield* store.load("c")
      assert.deepStrictEqual(stored.events.map((e) => encodeEvent(e as Event)), childEvents.map(encodeEvent))
      assert.deepStrictEqual(stored.header, child.header)
      // no cwd on the source: none on the child
      const bare = yield* SessionLive.create({ id: "bare" })
      const c2 = yield* SessionLive.fork(bare, { childId: "c2" })
      assert.isFalse("cwd" in c2.header)
    }).pipe(memory))

  it.scoped("a generated child id comes from the IdGenerator", () =>
    Effect.gen(function*() {
      const parent = yield* SessionLive.create({ id: "p" })
      const child = yield* SessionLive.fork(parent)
      assert.strictEqual(child.id, "gen-1")
      assert.strictEqual(child.header.parentSession, "p")
    }).pipe(memory, Effect.provide(layerCounter("gen-"))))

  it.scoped("independence: later parent appends stay out of the child and child appends out of the parent", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1)
      const child = yield* SessionLive.fork(parent, { childId: "c" })
      yield* closedTurn(parent, 2)
      yield* closedTurn(child, 7)
      const p = yield* parent.events
      const c = yield* child.events
      assert.strictEqual(p.length, 6)
      assert.deepStrictEqual(types(c), ["turn/start", "user/message", "turn/end", "session/end-seed", "turn/start", "user/message", "turn/end"])
      assert.strictEqual((c[5].data as { id: string }).id, "u7")
      assert.notStrictEqual(c[1], p[1])
      assert.isTrue(Object.isFrozen(c[1].data))
      assert.strictEqual((yield* store.load("p")).events.length, 6)
      assert.strictEqual((yield* store.load("c")).events.length, 7)
    }).pipe(memory))

  it.scoped("the child's end-seed follows an unmatched compaction/start inherited from a running parent (dead bracket)", () =>
    Effect.gen(function*() {
      const parent = yield* SessionLive.create({ id: "p" })
      yield* closedTurn(parent, 1)
      yield* parent.append("compaction/start", { compactionId: "k1", turn: null })
      const child = yield* SessionLive.fork(parent, { childId: "c" })
      const events = yield* child.events
      assert.deepStrictEqual(types(events).slice(-2), ["compaction/start", "session/end-seed"])
      // the parent has no marker after its open bracket: still live there
      assert.isFalse((yield* parent.events).some((e) => e.type === "session/end-seed"))
    }).pipe(memory))

  it.scoped("fork by id reads through the read pipeline without repair: a torn tail is not inherited", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const store = yield* makeJsonlStore({ root })
      yield* Effect.gen(function*() {
        const parent = yield* SessionLive.create({ id: "p", header: { cwd: "/x" } })
        yield* closedTurn(parent, 1)
        yield* parent.close
        const file = `${root}/p.jsonl`
        const damaged = new Uint8Array([...(yield* fs.readFile(file)), ...new TextEncoder().encode("{\"type\":\"turn/st")])
        yield* fs.writeFile(file, damaged)
        const child = yield* SessionLive.fork("p", { childId: "c" })
        assert.deepStrictEqual(types(yield* child.events), ["turn/start", "user/message", "turn/end", "session/end-seed"])
        // the source file is untouched (no repair through fork)
        assert.deepStrictEqual(yield* fs.readFile(file), damaged)
        const childText = yield* fs.readFileString(`${root}/c.jsonl`)
        assert.strictEqual(
          childText.split("\n")[0],
          `{"type":"session","version":1,"id":"c","createdAt":0,"cwd":"/x","parentSession":"p","seedLength":3}`
        )
      }).pipe(Effect.provideService(SessionStore, store))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("fork by id of a log whose stored events fail validation is StoreCorrupt (L9) and writes nothing", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      yield* store.create({ version: 1, id: "bad", createdAt: 0 })
      // a tool/result citing a seq that does not exist (E5): the store accepts the envelope
      yield* store.append("bad", [
        { type: "todo/write", seq: 0, time: 0, data: { todos: [] } },
        {
          type: "tool/result",
          seq: 1,
          time: 0,
          data: { turn: 1, step: 1, message: { id: "r", role: "user", content: [{ type: "tool-result", toolCallId: "x", content: text("r") }], source: { kind: "tool", callId: "x" } } },
          sourceEventSeqs: [9],
          surfaceOp: "append"
        }
      ] as unknown as Array<Event>, { expectedSeq: 0 })
      const e = yield* Effect.flip(SessionLive.fork("bad", { childId: "c" }))
      assert.strictEqual(e._tag, "StoreCorrupt")
      assert.strictEqual((e as { rule: string }).rule, "L9")
      yield* assertAbsent("c")
    }).pipe(memory))
})

describe("fromSeed construction failure is invisible", () => {
  it.scoped("B10 on a seed event is reported before the id is registered", () =>
    Effect.gen(function*() {
      const store = yield* SessionStore
      const big = { type: "todo/write", seq: 0, time: 0, data: { todos: [{ content: "x".repeat(2000), status: "pending" }] } }
      const e = yield* Effect.flip(SessionLive.fromSeed({ header: { version: 1, id: "s", createdAt: 0 }, seed: [big], maxEventBytes: 1000 }))
      assert.strictEqual(e._tag, "InvalidEnvelope")
      assert.strictEqual((e as { rule: string }).rule, "B10")
      const nf = yield* Effect.flip(store.load("s"))
      assert.strictEqual(nf._tag, "SessionNotFound")
      // the id is free: a valid construction succeeds
      const ok = yield* SessionLive.fromSeed({ header: { version: 1, id: "s", createdAt: 0 }, seed: [] })
      assert.strictEqual((yield* ok.events).length, 1)
    }).pipe(memory))
})
