import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { LegacyFormRefused, StoreCorrupt } from "../../src/schema/Errors.js"
import { upgradeV0 } from "../../src/schema/FormatV0.js"
import type { SessionHeader } from "../../src/schema/SessionHeader.js"
import { validateSeed } from "../../src/services/Seed.js"
import { deriveEventMessage, foldSurface } from "../../src/services/SurfaceManager.js"
import type { Event } from "../../src/schema/Events.js"

const header = { version: 0, id: "old", createdAt: 5, delegationDepth: 0 } as unknown as SessionHeader

const ev = (seq: number, type: string, data: unknown, extra: Record<string, unknown> = {}) => ({
  type,
  seq,
  time: 100 + seq,
  data,
  ...extra
})

const upgrade = (events: ReadonlyArray<unknown>) => {
  const r = upgradeV0("old", header, events)
  if (r instanceof LegacyFormRefused || r instanceof StoreCorrupt) throw new Error(`unexpected ${r._tag}`)
  return r
}

/** Validate the upgraded log as a seed and derive its messages. */
const derive = (events: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const { events: valid } = yield* validateSeed(events, { coldRead: false })
    const fold = foldSurface(valid)
    assert.ok("nodes" in fold)
    return (fold as { nodes: Array<number> }).nodes
      .map((s) => deriveEventMessage(valid[s] as Event))
      .filter((m) => m !== undefined)
  })

