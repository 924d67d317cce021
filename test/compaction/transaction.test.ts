import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { deterministicLine } from "../../src/layers/model/SummarizerLive.js"
import { compact, type CompactOptions } from "../../src/programs/compaction/Compact.js"
import { estimateTokens } from "../../src/programs/compaction/Tokens.js"
import { CompactionRejected, InvariantViolation, StoreFailure } from "../../src/schema/Errors.js"
import type { Event } from "../../src/schema/Events.js"
import type { Message } from "../../src/schema/Messages.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import type { PreparedEvent } from "../../src/services/PrepareEvent.js"
import { CHECKPOINT_PREAMBLE, Summarizer } from "../../src/services/Summarizer.js"
import { assertUnchanged, snapshot } from "../helpers/state.js"
import {
  baseLayer,
  invariantLayer,
  ofType,
  shortSummary,
  step,
  summarizerOf,
  typesFrom,
  userData,
  words
} from "./helpers.js"

/** Turn 1 (closed): [u0, a1(call c1), r1, a2]; surface seqs returned. */
const closedTurn = (s: Session.SessionShape, turn = 1) =>
  Effect.gen(function*() {
    yield* s.append("turn/start", { turn })
    yield* step(s, turn, 1, {
      users: [words(200, "ask")],
      text: words(150, "plan"),
      calls: [{ id: `c${turn}`, output: words(300, "out") }]
    })
    yield* step(s, turn, 2, { text: words(100, "answer") })
    yield* s.append("turn/end", { turn, reason: { kind: "completed" } })
  })

const expectRejected = (e: unknown, rule: string, reason: string): void => {
  assert.instanceOf(e, CompactionRejected)
  assert.strictEqual((e as CompactionRejected).rule, rule)
  assert.strictEqual((e as CompactionRejected).reason, reason)
}

const run = (s: Session.SessionShape, options: CompactOptions) =>
  compact(options).pipe(Effect.provideService(Session.Session, s))

const manual = (extra: Partial<CompactOptions> = {}): CompactOptions => ({ mode: "manual", retainTokens: 1, ...extra })

