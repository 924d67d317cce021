import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import {
  DEFAULT_SUMMARY_MAX_TOKENS,
  layerSummarizerDeterministic,
  layerSummarizerModel,
  type SummarizerLiveOptions
} from "../../src/layers/model/SummarizerLive.js"
import { compact } from "../../src/programs/compaction/Compact.js"
import { CompactionRejected } from "../../src/schema/Errors.js"
import type { Message } from "../../src/schema/Messages.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import {
  CHECKPOINT_PREAMBLE,
  frameCheckpoint,
  SUMMARY_INSTRUCTION,
  Summarizer,
  type SummaryInput
} from "../../src/services/Summarizer.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { step, typesFrom, words } from "./helpers.js"

const msg = (role: "user" | "assistant", content: ReadonlyArray<Record<string, unknown>>): Message => ({
  id: "m",
  role,
  content: content as any,
  source: role === "user" ? { kind: "user" } : { kind: "model", provider: "p", model: "m" }
})

describe("§9.5 exact texts", () => {
  it("SUMMARY_INSTRUCTION", () => {
    assert.strictEqual(
      SUMMARY_INSTRUCTION,
      "Write a checkpoint summary of the conversation above so that the work can continue from it without the original messages. Use Markdown with exactly these sections, in this order: \"## Primary request and intent\", \"## Key technical concepts\", \"## Files and code\", \"## Errors and fixes\", \"## Pending tasks\", \"## Current work\", \"## Next step\", \"## Critical context\". Use short bullet points. Write \"(none)\" under a section with nothing to report. Keep exact file paths, commands, identifiers, names and numbers. If the conversation contains a <compacted-summary> block, merge its content into your summary instead of copying it. Do not mention that this is a summary or a compaction. Output only the summary."
    )
  })

  it("CHECKPOINT_PREAMBLE and the framing", () => {
    assert.strictEqual(
      CHECKPOINT_PREAMBLE,
      "This is an automatic checkpoint that replaces the earlier part of this conversation. Treat it as established background and continue the work from where it left off, without acknowledging or mentioning the checkpoint."
    )
    assert.deepStrictEqual(frameCheckpoint([{ type: "text", text: "A" }, { type: "text", text: "B" }]), [
      { type: "text", text: `${CHECKPOINT_PREAMBLE}\n\n<compacted-summary>` },
      { type: "text", text: "A" },
      { type: "text", text: "B" },
      { type: "text", text: "</compacted-summary>" }
    ])
  })
})

describe("§9.5 deterministic summariser", () => {
  it.effect("exact output: roles, text concatenation, whitespace, 80-code-point cut, (no text)", () =>
    Effect.gen(function*() {
      const summarizer = yield* Summarizer
      const long = "🙂".repeat(79) + "ab" // 81 code points
      const out = yield* summarizer.summarize({
        messages: [
          msg("user", [{ type: "text", text: "  hello\n\n  world " }, { type: "text", text: "again\t!" }]),
          msg("assistant", [{ type: "reasoning", text: "secret" }, { type: "text", text: "ok" }, {
            type: "tool-call",
            id: "c1",
            name: "read",
            arguments: "{}"
          }]),
          {
            id: "r",
            role: "user",
            content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "file " }, { type: "image", attachment: {} }, { type: "text", text: "body" }] }],
            source: { kind: "tool", callId: "c1" }
          },
          msg("assistant", [{ type: "tool-call", id: "c2", name: "x", arguments: "{}" }]),
          msg("user", [{ type: "text", text: long }]),
          msg("user", [{ type: "text", text: "x".repeat(80) }])
        ]
      })
      assert.deepStrictEqual(out, {
        blocks: [{
          type: "text",
          text: [
            "- user: hello world again !",
            "- assistant: ok",
            "- user: file body",
            "- assistant: (no text)",
            `- user: ${"🙂".repeat(79)}a…`,
            `- user: ${"x".repeat(80)}`
          ].join("\n")
        }],
        provider: "deterministic",
        model: "summary-v1"
      })
    }).pipe(Effect.provide(layerSummarizerDeterministic)))
})

// ---------------------------------------------------------------------------------------------
// A scripted LanguageModel (the only fake: the LLM)

interface Script {
  readonly parts?: ReadonlyArray<Response.StreamPartEncoded>
  readonly fail?: AiError.AiError
}

