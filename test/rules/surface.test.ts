/**
 * SPEC §4 / §3.4 families D (eligibility and marker), E (provenance), F (replace range) and G
 * (tool/result rewrite): every rejection with identical errors at append, in a seed and in
 * `foldSurface`; the accepting rows with the stored surface; the worked examples of §4.2.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { InvariantViolation } from "../../src/schema/Errors.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"
import {
  acceptsAtAppend,
  acceptsEverywhere,
  APPEND,
  asEvents,
  assertError,
  assertUnchanged,
  assistantData,
  contextMsg,
  foldError,
  record,
  records,
  rejectsAtAppend,
  rejectsAfter,
  rejectsEverywhere,
  rejectsInSeed,
  replace,
  sessionWith,
  snapshot,
  type Step,
  text,
  todo,
  toolCallData,
  toolResultData,
  uid,
  user,
  userMsg,
  withStore
} from "../helpers/state.js"

type Rec = Record<string, unknown>

const marker = (rule: string, seq: number, eventType: string) => ({ _tag: "SurfaceMarkerInvalid", rule, seq, eventType })
const prov = (rule: string, seq: number) => ({ _tag: "ProvenanceInvalid", rule, seq })
const range = (rule: string, seq: number, start: number, end: number, extra: Rec = {}) => ({
  _tag: "ReplaceRangeInvalid",
  rule,
  seq,
  start,
  end,
  ...extra
})
const rewrite = (rule: string, seq: number) => ({ _tag: "ToolResultRewriteInvalid", rule, seq })

/** A user message replacing [start, end]. */
const userReplace = (id: string, start: number, end: number, cites: ReadonlyArray<number>): Step => [
  "user/message",
  userMsg(id),
  replace(start, end, cites)
]

const u0: ReadonlyArray<Step> = [user("u0")]

class Point {
  constructor(readonly x: number) {}
}