describe("the frozen v0 -> v1 edge (SPEC 8.3)", () => {
  it("K10 refuses request/header-delta, reason fallback and mode/set, naming form and seq", () => {
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [ev(1, "request/header-delta", { delta: {} }), "request/header-delta"],
      [ev(1, "request/header", { header: { config: { provider: "p", model: "m" } }, reason: "fallback" }), "request/header reason fallback"],
      [ev(1, "mode/set", { mode: "plan" }), "mode/set"]
    ]
    for (const [bad, form] of cases) {
      const r = upgradeV0("old", header, [ev(0, "turn/start", { turn: 1 }), bad])
      assert.ok(r instanceof LegacyFormRefused)
      assert.strictEqual((r as LegacyFormRefused).rule, "K10")
      assert.strictEqual((r as LegacyFormRefused).seq, 1)
      assert.strictEqual((r as LegacyFormRefused).form, form)
    }
  })

  it("K3: the header becomes version 1 and keeps every other field", () => {
    const r = upgrade([])
    assert.deepStrictEqual(r.header, { version: 1, id: "old", createdAt: 5, delegationDepth: 0 })
  })

  it.effect("normalisation 1: pre-identity user, assistant and tool messages get legacy ids", () =>
    Effect.gen(function*() {
      const r = upgrade([
        ev(0, "user/message", { content: [{ type: "text", text: "hi" }], source: { kind: "user" } }, { surfaceOp: "append" }),
        ev(1, "assistant/message", {
          turn: 1,
          step: 1,
          content: [{ type: "tool-call", id: "c1", name: "ls", arguments: "{}" }],
          provenance: { provider: "p", model: "m" },
          usage: { inputTokens: 1, outputTokens: 2 }
        }, { surfaceOp: "append" }),
        ev(2, "tool/result", { turn: 1, step: 1, callId: "c1", content: [{ type: "text", text: "a b" }], isError: false }, {
          surfaceOp: "append"
        }),
        // a replacement tool result takes its target's (normalised) id, so G3 holds
        ev(3, "tool/result", { turn: 1, step: 1, callId: "c1", content: [{ type: "text", text: "[pruned]" }], isError: false }, {
          surfaceOp: { op: "replace", start: 2, end: 2 },
          sourceEventSeqs: [2]
        })
      ])
      assert.deepStrictEqual(r.events[0], ev(0, "user/message", {
        id: "legacy-message:old:0",
        role: "user",
        content: [{ type: "text", text: "hi" }],
        source: { kind: "user" }
      }, { surfaceOp: "append" }))
      const messages = yield* derive(r.events)
      assert.deepStrictEqual(messages, [
        { id: "legacy-message:old:0", role: "user", content: [{ type: "text", text: "hi" }], source: { kind: "user" } },
        {
          id: "legacy-message:old:1",
          role: "assistant",
          content: [{ type: "tool-call", id: "c1", name: "ls", arguments: "{}" }],
          source: { provider: "p", model: "m", kind: "model" }
        },
        {
          id: "legacy-message:old:2",
          role: "user",
          content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "[pruned]" }], isError: false }],
          source: { kind: "tool", callId: "c1" }
        }
      ])
      // other data fields are kept
      assert.deepStrictEqual((r.events[1] as { data: { usage: unknown } }).data.usage, { inputTokens: 1, outputTokens: 2 })
    }))

  it("normalisation 2: a pre-loop turn/start loses its trigger; a malformed one is K11", () => {
    assert.deepStrictEqual(upgrade([ev(0, "turn/start", { turn: 1, trigger: { kind: "user" } })]).events[0], ev(0, "turn/start", { turn: 1 }))
    for (const data of [{ turn: 1, trigger: null }, { turn: 1, trigger: { kind: "user" }, x: 1 }, { turn: 0, trigger: { kind: "u" } }]) {
      const r = upgradeV0("old", header, [ev(0, "turn/start", data)])
      assert.ok(r instanceof StoreCorrupt)
      assert.strictEqual((r as StoreCorrupt).rule, "K11")
      assert.strictEqual((r as StoreCorrupt).seq, 0)
    }
  })

  it.effect("normalisation 3: steering/message becomes a user/message (wrapped and flat); other shapes are K11", () =>
    Effect.gen(function*() {
      const r = upgrade([
        ev(0, "steering/message", { turn: 1, message: { id: "s1", role: "user", content: [], source: { kind: "user" } } }, {
          surfaceOp: "append"
        }),
        ev(1, "steering/message", { turn: 1, content: [{ type: "text", text: "go" }], source: { kind: "user" } }, {
          surfaceOp: "append"
        })
      ])
      assert.deepStrictEqual((yield* derive(r.events)).map((m) => m!.id), ["s1", "legacy-message:old:1"])
      const bad = upgradeV0("old", header, [ev(0, "steering/message", null)])
      assert.ok(bad instanceof StoreCorrupt && bad.rule === "K11")
      const extra = upgradeV0("old", header, [ev(0, "steering/message", { turn: 1, message: {}, more: 1 })])
      assert.ok(extra instanceof StoreCorrupt && extra.rule === "K11")
    }))

  it("normalisation 4: old turn/end reasons", () => {
    const end = (reason: unknown) => upgradeV0("old", header, [ev(0, "turn/end", { turn: 1, reason })])
    const data = (r: ReturnType<typeof end>) => (r as unknown as { events: Array<{ data: unknown }> }).events[0].data
    assert.deepStrictEqual(data(end({ kind: "completed" })), { turn: 1, reason: { kind: "completed" } })
    assert.deepStrictEqual(data(end({ kind: "aborted" })), { turn: 1, reason: { kind: "aborted", reason: { kind: "legacy" } } })
    assert.deepStrictEqual(data(end({ kind: "aborted", reason: { kind: "user" } })), {
      turn: 1,
      reason: { kind: "aborted", reason: { kind: "user" } }
    })
    assert.deepStrictEqual(data(end({ kind: "disposed" })), { turn: 1, reason: { kind: "aborted", reason: { kind: "disposed" } } })
    assert.deepStrictEqual(data(end({ kind: "error", step: 2, failure: { message: "x", code: "E" } })), {
      turn: 1,
      reason: { kind: "error", error: { message: "x", code: "E" } }
    })
    assert.deepStrictEqual(data(end({ kind: "error", step: 1, message: "boom" })), {
      turn: 1,
      reason: { kind: "error", error: { message: "boom", code: "UNKNOWN" } }
    })
    assert.deepStrictEqual(data(end({ kind: "custom-ext", x: 1 })), { turn: 1, reason: { kind: "custom-ext", x: 1 } })
    for (
      const bad of [
        { kind: "completed", extra: 1 },
        { kind: "error", step: "1", message: "m" },
        { kind: "error", step: 1, message: "m", code: 7 },
        null
      ]
    ) {
      const r = end(bad)
      assert.ok(r instanceof StoreCorrupt, JSON.stringify(bad))
      assert.strictEqual((r as StoreCorrupt).rule, "K11")
    }
    const stepped = upgradeV0("old", header, [ev(0, "turn/end", { turn: 1, step: 1, reason: { kind: "completed" } })])
    assert.ok(stepped instanceof StoreCorrupt && stepped.rule === "K11")
  })

  it.effect("normalisation 5: an old context/message gets an id and role; meta stays hidden", () =>
    Effect.gen(function*() {
      const r = upgrade([
        ev(0, "context/message", { content: [{ type: "text", text: "ctx" }], source: { kind: "plugin", plugin: "x" }, meta: { a: 1 } }, {
          surfaceOp: "append"
        })
      ])
      assert.deepStrictEqual(yield* derive(r.events), [{
        id: "legacy-message:old:0",
        role: "user",
        content: [{ type: "text", text: "ctx" }],
        source: { kind: "plugin", plugin: "x" }
      }])
    }))

  it("current-looking but malformed events pass unchanged for current validation to judge", () => {
    const e = ev(0, "user/message", { id: "", role: "user", content: [], source: { kind: "user" } }, { surfaceOp: "append" })
    assert.strictEqual(upgrade([e]).events[0], e)
  })

  it("A13: a __proto__ key in legacy data stays plain data", () => {
    const data = JSON.parse(`{"content":[],"source":{"kind":"user"},"__proto__":{"polluted":true}}`)
    const r = upgrade([ev(0, "user/message", data, { surfaceOp: "append" })])
    const out = (r.events[0] as { data: Record<string, unknown> }).data
    assert.strictEqual(Object.getPrototypeOf(out), Object.prototype)
    assert.ok(Object.prototype.hasOwnProperty.call(out, "__proto__"))
    assert.strictEqual(({} as Record<string, unknown>).polluted, undefined)
  })
})
