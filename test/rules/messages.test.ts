/**
 * SPEC §1.5, §4.6–§4.7 / §3.4 family H (message shape): H1–H11 at append, in a seed and on a
 * cold read (wrapped by L9); the projection of each event type into derived messages; the
 * model transcript vs the human transcript.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import {
  type Event,
  isAppendSurfaceEvent,
  isReplacementSurfaceEvent,
  isSurfaceEvent
} from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { deriveEventMessage } from "../../src/services/SurfaceManager.js"
import {
  acceptsEverywhere,
  acceptsInSeed,
  APPEND,
  assertError,
  assistantData,
  contextMsg,
  record,
  records,
  rejectsAfter,
  rejectsInSeed,
  replace,
  sessionWith,
  storedText,
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

const prefix: ReadonlyArray<Step> = [user("u0"), ["tool/call", toolCallData("k")]]
const SEQ = prefix.length

const mutate = (base: Rec, f: (d: Rec) => void): Rec => {
  const d = JSON.parse(JSON.stringify(base)) as Rec
  f(d)
  return d
}
const m = (d: Rec) => d.message as Rec
const blk = (d: Rec) => (m(d).content as Array<Rec>)[0]

/** [rule, event type, bad data, message keyword] */
const CASES: ReadonlyArray<readonly [string, string, string, unknown]> = [
  ["H1", "user/message", "data not an object", "hello"],
  ["H1", "user/message", "data null", null],
  ["H1", "user/message", "data an array", [userMsg("x")]],
  ["H1", "user/message", "no id", mutate(userMsg("x"), (d) => delete d.id)],
  ["H1", "user/message", "an empty id", mutate(userMsg("x"), (d) => (d.id = ""))],
  ["H1", "context/message", "a numeric id", mutate(contextMsg("x"), (d) => (d.id = 7))],
  ["H1", "context/message", "data not an object", 3],
  ["H2", "assistant/message", "the legacy {turn, step, content} form", { turn: 1, step: 1, content: [text("x")] }],
  ["H2", "assistant/message", "a message without id", mutate(assistantData("a"), (d) => delete m(d).id)],
  ["H2", "assistant/message", "message not an object", { turn: 1, step: 1, message: "hi" }],
  ["H2", "tool/result", "no message", { turn: 1, step: 1, callId: "k", content: [] }],
  ["H2", "tool/result", "an empty message id", mutate(toolResultData("k", "r"), (d) => (m(d).id = ""))],
  ["H3", "user/message", "role assistant", mutate(userMsg("x"), (d) => (d.role = "assistant"))],
  ["H3", "context/message", "role system", mutate(contextMsg("x"), (d) => (d.role = "system"))],
  ["H3", "assistant/message", "role user", mutate(assistantData("a"), (d) => (m(d).role = "user"))],
  ["H3", "tool/result", "role assistant", mutate(toolResultData("k", "r"), (d) => (m(d).role = "assistant"))],
  ["H4", "user/message", "source a string", mutate(userMsg("x"), (d) => (d.source = "user"))],
  ["H4", "user/message", "source without kind", mutate(userMsg("x"), (d) => (d.source = {}))],
  ["H4", "context/message", "an empty source kind", mutate(contextMsg("x"), (d) => (d.source = { kind: "" }))],
  ["H4", "assistant/message", "a numeric source kind", mutate(assistantData("a"), (d) => (m(d).source = { kind: 1 }))],
  ["H5", "user/message", "content a string", mutate(userMsg("x"), (d) => (d.content = "hi"))],
  ["H5", "context/message", "content an object", mutate(contextMsg("x"), (d) => (d.content = { 0: text("x") }))],
  ["H5", "assistant/message", "content absent", mutate(assistantData("a"), (d) => delete m(d).content)],
  ["H6", "assistant/message", "source kind user", mutate(assistantData("a"), (d) => (m(d).source = { kind: "user" }))],
  ["H6", "assistant/message", "provider missing", mutate(assistantData("a"), (d) => (m(d).source = { kind: "model", model: "m" }))],
  ["H6", "assistant/message", "an empty model", mutate(assistantData("a"), (d) => (m(d).source = { kind: "model", provider: "p", model: "" }))],
  ["H7", "tool/result", "source kind model", mutate(toolResultData("k", "r"), (d) => (m(d).source = { kind: "model", callId: "k" }))],
  ["H7", "tool/result", "callId missing", mutate(toolResultData("k", "r"), (d) => (m(d).source = { kind: "tool" }))],
  ["H7", "tool/result", "an empty callId", mutate(toolResultData("k", "r"), (d) => (m(d).source = { kind: "tool", callId: "" }))],
  ["H8", "tool/result", "no block", mutate(toolResultData("k", "r"), (d) => (m(d).content = []))],
  ["H8", "tool/result", "two blocks", mutate(toolResultData("k", "r"), (d) => (m(d).content = [blk(d), blk(d)]))],
  ["H8", "tool/result", "a text block", mutate(toolResultData("k", "r"), (d) => (m(d).content = [text("x")]))],
  ["H8", "tool/result", "inner content not an array", mutate(toolResultData("k", "r"), (d) => (blk(d).content = "x"))],
  ["H9", "tool/result", "mismatched tool call ids", mutate(toolResultData("k", "r"), (d) => (blk(d).toolCallId = "other"))],
  ["H11", "context/message", "source kind user", mutate(contextMsg("x"), (d) => (d.source = { kind: "user" }))]
]

