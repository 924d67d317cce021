/**
 * SPEC §8.3 on hand-written v0 JSONL fixtures (test/fixtures/v0): every K10 refusal, every
 * normalisation (including replacement tool results taking their target's id), malformed legacy
 * shapes (K11), current-looking malformed events left to current validation (L9), and unknown
 * reference-design types (K7/K8). Each file is read with `readJsonlFile` and goes through the
 * read pipeline and seed validation (`inspectLoaded`); accepted ones assert the derived messages.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { REFERENCE_LOG_ONLY_TYPES } from "../../src/schema/FormatV0.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import type { RequestSnapshot } from "../../src/services/Session.js"
import { readJsonlFile } from "../../src/layers/jsonl/JsonlStore.js"
import { inspectLoaded } from "../../src/services/Resume.js"
import type { Event } from "../../src/schema/Events.js"
import { verifyLoaded } from "../../src/programs/Verify.js"
import { deriveEventMessage, foldSurface } from "../../src/services/SurfaceManager.js"
import { assertError } from "../helpers/state.js"

const DIR = fileURLToPath(new URL("../fixtures/v0/", import.meta.url))
const provide = Effect.provide(NodeContext.layer)

/** Read a fixture; it must be stored as version 0. */
const load = (name: string) =>
  Effect.gen(function*() {
    const loaded = yield* readJsonlFile(`${DIR}${name}.jsonl`)
    assert.strictEqual(loaded.storedVersion, 0)
    assert.strictEqual(loaded.header.version, 0)
    return loaded
  })

/** The upgraded, validated view of a fixture and its derived messages. */
const upgrade = (name: string) =>
  Effect.gen(function*() {
    const view = yield* inspectLoaded(yield* load(name))
    assert.deepStrictEqual(view.closers, [], "fixtures end outside a turn")
    const fold = foldSurface(view.events)
    if (!("nodes" in fold)) return assert.fail(fold.message)
    const messages = fold.nodes.map((s) => deriveEventMessage(view.events[s] as Event))
    return { view, messages, data: (seq: number) => view.events[seq].data }
  })

/** The read pipeline's error for a fixture (also reported by verify with the same rule). */
const refusal = (name: string) =>
  Effect.gen(function*() {
    const loaded = yield* load(name)
    const e = yield* Effect.flip(inspectLoaded(loaded))
    const report = yield* verifyLoaded(loaded)
    assert.isFalse(report.ok)
    return { error: e, report: report.ok ? undefined : report.error }
  })

const text = (t: string) => ({ type: "text", text: t })
const legacy = (name: string, seq: number) => `legacy-message:${name}:${seq}`

describe("K10: v0 refusals name the form and the seq", () => {
  const cases: ReadonlyArray<readonly [string, number, string]> = [
    ["k10-header-delta", 2, "request/header-delta"],
    ["k10-fallback", 2, "request/header reason fallback"],
    ["k10-mode-set", 1, "mode/set"]
  ]
  for (const [name, seq, form] of cases) {
    it.effect(`K10 refuses ${form} in a v0 log (${name}.jsonl, seq ${seq})`, () =>
      Effect.gen(function*() {
        const { error, report } = yield* refusal(name)
        assertError(error, { _tag: "LegacyFormRefused", rule: "K10", seq, form })
        assert.include(error.message, form)
        assert.include(error.message, `seq ${seq}`)
        assert.deepStrictEqual(report && { ...report, message: "" }, { _tag: "LegacyFormRefused", rule: "K10", seq, message: "" })
      }).pipe(provide))
  }
})

