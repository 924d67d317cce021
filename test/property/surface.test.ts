/**
 * Property tests of the surface over random valid logs (SPEC §4): seed acceptance, the
 * incremental surface and derived messages against the pure fold after every append, replay
 * determinism, and invariance of the derivation under inserted log-only events.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { encodeJson, type Json } from "../../src/schema/Json.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { deriveEventMessage, foldSurface, type SurfaceFold } from "../../src/services/SurfaceManager.js"
import {
  anyValidLog,
  appendOptions,
  asEvents,
  type BuiltLog,
  buildLog,
  insertion,
  insertLogOnly,
  type TopIntent,
  validLog
} from "../arbitraries.js"
import { runs } from "../suites.js"

const RUNS = { fastCheck: { numRuns: runs(40) } }
const header = (id: string) => ({ version: 1, id, createdAt: 0 })

const fold = (events: ReadonlyArray<Event>): SurfaceFold => {
  const r = foldSurface(events)
  if (!("nodes" in r)) assert.fail(`fold rejected a valid log: ${r.message}`)
  return r
}

/** From-scratch derivation: the fold's nodes through deriveEventMessage. */
const derive = (events: ReadonlyArray<Event>) => {
  const out: Array<unknown> = []
  for (const s of fold(events).nodes) {
    const m = deriveEventMessage(events[s])
    if (m !== undefined) out.push(m)
  }
  return out
}

const json = (v: unknown) => encodeJson(v as Json)

/** SessionLive.fromSeed over a generated log must accept it. */
const seeded = (id: string, seed: unknown) =>
  SessionLive.fromSeed({ header: header(id), seed }).pipe(
    Effect.catchAll((e) => Effect.dieMessage(`fromSeed rejected a valid log: ${e.message}`))
  )

/** Append every event of a log to a fresh session, checking after each append. */
const replayIncrementally = (
  log: BuiltLog,
  check: (s: Session.SessionShape, i: number) => Effect.Effect<void>
) =>
  Effect.gen(function*() {
    const s = yield* SessionLive.create({ id: "incremental" })
    for (let i = 0; i < log.events.length; i++) {
      const e = log.events[i]
      const appended = yield* s.appendUnknown(e.type, e.data, appendOptions(e)).pipe(
        Effect.catchAll((err) => Effect.dieMessage(`append ${i} rejected: ${err.message}`))
      )
      assert.strictEqual(appended.seq, i)
      yield* check(s, i)
    }
    return s
  })