const keyword: Record<string, string> = {
  H1: "lacks an identified message",
  H2: "lacks an identified message",
  H9: "mismatched tool call ids"
}

const shape = (rule: string, seq: number, eventType: string) => ({ _tag: "MessageShapeInvalid", rule, seq, eventType })

describe("H message shapes at append, in a seed and on a cold read", () => {
  for (const [rule, type, name, data] of CASES) {
    const step: Step = [type, data, APPEND]
    it.scoped(`${rule} rejects ${type} with ${name} at append`, () =>
      withStore(Effect.gen(function*() {
        const e = yield* rejectsAfter(prefix, step, shape(rule, SEQ, type))
        if (keyword[rule] !== undefined) assert.include((e as Error).message, keyword[rule])
      })))

    it.scoped(`${rule} rejects ${type} with ${name} in a seed`, () =>
      withStore(rejectsInSeed(records([...prefix, step]), shape(rule, SEQ, type))))

    it.scoped(`${rule} rejects ${type} with ${name} on SessionLive.open (StoreCorrupt L9 wrapping it)`, () =>
      withStore(Effect.gen(function*() {
        const id = uid()
        yield* Effect.scoped(sessionWith(prefix, id))
        const store = yield* SessionStore
        yield* store.append(id, [record(step, SEQ) as unknown as Event], { expectedSeq: SEQ })
        const before = yield* storedText(id)
        const e = yield* Effect.flip(Effect.scoped(SessionLive.open(id)))
        assertError(e, { _tag: "StoreCorrupt", rule: "L9", seq: SEQ })
        assertError((e as unknown as { cause: unknown }).cause, shape(rule, SEQ, type))
        assert.strictEqual(yield* storedText(id), before)
      })))
  }

  it.scoped("H11 is checked after H1–H9: a user-sourced context/message without array content is H5", () =>
    withStore(Effect.gen(function*() {
      const bad = mutate(contextMsg("x"), (d) => {
        d.source = { kind: "user" }
        d.content = "text"
      })
      yield* rejectsAfter(prefix, ["context/message", bad, APPEND], shape("H5", SEQ, "context/message"))
      yield* rejectsInSeed(records([...prefix, ["context/message", bad, APPEND]]), shape("H5", SEQ, "context/message"))
    })))

  it.scoped("H1 shapes are checked before surface markers (a bad shape without surfaceOp is H, not D3)", () =>
    withStore(rejectsAfter(prefix, ["user/message", { role: "user" }], shape("H1", SEQ, "user/message"))))
})