describe("§8.3 normalisations, asserted on the derived messages", () => {
  it.effect("K3: the header becomes version 1 and keeps every other field (cwd, delegationDepth, parentSession)", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual((yield* upgrade("n1-identity")).view.header, {
        version: 1,
        id: "n1-identity",
        createdAt: 1700000000000,
        cwd: "/home/dev/project",
        delegationDepth: 0
      })
      assert.deepStrictEqual((yield* upgrade("n4-turn-end")).view.header, {
        version: 1,
        id: "n4-turn-end",
        createdAt: 1700000000000,
        parentSession: "root",
        delegationDepth: 1
      })
    }).pipe(provide))

  it.effect("1: pre-identity user, assistant and tool messages get legacy ids; a replacement tool result takes its target's id", () =>
    Effect.gen(function*() {
      const n = "n1-identity"
      const { data, messages, view } = yield* upgrade(n)
      assert.deepStrictEqual(messages, [
        { id: legacy(n, 1), role: "user", content: [text("list the files")], source: { kind: "user" } },
        {
          id: legacy(n, 3),
          role: "assistant",
          content: [{ type: "tool-call", id: "c1", name: "ls", arguments: "{}" }],
          source: { provider: "anthropic", model: "claude", kind: "model" }
        },
        {
          // the replacement (seq 8) carries the id of its target (seq 5), so G3 holds
          id: legacy(n, 5),
          role: "user",
          content: [{ type: "tool-result", toolCallId: "c1", content: [text("[pruned]")], isError: false }],
          source: { kind: "tool", callId: "c1" }
        }
      ])
      // other data fields are kept; content/provenance and callId/content/isError leave data
      assert.deepStrictEqual(Object.keys(data(3) as object), ["turn", "step", "message", "usage"])
      assert.deepStrictEqual((data(3) as { usage: unknown }).usage, { inputTokens: 12, outputTokens: 5 })
      assert.deepStrictEqual(Object.keys(data(5) as object), ["turn", "step", "message"])
      assert.strictEqual((data(8) as { message: { id: string } }).message.id, legacy(n, 5))
      // envelopes are kept
      assert.deepStrictEqual(view.events[8].surfaceOp, { op: "replace", start: 5, end: 5 })
      assert.deepStrictEqual(view.events[8].sourceEventSeqs, [5])
      assert.strictEqual(view.events[8].time, 1700000000009)
    }).pipe(provide))

  it.effect("1: a replacement tool result whose target is not a tool result keeps its legacy id; current validation decides (G2)", () =>
    Effect.gen(function*() {
      const { error } = yield* refusal("n1-replacement-target-not-tool")
      assertError(error, { _tag: "StoreCorrupt", rule: "L9", seq: 1 })
      assertError((error as unknown as { cause: unknown }).cause, { _tag: "ToolResultRewriteInvalid", rule: "G2", seq: 1 })
    }).pipe(provide))

  it.effect("2: a pre-loop turn/start loses its trigger", () =>
    Effect.gen(function*() {
      const { data, messages } = yield* upgrade("n2-turn-start-trigger")
      assert.deepStrictEqual(data(0), { turn: 1 })
      assert.deepStrictEqual(data(3), { turn: 2 })
      assert.deepStrictEqual(messages, [{ id: "m1", role: "user", content: [text("hi")], source: { kind: "user" } }])
    }).pipe(provide))

  it.effect("3: steering/message becomes user/message (wrapped and flat forms), envelope kept", () =>
    Effect.gen(function*() {
      const n = "n3-steering"
      const { messages, view } = yield* upgrade(n)
      assert.deepStrictEqual(messages, [
        { id: "u1", role: "user", content: [text("start")], source: { kind: "user" } },
        { id: "s1", role: "user", content: [text("use tabs")], source: { kind: "user" } },
        { content: [text("and be quick")], source: { kind: "user" }, id: legacy(n, 3), role: "user" }
      ])
      assert.deepStrictEqual(view.events.map((e) => e.type), ["turn/start", "user/message", "user/message", "user/message", "turn/end"])
      assert.deepStrictEqual([view.events[3].time, view.events[3].surfaceOp], [1700000000004, "append"])
    }).pipe(provide))

  it.effect("3: a converted steering/message without surfaceOp then fails D3 under current validation", () =>
    Effect.gen(function*() {
      const { error, report } = yield* refusal("n3-steering-no-surfaceop")
      assertError(error, { _tag: "StoreCorrupt", rule: "L9", seq: 1 })
      assertError((error as unknown as { cause: unknown }).cause, { _tag: "SurfaceMarkerInvalid", rule: "D3", seq: 1 })
      assert.strictEqual(report?.rule, "D3")
    }).pipe(provide))

  it.effect("4: old turn/end reasons are normalised; the rest is unchanged", () =>
    Effect.gen(function*() {
      const n = "n4-turn-end"
      const { messages, view } = yield* upgrade(n)
      const reasons = view.events.filter((e) => e.type === "turn/end").map((e) => (e.data as { reason: unknown }).reason)
      assert.deepStrictEqual(reasons, [
        { kind: "completed" },
        { kind: "blocked" },
        { kind: "max-tokens" },
        { kind: "interrupted" },
        { kind: "aborted", reason: { kind: "legacy" } },
        { kind: "aborted", reason: { kind: "user-cancel" } },
        { kind: "aborted", reason: { kind: "disposed" } },
        { kind: "error", error: { message: "overloaded", code: "OVERLOADED" } },
        {
          kind: "error",
          error: { message: "rate limited", code: "RATE_LIMIT", status: 429, providerRetryAfterMs: 1500, requestId: "req-9" }
        },
        { kind: "error", error: { message: "socket hang up", code: "ECONNRESET" } },
        { kind: "error", error: { message: "boom", code: "UNKNOWN" } },
        { kind: "handoff", to: "agent-b" }
      ])
      assert.deepStrictEqual(messages, [
        { id: legacy(n, 24), role: "user", content: [text("after the turns")], source: { kind: "user" } }
      ])
    }).pipe(provide))

  it.effect("5: an old context/message gets an id and role; meta stays hidden from the model", () =>
    Effect.gen(function*() {
      const n = "n5-context-message"
      const { data, messages } = yield* upgrade(n)
      assert.deepStrictEqual(messages, [
        { id: "u1", role: "user", content: [text("fix the bug")], source: { kind: "user" } },
        { id: legacy(n, 1), role: "user", content: [text("<file>main.ts</file>")], source: { kind: "plugin", plugin: "files" } },
        { id: legacy(n, 2), role: "user", content: [text("git status: clean")], source: { kind: "plugin", plugin: "git" } }
      ])
      assert.deepStrictEqual((data(1) as { meta: unknown }).meta, { paths: ["main.ts"] })
    }).pipe(provide))

  it.effect("current-looking but malformed events pass the edge unchanged and fail current validation (H1 via L9)", () =>
    Effect.gen(function*() {
      const { error, report } = yield* refusal("malformed-current")
      assertError(error, { _tag: "StoreCorrupt", rule: "L9", seq: 1 })
      assertError((error as unknown as { cause: unknown }).cause, { _tag: "MessageShapeInvalid", rule: "H1", seq: 1 })
      assert.strictEqual(report?.rule, "H1")
    }).pipe(provide))
})