describe("property: random valid logs", () => {
  it.prop("the fold agrees with the generator's own surface model (SPEC §4.2, §4.6)", [anyValidLog], ([log]) => {
    const events = asEvents(log.events)
    const f = fold(events)
    assert.deepStrictEqual(f.nodes, [...log.nodes])
    assert.strictEqual(f.replacements.length, log.replacements)
    for (const r of f.replacements) {
      // shadowedSeqs are exactly the nodes of the declared span, in surface order
      const before = log.nodesBefore[r.seq]
      assert.deepStrictEqual(r.shadowedSeqs, before.slice(before.indexOf(r.start), before.indexOf(r.end) + 1))
    }
    assert.strictEqual(json(derive(events)), json(log.messages))
  }, RUNS)

  it.scoped.prop("SessionLive.fromSeed accepts every valid log (SPEC §3.2)", [anyValidLog], ([log]) =>
    Effect.gen(function*() {
      const s = yield* seeded("seeded", log.events)
      assert.strictEqual(s.firstLiveSeq, log.events.length)
      assert.deepStrictEqual(yield* s.surface.nodes, log.nodes)
      assert.strictEqual(yield* s.surface.replaceGeneration, log.replacements)
      assert.strictEqual(json(yield* s.messages), json(log.messages))
    }).pipe(Effect.provide(layerMemoryStore())), RUNS)

  it.scoped.prop(
    "incremental surface and replaceGeneration equal the full fold after every append (SPEC §4.3, §4.5)",
    [anyValidLog],
    ([log]) =>
      replayIncrementally(log, (s, i) =>
        Effect.gen(function*() {
          const f = fold(asEvents(log.events.slice(0, i + 1)))
          assert.deepStrictEqual(yield* s.surface.nodes, f.nodes, `nodes after append ${i}`)
          assert.strictEqual(yield* s.surface.replaceGeneration, f.replacements.length, `generation after ${i}`)
        })).pipe(Effect.asVoid, Effect.provide(layerMemoryStore())),
    RUNS
  )

  it.scoped.prop(
    "derived messages equal a from-scratch derivation after every append (SPEC §4.6)",
    [anyValidLog],
    ([log]) =>
      Effect.gen(function*() {
        const s = yield* replayIncrementally(log, (s, i) =>
          Effect.gen(function*() {
            const fromScratch = derive(asEvents(log.events.slice(0, i + 1)))
            assert.strictEqual(json(yield* s.messages), json(fromScratch), `messages after append ${i}`)
          }))
        // and against the handle's own log (the walked copies)
        assert.strictEqual(json(yield* s.messages), json(derive(yield* s.events)))
      }).pipe(Effect.provide(layerMemoryStore())),
    RUNS
  )

  it.scoped.prop(
    "replaying a log as a seed gives identical events, surface and messages (SPEC §4.6)",
    [anyValidLog],
    ([log]) =>
      Effect.gen(function*() {
        const n = log.events.length
        const endsWithMarker = n > 0 && log.events[n - 1].type === "session/end-seed"
        // the generated log as a seed
        const a = yield* seeded("replay-a", log.events)
        const aEvents = yield* a.events
        assert.strictEqual(aEvents.length, endsWithMarker ? n : n + 1)
        for (let i = 0; i < n; i++) assert.strictEqual(encodeEvent(aEvents[i]), JSON.stringify(log.events[i]))
        if (!endsWithMarker) {
          assert.strictEqual(aEvents[n].type, "session/end-seed")
          assert.strictEqual(aEvents[n].seq, n)
        }
        // a live session's log replayed as a seed
        const live = yield* replayIncrementally(log, () => Effect.void)
        const liveEvents = yield* live.events
        const b = yield* seeded("replay-b", liveEvents)
        const bEvents = yield* b.events
        assert.deepStrictEqual(bEvents.slice(0, n).map(encodeEvent), liveEvents.map(encodeEvent))
        assert.deepStrictEqual(yield* b.surface.nodes, yield* live.surface.nodes)
        assert.strictEqual(yield* b.surface.replaceGeneration, yield* live.surface.replaceGeneration)
        assert.strictEqual(json(yield* b.messages), json(yield* live.messages))
        assert.strictEqual(json(yield* a.messages), json(yield* live.messages))
        // and the replay of the replay is the same again
        const c = yield* seeded("replay-c", bEvents)
        assert.deepStrictEqual((yield* c.events).map(encodeEvent), bEvents.map(encodeEvent))
        assert.strictEqual(json(yield* c.messages), json(yield* b.messages))
      }).pipe(Effect.provide(layerMemoryStore())),
    { fastCheck: { numRuns: runs(30) } }
  )

  it.scoped.prop(
    "log-only events inserted anywhere never change the derived messages (SPEC §4.6)",
    [anyValidLog, fc.array(insertion, { minLength: 1, maxLength: 8 })],
    ([log, inserts]) =>
      Effect.gen(function*() {
        const { events, remap } = insertLogOnly(log.events, inserts)
        assert.strictEqual(events.length, log.events.length + inserts.length)
        const expected = json(derive(asEvents(log.events)))
        assert.strictEqual(json(derive(asEvents(events))), expected)
        assert.deepStrictEqual(fold(asEvents(events)).nodes, log.nodes.map(remap))
        const s = yield* seeded("inserted", events)
        assert.strictEqual(json(yield* s.messages), expected)
        assert.strictEqual(yield* s.surface.replaceGeneration, log.replacements)
      }).pipe(Effect.provide(layerMemoryStore())),
    RUNS
  )
})

describe("property: regression cases", () => {
  it.scoped("a log of only a compaction of an empty surface and noise is accepted", () =>
    Effect.gen(function*() {
      const intents: ReadonlyArray<TopIntent> = [
        { _tag: "compaction", at: 3, len: 1, minSpan: 1, summary: "s", failed: false },
        { _tag: "prune", pick: 0, kept: "k" }
      ]
      const log = buildLog(intents)
      assert.strictEqual(log.events.length, 0)
      const s = yield* seeded("empty", log.events)
      assert.deepStrictEqual((yield* s.events).map((e) => e.type), ["session/end-seed"])
    }).pipe(Effect.provide(layerMemoryStore())))

  it("generated logs are large enough to exercise replacements", () => {
    const sample = fc.sample(validLog({ rich: true }), { numRuns: 20, seed: 42 })
    assert.isTrue(sample.every((l) => l.replacements >= 2))
    assert.isTrue(sample.some((l) => l.events.length > 40))
  })
})