const scriptedModel = (script: Script, captured: Array<LanguageModel.ProviderOptions>) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    LanguageModel.make({
      generateText: () => Effect.dieMessage("the summariser streams"),
      streamText: (options) => {
        captured.push(options)
        return script.fail !== undefined
          ? Stream.fail(script.fail)
          : Stream.fromIterable(script.parts ?? [])
      }
    })
  )

const usage = { inputTokens: 1000, outputTokens: 50, totalTokens: 1050, cachedInputTokens: 400 }
const finish = (reason: Response.FinishReason): Response.StreamPartEncoded => ({ type: "finish", reason, usage })
const text = (id: string, ...deltas: ReadonlyArray<string>): ReadonlyArray<Response.StreamPartEncoded> => [
  { type: "text-start", id },
  ...deltas.map((delta): Response.StreamPartEncoded => ({ type: "text-delta", id, delta })),
  { type: "text-end", id }
]

const input: SummaryInput = {
  system: "You are a coding agent.",
  tools: [{ name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } }],
  messages: [
    msg("user", [{ type: "text", text: "fix the bug" }]),
    msg("assistant", [{ type: "text", text: "reading" }, { type: "tool-call", id: "c1", name: "read_file", arguments: "{\"path\":\"a.ts\"}" }]),
    {
      id: "r1",
      role: "user",
      content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "contents" }] }],
      source: { kind: "tool", callId: "c1" }
    }
  ],
  loggedRoute: { provider: "anthropic", model: "m-large" },
  agentRoute: { provider: "openai", model: "m-small" }
}

const summarize = (script: Script, options: SummarizerLiveOptions = {}, given: SummaryInput = input) => {
  const captured: Array<LanguageModel.ProviderOptions> = []
  return Effect.gen(function*() {
    const summarizer = yield* Summarizer
    const result = yield* Effect.either(summarizer.summarize(given))
    return { result, captured }
  }).pipe(Effect.provide(layerSummarizerModel(options).pipe(Layer.provide(scriptedModel(script, captured)))))
}

const expectP7 = (r: { readonly _tag: string; readonly left?: unknown }, pattern: RegExp): void => {
  assert.strictEqual(r._tag, "Left")
  const e = r.left as CompactionRejected
  assert.instanceOf(e, CompactionRejected)
  assert.strictEqual(e.rule, "P7")
  assert.strictEqual(e.reason, "summary")
  assert.match(e.detail, pattern)
}

