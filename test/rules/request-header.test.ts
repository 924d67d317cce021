/**
 * SPEC §1.3.11, §5 / §3.4 family I (request header): I1–I9 at append and in a seed (I7/I8 also
 * in store batches), legacy guard before shapes, and I10's verbatim round trip and the
 * canonical fold.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import {
  acceptsEverywhere,
  acceptsInSeed,
  assertError,
  record,
  records,
  rejectsAfter,
  rejectsInSeed,
  rejectsInStoreBatch,
  requestHeaderData,
  sessionWith,
  type Step,
  storedText,
  uid,
  user,
  withStore
} from "../helpers/state.js"


/** A prefix with a header and a context in force, so the folds have something to keep. */
const prefix: ReadonlyArray<Step> = [
  ["request/header", requestHeaderData("initial", { config: { provider: "p0", model: "m0" }, system: "sys" })],
  ["request/context", { provider: "p0", model: "m0", contextWindow: 1000 }],
  user("u0")
]
const SEQ = prefix.length
const cfg = { provider: "p", model: "m" }
/** A valid message of a `messagePrefix` (SPEC §1.5). */
const pm = { id: "prefix-0", role: "system", content: [{ type: "text", text: "You are in /repo." }], source: { kind: "instructions" } }
const rh = (rule: string, seq = SEQ) => ({ _tag: "RequestHeaderInvalid", rule, seq })

const CASES: ReadonlyArray<readonly [string, string, unknown]> = [
  ["I1", "data not an object", "header"],
  ["I1", "header absent", { reason: "initial" }],
  ["I1", "header not an object", { header: "x", reason: "initial" }],
  ["I1", "config missing", { header: { system: "s" }, reason: "initial" }],
  ["I1", "a pre-provider header {config:{model}}", { header: { config: { model: "x" } }, reason: "initial" }],
  ["I1", "an empty provider", { header: { config: { provider: "", model: "m" } }, reason: "initial" }],
  ["I1", "a non-string model", { header: { config: { provider: "p", model: 3 } }, reason: "initial" }],
  ["I2", "an empty reasoningEffort", { header: { config: { ...cfg, reasoningEffort: "" } }, reason: "initial" }],
  ["I2", "a numeric reasoningEffort", { header: { config: { ...cfg, reasoningEffort: 1 } }, reason: "initial" }],
  ["I3", "adapterDefaults null", { header: { config: cfg, adapterDefaults: null }, reason: "initial" }],
  ["I3", "adapterDefaults an array", { header: { config: cfg, adapterDefaults: [] }, reason: "initial" }],
  ["I3", "adapterDefaults a string", { header: { config: cfg, adapterDefaults: "x" }, reason: "initial" }],
  ["I4", "an adapterDefaults key other than reasoningEffort/maxTokens", {
    header: { config: { ...cfg, temperature: 1 }, adapterDefaults: { temperature: true } },
    reason: "initial"
  }],
  ["I5", "an adapterDefaults value false", { header: { config: { ...cfg, maxTokens: 5 }, adapterDefaults: { maxTokens: false } }, reason: "initial" }],
  ["I5", "an adapterDefaults value 1", { header: { config: { ...cfg, reasoningEffort: "low" }, adapterDefaults: { reasoningEffort: 1 } }, reason: "initial" }],
  ["I6", "a marker for an absent config field", { header: { config: cfg, adapterDefaults: { maxTokens: true } }, reason: "initial" }],
  ["I9", "an unknown reason", { header: { config: cfg }, reason: "retry" }],
  ["I9", "reason absent", { header: { config: cfg } }],
  ["I9", "a non-string reason", { header: { config: cfg }, reason: 1 }],
  ["I11", "a messagePrefix that is not an array", { header: { config: cfg, messagePrefix: { id: "p" } }, reason: "initial" }],
  ["I11", "a messagePrefix null", { header: { config: cfg, messagePrefix: null }, reason: "initial" }],
  ["I11", "a messagePrefix element that is not an object", { header: { config: cfg, messagePrefix: ["hi"] }, reason: "initial" }],
  ["I11", "a messagePrefix message without an id", { header: { config: cfg, messagePrefix: [{ role: pm.role, content: pm.content, source: pm.source }] }, reason: "initial" }],
  ["I11", "a messagePrefix message with an empty id", { header: { config: cfg, messagePrefix: [pm, { ...pm, id: "" }] }, reason: "initial" }],
  ["I11", "a messagePrefix message with role tool", { header: { config: cfg, messagePrefix: [{ ...pm, role: "tool" }] }, reason: "initial" }],
  ["I11", "a messagePrefix message whose content is not an array", { header: { config: cfg, messagePrefix: [{ ...pm, content: "hi" }] }, reason: "initial" }],
  ["I11", "a messagePrefix message whose source is an array", { header: { config: cfg, messagePrefix: [{ ...pm, source: [] }] }, reason: "initial" }]
]