describe("H10 plugin content blocks and source kinds", () => {
  it.scoped("H10 block internals and plugin source kinds are not validated", () =>
    withStore(Effect.gen(function*() {
      const odd = { type: "text", text: 42, extra: { deep: [1] } }
      const widget = { type: "plugin-widget", payload: { any: "thing" } }
      const u: Step = ["user/message", {
        id: "u1",
        role: "user",
        content: [odd, widget],
        source: { kind: "plugin-x", plugin: "p", form: { unknown: true } }
      }, APPEND]
      const { event, session } = yield* acceptsEverywhere(prefix, u)
      assert.deepStrictEqual((event.data as Rec).content, [odd, widget])
      const a = yield* session.appendUnknown("assistant/message", assistantData("a1", [widget, { type: "tool-call" }]), APPEND)
      assert.strictEqual(a.seq, SEQ + 1)
      const t = yield* session.appendUnknown("tool/result", toolResultData("k", "r", [widget, { type: "?" }]), APPEND)
      assert.strictEqual(t.seq, SEQ + 2)
      assert.deepStrictEqual((yield* session.messages).map((x) => x.id), ["u0", "u1", "a1", "r"])
    })))
})

describe("§4.6 derived messages: one projection per event type", () => {
  it.scoped("§4.6 user/message projects its data verbatim (extra keys kept, the same frozen object)", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([])
      const data = { ...userMsg("u1"), note: "kept" }
      const e = yield* s.appendUnknown("user/message", data, APPEND)
      const [msg] = yield* s.messages
      assert.strictEqual(msg, e.data)
      assert.deepStrictEqual(msg, data as never)
      assert.isTrue(Object.isFrozen(msg))
    })))

  it.scoped("§4.6 context/message projects { id, role, content, source }; meta and extra keys are hidden", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([])
      const e = yield* s.appendUnknown("context/message", contextMsg("c1"), APPEND)
      assert.deepStrictEqual((e.data as Rec).meta, { hidden: true })
      const [msg] = yield* s.messages
      assert.deepStrictEqual(Object.keys(msg), ["id", "role", "content", "source"])
      assert.deepStrictEqual(msg, {
        id: "c1",
        role: "user",
        content: [text("c1")],
        source: { kind: "plugin", plugin: "ctx" }
      } as never)
      assert.strictEqual(msg.content, (e.data as Rec).content)
      assert.isTrue(Object.isFrozen(msg))
    })))

  it.scoped("§4.6 assistant/message projects data.message; empty content projects to nothing but stays on the surface", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([user("u0")])
      const full = yield* s.appendUnknown("assistant/message", { ...assistantData("a1"), usage: { inputTokens: 1, outputTokens: 2 } }, APPEND)
      const empty = yield* s.appendUnknown("assistant/message", assistantData("a2", []), { surfaceOp: "append", sourceEventSeqs: [] })
      assert.deepStrictEqual(yield* s.surface.nodes, [0, 1, 2])
      const msgs = yield* s.messages
      assert.deepStrictEqual(msgs.map((x) => x.id), ["u0", "a1"])
      assert.strictEqual(msgs[1], (full.data as Rec).message)
      assert.isUndefined(deriveEventMessage(empty))
      assert.isFalse("usage" in msgs[1])
    })))

  it.scoped("§4.6 tool/result projects data.message (error and meta hidden)", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([["tool/call", toolCallData("k")]])
      const e = yield* s.appendUnknown("tool/result", toolResultData("k", "r", [text("x")], { error: { name: "E", code: "C" }, meta: { m: 1 } }), {
        surfaceOp: "append",
        sourceEventSeqs: [0]
      })
      const [msg] = yield* s.messages
      assert.strictEqual(msg, (e.data as Rec).message)
      assert.deepStrictEqual(Object.keys(msg), ["id", "role", "content", "source"])
    })))

  it.scoped("§4.6 log-only events project to nothing and never change the derivation", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([user("u0")])
      const before = JSON.stringify(yield* s.messages)
      const logOnly: ReadonlyArray<Step> = [
        todo,
        ["turn/start", { turn: 1 }],
        ["request/header", { header: { config: { provider: "p", model: "m" } }, reason: "initial" }],
        ["request/context", { provider: "p", model: "m" }],
        ["plugin/x", null, { ignorable: true }]
      ]
      for (const step of logOnly) {
        const e = yield* s.appendUnknown(...step)
        assert.isUndefined(deriveEventMessage(e))
      }
      assert.strictEqual(JSON.stringify(yield* s.messages), before)
    })))

  it.scoped("§4.6 derived messages follow replacements and equal a seed replay's derivation", () =>
    withStore(Effect.gen(function*() {
      const steps: ReadonlyArray<Step> = [
        user("u0"),
        ["assistant/message", assistantData("a1"), APPEND],
        ["context/message", contextMsg("c1"), APPEND],
        ["user/message", userMsg("sum"), replace(0, 1, [0, 1])],
        user("u2")
      ]
      const s = yield* sessionWith([])
      const seen: Array<string> = []
      for (const step of steps) {
        yield* s.appendUnknown(...step)
        seen.push(JSON.stringify((yield* s.messages).map((x) => x.id)))
      }
      assert.deepStrictEqual(seen.map((x) => JSON.parse(x)), [
        ["u0"],
        ["u0", "a1"],
        ["u0", "a1", "c1"],
        ["sum", "c1"],
        ["sum", "c1", "u2"]
      ])
      const id = uid()
      const replay = yield* SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed: yield* s.events })
      assert.strictEqual(JSON.stringify(yield* replay.messages), JSON.stringify(yield* s.messages))
      assert.deepStrictEqual(yield* replay.surface.nodes, yield* s.surface.nodes)
    })))
})

