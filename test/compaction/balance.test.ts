import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  BalanceCache,
  balanceCacheOf,
  balancedAfter,
  balancedBefore,
  selectCompactionRange,
  selectExplicitRegion,
  sessionBalance,
  toolPairingBalance
} from "../../src/programs/compaction/Compact.js"
import { measureSurface } from "../../src/programs/compaction/Tokens.js"
import { CompactionRejected } from "../../src/schema/Errors.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { assistantData, baseLayer, step, toolResultData, userData } from "./helpers.js"

const ev = (seq: number, type: string, data: unknown, surfaceOp?: unknown): Event =>
  ({ type, seq, time: 0, data, ...(surfaceOp === undefined ? {} : { surfaceOp }) }) as Event

const filler = (n: number): Array<Event> => Array.from({ length: n }, (_, i) => ev(i, "todo/write", { todos: [] }))

/** The §9.2 worked example: 10 user, 11 assistant(1 call), 12 result, 13 assistant(1 call), 14 result. */
const example = (): { readonly events: ReadonlyArray<Event>; readonly nodes: ReadonlyArray<number> } => {
  const events = [
    ...filler(10),
    ev(10, "user/message", userData("u", "hi"), "append"),
    ev(11, "assistant/message", assistantData(1, 1, "a1", "", ["c1"]), "append"),
    ev(12, "tool/result", toolResultData(1, 1, "c1", []), "append"),
    ev(13, "assistant/message", assistantData(1, 2, "a2", "", ["c2"]), "append"),
    ev(14, "tool/result", toolResultData(1, 2, "c2", []), "append")
  ]
  return { events, nodes: [10, 11, 12, 13, 14] }
}
const exampleTokens = [100, 200, 50, 300, 80]
const exampleMeasurement = {
  nodes: [10, 11, 12, 13, 14].map((seq, i) => ({ seq, tokens: exampleTokens[i] }))
}

const expectRejected = (r: unknown, rule: string, reason: string): void => {
  assert.instanceOf(r, CompactionRejected)
  assert.strictEqual((r as CompactionRejected).rule, rule)
  assert.strictEqual((r as CompactionRejected).reason, reason)
}

const balanceOf = (events: ReadonlyArray<Event>, nodes: ReadonlyArray<number>) => {
  const b = toolPairingBalance(nodes, events)
  if (b instanceof CompactionRejected) throw new Error(b.message)
  return b
}