describe("I1–I6, I9, I11 at append and in a seed", () => {
  for (const [rule, name, data] of CASES) {
    it.scoped(`${rule} rejects ${name} at append`, () =>
      withStore(Effect.gen(function*() {
        const e = yield* rejectsAfter(prefix, ["request/header", data], rh(rule))
        if (rule === "I1") assert.include((e as Error).message, "lacks provider/model")
      })))
    it.scoped(`${rule} rejects ${name} in a seed`, () =>
      withStore(rejectsInSeed(records([...prefix, ["request/header", data]]), rh(rule))))
    it.scoped(`${rule} rejects ${name} on SessionLive.open (StoreCorrupt L9 wrapping it)`, () =>
      withStore(Effect.gen(function*() {
        const id = uid()
        yield* Effect.scoped(sessionWith(prefix, id))
        const store = yield* SessionStore
        yield* store.append(id, [record(["request/header", data], SEQ) as unknown as Event], { expectedSeq: SEQ })
        const before = yield* storedText(id)
        const e = yield* Effect.flip(Effect.scoped(SessionLive.open(id)))
        assertError(e, { _tag: "StoreCorrupt", rule: "L9", seq: SEQ })
        assertError((e as unknown as { cause: unknown }).cause, rh(rule))
        assert.strictEqual(yield* storedText(id), before)
      })))
  }

  it.scoped("I1–I11 run in order: I1 before I2 before I3, I6 before I9, I9 before I11", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsAfter(prefix, ["request/header", { header: { config: { model: "m", reasoningEffort: "" } }, reason: "x" }], rh("I1"))
      yield* rejectsAfter(prefix, ["request/header", { header: { config: { ...cfg, reasoningEffort: "" }, adapterDefaults: null }, reason: "x" }], rh("I2"))
      yield* rejectsAfter(prefix, ["request/header", { header: { config: cfg, adapterDefaults: { maxTokens: true } }, reason: "x" }], rh("I6"))
      yield* rejectsAfter(prefix, ["request/header", { header: { config: cfg, messagePrefix: 1 }, reason: "x" }], rh("I9"))
    })))
})

describe("I7, I8 legacy forms (append, seed, store batch)", () => {
  const fallback = { header: { config: cfg }, reason: "fallback" }
  const delta = { base: 0, changes: {} }

  it.scoped("I7 rejects reason fallback at append, in a seed and in a store batch", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsAfter(prefix, ["request/header", fallback], rh("I7"))
      yield* rejectsInSeed(records([...prefix, ["request/header", fallback]]), rh("I7"))
      yield* rejectsInStoreBatch(prefix, record(["request/header", fallback], SEQ), rh("I7"))
    })))

  it.scoped("I7 fires before the shape checks (legacy guard first)", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsAfter(prefix, ["request/header", { header: "bad", reason: "fallback" }], rh("I7"))
      yield* rejectsInSeed(records([...prefix, ["request/header", { reason: "fallback" }]]), rh("I7"))
    })))

  it.scoped("I8 rejects the request/header-delta type at append, in a seed and in a store batch", () =>
    withStore(Effect.gen(function*() {
      yield* rejectsAfter(prefix, ["request/header-delta", delta], rh("I8"))
      yield* rejectsAfter(prefix, ["request/header-delta", null, { ignorable: true }], rh("I8"))
      yield* rejectsInSeed(records([...prefix, ["request/header-delta", delta]]), rh("I8"))
      yield* rejectsInStoreBatch(prefix, record(["request/header-delta", delta], SEQ), rh("I8"))
    })))
})