describe("§4.7 model transcript vs human transcript", () => {
  it.scoped("§4.7 the human transcript keeps shadowed append-origin events and omits replacements", () =>
    withStore(Effect.gen(function*() {
      const s = yield* sessionWith([
        user("u0"),
        ["assistant/message", assistantData("a1"), APPEND],
        todo,
        ["user/message", userMsg("sum"), replace(0, 1, [0, 1])],
        ["context/message", contextMsg("c1"), APPEND],
        ["context/message", contextMsg("c2"), replace(4, 4, [4])]
      ])
      assert.deepStrictEqual(yield* s.surface.nodes, [3, 5])
      assert.deepStrictEqual((yield* s.messages).map((x) => x.id), ["sum", "c2"])
      const transcript = yield* s.transcript
      assert.deepStrictEqual(transcript.map((e) => e.seq), [0, 1, 4])
      const events = yield* s.events
      assert.strictEqual(transcript[0], events[0])
      assert.isTrue(Object.isFrozen(transcript))
    })))

  it("§4.7 the surface predicates: eligible type and marker; marker-less and log-only events satisfy none", () => {
    const ev = (type: string, surfaceOp?: unknown) => ({ type, seq: 0, time: 0, data: {}, ...(surfaceOp === undefined ? {} : { surfaceOp }) }) as Event
    const table: ReadonlyArray<readonly [Event, boolean, boolean, boolean]> = [
      [ev("user/message", "append"), true, true, false],
      [ev("tool/result", { op: "replace", start: 0, end: 0 }), true, false, true],
      [ev("context/message"), false, false, false],
      [ev("todo/write", "append"), false, false, false],
      [ev("todo/write"), false, false, false]
    ]
    for (const [e, surface, append, replacement] of table) {
      assert.strictEqual(isSurfaceEvent(e), surface, e.type)
      assert.strictEqual(isAppendSurfaceEvent(e), append, e.type)
      assert.strictEqual(isReplacementSurfaceEvent(e), replacement, e.type)
    }
  })

  it.scoped("§4.7 a seeded session's transcript and messages equal the live session's", () =>
    withStore(Effect.gen(function*() {
      const steps: ReadonlyArray<Step> = [user("u0"), user("u1"), ["user/message", userMsg("sum"), replace(0, 0, [0])]]
      const { events } = yield* acceptsInSeed(records(steps))
      const live = yield* sessionWith(steps)
      assert.deepStrictEqual(events.slice(0, 3).map(encodeEvent), (yield* live.events).map(encodeEvent))
      assert.deepStrictEqual((yield* live.transcript).map((e) => e.seq), [0, 1])
    })))
})