describe("§9.1 tool-pairing balance", () => {
  it("cut counters of the worked example", () => {
    const { events, nodes } = example()
    assert.deepStrictEqual(balanceOf(events, nodes).counters, [0, 0, 1, 0, 1, 0])
  })

  it("balanced before/after a seq; a neutral node inside a pair is unbalanced on both sides", () => {
    const events = [
      ev(0, "assistant/message", assistantData(1, 1, "a", "", ["x", "y"]), "append"),
      ev(1, "tool/result", toolResultData(1, 1, "x", []), "append"),
      ev(2, "user/message", userData("inj", "note"), "append"),
      ev(3, "tool/result", toolResultData(1, 1, "y", []), "append")
    ]
    const b = balanceOf(events, [0, 1, 2, 3])
    assert.deepStrictEqual(b.counters, [0, 2, 1, 1, 0])
    assert.strictEqual(balancedBefore(b, 0), true)
    assert.strictEqual(balancedAfter(b, 0), false)
    assert.strictEqual(balancedBefore(b, 2), false)
    assert.strictEqual(balancedAfter(b, 2), false)
    assert.strictEqual(balancedAfter(b, 3), true)
  })

  it("P5 balanced-before/after a seq not on the surface", () => {
    const { events, nodes } = example()
    const b = balanceOf(events, nodes)
    expectRejected(balancedBefore(b, 3), "P5", "invalid-range")
    expectRejected(balancedAfter(b, 99), "P5", "invalid-range")
  })

  it("P6 a negative in-progress counter is a corrupt surface", () => {
    const events = [ev(0, "tool/result", toolResultData(1, 1, "x", []), "append")]
    expectRejected(toolPairingBalance([0], events), "P6", "corrupt-surface")
  })

  it("P6 a surface seq without a log event is a corrupt surface", () => {
    const { events } = example()
    expectRejected(toolPairingBalance([10, 11, 12, 40], events), "P6", "corrupt-surface")
    expectRejected(measureSurface([10, 40], events), "P6", "corrupt-surface")
  })

  it("P6 a measurement not aligned with the surface", () => {
    const { events, nodes } = example()
    const b = balanceOf(events, nodes)
    const shorter = { nodes: exampleMeasurement.nodes.slice(1) }
    expectRejected(selectCompactionRange(shorter, b, 0), "P6", "corrupt-surface")
    const reordered = { nodes: [...exampleMeasurement.nodes].reverse() }
    expectRejected(selectCompactionRange(reordered, b, 0), "P6", "corrupt-surface")
    expectRejected(selectExplicitRegion(shorter, b, 11, 12), "P6", "corrupt-surface")
  })

  it("cache: extended for new tail nodes, rebuilt on a new generation or a shorter surface", () => {
    const { events } = example()
    const cache = new BalanceCache()
    const first = cache.get([10, 11], 0, events)
    assert.deepStrictEqual((first as any).counters, [0, 0, 1])
    assert.strictEqual(cache.rebuilds, 1)
    const extended = cache.get([10, 11, 12, 13], 0, events)
    assert.deepStrictEqual((extended as any).counters, [0, 0, 1, 0, 1])
    assert.deepStrictEqual([cache.rebuilds, cache.extensions], [1, 1])
    // unchanged surface: neither
    cache.get([10, 11, 12, 13], 0, events)
    assert.deepStrictEqual([cache.rebuilds, cache.extensions], [1, 1])
    // a cached node count above the current one: rebuild
    const shorter = cache.get([10, 11, 12], 0, events)
    assert.deepStrictEqual((shorter as any).counters, [0, 0, 1, 0])
    assert.deepStrictEqual([cache.rebuilds, cache.extensions], [2, 1])
    // a new generation: rebuild
    cache.get([10, 11, 12], 1, events)
    assert.deepStrictEqual([cache.rebuilds, cache.extensions], [3, 1])
  })

  it("cache: a corrupt new tail is rejected (P6) and not committed", () => {
    const events = [
      ...example().events,
      ev(15, "tool/result", toolResultData(1, 3, "zz", []), "append")
    ]
    const cache = new BalanceCache()
    cache.get([10, 11, 12, 13, 14], 0, events)
    expectRejected(cache.get([10, 11, 12, 13, 14, 15], 0, events), "P6", "corrupt-surface")
    const again = cache.get([10, 11, 12, 13, 14], 0, events)
    assert.deepStrictEqual((again as any).counters, [0, 0, 1, 0, 1, 0])
    assert.strictEqual(cache.extensions, 0)
  })

  it.scoped("cache: per session, follows appends and replacements", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "bal" })
      yield* s.append("turn/start", { turn: 1 })
      yield* step(s, 1, 1, { users: ["go"], text: "", calls: [{ id: "c1", output: "x" }] })
      const b1 = yield* sessionBalance(s)
      const cache = balanceCacheOf(s)
      assert.deepStrictEqual([cache.rebuilds, cache.extensions], [1, 0])
      yield* step(s, 1, 2, { text: "", calls: [{ id: "c2", output: "y" }, { id: "c3", output: "z" }] })
      const b2 = yield* sessionBalance(s)
      assert.deepStrictEqual([cache.rebuilds, cache.extensions], [1, 1])
      const events = yield* s.events
      const fresh = balanceOf(events, yield* s.surface.nodes)
      assert.deepStrictEqual(b2, fresh)
      assert.deepStrictEqual(b1.counters, [0, 0, 1, 0])
      // a replacement advances the generation: rebuild
      const nodes = yield* s.surface.nodes
      yield* s.append("user/message", userData("cp", "summary"), {
        surfaceOp: { op: "replace", start: nodes[0], end: nodes[2] },
        sourceEventSeqs: [nodes[0], nodes[1], nodes[2]]
      })
      const b3 = yield* sessionBalance(s)
      assert.strictEqual(cache.rebuilds, 2)
      assert.deepStrictEqual(b3, balanceOf(yield* s.events, yield* s.surface.nodes))
    }).pipe(Effect.provide(baseLayer)))
})