describe("D surface eligibility and marker", () => {
  it.scoped("D1 rejects a log-only type carrying surfaceOp (append and replace forms)", () =>
    withStore(Effect.gen(function*() {
      const e = yield* rejectsEverywhere(u0, ["todo/write", { todos: [] }, APPEND], marker("D1", 1, "todo/write"))
      assert.include((e as Error).message, "not surface-eligible")
      assert.include((e as Error).message, "cannot carry surfaceOp")
      yield* rejectsEverywhere(u0, ["turn/start", { turn: 1 }, replace(0, 0, [0])], marker("D1", 1, "turn/start"))
      yield* rejectsEverywhere(u0, ["plugin/x", null, { surfaceOp: "append", ignorable: true }], marker("D1", 1, "plugin/x"))
    })))

  it.scoped("D2 rejects a log-only type carrying sourceEventSeqs", () =>
    withStore(rejectsEverywhere(u0, ["todo/write", { todos: [] }, { sourceEventSeqs: [0] }], marker("D2", 1, "todo/write"))))

  it.scoped("D3 rejects a surface type without surfaceOp", () =>
    withStore(Effect.gen(function*() {
      const e = yield* rejectsEverywhere(u0, ["user/message", userMsg("u1")], marker("D3", 1, "user/message"))
      assert.include((e as Error).message, "requires a surfaceOp marker")
      yield* rejectsEverywhere(u0, ["assistant/message", assistantData("a1"), { sourceEventSeqs: [0] }], marker("D3", 1, "assistant/message"))
      yield* rejectsEverywhere(u0, ["context/message", contextMsg("c1")], marker("D3", 1, "context/message"))
      yield* rejectsEverywhere([["tool/call", toolCallData("k")]], ["tool/result", toolResultData("k", "r")], marker("D3", 1, "tool/result"))
    })))

  for (const bad of ["prepend", "", null, [], ["append"], 1, true, false]) {
    it.scoped(`D4 rejects surfaceOp ${JSON.stringify(bad)}`, () =>
      withStore(Effect.gen(function*() {
        const e = yield* rejectsEverywhere(u0, ["user/message", userMsg("u1"), { surfaceOp: bad }], marker("D4", 1, "user/message"))
        assert.include((e as Error).message, "invalid surfaceOp")
      })))
  }

  const badReplaces: ReadonlyArray<readonly [string, unknown]> = [
    ["an extra key", { op: "replace", start: 0, end: 0, extra: 1 }],
    ["a missing key", { op: "replace", start: 0 }],
    ["op other than replace", { op: "insert", start: 0, end: 0 }],
    ["a negative start", { op: "replace", start: -1, end: 0 }],
    ["a fractional end", { op: "replace", start: 0, end: 0.5 }],
    ["a string start", { op: "replace", start: "0", end: 0 }],
    ["an unsafe end", { op: "replace", start: 0, end: 2 ** 53 }],
    ["an empty object", {}]
  ]
  for (const [name, op] of badReplaces) {
    it.scoped(`D5 rejects a replace surfaceOp with ${name}`, () =>
      withStore(Effect.gen(function*() {
        const e = yield* rejectsEverywhere(u0, ["user/message", userMsg("u1"), { surfaceOp: op, sourceEventSeqs: [0] }], marker("D5", 1, "user/message"))
        assert.include((e as Error).message, "invalid replace surfaceOp")
      })))
  }

  it.scoped("D6 rejects a surfaceOp failing the lossless walk at append; in a seed the record walk fires first", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsAfter(u0, ["user/message", userMsg("u1"), { surfaceOp: new Point(1) }], marker("D6", 1, "user/message"))
      yield* rejectsAfter(u0, ["user/message", userMsg("u1"), { surfaceOp: { op: "replace", start: 0n, end: 0 }, sourceEventSeqs: [0] }], marker("D6", 1, "user/message"))
      yield* rejectsInSeed([record(u0[0], 0), { ...record(user("u1"), 1), surfaceOp: new Point(1) }], {
        _tag: "NotLosslessJson",
        rule: "A8",
        seq: 1,
        path: "/surfaceOp"
      })
      yield* rejectsInSeed([record(u0[0], 0), { ...record(user("u1"), 1), surfaceOp: { op: "replace", start: 0n, end: 0 } }], {
        _tag: "NotLosslessJson",
        rule: "A1",
        seq: 1,
        path: "/surfaceOp/start"
      })
    })))

  it.scoped("D7 a log-only event without markers is accepted and never on the surface", () =>
    withStore(Effect.gen(function*() {
      const { event, nodes, session } = yield* acceptsEverywhere(u0, ["todo/write", { todos: [{ content: "x", status: "pending" }] }])
      assert.isUndefined(event.surfaceOp)
      assert.deepStrictEqual(nodes, [0])
      assert.strictEqual((yield* session.messages).length, 1)
      assert.deepStrictEqual((yield* session.transcript).map((e) => e.seq), [0])
    })))
})

