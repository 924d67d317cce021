import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import {
  DEFAULT_PRUNE_CONFIG,
  PRUNE_MARKER,
  pruneContent,
  pruneToolResult,
  pruneToolResults,
  validatePruneConfig
} from "../../src/programs/compaction/PruneToolResults.js"
import { estimateTokens } from "../../src/programs/compaction/Tokens.js"
import { CompactionRejected } from "../../src/schema/Errors.js"
import type { ContentBlock } from "../../src/schema/Messages.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { baseLayer, invariantLayer, toolResultData, typesFrom, userData } from "./helpers.js"

const cfg = { thresholdChars: 100, headChars: 20, tailChars: 10 }
const t = (text: string): ContentBlock => ({ type: "text", text })
const image: ContentBlock = { type: "image", attachment: { id: "sha256:abc", size: 10 } }
const digits = (n: number): string => Array.from({ length: n }, (_, i) => String(i % 10)).join("")

describe("§9.6 PRUNE_MARKER and config", () => {
  it("PRUNE_MARKER is exact and has 51 code points", () => {
    assert.strictEqual(PRUNE_MARKER, "\n\n[... middle of this tool result was pruned ...]\n\n")
    assert.strictEqual(Array.from(PRUNE_MARKER).length, 51)
  })

  it("defaults 8192 / 4096 / 1024", () => {
    assert.deepStrictEqual(validatePruneConfig({}), DEFAULT_PRUNE_CONFIG)
    assert.deepStrictEqual(DEFAULT_PRUNE_CONFIG, { thresholdChars: 8192, headChars: 4096, tailChars: 1024 })
  })

  const bad: ReadonlyArray<readonly [string, unknown]> = [
    ["an unknown key", { thresholdChars: 100, colour: "red" }],
    ["thresholdChars 0", { thresholdChars: 0, headChars: 0, tailChars: 0 }],
    ["a fractional headChars", { headChars: 1.5 }],
    ["a negative tailChars", { tailChars: -1 }],
    ["a string value", { headChars: "10" }],
    ["head + marker + tail above the threshold", { thresholdChars: 100, headChars: 40, tailChars: 10 }],
    ["not an object", 42]
  ]
  for (const [name, input] of bad) {
    it(`P13 rejects ${name}`, () => {
      const r = validatePruneConfig(input)
      assert.instanceOf(r, CompactionRejected)
      assert.strictEqual((r as CompactionRejected).rule, "P13")
      assert.strictEqual((r as CompactionRejected).reason, "config")
    })
  }

  it("head + marker + tail exactly at the threshold is valid", () => {
    assert.deepStrictEqual(validatePruneConfig({ thresholdChars: 81, headChars: 20, tailChars: 10 }), {
      thresholdChars: 81,
      headChars: 20,
      tailChars: 10
    })
  })

  it.effect("P13 pruneToolResults fails to start with an invalid config", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "p13-prune" })
      const e = yield* Effect.flip(
        pruneToolResults({ config: { thresholdChars: 10 } }).pipe(Effect.provideService(Session.Session, s))
      )
      assert.strictEqual(e._tag, "CompactionRejected")
      assert.strictEqual((e as CompactionRejected).rule, "P13")
      assert.strictEqual((yield* s.events).length, 0)
    }).pipe(Effect.scoped, Effect.provide(baseLayer)))
})

describe("§9.6 the head/marker/tail transform", () => {
  it("at or below thresholdChars nothing is pruned", () => {
    assert.isUndefined(pruneContent([t(digits(100))], cfg))
    assert.isUndefined(pruneContent([t(digits(60)), image, t(digits(40))], cfg))
  })

  it("one text block: head, marker, tail", () => {
    const text = digits(150)
    assert.deepStrictEqual(pruneContent([t(text)], cfg), [t(text.slice(0, 20) + PRUNE_MARKER + text.slice(140))])
  })

  it("code points: surrogate pairs count once and are never split", () => {
    const emoji = Array.from({ length: 120 }, (_, i) => (i % 2 === 0 ? "🙂" : "λ")).join("")
    const out = pruneContent([t(emoji)], cfg) as ReadonlyArray<any>
    const points = Array.from(emoji)
    assert.strictEqual(out[0].text, points.slice(0, 20).join("") + PRUNE_MARKER + points.slice(110).join(""))
    assert.notMatch(out[0].text, /[\ud800-\udbff](?![\udc00-\udfff])/)
  })

  it("block by block: kept non-text blocks, the marker where the cut starts, empty blocks dropped", () => {
    const blocks = [t("a".repeat(15)), image, t("b".repeat(30)), t("c".repeat(90)), t(""), t("d".repeat(15))]
    // N = 150: cut [20, 140)
    assert.deepStrictEqual(pruneContent(blocks, cfg), [
      t("a".repeat(15)),
      image,
      t("bbbbb" + PRUNE_MARKER),
      t("d".repeat(10))
    ])
  })

  it("a cut starting exactly at a block start puts the marker at that block's start", () => {
    assert.deepStrictEqual(pruneContent([t("a".repeat(20)), t("b".repeat(130))], cfg), [
      t("a".repeat(20)),
      t(PRUNE_MARKER + "b".repeat(10))
    ])
  })

  it("headChars 0 and tailChars 0", () => {
    const text = digits(150)
    assert.deepStrictEqual(pruneContent([t(text)], { thresholdChars: 100, headChars: 0, tailChars: 0 }), [
      t(PRUNE_MARKER)
    ])
  })

  it("text blocks keep their other keys; non-text blocks stay in place", () => {
    const blocks = [{ type: "text", text: digits(150), cache: true }, image]
    assert.deepStrictEqual(pruneContent(blocks, cfg), [
      { type: "text", text: digits(150).slice(0, 20) + PRUNE_MARKER + digits(150).slice(140), cache: true },
      image
    ])
  })

  it("pruneToolResult changes only message.content[0].content", () => {
    const data = toolResultData(3, 2, "c9", [t(digits(150))], {
      error: { name: "Boom", code: "E1" },
      meta: { lines: [1, 2] }
    })
    const out = pruneToolResult(data as any, cfg) as any
    assert.deepStrictEqual({ ...out, message: { ...out.message, content: [] } }, {
      ...data,
      message: { ...data.message, content: [] }
    })
    assert.deepStrictEqual(out.message.content[0].content, [t(digits(150).slice(0, 20) + PRUNE_MARKER + digits(150).slice(140))])
    assert.strictEqual(out.message.content[0].toolCallId, "c9")
  })
})

