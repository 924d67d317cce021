import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { compact, toolPairingBalance } from "../../src/programs/compaction/Compact.js"
import { PRUNE_MARKER, pruneContent, pruneToolResults } from "../../src/programs/compaction/PruneToolResults.js"
import { CompactionRejected } from "../../src/schema/Errors.js"
import type { Event } from "../../src/schema/Events.js"
import type { ContentBlock } from "../../src/schema/Messages.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { invariantLayer, step } from "./helpers.js"
import { runs } from "../suites.js"

// ---------------------------------------------------------------------------------------------
// Random surfaces built the way the agent loop writes them

const word = fc.constantFrom("read", "file", "src/a.ts", "ok", "λx", "🙂", "done", "\"q\"", "a\nb")
const prose = (max: number) => fc.array(word, { maxLength: max }).map((ws) => ws.join(" "))

interface StepPlan {
  readonly users: ReadonlyArray<string>
  readonly text: string
  readonly calls: ReadonlyArray<string>
  readonly inject: string | null
}

const stepPlan: fc.Arbitrary<StepPlan> = fc.record({
  users: fc.array(prose(200), { maxLength: 2 }),
  text: prose(200),
  calls: fc.array(fc.oneof(prose(60), prose(600)), { maxLength: 3 }),
  inject: fc.option(prose(20), { nil: null })
})

const turnPlan = fc.array(stepPlan, { minLength: 1, maxLength: 3 })

type Op =
  | { readonly _tag: "retain"; readonly tokens: number }
  | { readonly _tag: "region"; readonly a: number; readonly b: number }
  | { readonly _tag: "prune" }

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ _tag: fc.constant("retain" as const), tokens: fc.integer({ min: 0, max: 800 }) }),
  fc.record({ _tag: fc.constant("region" as const), a: fc.nat(), b: fc.nat() }),
  fc.record({ _tag: fc.constant("prune" as const) })
)

let sessionCounter = 0
const tally: Record<string, number> = { ok: 0 }

const writeTurn = (s: Session.SessionShape, turn: number, plan: ReadonlyArray<StepPlan>) =>
  Effect.gen(function*() {
    yield* s.append("turn/start", { turn })
    for (const [i, p] of plan.entries()) {
      yield* step(s, turn, i + 1, {
        users: i === 0 && p.users.length === 0 ? ["go"] : p.users,
        text: p.text,
        calls: p.calls.map((output, k) => ({ id: `c-${turn}-${i}-${k}`, output })),
        ...(p.inject === null ? {} : { injectAfterFirstResult: p.inject })
      })
    }
    yield* s.append("turn/end", { turn, reason: { kind: "completed" } })
  })

/** callId -> [assistant seq, result seq] for pairs whose both halves are on `nodes`. */
const pairsOn = (nodes: ReadonlyArray<number>, events: ReadonlyArray<Event>): Map<string, [number, number]> => {
  const calls = new Map<string, number>()
  const out = new Map<string, [number, number]>()
  for (const seq of nodes) {
    const e = events[seq]
    const d = e.data as any
    if (e.type === "assistant/message") {
      for (const b of d.message.content) if (b.type === "tool-call") calls.set(b.id, seq)
    } else if (e.type === "tool/result") {
      const a = calls.get(d.message.source.callId)
      if (a !== undefined) out.set(d.message.source.callId, [a, seq])
    }
  }
  return out
}

describe("property: compaction over random surfaces", () => {
  // the property must not pass vacuously: some random compactions succeed
  afterAll(() => {
    assert.isAbove(tally.ok, 0, JSON.stringify(tally))
  })
  it.scoped.prop(
    "never separates a tool call from its result, cites every shadowed node, replays identically",
    [fc.array(turnPlan, { minLength: 1, maxLength: 4 }), fc.array(op, { minLength: 1, maxLength: 4 })],
    ([turns, ops]) =>
      Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: `prop-${++sessionCounter}` })
        yield* run(s, turns, ops)
      }).pipe(Effect.scoped, Effect.provide(invariantLayer)),
    { fastCheck: { numRuns: runs(60) } }
  )
})

