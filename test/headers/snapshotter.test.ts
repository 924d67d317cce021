/**
 * SPEC §5.3 / §3.4 family R: the HeaderSnapshotter in a scripted loop — R1–R8 in order over one
 * session and its reopened instances, the rule precedence of §5.3, request/context (R7), the I1
 * guard before anything is appended, and `decide` never writing.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { layer as snapshotterLayer } from "../../src/layers/session/HeaderSnapshotterLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import type { RequestContext, RequestHeader } from "../../src/schema/RequestHeader.js"
import { HeaderSnapshotter, type ModelRequestPlan } from "../../src/services/HeaderSnapshotter.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { assertError, records, replace, snapshot, uid, user, userMsg } from "../helpers/state.js"

const provide = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(snapshotterLayer), Effect.provide(layerMemoryStore()))

const H1: RequestHeader = {
  config: { provider: "p", model: "m1", maxTokens: 100 },
  system: "be brief",
  tools: [{ name: "read", description: "reads", parameters: { type: "object" } }]
}
const H2: RequestHeader = { ...H1, system: "be thorough" }
const C1: RequestContext = { provider: "p", model: "m1", contextWindow: 1000 }

/** The (type, reason or data) summary of what `record` appended. */
const summary = (events: ReadonlyArray<Event>) =>
  events.map((e) =>
    e.type === "request/header"
      ? `header:${(e.data as { reason: string }).reason}`
      : `${e.type}:${JSON.stringify(e.data)}`
  )

/** One model request: record, assert the appended summary, then return the appended events. */
const request = (session: Session.SessionShape, plan: ModelRequestPlan, expected: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const snap = yield* HeaderSnapshotter
    const before = (yield* session.events).length
    const written = yield* snap.record(session, plan)
    assert.deepStrictEqual(summary(written), expected)
    // what record returned is exactly what the log gained
    const events = yield* session.events
    assert.deepStrictEqual(events.slice(before).map((e) => encodeEvent(e)), written.map((e) => encodeEvent(e)))
    return written
  })

/** A replacement of the single surface node `target` (a compaction summary). */
const compact = (session: Session.SessionShape, target: number, id: string) =>
  session.appendUnknown("user/message", { ...userMsg(id), source: { kind: "plugin", plugin: "compact" } }, replace(target, target, [target]))