describe("§9.6 pruneToolResults over a session", () => {
  const bigTurn = (s: Session.SessionShape, outputs: ReadonlyArray<ReadonlyArray<ContentBlock>>) =>
    Effect.gen(function*() {
      yield* s.append("turn/start", { turn: 1 })
      yield* s.append("step/start", { turn: 1, step: 1 })
      yield* s.append("user/message", userData("u", "go"), { surfaceOp: "append" })
      yield* s.append("assistant/message", {
        turn: 1,
        step: 1,
        message: {
          id: "a",
          role: "assistant",
          content: outputs.map((_, i) => ({ type: "tool-call", id: `c${i}`, name: "read", arguments: "{}" })),
          source: { kind: "model", provider: "p", model: "m" }
        }
      }, { surfaceOp: "append", sourceEventSeqs: [] })
      for (const [i, inner] of outputs.entries()) {
        const call = yield* s.append("tool/call", { turn: 1, step: 1, callId: `c${i}`, name: "read", arguments: "{}" })
        yield* s.append("tool/result", toolResultData(1, 1, `c${i}`, inner, { meta: { i }, error: { name: "n", code: "X" } }), {
          surfaceOp: "append",
          sourceEventSeqs: [call.seq]
        })
      }
      yield* s.append("step/end", { turn: 1, step: 1 })
    })

  it.scoped("compaction/prune immediately followed by the content-only replacement; converges; replays", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "prune-1" })
      yield* bigTurn(s, [[t(digits(10_000))], [t("small")], [t(digits(9000)), image]])
      const n = (yield* s.events).length
      const nodesBefore = yield* s.surface.nodes
      const events0 = yield* s.events
      const report = yield* pruneToolResults().pipe(Effect.provideService(Session.Session, s))
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/prune", "tool/result", "compaction/prune", "tool/result"])
      assert.strictEqual(report.pruned.length, 2)
      for (const [k, p] of report.pruned.entries()) {
        const original = events0[p.seq]
        const prune = events[n + 2 * k]
        const replacement = events[n + 2 * k + 1]
        assert.deepStrictEqual(prune.data, {
          shadowedRange: { start: p.seq, end: p.seq },
          shadowedSeqs: [p.seq],
          shadowedTokenCount: estimateTokens((original.data as any).message)
        })
        assert.deepStrictEqual(replacement.surfaceOp, { op: "replace", start: p.seq, end: p.seq })
        assert.deepStrictEqual(replacement.sourceEventSeqs, [p.seq])
        const o = original.data as any
        const r = replacement.data as any
        for (const key of ["turn", "step", "error", "meta"]) assert.deepStrictEqual(r[key], o[key])
        assert.strictEqual(r.message.id, o.message.id)
        assert.deepStrictEqual(r.message.source, o.message.source)
        assert.strictEqual(r.message.content[0].toolCallId, o.message.content[0].toolCallId)
        assert.deepStrictEqual(p, { seq: p.seq, pruneSeq: prune.seq, replacementSeq: replacement.seq, shadowedTokenCount: (prune.data as any).shadowedTokenCount })
      }
      const third = events[n + 3].data as any
      assert.deepStrictEqual(third.message.content[0].content, [
        t(digits(9000).slice(0, 4096) + PRUNE_MARKER + digits(9000).slice(9000 - 1024)),
        image
      ])
      // the surface has the replacements in the originals' places
      const nodes = yield* s.surface.nodes
      assert.deepStrictEqual(nodes, nodesBefore.map((seq) => seq === report.pruned[0].seq ? n + 1 : seq === report.pruned[1].seq ? n + 3 : seq))
      // one-pass convergence
      const again = yield* pruneToolResults().pipe(Effect.provideService(Session.Session, s))
      assert.strictEqual(again.pruned.length, 0)
      assert.strictEqual((yield* s.events).length, events.length)
      // replay equivalence
      const replay = yield* SessionLive.fromSeed({ header: { version: 1, id: "prune-1-replay", createdAt: 0 }, seed: events })
      assert.deepStrictEqual(yield* replay.messages, yield* s.messages)
    }).pipe(Effect.provide(invariantLayer)))
})
