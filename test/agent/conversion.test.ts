/**
 * Conversions between the log's messages and `@effect/ai` (SPEC §1.5, §1.3.5): request ↔ Prompt,
 * stream parts → the normative chunk vocabulary, chunks → content, usage, finish reasons and
 * provider errors; and the scripted LanguageModel's contract (capture, exhaustion, leftovers).
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Response from "@effect/ai/Response"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { layerScriptedLanguageModel, ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import {
  aiErrorFailure,
  assembleChunks,
  ChunkTranslator,
  encodePrompt,
  finishReasonOf,
  ModelRequestConfig,
  promptToRequest,
  requestToPrompt,
  usageOf
} from "../../src/services/PromptConversion.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import type { Message } from "../../src/schema/Messages.js"
import { requestMessages } from "../../src/schema/RequestHeader.js"
import { toolkit } from "./helpers.js"

const header = {
  config: { provider: "p", model: "m" },
  system: "be brief"
}

const messages: ReadonlyArray<Message> = [
  { id: "u1", role: "user", content: [{ type: "text", text: "hi" }, { type: "image", attachment: { id: "sha256:ab", mediaType: "image/png" } }], source: { kind: "user" } },
  {
    id: "a1",
    role: "assistant",
    content: [
      { type: "reasoning", text: "hmm" },
      { type: "text", text: "calling" },
      { type: "tool-call", id: "c1", name: "read_file", arguments: "{\"path\":\"a\"}" },
      { type: "tool-call", id: "c2", name: "list_files", arguments: "{not json" }
    ],
    source: { kind: "model", provider: "p", model: "m" }
  },
  {
    id: "r1",
    role: "user",
    content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "A" }] }],
    source: { kind: "tool", callId: "c1" }
  },
  {
    id: "r2",
    role: "user",
    content: [{ type: "tool-result", toolCallId: "c2", content: [{ type: "text", text: "bad" }], isError: true }],
    source: { kind: "tool", callId: "c2" }
  },
  { id: "x1", role: "user", content: [{ type: "custom-block", payload: [1, 2] }], source: { kind: "plugin", plugin: "clock" } }
]

describe("PromptConversion", () => {
  it("§1.5 requestToPrompt: system first, parts per block, tool results as tool messages named after their call", () => {
    const prompt = requestToPrompt({ header, messages })
    assert.deepStrictEqual(prompt.content.map((m) => m.role), ["system", "user", "assistant", "tool", "tool", "user"])
    assert.strictEqual((prompt.content[0] as Prompt.SystemMessage).content, "be brief")
    const assistant = prompt.content[2] as Prompt.AssistantMessage
    assert.deepStrictEqual(assistant.content.map((p) => p.type), ["reasoning", "text", "tool-call", "tool-call"])
    const call = assistant.content[2] as Prompt.ToolCallPart
    assert.deepStrictEqual(call.params, { path: "a" })
    // arguments that are not JSON travel as the raw string
    assert.strictEqual((assistant.content[3] as Prompt.ToolCallPart).params, "{not json")
    const result = (prompt.content[4] as Prompt.ToolMessage).content[0]
    assert.strictEqual(result.name, "list_files")
    assert.strictEqual(result.isFailure, true)
    assert.strictEqual(result.result, "bad")
    // a pure function of the request value
    assert.deepStrictEqual(encodePrompt(requestToPrompt({ header, messages })), encodePrompt(prompt))
  })

  it("§1.5 promptToRequest inverts requestToPrompt", () => {
    const back = promptToRequest(requestToPrompt({ header, messages }))
    assert.strictEqual(back.system, "be brief")
    assert.deepStrictEqual(back.messages, messages)
  })

  it("§1.5/§5.4 a rebuilt request of a header with a messagePrefix converts as system, prefix, history", () =>
    Effect.runSync(Effect.gen(function*() {
      const prefix = [
        { id: "p0", role: "system", content: [{ type: "text", text: "You are in /repo." }], source: { kind: "instructions" } },
        { id: "p1", role: "user", content: [{ type: "text", text: "AGENTS.md: be brief" }], source: { kind: "catalog" } }
      ]
      const s = yield* SessionLive.create({ id: "prefix" })
      yield* s.appendUnknown("user/message", messages[0], { surfaceOp: "append" })
      const h = yield* s.appendUnknown("request/header", { header: { ...header, messagePrefix: prefix }, reason: "initial" })
      const request = yield* s.requestAt(h.seq)
      const prompt = requestToPrompt(request)
      assert.deepStrictEqual(prompt.content.map((m) => m.role), ["system", "system", "user", "user"])
      assert.strictEqual((prompt.content[1] as Prompt.SystemMessage).content, "You are in /repo.")
      assert.deepStrictEqual(promptToRequest(prompt).messages.map((m) => m.id), ["p0", "p1", "u1"])
      // the same messages the agent loop sends: requestMessages(header, history)
      assert.deepStrictEqual(request.messages, requestMessages(yield* s.requestHeader, yield* s.messages))
    }).pipe(Effect.scoped, Effect.provide(layerMemoryStore()))))

  it("§1.5 a prompt without a header has no system message; an empty header system is dropped", () => {
    assert.strictEqual(requestToPrompt({ header: undefined, messages: messages.slice(0, 1) }).content[0].role, "user")
    assert.strictEqual(
      requestToPrompt({ header: { ...header, system: "" }, messages: messages.slice(0, 1) }).content[0].role,
      "user"
    )
  })

  it("§1.3.5 stream parts translate to block-start, deltas, block-end, usage and finish", () => {
    const t = new ChunkTranslator()
    const parts = [
      Response.makePart("reasoning-start", { id: "r" }),
      Response.makePart("reasoning-delta", { id: "r", delta: "th" }),
      Response.makePart("text-start", { id: "t" }),
      Response.makePart("text-delta", { id: "t", delta: "He" }),
      Response.makePart("reasoning-end", { id: "r" }),
      Response.makePart("text-delta", { id: "t", delta: "llo" }),
      Response.makePart("text-end", { id: "t" }),
      Response.makePart("tool-params-start", { id: "c", name: "f", providerExecuted: false }),
      Response.makePart("tool-params-delta", { id: "c", delta: "{\"a\":" }),
      Response.makePart("tool-params-delta", { id: "c", delta: "1}" }),
      Response.makePart("tool-params-end", { id: "c" }),
      Response.makePart("tool-call", { id: "c", name: "f", params: { a: 1 }, providerExecuted: false }),
      Response.makePart("tool-call", { id: "w", name: "g", params: { b: [true] }, providerExecuted: false }),
      Response.makePart("finish", {
        reason: "tool-calls",
        usage: new Response.Usage({ inputTokens: 10, outputTokens: 4, totalTokens: 14, cachedInputTokens: 3 })
      })
    ]
    const chunks = parts.flatMap((p) => t.translate(p as Response.StreamPart<any>))
    assert.deepStrictEqual(chunks, [
      { type: "block-start", index: 0, blockType: "reasoning" },
      { type: "reasoning-delta", index: 0, text: "th" },
      { type: "block-start", index: 1, blockType: "text" },
      { type: "text-delta", index: 1, text: "He" },
      { type: "block-end", index: 0, block: { type: "reasoning", text: "th" } },
      { type: "text-delta", index: 1, text: "llo" },
      { type: "block-end", index: 1, block: { type: "text", text: "Hello" } },
      { type: "block-start", index: 2, blockType: "tool-call" },
      { type: "tool-call-delta", index: 2, id: "c", name: "f", argumentsDelta: "{\"a\":" },
      { type: "tool-call-delta", index: 2, id: "c", argumentsDelta: "1}" },
      { type: "block-end", index: 2, block: { type: "tool-call", id: "c", name: "f", arguments: "{\"a\":1}" } },
      { type: "block-start", index: 3, blockType: "tool-call" },
      { type: "tool-call-delta", index: 3, id: "w", name: "g", argumentsDelta: "{\"b\":[true]}" },
      { type: "block-end", index: 3, block: { type: "tool-call", id: "w", name: "g", arguments: "{\"b\":[true]}" } },
      { type: "usage", usage: { inputTokens: 7, outputTokens: 4, cacheReadTokens: 3 } },
      { type: "finish", reason: { kind: "tool-calls" } }
    ])
    const assembled = assembleChunks(chunks)
    assert.deepStrictEqual(assembled.content.map((b) => b.type), ["reasoning", "text", "tool-call", "tool-call"])
    assert.deepStrictEqual(assembled.usage, { inputTokens: 7, outputTokens: 4, cacheReadTokens: 3 })
    assert.deepStrictEqual(assembled.finish, { kind: "tool-calls" })
  })

  it("§1.3.5 blocks the provider never ended: text and reasoning are ended at finish in block order, a partial tool call is not", () => {
    const t = new ChunkTranslator()
    const parts = [
      Response.makePart("text-start", { id: "t" }),
      Response.makePart("reasoning-start", { id: "r" }),
      Response.makePart("text-delta", { id: "t", delta: "a1 " }),
      Response.makePart("reasoning-delta", { id: "r", delta: "b1" }),
      Response.makePart("text-delta", { id: "t", delta: "a2" }),
      Response.makePart("tool-params-start", { id: "c", name: "f", providerExecuted: false }),
      Response.makePart("tool-params-delta", { id: "c", delta: "{\"a\":" }),
      Response.makePart("finish", { reason: "stop", usage: new Response.Usage({ inputTokens: 1, outputTokens: 2, totalTokens: 3 }) })
    ]
    const chunks = parts.flatMap((p) => t.translate(p as Response.StreamPart<any>))
    assert.deepStrictEqual(chunks.slice(-4), [
      { type: "block-end", index: 0, block: { type: "text", text: "a1 a2" } },
      { type: "block-end", index: 1, block: { type: "reasoning", text: "b1" } },
      { type: "usage", usage: { inputTokens: 1, outputTokens: 2 } },
      { type: "finish", reason: { kind: "stop" } }
    ])
    const assembled = assembleChunks(chunks)
    assert.deepStrictEqual(assembled.content, [{ type: "text", text: "a1 a2" }, { type: "reasoning", text: "b1" }])
    // a finish ends nothing twice: a block ended by the provider keeps its one block-end
    const u = new ChunkTranslator()
    const ended = [
      Response.makePart("text-start", { id: "t" }),
      Response.makePart("text-delta", { id: "t", delta: "x" }),
      Response.makePart("text-end", { id: "t" }),
      Response.makePart("finish", { reason: "stop", usage: new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }) })
    ].flatMap((p) => u.translate(p as Response.StreamPart<any>))
    assert.deepStrictEqual(ended.filter((c) => c.type === "block-end").length, 1)
  })

  it("§1.3.6 the delivered prefix keeps unfinished text and reasoning and drops tool calls", () => {
    const prefix = assembleChunks([
      { type: "block-start", index: 0, blockType: "text" },
      { type: "text-delta", index: 0, text: "par" },
      { type: "block-start", index: 1, blockType: "tool-call" },
      { type: "tool-call-delta", index: 1, id: "c", argumentsDelta: "{}" },
      { type: "block-end", index: 1, block: { type: "tool-call", id: "c", name: "f", arguments: "{}" } },
      { type: "block-start", index: 2, blockType: "reasoning" }
    ]).deliveredPrefix
    assert.deepStrictEqual(prefix, [{ type: "text", text: "par" }])
    assert.deepStrictEqual(assembleChunks([]).deliveredPrefix, [])
  })

  it("§1.3.5 finish reasons, usage and provider errors", () => {
    assert.deepStrictEqual(finishReasonOf("length"), { kind: "max-tokens" })
    assert.deepStrictEqual(finishReasonOf("content-filter"), { kind: "stop", providerReason: "content-filter" })
    assert.strictEqual(usageOf(new Response.Usage({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined })), undefined)
    const failure = aiErrorFailure(new AiError.UnknownError({ module: "M", method: "f", description: "boom" }))
    assert.deepStrictEqual(failure, { message: "M.f: boom", code: "UnknownError" })
  })
})

describe("ScriptedLanguageModel", () => {
  it.effect("captures every request (prompt, tools, config) and streams its script", () =>
    Effect.gen(function*() {
      const withHandler = yield* toolkit
      const prompt = requestToPrompt({ header, messages: messages.slice(0, 1) })
      const parts = yield* LanguageModel.streamText({ prompt, toolkit: withHandler, disableToolCallResolution: true }).pipe(
        Stream.runCollect,
        Effect.provideService(ModelRequestConfig, header.config)
      )
      assert.deepStrictEqual([...parts].map((p) => p.type), ["text-start", "text-delta", "text-delta", "text-end", "finish"])
      const text = yield* LanguageModel.generateText({ prompt: "plain" })
      assert.strictEqual(text.text, "two")
      const requests = yield* (yield* ScriptedModel).requests
      assert.strictEqual(requests.length, 2)
      assert.deepStrictEqual(encodePrompt(requests[0].prompt), encodePrompt(prompt))
      assert.deepStrictEqual(requests[0].tools.map((t) => t.name), ["list_files", "read_file", "slow"])
      assert.deepStrictEqual(requests[0].config, header.config)
      assert.strictEqual(requests[1].config, undefined)
      assert.deepStrictEqual(requests[1].tools, [])
    }).pipe(
      Effect.provide(layerScriptedLanguageModel({
        scripts: [[{ type: "text", text: "one two" }, { type: "finish", reason: "stop" }], [{ type: "text", text: "two" }]],
        captureRequests: true
      })),
      Effect.provide(toolkit.toLayer({ list_files: () => Effect.succeed([]), read_file: () => Effect.succeed(""), slow: () => Effect.succeed("") }))
    ))

  it.effect("a model made without captureRequests keeps no request: it counts the calls it served, and requests dies", () =>
    Effect.gen(function*() {
      for (const prompt of ["a", "b", "c"]) yield* LanguageModel.generateText({ prompt })
      const handle = yield* ScriptedModel
      assert.strictEqual(yield* handle.served, 3)
      const requests = yield* Effect.exit(handle.requests)
      assert.isTrue(Exit.isFailure(requests) && Cause.isDie(requests.cause))
      assert.include(Cause.pretty((requests as Exit.Failure<unknown, unknown>).cause), "requests are not kept")
    }).pipe(Effect.provide(layerScriptedLanguageModel({
      scripts: [[{ type: "text", text: "1" }], [{ type: "text", text: "2" }], [{ type: "text", text: "3" }]]
    }))))

  it.effect("an exhausted script dies loudly; a scripted provider error fails the stream", () =>
    Effect.gen(function*() {
      const failed = yield* Effect.exit(LanguageModel.generateText({ prompt: "x" }))
      assert.isTrue(Exit.isFailure(failed) && Cause.failureOption(failed.cause)._tag === "Some")
      const exhausted = yield* Effect.exit(LanguageModel.generateText({ prompt: "y" }))
      assert.isTrue(Exit.isFailure(exhausted) && Cause.isDie(exhausted.cause))
      assert.include(Cause.pretty((exhausted as Exit.Failure<unknown, unknown>).cause), "script exhausted")
    }).pipe(Effect.provide(layerScriptedLanguageModel({
      scripts: [[{ type: "fail", error: new AiError.UnknownError({ module: "M", method: "f" }) }]]
    }))))

  it.effect("releasing the layer with unconsumed scripts dies", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.scoped(Layer.build(layerScriptedLanguageModel({ scripts: [[]] }))))
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      assert.include(Cause.pretty((exit as Exit.Failure<unknown, unknown>).cause), "1 script(s) left unconsumed")
      const ok = yield* Effect.exit(Effect.scoped(Layer.build(layerScriptedLanguageModel({ scripts: [[]], requireConsumed: false }))))
      assert.isTrue(Exit.isSuccess(ok))
    }))
})