const run = (s: Session.SessionShape, turns: ReadonlyArray<ReadonlyArray<StepPlan>>, ops: ReadonlyArray<Op>) =>
      Effect.gen(function*() {
        let turn = 0
        for (const plan of turns) yield* writeTurn(s, ++turn, plan)
        for (const o of ops) {
          const before = [...(yield* s.surface.nodes)]
          const eventsBefore = yield* s.events
          if (o._tag === "prune") {
            yield* s.append("turn/start", { turn: ++turn })
            yield* pruneToolResults({ config: { thresholdChars: 200, headChars: 50, tailChars: 20 } })
            yield* s.append("turn/end", { turn, reason: { kind: "completed" } })
            continue
          }
          const options = o._tag === "retain"
            ? { mode: "manual" as const, retainTokens: o.tokens }
            : {
              mode: "manual" as const,
              region: {
                start: before[o.a % Math.max(1, before.length)] ?? 0,
                end: before[o.b % Math.max(1, before.length)] ?? 0
              }
            }
          const outcome = yield* Effect.either(compact(options))
          const after = yield* s.surface.nodes
          const events = yield* s.events
          if (outcome._tag === "Left") {
            const e = outcome.left
            assert.instanceOf(e, CompactionRejected)
            assert.include(["P4", "P5", "P7"], (e as CompactionRejected).rule)
            tally[(e as CompactionRejected).rule] = (tally[(e as CompactionRejected).rule] ?? 0) + 1
            assert.deepStrictEqual([...after], before)
            continue
          }
          const r = outcome.right
          tally.ok++
          // the shadowed nodes are a contiguous span of the old surface, replaced by the checkpoint
          const i = before.indexOf(r.shadowedSeqs[0])
          assert.deepStrictEqual(before.slice(i, i + r.shadowedSeqs.length), [...r.shadowedSeqs])
          const checkpointSeq = r.summarySeq + 1
          assert.deepStrictEqual([...after], [
            ...before.slice(0, i),
            checkpointSeq,
            ...before.slice(i + r.shadowedSeqs.length)
          ])
          assert.deepStrictEqual(events[checkpointSeq].sourceEventSeqs, [r.startSeq, r.summarySeq, ...r.shadowedSeqs])
          // no call is separated from its result
          const shadowed = new Set(r.shadowedSeqs)
          for (const [callId, [a, res]] of pairsOn(before, eventsBefore)) {
            assert.strictEqual(shadowed.has(a), shadowed.has(res), `call ${callId} separated from its result`)
          }
          assert.notInstanceOf(toolPairingBalance(after, events), CompactionRejected)
        }
        const events = yield* s.events
        const replay = yield* SessionLive.fromSeed({
          header: { version: 1, id: `prop-replay-${sessionCounter}`, createdAt: 0 },
          seed: events
        })
        assert.deepStrictEqual(yield* replay.messages, yield* s.messages)
      }).pipe(Effect.provideService(Session.Session, s))

// ---------------------------------------------------------------------------------------------
// The pruner's transform over random blocks

const anyText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 80 }),
  fc.string({ unit: "grapheme", maxLength: 80 }),
  prose(40)
)
const block: fc.Arbitrary<ContentBlock> = fc.oneof(
  { arbitrary: anyText.map((text): ContentBlock => ({ type: "text", text })), weight: 5 },
  { arbitrary: fc.constant<ContentBlock>({ type: "image", attachment: { id: "sha256:x" } }), weight: 1 }
)
const config = fc.record({ head: fc.nat(60), tail: fc.nat(60), slack: fc.nat(60) }).map(({ head, tail, slack }) => ({
  thresholdChars: head + 51 + tail + slack,
  headChars: head,
  tailChars: tail
}))

const textPoints = (blocks: ReadonlyArray<ContentBlock>): Array<string> =>
  blocks.flatMap((b) => (b.type === "text" ? Array.from(b.text as string) : []))

describe("property: the pruner transform", () => {
  it.prop(
    "head + marker + tail in code points, non-text blocks kept in order, no empty text block, converges",
    [fc.array(block, { maxLength: 8 }), config],
    ([blocks, cfg]) => {
      const points = textPoints(blocks)
      const out = pruneContent(blocks, cfg)
      if (points.length <= cfg.thresholdChars) {
        assert.isUndefined(out)
        return
      }
      assert.isDefined(out)
      const pruned = out!
      const expected = [
        ...points.slice(0, cfg.headChars),
        ...Array.from(PRUNE_MARKER),
        ...points.slice(points.length - cfg.tailChars)
      ]
      assert.deepStrictEqual(textPoints(pruned), expected)
      assert.isAtMost(expected.length, cfg.thresholdChars)
      assert.deepStrictEqual(
        pruned.filter((b) => b.type !== "text"),
        blocks.filter((b) => b.type !== "text")
      )
      for (const b of pruned) if (b.type === "text") assert.notStrictEqual(b.text, "")
      assert.isUndefined(pruneContent(pruned, cfg))
    }
  )
})