describe("§9.2 range selection", () => {
  const { events, nodes } = example()
  const balance = balanceOf(events, nodes)

  it("worked example: retainTokens 350 selects [10, 12]", () => {
    const r = selectCompactionRange(exampleMeasurement, balance, 350)
    assert.deepStrictEqual(r, { start: 10, end: 12, seqs: [10, 11, 12], tokens: 350 })
  })

  it("worked example: retainTokens 50 snaps from 4 to 3 and selects [10, 12]", () => {
    const r = selectCompactionRange(exampleMeasurement, balance, 50)
    assert.deepStrictEqual(r, { start: 10, end: 12, seqs: [10, 11, 12], tokens: 350 })
  })

  it("P4 worked example: retainTokens 700 reaches index 0 (nothing to compact)", () => {
    expectRejected(selectCompactionRange(exampleMeasurement, balance, 700), "P4", "nothing")
  })

  it("retainTokens 0 still keeps the last node", () => {
    const r = selectCompactionRange(exampleMeasurement, balance, 0)
    assert.deepStrictEqual((r as any).seqs, [10, 11, 12])
  })

  it("P4 the sum never reaches retainTokens", () => {
    expectRejected(selectCompactionRange(exampleMeasurement, balance, 10_000), "P4", "nothing")
  })

  it("P4 snapping reaches the head", () => {
    // surface: assistant(1 call), user (neutral inside the pair), result
    const evs = [
      ev(0, "assistant/message", assistantData(1, 1, "a", "", ["x"]), "append"),
      ev(1, "user/message", userData("u", "note"), "append"),
      ev(2, "tool/result", toolResultData(1, 1, "x", []), "append")
    ]
    const b = balanceOf(evs, [0, 1, 2])
    const m = { nodes: [{ seq: 0, tokens: 10 }, { seq: 1, tokens: 10 }, { seq: 2, tokens: 10 }] }
    expectRejected(selectCompactionRange(m, b, 5), "P4", "nothing")
  })

  it("P4 an empty surface", () => {
    expectRejected(selectCompactionRange({ nodes: [] }, { nodes: [], counters: [0] }, 0), "P4", "nothing")
  })

  it("explicit regions: balanced on both sides", () => {
    assert.deepStrictEqual(selectExplicitRegion(exampleMeasurement, balance, 10, 12), {
      start: 10,
      end: 12,
      seqs: [10, 11, 12],
      tokens: 350
    })
    assert.deepStrictEqual((selectExplicitRegion(exampleMeasurement, balance, 11, 14) as any).seqs, [11, 12, 13, 14])
    assert.deepStrictEqual((selectExplicitRegion(exampleMeasurement, balance, 10, 10) as any).seqs, [10])
  })

  it("P5 explicit region unbalanced after end", () => {
    expectRejected(selectExplicitRegion(exampleMeasurement, balance, 10, 11), "P5", "invalid-range")
  })

  it("P5 explicit region unbalanced before start", () => {
    expectRejected(selectExplicitRegion(exampleMeasurement, balance, 12, 14), "P5", "invalid-range")
  })

  it("P5 explicit region with start after end", () => {
    expectRejected(selectExplicitRegion(exampleMeasurement, balance, 13, 10), "P5", "invalid-range")
  })

  it("P5 explicit region endpoint not on the surface", () => {
    expectRejected(selectExplicitRegion(exampleMeasurement, balance, 9, 12), "P5", "invalid-range")
    expectRejected(selectExplicitRegion(exampleMeasurement, balance, 10, 15), "P5", "invalid-range")
  })
})