describe("K11: malformed legacy shapes are corruption naming the form and seq", () => {
  const cases: ReadonlyArray<readonly [string, number, string]> = [
    ["k11-turn-start", 1, "turn/start"],
    ["k11-steering", 1, "steering/message"],
    ["k11-turn-end-step", 1, "turn/end"],
    ["k11-turn-end-extra-keys", 1, "turn/end"],
    ["k11-turn-end-error-code", 1, "turn/end"]
  ]
  for (const [name, seq, form] of cases) {
    it.effect(`K11: ${name}.jsonl is StoreCorrupt at seq ${seq} naming ${form}`, () =>
      Effect.gen(function*() {
        const { error, report } = yield* refusal(name)
        assertError(error, { _tag: "StoreCorrupt", rule: "K11", seq })
        assert.include(error.message, form)
        assert.strictEqual(report?.rule, "K11")
      }).pipe(provide))
  }
})

describe("K7/K8: reference-design types after the edge", () => {
  it.effect("K7: an unknown type without ignorable refuses the log, naming type and seq", () =>
    Effect.gen(function*() {
      const { error } = yield* refusal("k7-reference-types")
      assertError(error, { _tag: "UnknownEventType", rule: "K7", seq: 1, eventType: "approval/request" })
    }).pipe(provide))

  it.effect("K7: one of the reference log-only types carrying a surfaceOp is not marked by normalisation 6, so K7 refuses it", () =>
    Effect.gen(function*() {
      const { error } = yield* refusal("k7-reference-type-surfaceop")
      assertError(error, { _tag: "UnknownEventType", rule: "K7", seq: 1, eventType: "team/message/delivered" })
    }).pipe(provide))

  it.effect("K8: unknown types marked ignorable are kept (data null included) and never reach the model", () =>
    Effect.gen(function*() {
      const n = "k8-ignorable"
      const { messages, view } = yield* upgrade(n)
      assert.deepStrictEqual(messages, [{ id: legacy(n, 0), role: "user", content: [text("hi")], source: { kind: "user" } }])
      assert.deepStrictEqual(view.events.slice(1).map((e) => [e.type, e.data, e.ignorable]), [
        ["session/title", { title: "Greeting" }, true],
        ["approval/request", null, true]
      ])
    }).pipe(provide))
})