describe("E provenance", () => {
  for (const bad of ["0", 5, { 0: 0 }, null, true]) {
    it.scoped(`E1 rejects sourceEventSeqs ${JSON.stringify(bad)} (not an array)`, () =>
      withStore(rejectsEverywhere(u0, ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: bad }], prov("E1", 1))))
  }

  it.scoped("E1 a non-array that fails the walk at append is still E1", () =>
    withStore(rejectsAfter(u0, ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: new Map() }], prov("E1", 1))))

  it.scoped("E2 rejects [] on types other than assistant/message", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsEverywhere(u0, ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [] }], prov("E2", 1))
      yield* rejectsEverywhere(u0, ["context/message", contextMsg("c1"), { surfaceOp: "append", sourceEventSeqs: [] }], prov("E2", 1))
      yield* rejectsEverywhere([["tool/call", toolCallData("k")]], ["tool/result", toolResultData("k", "r"), {
        surfaceOp: "append",
        sourceEventSeqs: []
      }], prov("E2", 1))
    })))

  it.scoped("E3 [] on assistant/message with append is accepted and stored", () =>
    withStore(Effect.gen(function*() {
      const { event, nodes } = yield* acceptsEverywhere(u0, ["assistant/message", assistantData("a1"), { surfaceOp: "append", sourceEventSeqs: [] }])
      assert.deepStrictEqual(event.sourceEventSeqs, [])
      assert.deepStrictEqual(nodes, [0, 1])
    })))

  for (const [name, bad] of [["a string", "0"], ["a fraction", 0.5], ["a negative", -1], ["an unsafe integer", 2 ** 53], ["null", null]] as const) {
    it.scoped(`E4 rejects ${name} element`, () =>
      withStore(rejectsEverywhere([todo, todo], ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [0, bad] }], prov("E4", 2))))
  }

  it.scoped("E4 a hole or a BigInt element is E4 at append and in the fold; in a seed the record walk fires first", () =>
    withStore(Effect.gen(function*() {
      const hole: Array<number> = [0]
      hole.length = 2
      for (const [list, walkRule, path] of [[hole, "A7", "/sourceEventSeqs"], [[0, 1n], "A1", "/sourceEventSeqs/1"]] as const) {
        const step: Step = ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: list }]
        const atAppend = yield* rejectsAfter([todo, todo], step, prov("E4", 2))
        const inFold = foldError(records([todo, todo, step]))
        assertError(inFold, prov("E4", 2))
        assert.strictEqual((inFold as Rec).rule, (atAppend as unknown as Rec).rule)
        yield* rejectsInSeed(records([todo, todo, step]), { _tag: "NotLosslessJson", rule: walkRule, seq: 2, path })
      }
    })))

  it.scoped("E5 rejects a duplicate element", () =>
    withStore(rejectsEverywhere([todo, todo], ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [1, 0, 1] }], prov("E5", 2))))

  it.scoped("E6 rejects a self or forward reference", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsEverywhere([todo, todo], ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [2] }], prov("E6", 2))
      yield* rejectsEverywhere([todo, todo], ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [0, 7] }], prov("E6", 2))
    })))

  it.scoped("E4–E6 are checked per element in order: the first offending element wins", () =>
    withStore(Effect.gen(function*() {
      // element 0 is a forward reference (E6) before element 1's string (E4)
      yield* rejectsEverywhere([todo, todo], ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [5, "x"] }], prov("E6", 2))
      // element 1 duplicates element 0 (E5) before element 2's fraction (E4)
      yield* rejectsEverywhere([todo, todo], ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: [0, 0, 0.5] }], prov("E5", 2))
    })))

  it.scoped("E7 absent sourceEventSeqs on an append event is accepted (no provenance recorded)", () =>
    withStore(Effect.gen(function*() {
      const { event } = yield* acceptsEverywhere(u0, ["assistant/message", assistantData("a1"), APPEND])
      assert.isFalse("sourceEventSeqs" in event)
      // an explicit undefined is treated as absent (§3.1 step 2)
      const s = yield* sessionWith(u0)
      const e = yield* acceptsAtAppend(s, ["user/message", userMsg("u1"), { surfaceOp: "append", sourceEventSeqs: undefined }])
      assert.isFalse("sourceEventSeqs" in e)
      const t = yield* acceptsAtAppend(s, ["todo/write", { todos: [] }, { surfaceOp: undefined, sourceEventSeqs: undefined }])
      assert.isFalse("surfaceOp" in t)
    })))

  it.scoped("E8 citations of non-surface earlier events (chunks, tool/call, compaction markers) are accepted", () =>
    withStore(Effect.gen(function*() {
      const prefix: ReadonlyArray<Step> = [
        ["assistant/chunk", { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: "hi" } }],
        ["tool/call", toolCallData("k")],
        ["compaction/start", { compactionId: "c", turn: 1 }],
        user("u0")
      ]
      const a = yield* acceptsEverywhere(prefix, ["assistant/message", assistantData("a1"), { surfaceOp: "append", sourceEventSeqs: [0] }])
      assert.deepStrictEqual(a.event.sourceEventSeqs, [0])
      const t = yield* acceptsEverywhere(prefix, ["tool/result", toolResultData("k", "r"), { surfaceOp: "append", sourceEventSeqs: [1] }])
      assert.deepStrictEqual(t.nodes, [3, 4])
      const r = yield* acceptsEverywhere(prefix, userReplace("sum", 3, 3, [2, 3]))
      assert.deepStrictEqual(r.event.sourceEventSeqs, [2, 3])
      assert.deepStrictEqual(r.nodes, [4])
    })))

  it("E9 a windowed fold accepts citations below the window base", () => {
    const window = [
      record(["assistant/message", assistantData("a1"), { surfaceOp: "append", sourceEventSeqs: [0, 3] }], 10),
      record(["user/message", userMsg("u"), { surfaceOp: "append", sourceEventSeqs: [2, 10] }], 11)
    ]
    assert.deepStrictEqual(foldSurface(asEvents(window), 10), { nodes: [10, 11], replacements: [] })
  })

  it.scoped("E10 caller mutation of its sourceEventSeqs array after append leaves the stored list unchanged", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([todo, todo])
      const cites = [0, 1]
      const e = yield* s.appendUnknown("user/message", userMsg("u"), { surfaceOp: "append", sourceEventSeqs: cites })
      cites.push(5)
      cites[0] = 9
      assert.deepStrictEqual(e.sourceEventSeqs, [0, 1])
      assert.isTrue(Object.isFrozen(e.sourceEventSeqs))
      assert.deepStrictEqual((yield* s.events)[2].sourceEventSeqs, [0, 1])
      const loaded = yield* (yield* SessionStore).load(s.id)
      assert.deepStrictEqual((loaded.events[2] as Event).sourceEventSeqs, [0, 1])
    })))
})

