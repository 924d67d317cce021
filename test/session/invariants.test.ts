import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as InvariantsLive from "../../src/layers/session/InvariantsLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"

type Spec = readonly [type: string, data: unknown, options?: Record<string, unknown>]

const user = (id: string): Spec => ["user/message", { id, role: "user", content: [], source: { kind: "user" } }, {
  surfaceOp: "append"
}]
const assistantCalling = (turn: number, step: number, callIds: ReadonlyArray<string>): Spec => [
  "assistant/message",
  {
    turn,
    step,
    message: {
      id: `a-${turn}-${step}`,
      role: "assistant",
      content: callIds.map((id) => ({ type: "tool-call", id, name: "t", arguments: "{}" })),
      source: { kind: "model", provider: "p", model: "m" }
    }
  },
  { surfaceOp: "append", sourceEventSeqs: [] }
]
const toolResult = (turn: number, step: number, callId: string, extra: Record<string, unknown> = {}): Spec => [
  "tool/result",
  {
    turn,
    step,
    message: {
      id: `r-${callId}`,
      role: "user",
      content: [{ type: "tool-result", toolCallId: callId, content: [] }],
      source: { kind: "tool", callId }
    },
    ...extra
  },
  { surfaceOp: "append" }
]
const toolCall = (turn: number, step: number, callId: string): Spec => [
  "tool/call",
  { turn, step, callId, name: "t", arguments: "{}" }
]
const start = (turn: number): Spec => ["turn/start", { turn }]
const stepStart = (turn: number, step: number): Spec => ["step/start", { turn, step }]
const stepEnd = (turn: number, step: number): Spec => ["step/end", { turn, step }]
const turnEnd = (turn: number): Spec => ["turn/end", { turn, reason: { kind: "completed" } }]
const cstart = (id: string, turn: number | null): Spec => ["compaction/start", { compactionId: id, turn }]
const summary = (id: string, seqs: ReadonlyArray<number>, tokens: unknown = 10): Spec => [
  "compaction/summary",
  {
    compactionId: id,
    summary: [],
    shadowedRange: { start: seqs[0], end: seqs[seqs.length - 1] },
    shadowedSeqs: seqs,
    shadowedTokenCount: tokens,
    provider: "p",
    model: "m"
  }
]
const cend = (id: string, turn: number | null, error?: string): Spec => [
  "compaction/end",
  error === undefined ? { compactionId: id, turn } : { compactionId: id, turn, error }
]

const open1: ReadonlyArray<Spec> = [start(1), stepStart(1, 1)]

/** [rule, valid prefix, violating candidate] */
const cases: ReadonlyArray<readonly [string, ReadonlyArray<Spec>, Spec]> = [
  ["V2", [start(1)], start(2)],
  ["V2", [start(1), turnEnd(1)], start(3)],
  ["V3", [start(1)], turnEnd(2)],
  ["V3", open1, turnEnd(1)],
  ["V4", [start(1)], stepStart(2, 1)],
  ["V4", open1, stepStart(1, 2)],
  ["V4", [start(1), stepStart(1, 1), stepEnd(1, 1)], stepStart(1, 3)],
  ["V5", [start(1)], stepEnd(1, 1)],
  ["V5", open1, ["assistant/chunk", { turn: 1, step: 2, chunk: { type: "text-delta", index: 0, text: "x" } }]],
  ["V5", open1, toolCall(2, 1, "c")],
  ["V7", [...open1, assistantCalling(1, 1, ["c1"]), toolCall(1, 1, "c1")], toolResult(1, 1, "other")],
  ["V7", [...open1, assistantCalling(1, 1, ["c1"])], toolResult(1, 1, "c1")],
  [
    "V8",
    [...open1, assistantCalling(1, 1, ["c1"]), toolCall(1, 1, "c1"), stepEnd(1, 1), stepStart(1, 2)],
    toolResult(1, 2, "c1")
  ],
  ["V9", [...open1, assistantCalling(1, 1, ["c1"]), toolCall(1, 1, "c1"), toolResult(1, 1, "c1"), stepEnd(1, 1), turnEnd(1)], [
    "tool/result",
    toolResult(1, 1, "c1")[1],
    { surfaceOp: { op: "replace", start: 4, end: 4 }, sourceEventSeqs: [4] }
  ]],
  ["V10", [], ["todo/write", { todos: [] }]],
  ["V10", [], ["request/context", { provider: "p", model: "m" }]],
  ["V12", [start(1)], cstart("k", 2)],
  ["V13", [start(1)], cstart("k", null)],
  ["V14", [cstart("k", null)], start(1)],
  ["V14", [start(1), cstart("k", 1)], turnEnd(1)],
  ["V15", [start(1), cstart("k", 1)], cend("other", 1)],
  ["V15", [start(1)], cend("k", 1)],
  ["V16", [start(1), user("u"), cstart("k", 1), summary("k", [1])], summary("k", [1])],
  ["V17", [start(1), cstart("k", 1)], ["compaction/summary", { ...summary("k", [1])[1] as object, shadowedSeqs: [] }]],
  ["V17", [start(1), user("u"), user("v"), cstart("k", 1)], [
    "compaction/summary",
    { ...summary("k", [1, 2])[1] as object, shadowedRange: { start: 1, end: 1 } }
  ]],
  ["V18", [start(1), user("u"), cstart("k", 1)], summary("k", [1], -1)],
  ["V19", [start(1), cstart("k", 1)], cend("k", 1)],
  ["V20", [start(1), user("u"), cstart("k", 1)], ["user/message", {
    id: "cp",
    role: "user",
    content: [],
    source: { kind: "plugin", plugin: "compact", compactionId: "other" }
  }, { surfaceOp: { op: "replace", start: 1, end: 1 }, sourceEventSeqs: [1] }]],
  ["V22", [...open1, assistantCalling(1, 1, ["c1"]), toolCall(1, 1, "c1"), toolResult(1, 1, "c1"), [
    "compaction/prune",
    { shadowedRange: { start: 5, end: 5 }, shadowedSeqs: [5], shadowedTokenCount: 3 }
  ]], ["todo/write", { todos: [] }]]
]