describe("R1–R8 in a scripted loop", () => {
  it.scoped("R1–R8: initial, inherit, change, context, series after a replacement, declared series, resume", () =>
    provide(Effect.gen(function*() {
      const id = uid("loop")
      const s = yield* SessionLive.create({ id })
      // R1: first request of a fresh session
      yield* s.append("turn/start", { turn: 1 })
      yield* s.appendUnknown(...user("u1"))
      const [h] = yield* request(s, { header: H1, context: C1, firstOfInstance: true }, [
        "header:initial",
        `request/context:${JSON.stringify(C1)}`
      ])
      assert.deepStrictEqual(h.data, { header: H1, reason: "initial" })
      // R4/R7: later step with an identical header and route: nothing
      yield* request(s, { header: H1, context: C1, firstOfInstance: false }, [])
      yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
      yield* s.append("turn/start", { turn: 2 })
      yield* request(s, { header: H1, context: C1, firstOfInstance: false }, []) // later turn
      yield* request(s, { header: H1, context: C1, firstOfInstance: false }, []) // retry
      // R3: a changed header is a change; the route is unchanged (no context)
      yield* request(s, { header: H2, context: C1, firstOfInstance: false }, ["header:change"])
      // R7: only the capacity changes
      yield* request(s, { header: H2, context: { ...C1, contextWindow: 2000 }, firstOfInstance: false }, [
        `request/context:{"provider":"p","model":"m1","contextWindow":2000}`
      ])
      // R7: an absent contextWindow differs from the older one and clears it
      yield* request(s, { header: H2, context: { provider: "p", model: "m1" }, firstOfInstance: false }, [
        `request/context:{"provider":"p","model":"m1"}`
      ])
      assert.deepStrictEqual(yield* s.requestContext, { provider: "p", model: "m1" })
      // and a present one differs from an absent one
      yield* request(s, { header: H2, context: C1, firstOfInstance: false }, [`request/context:${JSON.stringify(C1)}`])
      // no context in the plan: nothing about context
      yield* request(s, { header: H2, firstOfInstance: false }, [])
      // R5: identical header after a surface replacement
      const seqU1 = 1
      yield* compact(s, seqU1, "sum1")
      yield* request(s, { header: H2, context: C1, firstOfInstance: false }, ["header:series"])
      // ... then the series is anchored: nothing
      yield* request(s, { header: H2, context: C1, firstOfInstance: false }, [])
      // R6: declared new series (this request only)
      yield* request(s, { header: H2, context: C1, firstOfInstance: false, newSeries: true }, ["header:series"])
      yield* request(s, { header: H2, context: C1, firstOfInstance: false }, [])
      // precedence: a changed header after a replacement is a change, not a series
      const sumSeq = (yield* s.surface.nodes)[0]
      yield* compact(s, sumSeq, "sum2")
      yield* request(s, { header: H1, context: C1, firstOfInstance: false, newSeries: true }, ["header:change"])
      yield* request(s, { header: H1, context: C1, firstOfInstance: false }, [])
      // an appended (non-replacement) message after the header does not start a series
      yield* s.appendUnknown(...user("u2"))
      yield* request(s, { header: H1, context: C1, firstOfInstance: false }, [])
      yield* s.append("turn/end", { turn: 2, reason: { kind: "completed" } })
      const beforeReopen = yield* s.events
      yield* s.close

      // R2: a new loop instance over a log with a header: resume, even unchanged and even after a
      // replacement and with a declared series
      yield* Effect.scoped(Effect.gen(function*() {
        const r = yield* SessionLive.open(id)
        assert.deepStrictEqual(yield* r.requestHeader, H1)
        const sumSeq2 = (yield* r.surface.nodes)[0]
        yield* compact(r, sumSeq2, "sum3")
        yield* request(r, { header: H1, context: C1, firstOfInstance: true, newSeries: true }, ["header:resume"])
        yield* request(r, { header: H1, context: C1, firstOfInstance: false }, [])
        // a changed header on the first request of an instance is still resume
        yield* r.close
      }))
      yield* Effect.scoped(Effect.gen(function*() {
        const r = yield* SessionLive.open(id)
        yield* request(r, { header: H2, context: { provider: "q", model: "m1" }, firstOfInstance: true }, [
          "header:resume",
          `request/context:{"provider":"q","model":"m1"}`
        ])
        assert.deepStrictEqual(yield* r.requestHeader, H2)
        // R8: header events never change derived messages; requestHeader is the latest canonical snapshot
        const events = yield* r.events
        const headers = events.filter((e) => e.type === "request/header")
        assert.deepStrictEqual(
          headers.map((e) => (e.data as { reason: string }).reason),
          ["initial", "change", "series", "series", "change", "resume", "resume"]
        )
        for (const e of headers) {
          if (e.seq === 0) continue
          const at = yield* r.requestAt(e.seq)
          const prev = yield* r.requestAt(e.seq - 1)
          assert.deepStrictEqual(at.messages, prev.messages)
          assert.deepStrictEqual(at.header, (e.data as { header: RequestHeader }).header)
        }
        assert.isAbove(events.length, beforeReopen.length)
      }))
    })))

  it.scoped("R2: the first request over a seeded session (resume, fork child) is resume", () =>
    provide(Effect.gen(function*() {
      const id = uid("seeded")
      const seed = records([["request/header", { header: H1, reason: "initial" }], user("u1")])
      const s = yield* SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed })
      yield* request(s, { header: H1, firstOfInstance: true }, ["header:resume"])
      // a seed without any header: initial
      const t = yield* SessionLive.fromSeed({ header: { version: 1, id: uid("seeded"), createdAt: 0 }, seed: records([user("u1")]) })
      yield* request(t, { header: H1, firstOfInstance: true }, ["header:initial"])
    })))

  it.scoped("R3: a later request in an instance without any header yet is a change", () =>
    provide(Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: uid() })
      yield* request(s, { header: H1, firstOfInstance: false }, ["header:change"])
      yield* request(s, { header: H1, firstOfInstance: false }, [])
    })))

  it.scoped("R5: a replacement before the latest header does not make a series; a later one does", () =>
    provide(Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: uid() })
      yield* s.appendUnknown(...user("u1"))
      yield* compact(s, 0, "sum")
      yield* request(s, { header: H1, firstOfInstance: true }, ["header:initial"])
      yield* request(s, { header: H1, firstOfInstance: false }, [])
      // a tool-result-like replacement by a context/message is also a replacement surface event
      yield* s.appendUnknown("context/message", {
        id: "c1",
        role: "user",
        content: [{ type: "text", text: "ctx" }],
        source: { kind: "plugin", plugin: "x" }
      }, replace(1, 1, [1]))
      yield* s.append("todo/write", { todos: [] })
      yield* request(s, { header: H1, firstOfInstance: false }, ["header:series"])
    })))

  it.scoped("§5.1: only canonical snapshots are written; a non-canonical equal header is not a change", () =>
    provide(Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: uid() })
      const noisy: RequestHeader = { config: { provider: "p", model: "m" }, system: "", tools: [], adapterDefaults: {} }
      const [e] = yield* request(s, { header: noisy, firstOfInstance: true }, ["header:initial"])
      assert.deepStrictEqual(e.data, { header: { config: { provider: "p", model: "m" } }, reason: "initial" })
      yield* request(s, { header: { config: { provider: "p", model: "m" } }, firstOfInstance: false }, [])
      yield* request(s, noisyPlan(noisy), [])
      const withMarker: RequestHeader = {
        config: { provider: "p", model: "m", maxTokens: 5 },
        adapterDefaults: { maxTokens: true },
        system: "s"
      }
      const [c] = yield* request(s, { header: withMarker, firstOfInstance: false }, ["header:change"])
      assert.deepStrictEqual(c.data, { header: withMarker, reason: "change" })
    })))

  it.scoped("R8: header and context events never change derived messages or the transcript", () =>
    provide(Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: uid() })
      yield* s.appendUnknown(...user("u1"))
      const before = yield* snapshot(s)
      yield* request(s, { header: H1, context: C1, firstOfInstance: true }, ["header:initial", `request/context:${JSON.stringify(C1)}`])
      const after = yield* snapshot(s)
      assert.strictEqual(after.messages, before.messages)
      assert.deepStrictEqual(after.nodes, before.nodes)
      assert.deepStrictEqual(after.transcript, before.transcript)
      const header = yield* s.requestHeader
      assert.deepStrictEqual(header, H1)
      assert.isTrue(Object.isFrozen(header))
      assert.deepStrictEqual(yield* s.requestAt(2), { header: H1, context: C1, messages: yield* s.messages })
    })))
})