describe("§4.2 worked examples (append, seed and fold agree)", () => {
  it.scoped("§4.2 [1,2] replace(1,2) by 4 gives [4]", () =>
    withStore(Effect.gen(function*() {
      const { nodes } = yield* acceptsEverywhere([todo, user("a"), user("b"), todo], userReplace("r", 1, 2, [1, 2]))
      assert.deepStrictEqual(nodes, [4])
    })))

  it.scoped("§4.2 [0,1,2] replace(1,1) by 3 gives [0,3,2]", () =>
    withStore(Effect.gen(function*() {
      const { nodes } = yield* acceptsEverywhere([user("a"), user("b"), user("c")], userReplace("r", 1, 1, [1]))
      assert.deepStrictEqual(nodes, [0, 3, 2])
    })))

  it.scoped("§4.2 [0,1] replace(0,0) by 2 gives [2,1]", () =>
    withStore(Effect.gen(function*() {
      const { nodes } = yield* acceptsEverywhere([user("a"), user("b")], userReplace("r", 0, 0, [0]))
      assert.deepStrictEqual(nodes, [2, 1])
    })))

  it.scoped("§4.2 [2,1] replace(2,1) by 3 gives [3] (F6: start numerically greater than end)", () =>
    withStore(Effect.gen(function*() {
      const prefix = [user("a"), user("b"), userReplace("r", 0, 0, [0])]
      const { nodes, session } = yield* acceptsEverywhere(prefix, userReplace("r2", 2, 1, [1, 2]))
      assert.deepStrictEqual(nodes, [3])
      assert.strictEqual(yield* session.surface.replaceGeneration, 2)
      const fold = foldSurface(asEvents(records([...prefix, userReplace("r2", 2, 1, [1, 2])])))
      assert.deepStrictEqual(fold, {
        nodes: [3],
        replacements: [{ seq: 2, start: 0, end: 0, shadowedSeqs: [0] }, { seq: 3, start: 2, end: 1, shadowedSeqs: [2, 1] }]
      })
    })))

  const on032: ReadonlyArray<Step> = [user("a"), user("b"), user("c"), userReplace("r", 1, 1, [1])]

  it.scoped("§4.2 [0,3,2] replace(2,3) by 4 is rejected F3, naming both positions", () =>
    withStore(Effect.gen(function*() {
      const e = yield* rejectsEverywhere(on032, userReplace("x", 2, 3, [2, 3]), range("F3", 4, 2, 3))
      assert.include((e as Error).message, "position 2")
      assert.include((e as Error).message, "position 1")
    })))

  it.scoped("§4.2 [0,3,2] replace(1,1) by 4 is rejected F1 (1 was shadowed)", () =>
    withStore(Effect.gen(function*() {
      const e = yield* rejectsEverywhere(on032, userReplace("x", 1, 1, [1]), range("F1", 4, 1, 1))
      assert.include((e as Error).message, "start seq 1 not found")
    })))

  it.scoped("§4.2 ranges are inclusive positional spans: replace(1,3) on [0,1,2,3,4] shadows [1,2,3]", () =>
    withStore(Effect.gen(function*() {
      const prefix = [user("a"), user("b"), todo, user("c"), user("d"), user("e")]
      const { nodes, session } = yield* acceptsEverywhere(prefix, userReplace("r", 1, 4, [1, 3, 4]))
      assert.deepStrictEqual(nodes, [0, 6, 5])
      assert.deepStrictEqual((yield* session.messages).map((m) => m.id), ["a", "r", "e"])
      const fold = foldSurface(asEvents(records([...prefix, userReplace("r", 1, 4, [1, 3, 4])])))
      assert.deepStrictEqual("nodes" in fold ? fold.replacements : fold, [{ seq: 6, start: 1, end: 4, shadowedSeqs: [1, 3, 4] }])
    })))
})