describe("§9.5 LanguageModel-backed summariser", () => {
  it.effect("success: kept text blocks, usage, rawOutput, route from the logged header, default maxTokens", () =>
    Effect.gen(function*() {
      const { result, captured } = yield* summarize({
        parts: [
          { type: "reasoning-start", id: "r" },
          { type: "reasoning-delta", id: "r", delta: "thinking" },
          { type: "reasoning-end", id: "r" },
          ...text("t1", "## Primary ", "request"),
          ...text("t2", "\n- fix"),
          finish("stop")
        ]
      })
      assert.strictEqual(result._tag, "Right")
      const out = (result as any).right
      assert.deepStrictEqual(out, {
        blocks: [{ type: "text", text: "## Primary request" }, { type: "text", text: "\n- fix" }],
        usage: { inputTokens: 600, outputTokens: 50, cacheReadTokens: 400 },
        rawOutput: [
          { type: "reasoning", text: "thinking" },
          { type: "text", text: "## Primary request" },
          { type: "text", text: "\n- fix" }
        ],
        provider: "anthropic",
        model: "m-large",
        maxTokens: DEFAULT_SUMMARY_MAX_TOKENS,
        llmStreamCall: true
      })
      // the request: system, the shadowed messages, then the instruction; tools offered, never chosen
      assert.strictEqual(captured.length, 1)
      const request = captured[0]
      const messages = request.prompt.content
      assert.strictEqual(messages[0].role, "system")
      assert.strictEqual((messages[0] as any).content, "You are a coding agent.")
      assert.deepStrictEqual(messages.map((m) => m.role), ["system", "user", "assistant", "tool", "user"])
      const last = messages[messages.length - 1] as any
      assert.strictEqual(last.content[0].text, SUMMARY_INSTRUCTION)
      const tool = messages[3] as any
      assert.strictEqual(tool.content[0].id, "c1")
      assert.strictEqual(tool.content[0].name, "read_file")
      assert.deepStrictEqual(request.tools.map((t) => t.name), ["read_file"])
      assert.strictEqual(request.toolChoice, "none")
    }))

  it.effect("route: configured first, else logged header, else agent; maxTokens configurable", () =>
    Effect.gen(function*() {
      const ok = [...text("t", "summary"), finish("stop")]
      const configured = yield* summarize({ parts: ok }, { provider: "x", model: "y", maxTokens: 100 })
      assert.deepStrictEqual([(configured.result as any).right.provider, (configured.result as any).right.model, (configured.result as any).right.maxTokens], ["x", "y", 100])
      const agent = yield* summarize({ parts: ok }, {}, { ...input, loggedRoute: undefined })
      assert.deepStrictEqual([(agent.result as any).right.provider, (agent.result as any).right.model], ["openai", "m-small"])
    }))

  it.effect("P7 no route", () =>
    Effect.gen(function*() {
      const { result, captured } = yield* summarize({ parts: [] }, {}, { messages: input.messages })
      expectP7(result, /no summarisation route/)
      assert.strictEqual(captured.length, 0)
    }))

  it.effect("P7 finish error", () =>
    Effect.gen(function*() {
      expectP7((yield* summarize({ parts: [...text("t", "partial"), finish("error")] })).result, /error/)
    }))

  it.effect("P7 finish max-tokens (length)", () =>
    Effect.gen(function*() {
      expectP7((yield* summarize({ parts: [...text("t", "partial"), finish("length")] })).result, /max-tokens/)
    }))

  it.effect("P7 aborted (content-filter)", () =>
    Effect.gen(function*() {
      expectP7((yield* summarize({ parts: [...text("t", "partial"), finish("content-filter")] })).result, /aborted/)
    }))

  it.effect("P7 an image block in the output", () =>
    Effect.gen(function*() {
      const parts: ReadonlyArray<Response.StreamPartEncoded> = [
        ...text("t", "see picture"),
        { type: "file", mediaType: "image/png", data: "aGVsbG8=" },
        finish("stop")
      ]
      expectP7((yield* summarize({ parts })).result, /image/)
    }))

  it.effect("P7 blank output", () =>
    Effect.gen(function*() {
      expectP7((yield* summarize({ parts: [...text("t", "  \n\t "), finish("stop")] })).result, /no text/)
      expectP7((yield* summarize({ parts: [finish("stop")] })).result, /no text/)
    }))

  it.effect("P7 the model call fails or reports an error part", () =>
    Effect.gen(function*() {
      const failed = yield* summarize({
        fail: new AiError.UnknownError({ module: "test", method: "stream", description: "overloaded" })
      })
      expectP7(failed.result, /model call failed/)
      const errorPart = yield* summarize({ parts: [...text("t", "x"), { type: "error", error: "boom" }, finish("stop")] })
      expectP7(errorPart.result, /boom/)
    }))

  it.scoped("a compaction through the model summariser records the call envelope", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "llm" })
      yield* s.append("turn/start", { turn: 1 })
      yield* s.append("request/header", {
        header: { config: { provider: "anthropic", model: "m-large" }, system: "sys" },
        reason: "initial"
      })
      yield* step(s, 1, 1, { users: [words(300)], text: words(300), calls: [{ id: "c", output: words(300) }] })
      yield* step(s, 1, 2, { text: "done" })
      yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
      const n = (yield* s.events).length
      const captured: Array<LanguageModel.ProviderOptions> = []
      const model = layerSummarizerModel().pipe(
        Layer.provide(scriptedModel({ parts: [...text("t", "## Current work\n- done"), finish("stop")] }, captured))
      )
      const r = yield* compact({ mode: "manual", retainTokens: 1 }).pipe(
        Effect.provide(model),
        Effect.provideService(Session.Session, s)
      )
      const events = yield* s.events
      assert.deepStrictEqual(typesFrom(events, n), ["compaction/start", "compaction/summary", "user/message", "compaction/end"])
      const summary = events[r.summarySeq].data as any
      assert.strictEqual(summary.provider, "anthropic")
      assert.strictEqual(summary.model, "m-large")
      assert.strictEqual(summary.maxTokens, 8192)
      assert.strictEqual(summary.llmStreamCall, true)
      assert.deepStrictEqual(summary.rawOutput, [{ type: "text", text: "## Current work\n- done" }])
      assert.deepStrictEqual(summary.usage, { inputTokens: 600, outputTokens: 50, cacheReadTokens: 400 })
      assert.strictEqual((captured[0].prompt.content[0] as any).content, "sys")
    }).pipe(Effect.provide(Layer.merge(layerMemoryStore(), IdGenerator.layerCounter()))))
})