describe("§9.3 the compaction transaction", () => {
  it.scoped("a successful manual compaction: event sequence, citations, result (P10 none)", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "ok" })
      yield* closedTurn(s)
      const before = yield* s.events
      const nodes = yield* s.surface.nodes
      assert.strictEqual(nodes.length, 4)
      const shadowed = nodes.slice(0, 3)
      const shadowedMessages = (yield* s.messages).slice(0, 3) as ReadonlyArray<Message>
      const tokens = shadowedMessages.reduce((n, m) => n + estimateTokens(m), 0)

      const result = yield* run(s, manual({ sourceCommandId: "cmd-7" }))
      const events = yield* s.events
      const n = before.length
      assert.deepStrictEqual(typesFrom(events, n), [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end"
      ])
      const [start, summary, checkpoint, end] = events.slice(n)
      assert.deepStrictEqual(start.data, { compactionId: "id-1", sourceCommandId: "cmd-7", turn: null })
      const summaryText = shadowedMessages.map(deterministicLine).join("\n")
      assert.deepStrictEqual(summary.data, {
        compactionId: "id-1",
        sourceCommandId: "cmd-7",
        summary: [{ type: "text", text: summaryText }],
        shadowedRange: { start: shadowed[0], end: shadowed[2] },
        shadowedSeqs: shadowed,
        shadowedTokenCount: tokens,
        provider: "deterministic",
        model: "summary-v1"
      })
      assert.deepStrictEqual(checkpoint.surfaceOp, { op: "replace", start: shadowed[0], end: shadowed[2] })
      assert.deepStrictEqual(checkpoint.sourceEventSeqs, [start.seq, summary.seq, ...shadowed])
      assert.deepStrictEqual(checkpoint.data, {
        id: "id-2",
        role: "user",
        content: [
          { type: "text", text: `${CHECKPOINT_PREAMBLE}\n\n<compacted-summary>` },
          { type: "text", text: summaryText },
          { type: "text", text: "</compacted-summary>" }
        ],
        source: { kind: "plugin", plugin: "compact", compactionId: "id-1", sourceCommandId: "cmd-7" }
      })
      assert.deepStrictEqual(end.data, { compactionId: "id-1", sourceCommandId: "cmd-7", turn: null })
      assert.deepStrictEqual(result, {
        compactionId: "id-1",
        sourceCommandId: "cmd-7",
        startSeq: start.seq,
        summarySeq: summary.seq,
        endSeq: end.seq,
        summary: [{ type: "text", text: summaryText }],
        shadowedRange: { start: shadowed[0], end: shadowed[2] },
        shadowedSeqs: shadowed,
        shadowedTokenCount: tokens
      })
      assert.deepStrictEqual(yield* s.surface.nodes, [checkpoint.seq, nodes[3]])
      const messages = yield* s.messages
      assert.strictEqual(messages[0].id, "id-2")
      // the store holds the same log
      const stored = yield* (yield* SessionStore).load("ok")
      assert.strictEqual(stored.events.length, events.length)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("an automatic compaction inside the open turn is owned by it; no invariant vetoes it", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "auto" })
      yield* closedTurn(s)
      yield* s.append("turn/start", { turn: 2 })
      const n = (yield* s.events).length
      const result = yield* run(s, { mode: "automatic", retainTokens: 1 })
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end"
      ])
      assert.strictEqual((events[n].data as any).turn, 2)
      assert.strictEqual((events[n + 3].data as any).turn, 2)
      assert.strictEqual(result.startSeq, n)
      assert.strictEqual(result.endSeq, n + 3)
      // the loop continues normally afterwards
      yield* step(s, 2, 1, { users: ["next"], text: "fine" })
      yield* s.append("turn/end", { turn: 2, reason: { kind: "completed" } })
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("a manual explicit region compaction", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "region" })
      yield* closedTurn(s, 1)
      yield* closedTurn(s, 2)
      const nodes = yield* s.surface.nodes
      const r = yield* run(s, { mode: "manual", region: { start: nodes[4], end: nodes[6] } })
      assert.deepStrictEqual(r.shadowedSeqs, nodes.slice(4, 7))
      const after = yield* s.surface.nodes
      assert.deepStrictEqual(after, [...nodes.slice(0, 4), r.summarySeq + 1, nodes[7]])
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("P1 lock busy: an unmatched compaction/start; nothing written", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p1" })
      yield* closedTurn(s)
      yield* s.append("compaction/start", { compactionId: "other", turn: null })
      const before = yield* snapshot(s)
      expectRejected(yield* Effect.flip(run(s, manual())), "P1", "busy")
      assertUnchanged(before, yield* snapshot(s))
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P1 an unmatched start before the newest end-seed is not busy", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p1-src" })
      yield* closedTurn(s)
      yield* s.append("compaction/start", { compactionId: "dead", turn: null })
      const seed = yield* s.events
      const child = yield* SessionLive.fromSeed({ header: { version: 1, id: "p1-child", createdAt: 0 }, seed })
      const r = yield* run(child, manual())
      assert.strictEqual(r.startSeq, seed.length + 1)
      // and the same start is busy in the original lifecycle
      expectRejected(yield* Effect.flip(run(s, manual())), "P1", "busy")
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P2 manual compaction while a turn is open; nothing written", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p2" })
      yield* closedTurn(s)
      yield* s.append("turn/start", { turn: 2 })
      const before = yield* snapshot(s)
      expectRejected(yield* Effect.flip(run(s, manual())), "P2", "busy")
      assertUnchanged(before, yield* snapshot(s))
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P3 automatic compaction without an open turn; nothing written", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p3" })
      yield* closedTurn(s)
      const before = yield* snapshot(s)
      expectRejected(yield* Effect.flip(run(s, { mode: "automatic", retainTokens: 1 })), "P3", "no-turn")
      assertUnchanged(before, yield* snapshot(s))
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P4 nothing to compact; nothing written", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p4" })
      yield* closedTurn(s)
      const before = yield* snapshot(s)
      expectRejected(yield* Effect.flip(run(s, manual({ retainTokens: 1_000_000 }))), "P4", "nothing")
      assertUnchanged(before, yield* snapshot(s))
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P5 invalid explicit region; nothing written", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p5" })
      yield* closedTurn(s)
      const nodes = yield* s.surface.nodes
      const before = yield* snapshot(s)
      // cut after the assistant with a pending call is unbalanced
      const e = yield* Effect.flip(run(s, { mode: "manual", region: { start: nodes[0], end: nodes[1] } }))
      expectRejected(e, "P5", "invalid-range")
      assertUnchanged(before, yield* snapshot(s))
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P7 the framed summary is not strictly smaller: exactly one compaction/end with error", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p7" })
      yield* s.append("user/message", userData("tiny", "hi"), { surfaceOp: "append" })
      yield* s.append("user/message", userData("tail", "there"), { surfaceOp: "append" })
      const n = (yield* s.events).length
      const nodes = yield* s.surface.nodes
      expectRejected(yield* Effect.flip(run(s, manual())), "P7", "summary")
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "compaction/end"])
      const end = events[n + 1].data as any
      assert.strictEqual(end.compactionId, (events[n].data as any).compactionId)
      assert.match(end.error, /P7/)
      assert.deepStrictEqual(yield* s.surface.nodes, nodes)
      // the lock is free again
      assert.strictEqual(ofType(events, "compaction/end").length, 1)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P7 the summariser fails: exactly one compaction/end with error", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p7b" })
      yield* closedTurn(s)
      const n = (yield* s.events).length
      const failing = summarizerOf(() =>
        Effect.fail(new CompactionRejected({ rule: "P7", reason: "summary", detail: "model said no" }))
      )
      const e = yield* Effect.flip(run(s, manual()).pipe(Effect.provide(failing)))
      expectRejected(e, "P7", "summary")
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "compaction/end"])
      assert.match((events[n + 1].data as any).error, /model said no/)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P8 automatic: the surface changed while summarising: one compaction/end with error", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p8" })
      yield* closedTurn(s)
      yield* s.append("turn/start", { turn: 2 })
      const n = (yield* s.events).length
      const racing = summarizerOf(() =>
        s.append("user/message", userData("late", "queued input"), { surfaceOp: "append" }).pipe(
          Effect.orDie,
          Effect.as(shortSummary())
        )
      )
      const e = yield* Effect.flip(run(s, { mode: "automatic", retainTokens: 1 }).pipe(Effect.provide(racing)))
      expectRejected(e, "P8", "changed")
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "user/message", "compaction/end"])
      assert.match((events[n + 2].data as any).error, /P8/)
      assert.strictEqual((events[n + 2].data as any).turn, 2)
    }).pipe(Effect.provide(invariantLayer)))

  it.scoped("P8 manual: appends elsewhere are fine, a rewrite inside the span is not", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p8m" })
      yield* closedTurn(s)
      const appending = summarizerOf(() =>
        s.append("user/message", userData("later", "more"), { surfaceOp: "append" }).pipe(
          Effect.orDie,
          Effect.as(shortSummary())
        )
      )
      const ok = yield* run(s, manual()).pipe(Effect.provide(appending))
      assert.strictEqual(ok.shadowedSeqs.length, 3)

      const s2 = yield* SessionLive.create({ id: "p8m2" })
      yield* closedTurn(s2)
      const nodes = yield* s2.surface.nodes
      const rewriting = summarizerOf(() =>
        Effect.gen(function*() {
          const events = yield* s2.events
          const original = events[nodes[2]].data as any
          yield* s2.append("tool/result", {
            ...original,
            message: { ...original.message, content: [{ ...original.message.content[0], content: [] }] }
          }, { surfaceOp: { op: "replace", start: nodes[2], end: nodes[2] }, sourceEventSeqs: [nodes[2]] })
          return shortSummary()
        }).pipe(Effect.orDie)
      )
      const n = (yield* s2.events).length
      const e = yield* Effect.flip(
        compact({ mode: "manual", region: { start: nodes[0], end: nodes[2] } }).pipe(
          Effect.provide(rewriting),
          Effect.provideService(Session.Session, s2)
        )
      )
      expectRejected(e, "P8", "changed")
      const events = yield* s2.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "tool/result", "compaction/end"])
      assert.isString((events[n + 2].data as any).error)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P10 a commit append fails: one compaction/end with error, surface unchanged", () =>
    Effect.gen(function*() {
      const vetoSummary = () =>
        Effect.succeed({
          check: (candidate: Event) =>
            candidate.type === "compaction/summary"
              ? Effect.fail(new InvariantViolation({ rule: "V99", seq: candidate.seq, detail: "no summaries today" }))
              : Effect.void,
          apply: () => {}
        })
      const s = yield* SessionLive.create({ id: "p10", validators: [vetoSummary] })
      yield* closedTurn(s)
      const nodes = yield* s.surface.nodes
      const n = (yield* s.events).length
      const e = yield* Effect.flip(run(s, manual()))
      expectRejected(e, "P10", "commit")
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "compaction/end"])
      assert.match((events[n + 1].data as any).error, /no summaries today/)
      assert.deepStrictEqual(yield* s.surface.nodes, nodes)
    }).pipe(Effect.provide(baseLayer)))

  it.scoped("P9 interrupted after compaction/start: one compaction/end with error; the interruption propagates", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p9" })
      yield* closedTurn(s)
      const n = (yield* s.events).length
      const entered = yield* Deferred.make<void>()
      const hanging = summarizerOf(() => Effect.zipRight(Deferred.succeed(entered, undefined), Effect.never))
      const fiber = yield* Effect.fork(run(s, manual()).pipe(Effect.provide(hanging)))
      yield* Deferred.await(entered)
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(exit._tag === "Failure")
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "compaction/end"])
      assert.strictEqual((events[n + 1].data as any).error, "interrupted")
      // the lock is released: a new compaction succeeds
      const r = yield* run(s, manual())
      assert.strictEqual(r.startSeq, n + 2)
    }).pipe(Effect.provide(baseLayer)))

  // live clock and a short window: see the report (a write-behind timer forked inside an
  // uninterruptible region cannot be interrupted by flush, so flush waits for the window)
  it.live("P11 manual: a failed flush after compaction/end is reported", () =>
    Effect.gen(function*() {
      let failing = false
      const store = Layer.effect(
        SessionStore,
        Effect.map(makeMemoryStore(), (inner) => ({
          ...inner,
          append: (id: string, events: ReadonlyArray<Event | PreparedEvent>, options: { readonly expectedSeq: number }) =>
            failing
              ? Effect.fail(new StoreFailure({ method: "append", cause: "disk full" }))
              : inner.append(id, events, options)
        }))
      )
      const program = Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "p11", persistence: { mode: "batched", windowMs: 20 } })
        yield* closedTurn(s)
        yield* s.flush
        failing = true
        const e = yield* Effect.flip(run(s, manual()))
        expectRejected(e, "P11", "persistence")
        // the compaction itself committed in memory
        const events = yield* s.events
        assert.strictEqual(events[events.length - 1].type, "compaction/end")
        failing = false
      })
      yield* program.pipe(
        Effect.provide(Layer.mergeAll(store, IdGenerator.layerCounter("id-"), Layer.succeed(Summarizer, {
          summarize: () => Effect.succeed(shortSummary())
        }))),
        Effect.scoped
      )
    }))

  it.scoped("P13 invalid options", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p13" })
      yield* closedTurn(s)
      const before = yield* snapshot(s)
      expectRejected(yield* Effect.flip(run(s, { mode: "manual", retainTokens: -1 })), "P13", "config")
      expectRejected(
        yield* Effect.flip(run(s, { mode: "automatic", region: { start: 0, end: 1 } })),
        "P13",
        "config"
      )
      assertUnchanged(before, yield* snapshot(s))
    }).pipe(Effect.provide(baseLayer)))
})