describe("F replace range", () => {
  it.scoped("F1 start never added (a log-only seq), beyond the log, or already shadowed", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsEverywhere([todo, user("a")], userReplace("x", 0, 1, [0, 1]), range("F1", 2, 0, 1))
      yield* rejectsEverywhere([todo, user("a")], ["user/message", userMsg("x"), replace(9, 1)], range("F1", 2, 9, 1))
      yield* rejectsEverywhere([user("a"), user("b"), userReplace("r", 0, 1, [0, 1])], userReplace("x", 0, 2, [0, 2]), range("F1", 3, 0, 2))
    })))

  it("F1 a replacement reaching below a loaded window fails", () => {
    const window = [record(user("a"), 5), record(userReplace("x", 3, 5, [3, 5]), 6)]
    assertError(foldError(window, 5), range("F1", 6, 3, 5))
  })

  it.scoped("F2 end not on the surface (shadowed or log-only)", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsEverywhere([user("a"), todo], userReplace("x", 0, 1, [0, 1]), range("F2", 2, 0, 1))
      const e = yield* rejectsEverywhere([user("a"), user("b"), userReplace("r", 1, 1, [1])], userReplace("x", 0, 1, [0, 1]), range("F2", 3, 0, 1))
      assert.include((e as Error).message, "end seq 1 not found")
    })))

  it.scoped("F3 start positionally after end", () =>
    withStore(rejectsEverywhere([user("a"), user("b")], userReplace("x", 1, 0, [0, 1]), range("F3", 2, 1, 0))))

  it.scoped("F4 sourceEventSeqs absent: every shadowed seq is missing", () =>
    withStore(Effect.gen(function*() {
      const e = yield* rejectsEverywhere([user("a"), user("b")], ["user/message", userMsg("x"), replace(0, 1)], range("F4", 2, 0, 1, { missing: [0, 1] }))
      assert.include((e as Error).message, "F4")
    })))

  it.scoped("F4 missing lists the uncovered shadowed seqs in surface order", () =>
    withStore(Effect.gen(function*() {
      // surface [3, 2, 4]: replace(3, 4) citing only 2 misses [3, 4]
      const prefix = [user("a"), todo, user("b"), userReplace("r", 0, 0, [0]), user("c")]
      yield* rejectsEverywhere(prefix, userReplace("x", 3, 4, [2]), range("F4", 5, 3, 4, { missing: [3, 4] }))
      // surface [3, 2]: citing an unrelated earlier seq misses both, listed 3 before 2
      yield* rejectsEverywhere(prefix.slice(0, 4), userReplace("x", 3, 2, [1]), range("F4", 4, 3, 2, { missing: [3, 2] }))
      // an empty list on assistant/message replace is not E2 but F4
      yield* rejectsEverywhere([user("a")], ["assistant/message", assistantData("x"), replace(0, 0, [])], range("F4", 1, 0, 0, { missing: [0] }))
    })))

  it.scoped("F5 start === end replaces a single node", () =>
    withStore(Effect.gen(function*() {
      const { nodes, session } = yield* acceptsEverywhere([user("a"), user("b"), user("c")], userReplace("r", 2, 2, [2]))
      assert.deepStrictEqual(nodes, [0, 1, 3])
      assert.strictEqual(yield* session.surface.replaceGeneration, 1)
    })))

  it.scoped("F6 start numerically greater than end but positionally before it is accepted", () =>
    withStore(Effect.gen(function*() {
      // [0,1,2] -> replace(0,0) by 3 -> [3,1,2]; replace(3,2) shadows [3,1,2]
      const prefix = [user("a"), user("b"), user("c"), userReplace("r", 0, 0, [0])]
      const { nodes } = yield* acceptsEverywhere(prefix, userReplace("r2", 3, 2, [1, 2, 3]))
      assert.deepStrictEqual(nodes, [4])
    })))

  it.scoped("F7 any surface type may replace any range (assistant/message over mixed nodes)", () =>
    withStore(Effect.gen(function*() {
      const prefix: ReadonlyArray<Step> = [
        user("a"),
        ["assistant/message", assistantData("b"), APPEND],
        ["tool/call", toolCallData("k")],
        ["tool/result", toolResultData("k", "t"), { surfaceOp: "append", sourceEventSeqs: [2] }],
        ["context/message", contextMsg("c"), APPEND]
      ]
      const a = yield* acceptsEverywhere(prefix, ["assistant/message", assistantData("sum"), replace(0, 4, [0, 1, 3, 4])])
      assert.deepStrictEqual(a.nodes, [5])
      const c = yield* acceptsEverywhere(prefix, ["context/message", contextMsg("sum"), replace(1, 3, [1, 2, 3])])
      assert.deepStrictEqual(c.nodes, [0, 5, 4])
    })))

  it.scoped("F8 a failed replacement leaves log length, nodes and replaceGeneration; later appends proceed", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([user("a"), user("b"), userReplace("r", 0, 0, [0])])
      yield* rejectsAtAppend(s, userReplace("x", 0, 1, [0, 1]), range("F1", 3, 0, 1))
      // rejectsAtAppend appended a todo/write at 3
      const e = yield* s.appendUnknown(...userReplace("y", 2, 1, [1, 2]))
      assert.strictEqual(e.seq, 4)
      assert.deepStrictEqual(yield* s.surface.nodes, [4])
      assert.strictEqual(yield* s.surface.replaceGeneration, 2)
    })))

  it.scoped("F9 a replacement vetoed by a pre-commit validator after surface validation leaves nothing behind", () =>
    withStore(Effect.gen(function*() {
      const veto = () =>
        Effect.succeed({
          check: (candidate: Event) =>
            typeof candidate.surfaceOp === "object"
              ? Effect.fail(new InvariantViolation({ rule: "V99", seq: candidate.seq, detail: "no replacements" }))
              : Effect.void,
          apply: () => {}
        })
      const s = yield* SessionLive.create({ id: uid(), validators: [veto] })
      yield* s.appendUnknown(...user("a"))
      yield* s.appendUnknown(...user("b"))
      yield* rejectsAtAppend(s, userReplace("x", 0, 1, [0, 1]), { _tag: "InvariantViolation", rule: "V99", seq: 2 })
      assert.deepStrictEqual(yield* s.surface.nodes, [0, 1])
      assert.strictEqual(yield* s.surface.replaceGeneration, 0)
      // an invalid range still fails with its own rule, before the validator
      yield* rejectsAtAppend(s, userReplace("x", 2, 2, [2]), range("F1", 3, 2, 2))
    })))
})