/** The raw lines of a fixture after its header, parsed. */
const rawEvents = (name: string): Array<Record<string, unknown>> =>
  readFileSync(`${DIR}${name}.jsonl`, "utf8").trim().split("\n").slice(1).map((l) => JSON.parse(l))

describe("§8.3 normalisation 6: the reference design's own log-only types", () => {
  it.effect("6: each of the 29 types gets ignorable: true with data and every other field unchanged; one already marked is left as it is; the messages are those of the log without them", () =>
    Effect.gen(function*() {
      const n = "n6-reference-log-only"
      const raw = rawEvents(n)
      const { messages, view } = yield* upgrade(n)
      const listed = raw.filter((e) => REFERENCE_LOG_ONLY_TYPES.has(e.type as string))
      assert.strictEqual(listed.length, 29)
      assert.deepStrictEqual(new Set(listed.map((e) => e.type)), new Set(REFERENCE_LOG_ONLY_TYPES))
      for (const e of raw) {
        const upgraded = view.events[e.seq as number] as unknown as Record<string, unknown>
        if (REFERENCE_LOG_ONLY_TYPES.has(e.type as string)) {
          assert.deepStrictEqual(upgraded, { ...e, ignorable: true }, `${e.type}`)
          assert.deepStrictEqual(Object.keys(upgraded), [...Object.keys(e).filter((k) => k !== "ignorable"), "ignorable"])
        }
      }
      assert.deepStrictEqual(messages, [
        { id: legacy(n, 0), role: "user", content: [text("hi")], source: { kind: "user" } },
        {
          id: legacy(n, 16),
          role: "assistant",
          content: [text("hello")],
          source: { provider: "p", model: "m", kind: "model" }
        },
        { id: legacy(n, 31), role: "user", content: [text("bye")], source: { kind: "user" } }
      ])
    }).pipe(provide))

  it.effect("6 does not apply to a v1 log: a listed type without ignorable is refused there (K7); a v1 append refuses it (K9)", () =>
    Effect.gen(function*() {
      const dir = mkdtempSync(join(tmpdir(), "esl-v1-"))
      const file = join(dir, "v1-title.jsonl")
      writeFileSync(
        file,
        `{"type":"session","version":1,"id":"v1-title","createdAt":1}\n` +
          `{"type":"session/title","seq":0,"time":1,"data":{"title":"Greeting"}}\n`
      )
      const e = yield* Effect.flip(Effect.flatMap(readJsonlFile(file), inspectLoaded))
      assertError(e, { _tag: "UnknownEventType", rule: "K7", seq: 0, eventType: "session/title" })
      rmSync(dir, { recursive: true })
      const appended = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "v1-append" })
        return yield* Effect.flip(s.append("session/title" as never, { title: "t" } as never))
      })).pipe(Effect.provide(layerMemoryStore()))
      assertError(appended, { _tag: "UnknownEventType", rule: "K9" })
    }).pipe(provide))
})

describe("§1.3.11 messagePrefix in a v0 log (I11, §5.4)", () => {
  it.effect("the prefix survives the upgrade, the fold keeps it, and every rebuilt request is prefix + history", () =>
    Effect.gen(function*() {
      const n = "n-message-prefix"
      const raw = rawEvents(n)
      const prefix2 = (raw[2].data as { header: { messagePrefix: Array<unknown> } }).header.messagePrefix
      const prefix7 = (raw[7].data as { header: { messagePrefix: Array<unknown> } }).header.messagePrefix
      const { view } = yield* upgrade(n)
      assert.deepStrictEqual(view.events[2].data, raw[2].data)
      const history = (upTo: number) => {
        const fold = foldSurface(view.events.slice(0, upTo + 1))
        if (!("nodes" in fold)) return assert.fail(fold.message)
        return fold.nodes.map((s) => deriveEventMessage(view.events[s] as Event)!)
      }
      const at = (seq: number) => requestAtLog(view.events as ReadonlyArray<Event>, seq) as RequestSnapshot
      assert.deepStrictEqual(at(1).messages, history(1), "no header yet: no prefix")
      for (const seq of [2, 3, 4, 5, 6]) assert.deepStrictEqual(at(seq).messages, [...prefix2, ...history(seq)] as never)
      for (const seq of [7, 8, 9]) assert.deepStrictEqual(at(seq).messages, [...prefix7, ...history(seq)] as never)
      assert.deepStrictEqual(at(9).header?.messagePrefix, prefix7 as never)
    }).pipe(provide))
})
