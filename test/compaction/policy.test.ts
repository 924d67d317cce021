import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  defaultIsContextOverflow,
  type HookContext,
  onOverflow,
  preStepHook,
  resolveLimits,
  validatePolicy
} from "../../src/programs/compaction/Compact.js"
import { measureRequest } from "../../src/programs/compaction/Tokens.js"
import { CompactionRejected } from "../../src/schema/Errors.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { baseLayer, invariantLayer, ofType, step, typesFrom, userData, words } from "./helpers.js"

const header = { config: { provider: "p", model: "m" } }
const ctx = (contextWindow: number | undefined, turn = 2): HookContext => ({ turn, header, contextWindow })

const expectRejected = (e: unknown, rule: string, reason: string): void => {
  assert.instanceOf(e, CompactionRejected)
  assert.strictEqual((e as CompactionRejected).rule, rule)
  assert.strictEqual((e as CompactionRejected).reason, reason)
}

/** Turn 1 (closed) with a big tool result, then turn 2 opened. */
const history = (s: Session.SessionShape) =>
  Effect.gen(function*() {
    yield* s.append("turn/start", { turn: 1 })
    yield* step(s, 1, 1, {
      users: [words(400, "ask")],
      text: words(400, "plan"),
      calls: [{ id: "c1", output: words(3000, "out") }]
    })
    yield* step(s, 1, 2, { text: words(50, "answer") })
    yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
    yield* s.append("turn/start", { turn: 2 })
  })

const pressure = (s: Session.SessionShape) => Effect.map(s.messages, (m) => measureRequest(m, header))

describe("§9.7 policy configuration (P13)", () => {
  it("defaults: threshold ⌊0.8 w⌋, retained tail ⌊0.16 w⌋; overrides match exact provider and model", () => {
    assert.deepStrictEqual(resolveLimits({}, undefined, 1000), { contextWindow: 1000, threshold: 800, retainTokens: 160 })
    assert.deepStrictEqual(resolveLimits({ retainTokens: 10 }, undefined, 1000), {
      contextWindow: 1000,
      threshold: 800,
      retainTokens: 10
    })
    const policy = { overrides: [{ provider: "p", model: "m", contextWindow: 10_000, retainRatio: 0.5 }] }
    assert.deepStrictEqual(resolveLimits(policy, { provider: "p", model: "m" }, 1000), {
      contextWindow: 10_000,
      threshold: 8000,
      retainTokens: 5000
    })
    assert.deepStrictEqual(resolveLimits(policy, { provider: "p", model: "m2" }, 1000), {
      contextWindow: 1000,
      threshold: 800,
      retainTokens: 160
    })
    assert.isUndefined(resolveLimits({}, undefined, undefined))
  })

  const bad: ReadonlyArray<readonly [string, unknown]> = [
    ["an unknown key", { contextWindw: 1000 }],
    ["ratio and absolute retained tail together", { retainTokens: 10, retainRatio: 0.1 }],
    ["a retained tail at or above the threshold", { contextWindow: 1000, retainTokens: 800 }],
    ["a ratio above 1", { thresholdRatio: 1.5 }],
    ["a negative compactionRetries", { compactionRetries: -1 }],
    ["an invalid pruner config", { prune: { thresholdChars: 10 } }],
    ["an override without a model", { overrides: [{ provider: "p" }] }],
    ["an override retaining more than its threshold", { overrides: [{ provider: "p", model: "m", contextWindow: 100, retainTokens: 90 }] }]
  ]
  for (const [name, policy] of bad) {
    it(`P13 rejects ${name}`, () => expectRejected(validatePolicy(policy as any), "P13", "config"))
  }

  it.scoped("P13 the pre-step hook of an invalid policy fails and writes nothing", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p13-hook" })
      yield* history(s)
      const n = (yield* s.events).length
      const e = yield* Effect.flip(
        preStepHook({ retainTokens: 1, retainRatio: 0.1 })(ctx(1000)).pipe(Effect.provideService(Session.Session, s))
      )
      expectRejected(e, "P13", "config")
      assert.strictEqual((yield* s.events).length, n)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P13 a retained tail above the threshold of the route's context window", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p13-window" })
      yield* history(s)
      const e = yield* Effect.flip(
        preStepHook({ retainTokens: 5000 })(ctx(1000)).pipe(Effect.provideService(Session.Session, s))
      )
      expectRejected(e, "P13", "config")
    }).pipe(Effect.provide(baseLayer)))

  it("the default overflow classifier", () => {
    assert.isTrue(defaultIsContextOverflow(new Error("prompt is too long: 210000 tokens > 200000 maximum")))
    assert.isTrue(defaultIsContextOverflow({ message: "This model's maximum context length is 8192 tokens" }))
    assert.isFalse(defaultIsContextOverflow(new Error("rate limited")))
  })
})