const noisyPlan = (header: RequestHeader): ModelRequestPlan => ({ header, firstOfInstance: false })

describe("I1 before anything is appended; decide never writes", () => {
  const bad: ReadonlyArray<readonly [string, string, unknown]> = [
    ["I1", "no provider", { config: { model: "m" } }],
    ["I1", "an empty model", { config: { provider: "p", model: "" } }],
    ["I1", "no config", {}],
    ["I2", "an empty reasoning effort", { config: { provider: "p", model: "m", reasoningEffort: "" } }],
    ["I6", "a marker for an absent field", { config: { provider: "p", model: "m" }, adapterDefaults: { maxTokens: true } }]
  ]
  for (const [rule, name, header] of bad) {
    it.scoped(`${rule}: a plan with ${name} fails record and decide; nothing is appended`, () =>
      provide(Effect.gen(function*() {
        const snap = yield* HeaderSnapshotter
        const s = yield* SessionLive.create({ id: uid() })
        yield* s.appendUnknown(...user("u1"))
        const before = yield* snapshot(s)
        for (const first of [true, false]) {
          const plan = { header: header as RequestHeader, context: C1, firstOfInstance: first }
          const e = yield* Effect.flip(snap.record(s, plan))
          assertError(e, { _tag: "RequestHeaderInvalid", rule, seq: 1 })
          if (rule === "I1") assert.include(e.message, "lacks provider/model")
          assertError(yield* Effect.flip(snap.decide(s, plan)), { _tag: "RequestHeaderInvalid", rule })
        }
        assert.deepStrictEqual(yield* snapshot(s), before)
      })))
  }

  it.scoped("decide reports what record would write and writes nothing", () =>
    provide(Effect.gen(function*() {
      const snap = yield* HeaderSnapshotter
      const s = yield* SessionLive.create({ id: uid() })
      const before = yield* snapshot(s)
      const d = yield* snap.decide(s, { header: { ...H1, system: "" }, context: C1, firstOfInstance: true })
      assert.deepStrictEqual(d, { header: { header: { config: H1.config, tools: H1.tools! }, reason: "initial" }, context: C1 })
      assert.deepStrictEqual(yield* snapshot(s), before)
      assert.deepStrictEqual(yield* snap.decide(s, { header: H1, firstOfInstance: false }), {
        header: { header: H1, reason: "change" }
      })
    })))

  it.scoped("A1–A9: a header or context that is not lossless JSON fails before anything is appended", () =>
    provide(Effect.gen(function*() {
      const snap = yield* HeaderSnapshotter
      const s = yield* SessionLive.create({ id: uid() })
      yield* snap.record(s, { header: H1, context: C1, firstOfInstance: true })
      const before = yield* snapshot(s)
      const cyclic: Record<string, unknown> = { type: "object" }
      cyclic.self = cyclic
      const cases: ReadonlyArray<readonly [ModelRequestPlan, string, string]> = [
        // NaN context window (A4): the header would be a change, but nothing is written
        [{ header: H2, context: { provider: "p", model: "m", contextWindow: Number.NaN }, firstOfInstance: false }, "A4", "/data/contextWindow"],
        // a cyclic tool schema (A6) is rejected by the walk instead of looping in the comparison
        [{ header: { ...H1, tools: [{ name: "t", description: "d", parameters: cyclic }] }, firstOfInstance: false }, "A6", "/data/header/tools/0/parameters/self"],
        [{ header: { config: { provider: "p", model: "m", maxTokens: 10n as never } }, firstOfInstance: false }, "A1", "/data/header/config/maxTokens"]
      ]
      for (const [plan, rule, path] of cases) {
        const e = yield* Effect.flip(snap.record(s, plan))
        assertError(e, { _tag: "NotLosslessJson", rule, seq: 2, path })
        assertError(yield* Effect.flip(snap.decide(s, plan)), { _tag: "NotLosslessJson", rule, path })
      }
      assert.deepStrictEqual(yield* snapshot(s), before)
    })))
})