const withInvariants = Layer.merge(layerMemoryStore(), InvariantsLive.layer)

const appendAll = (s: Session.Session["Type"], specs: ReadonlyArray<Spec>) =>
  Effect.forEach(specs, ([type, data, options]) => s.appendUnknown(type, data, options), { discard: true })

describe("optional invariants (SPEC 11.4)", () => {
  cases.forEach(([rule, prefix, candidate], i) => {
    it.scoped(`${rule} vetoes before commit and leaves nothing behind (case ${i})`, () =>
      Effect.gen(function*() {
        const id = `inv-${i}`
        const s = yield* SessionLive.create({ id })
        yield* appendAll(s, prefix)
        const before = (yield* s.events).length
        const err = yield* Effect.flip(s.appendUnknown(candidate[0], candidate[1], candidate[2]))
        assert.strictEqual(err._tag, "InvariantViolation")
        assert.strictEqual((err as { rule: string }).rule, rule)
        assert.strictEqual((err as { seq?: number }).seq, before)
        assert.strictEqual((yield* s.events).length, before)
        const stored = before === 0 ? [] : (yield* (yield* SessionStore).load(id)).events
        assert.strictEqual(stored.length, before)
      }).pipe(Effect.provide(withInvariants)))

    it.scoped(`${rule}: a seed breaking it fails construction with the layer and is accepted without (case ${i})`, () =>
      Effect.gen(function*() {
        // build the seed through a session without invariants
        const raw = yield* Effect.gen(function*() {
          const s = yield* SessionLive.create({ id: `raw-${i}` })
          yield* appendAll(s, [...prefix, candidate])
          return yield* s.events
        }).pipe(Effect.provide(layerMemoryStore()))
        const header = { version: 1, id: `seed-${i}`, createdAt: 0 }
        const accepted = yield* SessionLive.fromSeed({ header, seed: raw }).pipe(Effect.provide(layerMemoryStore()))
        assert.strictEqual((yield* accepted.events).length, raw.length + 1)
        const err = yield* Effect.flip(SessionLive.fromSeed({ header, seed: raw }).pipe(Effect.provide(withInvariants)))
        assert.strictEqual(err._tag, "InvariantViolation")
        assert.strictEqual((err as { rule: string }).rule, rule)
      }))
  })

  it.scoped("a well-formed agent turn with tool calls, a compaction and a prune passes every rule", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "inv-ok" })
      yield* appendAll(s, [
        start(1),
        stepStart(1, 1),
        user("u1"),
        assistantCalling(1, 1, ["c1", "c2"]),
        toolCall(1, 1, "c1"),
        toolResult(1, 1, "c1"),
        // a synthetic TOOL_NOT_STARTED result needs no tool/call
        toolResult(1, 1, "c2", { error: { name: "ToolNotStartedError", code: "TOOL_NOT_STARTED" } }),
        stepEnd(1, 1),
        ["compaction/prune", { shadowedRange: { start: 5, end: 5 }, shadowedSeqs: [5], shadowedTokenCount: 3 }],
        ["tool/result", toolResult(1, 1, "c1")[1], { surfaceOp: { op: "replace", start: 5, end: 5 }, sourceEventSeqs: [5] }],
        cstart("k", 1),
        summary("k", [2, 3]),
        ["user/message", {
          id: "cp",
          role: "user",
          content: [],
          source: { kind: "plugin", plugin: "compact", compactionId: "k" }
        }, { surfaceOp: { op: "replace", start: 2, end: 3 }, sourceEventSeqs: [10, 11, 2, 3] }],
        cend("k", 1),
        turnEnd(1),
        start(2),
        turnEnd(2)
      ])
      assert.strictEqual((yield* s.events).length, 17)
    }).pipe(Effect.provide(withInvariants)))

  it.scoped("V21: an end-seed marker clears a bracket inherited from a dead lifecycle", () =>
    Effect.gen(function*() {
      const seed = yield* Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "v21-src" })
        yield* appendAll(s, [cstart("k", null)])
        return yield* s.events
      }).pipe(Effect.provide(layerMemoryStore()))
      const s = yield* SessionLive.fromSeed({ header: { version: 1, id: "v21", createdAt: 0 }, seed })
      // the bracket was inherited and is dead: a new turn may start
      yield* s.append("turn/start", { turn: 1 })
      assert.strictEqual((yield* s.events).length, 3)
    }).pipe(Effect.provide(withInvariants)))
})