describe("I10 valid headers round-trip verbatim; folds canonicalise", () => {
  const full = {
    header: {
      config: { provider: "p", model: "m", reasoningEffort: "high", maxTokens: 100, temperature: 0.5, stop: ["x"] },
      adapterDefaults: { reasoningEffort: true, maxTokens: true },
      system: "be brief",
      tools: [{ name: "read", description: "reads", parameters: { type: "object", properties: {} } }]
    },
    reason: "change"
  }

  it.scoped("I10 a header with reasoning effort and adapter markers is stored verbatim and folded", () =>
    withStore(Effect.gen(function*() {
      const { event, session } = yield* acceptsEverywhere(prefix, ["request/header", full])
      assert.deepStrictEqual(event.data, full)
      assert.strictEqual(
        encodeEvent(event),
        `{"type":"request/header","seq":${SEQ},"time":0,"data":${JSON.stringify(full)}}`
      )
      assert.deepStrictEqual(yield* session.requestHeader, full.header as never)
      assert.isTrue(Object.isFrozen(yield* session.requestHeader))
      const loaded = yield* (yield* SessionStore).load(session.id)
      assert.strictEqual(encodeEvent(loaded.events[SEQ] as Event), encodeEvent(event))
    })))

  it.scoped("I11 a header with a messagePrefix is stored verbatim, folded with it, and every rebuilt request starts with it (§5.4)", () =>
    withStore(Effect.gen(function*() {
      const data = { header: { config: cfg, messagePrefix: [pm] }, reason: "change" }
      const { event, session } = yield* acceptsEverywhere(prefix, ["request/header", data])
      assert.deepStrictEqual(event.data, data)
      assert.deepStrictEqual(yield* session.requestHeader, data.header as never)
      const loaded = yield* (yield* SessionStore).load(session.id)
      assert.strictEqual(encodeEvent(loaded.events[SEQ] as Event), encodeEvent(event))
      const history = yield* session.messages
      assert.deepStrictEqual((yield* session.requestAt(SEQ)).messages, [pm, ...history] as never)
      // before the header with the prefix, the request has none (the earlier header has no prefix)
      assert.deepStrictEqual((yield* session.requestAt(SEQ - 1)).messages, history as never)
      // an empty prefix is dropped by the canonical fold and adds nothing
      const empty = { header: { config: cfg, messagePrefix: [] }, reason: "change" }
      const next = yield* session.appendUnknown("request/header", empty)
      assert.deepStrictEqual(yield* session.requestHeader, { config: cfg } as never)
      assert.deepStrictEqual((yield* session.requestAt(next.seq)).messages, history as never)
    })))

  it.scoped("I10 a non-canonical but valid header is accepted verbatim; the fold is canonical", () =>
    withStore(Effect.gen(function*() {
      const data = {
        header: { config: cfg, system: "", tools: [], adapterDefaults: {} },
        reason: "series"
      }
      const { event, session } = yield* acceptsEverywhere(prefix, ["request/header", data])
      assert.deepStrictEqual(event.data, data)
      assert.deepStrictEqual(yield* session.requestHeader, { config: cfg } as never)
      assert.deepStrictEqual(yield* session.requestContext, { provider: "p0", model: "m0", contextWindow: 1000 } as never)
    })))

  it.scoped("I10 a seeded session folds the latest header and context", () =>
    withStore(Effect.gen(function*() {
      const id = uid()
      const s = yield* SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed: records([...prefix, ["request/header", full]]) })
      assert.deepStrictEqual(yield* s.requestHeader, full.header as never)
      assert.deepStrictEqual(yield* s.requestContext, { provider: "p0", model: "m0", contextWindow: 1000 } as never)
      assert.include(yield* storedText(id), "be brief")
      const { events } = yield* acceptsInSeed(records(prefix))
      assert.strictEqual(events.length, SEQ + 1)
    })))
})