describe("§9.7 pressure (pre-step hook)", () => {
  it.scoped("below the threshold nothing is written", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "below" })
      yield* history(s)
      const n = (yield* s.events).length
      yield* preStepHook({})(ctx(1_000_000)).pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual((yield* s.events).length, n)
      // no known context window: no pressure check at all
      yield* preStepHook({})(ctx(undefined)).pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual((yield* s.events).length, n)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("pruning first: enough when it brings the request below the threshold", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "prune-first" })
      yield* history(s)
      const size = yield* pressure(s)
      const n = (yield* s.events).length
      // window such that the threshold sits between the pruned and the unpruned size
      const window = Math.ceil((size - 2000) / 0.8)
      yield* preStepHook({})(ctx(window)).pipe(Effect.provideService(Session.Session, s))
      assert.deepStrictEqual(typesFrom(yield* s.events, n), ["compaction/prune", "tool/result"])
      assert.isBelow(yield* pressure(s), Math.floor(window * 0.8))
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("prune, then an automatic compaction owned by the open turn", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "compact-round" })
      yield* history(s)
      const n = (yield* s.events).length
      yield* preStepHook({ retainTokens: 100 })(ctx(1000)).pipe(Effect.provideService(Session.Session, s))
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), [
        "compaction/prune",
        "tool/result",
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end"
      ])
      assert.strictEqual((events[n + 2].data as any).turn, 2)
      assert.isBelow(yield* pressure(s), 800)
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("P12 still at or above the threshold after compactionRetries + 1 rounds", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p12" })
      yield* s.append("turn/start", { turn: 1 })
      yield* s.append("user/message", userData("u1", words(1000, "head")), { surfaceOp: "append" })
      yield* s.append("user/message", userData("u2", words(1000, "more")), { surfaceOp: "append" })
      yield* s.append("user/message", userData("u3", words(2000, "tail")), { surfaceOp: "append" })
      const e = yield* Effect.flip(
        preStepHook({ retainTokens: 100 })(ctx(1000, 1)).pipe(Effect.provideService(Session.Session, s))
      )
      expectRejected(e, "P12", "pressure")
      const events = yield* s.events
      const starts = ofType(events, "compaction/start").length
      assert.isAtLeast(starts, 1)
      assert.isAtMost(starts, 2)
      // every bracket was closed
      assert.strictEqual(ofType(events, "compaction/end").length, starts)
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("compactionRetries bounds the rounds", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p12-rounds" })
      yield* s.append("turn/start", { turn: 1 })
      for (let i = 0; i < 6; i++) {
        yield* s.append("user/message", userData(`u${i}`, words(1000, `w${i}`)), { surfaceOp: "append" })
      }
      yield* s.append("user/message", userData("last", words(2000, "tail")), { surfaceOp: "append" })
      const e = yield* Effect.flip(
        preStepHook({ retainTokens: 100, compactionRetries: 0, prune: false })(ctx(1000, 1)).pipe(
          Effect.provideService(Session.Session, s)
        )
      )
      expectRejected(e, "P12", "pressure")
      assert.strictEqual(ofType(yield* s.events, "compaction/start").length, 1)
    }).pipe(Effect.provide(baseLayer)))
})

describe("§9.7 context overflow", () => {
  it.scoped("prune + compact with retainTokens 0, retry only if replaceGeneration advanced, at most maxOverflowRetries", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "overflow" })
      yield* history(s)
      const handler = onOverflow({ maxOverflowRetries: 1 })
      assert.isTrue(handler.isOverflow(new Error("context_length_exceeded")))
      const before = yield* s.surface.replaceGeneration
      const n = (yield* s.events).length
      const retry = yield* handler.handle(ctx(undefined)).pipe(Effect.provideService(Session.Session, s))
      assert.isTrue(retry)
      assert.isAbove(yield* s.surface.replaceGeneration, before)
      const types = typesFrom(yield* s.events, n)
      assert.deepStrictEqual(types.slice(0, 2), ["compaction/prune", "tool/result"])
      assert.deepStrictEqual(types.slice(2), ["compaction/start", "compaction/summary", "user/message", "compaction/end"])
      // the budget is spent: no further retry, nothing written
      const m = (yield* s.events).length
      assert.isFalse(yield* handler.handle(ctx(undefined)).pipe(Effect.provideService(Session.Session, s)))
      assert.strictEqual((yield* s.events).length, m)
      assert.strictEqual(yield* handler.attempts, 1)
      // a successful assistant message resets the counter
      yield* handler.reset
      assert.strictEqual(yield* handler.attempts, 0)
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("no retry when nothing could be pruned or compacted", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "overflow-none" })
      yield* s.append("turn/start", { turn: 1 })
      yield* s.append("user/message", userData("only", words(100)), { surfaceOp: "append" })
      const handler = onOverflow({})
      const n = (yield* s.events).length
      assert.isFalse(yield* handler.handle(ctx(undefined, 1)).pipe(Effect.provideService(Session.Session, s)))
      assert.strictEqual((yield* s.events).length, n)
    }).pipe(Effect.provide(baseLayer)))
})