describe("G tool/result replacement (content-only rewrite)", () => {
  const target = toolResultData("k", "r1", [text("a very long output")], { meta: { tags: ["a", "b"], n: 1 } })
  /** 0 tool/call, 1 tool/result (the target), 2 user */
  const prefix: ReadonlyArray<Step> = [
    ["tool/call", toolCallData("k")],
    ["tool/result", target, { surfaceOp: "append", sourceEventSeqs: [0] }],
    user("u")
  ]
  const rewriteOf = (data: unknown, start = 1, end = 1, cites: ReadonlyArray<number> = [start, end]): Step => [
    "tool/result",
    data,
    replace(start, end, [...new Set(cites)])
  ]
  const clone = (): Rec => JSON.parse(JSON.stringify(target))
  const msg = (d: Rec) => d.message as Rec
  const block = (d: Rec) => (msg(d).content as Array<Rec>)[0]

  it.scoped("G1 rejects a range shadowing more than one node", () =>
    withStore(Effect.gen(function*() {
      const e = yield* rejectsEverywhere(prefix, rewriteOf(clone(), 1, 2, [1, 2]), rewrite("G1", 3))
      assert.include((e as Error).message, "must rewrite exactly one current node")
    })))

  it.scoped("G2 rejects a shadowed node that is not a tool/result", () =>
    withStore(rejectsEverywhere(prefix, rewriteOf(clone(), 2, 2, [2]), rewrite("G2", 3))))

  const drifts: ReadonlyArray<readonly [string, (d: Rec) => void]> = [
    ["turn", (d) => (d.turn = 2)],
    ["step", (d) => (d.step = 2)],
    ["error added", (d) => (d.error = { name: "E", code: "X" })],
    ["meta: a drifted array element", (d) => (d.meta = { tags: ["a", "c"], n: 1 })],
    ["meta: array vs scalar", (d) => (d.meta = { tags: "a", n: 1 })],
    ["meta: different key names", (d) => (d.meta = { tagz: ["a", "b"], n: 1 })],
    ["meta: different key counts", (d) => (d.meta = { tags: ["a", "b"], n: 1, more: true })],
    ["meta removed", (d) => delete d.meta],
    ["message.id", (d) => (msg(d).id = "r2")],
    ["source (extra key)", (d) => (msg(d).source = { kind: "tool", callId: "k", extra: 1 })],
    ["block toolCallId (with its source callId)", (d) => {
      block(d).toolCallId = "k2"
      msg(d).source = { kind: "tool", callId: "k2" }
    }],
    ["block isError", (d) => (block(d).isError = true)],
    ["an extra data key", (d) => (d.note = 1)],
    ["an extra message key", (d) => (msg(d).note = 1)],
    ["an extra block key", (d) => (block(d).note = 1)]
  ]
  for (const [name, drift] of drifts) {
    it.scoped(`G3 rejects a rewrite that changes ${name}`, () =>
      withStore(Effect.gen(function*() {
        const d = clone()
        block(d).content = [text("[pruned]")]
        drift(d)
        const e = yield* rejectsEverywhere(prefix, rewriteOf(d), rewrite("G3", 3))
        assert.include((e as Error).message, "may change only content")
      })))
  }

  it.scoped("G4 a rewrite of only the result block's inner content is accepted", () =>
    withStore(Effect.gen(function*() {
      const d = clone()
      block(d).content = [text("[pruned]"), { type: "image", attachment: { id: "sha256:x" } }]
      const { event, nodes, session } = yield* acceptsEverywhere(prefix, rewriteOf(d))
      assert.deepStrictEqual(nodes, [3, 2])
      assert.deepStrictEqual(event.data, d)
      const messages = yield* session.messages
      assert.deepStrictEqual(messages[0], msg(d) as never)
      assert.strictEqual(messages[0].id, "r1")
    })))

  it.scoped("G5 comparison is structural: key order irrelevant, fresh equal arrays pass", () =>
    withStore(Effect.gen(function*() {
      const d = clone()
      const reordered: Rec = {
        meta: { n: 1, tags: ["a", "b"] },
        message: {
          source: { callId: "k", kind: "tool" },
          content: [{ content: [text("short")], toolCallId: "k", type: "tool-result" }],
          role: "user",
          id: "r1"
        },
        step: d.step,
        turn: d.turn
      }
      const { nodes } = yield* acceptsEverywhere(prefix, rewriteOf(reordered))
      assert.deepStrictEqual(nodes, [3, 2])
      // arrays are positional: the same tags in another order differ
      const swapped = { ...reordered, meta: { n: 1, tags: ["b", "a"] } }
      yield* rejectsEverywhere(prefix, rewriteOf(swapped), rewrite("G3", 3))
    })))

  it.scoped("G4 a rewrite of a rewrite keeps the original identity", () =>
    withStore(Effect.gen(function*() {
      const first = clone()
      block(first).content = [text("short")]
      const second = clone()
      block(second).content = []
      const { nodes } = yield* acceptsEverywhere([...prefix, rewriteOf(first)], rewriteOf(second, 3, 3, [3]))
      assert.deepStrictEqual(nodes, [4, 2])
    })))
})
