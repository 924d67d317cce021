/**
 * Fixtures of the chat persistence tests: a toolkit with a working and a failing tool, scripted
 * conversations (text, reasoning, tools, a failing tool, generateObject, a failed call, an
 * interrupted stream), a runner that drives one conversation through any `Chat.Persistence` and
 * returns the encoded history after every call, and the stores the layer runs on.
 */
import * as AiError from "@effect/ai/AiError"
import * as Chat from "@effect/ai/Chat"
import * as AiIdGenerator from "@effect/ai/IdGenerator"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { type CallScript, layerScriptedLanguageModel, type ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"

export const Weather = Tool.make("weather", {
  description: "The weather in a city",
  parameters: { city: Schema.String },
  success: Schema.Struct({ city: Schema.String, celsius: Schema.Number })
})

export class Missing extends Schema.TaggedError<Missing>()("Missing", { key: Schema.String }) {}

export const Lookup = Tool.make("lookup", {
  description: "Look a key up",
  parameters: { key: Schema.String },
  success: Schema.String,
  failure: Missing,
  failureMode: "return"
})

export const toolkit = Toolkit.make(Weather, Lookup)

export const handlers = toolkit.toLayer({
  weather: ({ city }) => Effect.succeed({ city, celsius: 4 }),
  lookup: ({ key }) => key === "known" ? Effect.succeed("found it") : Effect.fail(new Missing({ key }))
})

/** A deterministic `@effect/ai` id generator (the message ids `@effect/ai`'s persisted chat stamps). */
export const aiIds = Layer.sync(AiIdGenerator.IdGenerator, () => {
  let n = 0
  return { generateId: () => Effect.sync(() => `msg-${++n}`) }
})

export const Person = Schema.Struct({ name: Schema.String, age: Schema.Number })

/** One call of a conversation and the script the model answers it with. */
export type ChatCall =
  | { readonly kind: "text"; readonly prompt: Prompt.RawInput; readonly tools?: boolean; readonly script: CallScript }
  | { readonly kind: "stream"; readonly prompt: Prompt.RawInput; readonly tools?: boolean; readonly script: CallScript }
  | { readonly kind: "object"; readonly prompt: Prompt.RawInput; readonly script: CallScript }
  | { readonly kind: "interrupt"; readonly prompt: Prompt.RawInput; readonly script: (reached: Deferred.Deferred<void>) => CallScript }
  /** No call: the history is set outside a call (`Ref.update`), as a user of `@effect/ai`'s chat may. */
  | { readonly kind: "edit"; readonly edit: (history: Prompt.Prompt) => Prompt.Prompt }

const finish = (reason: "stop" | "tool-calls" = "stop"): CallScript[number] => ({
  type: "finish",
  reason,
  usage: { inputTokens: 10, outputTokens: 5 }
})

/** The conversation: every kind of call and part a chat history keeps. */
export const conversation: ReadonlyArray<ChatCall> = [
  {
    kind: "text",
    prompt: [
      { role: "system", content: "You are brief." },
      {
        role: "user",
        content: [
          { type: "text", text: "Hello", options: { openai: { cacheControl: "ephemeral" } } },
          { type: "file", mediaType: "image/png", fileName: "dot.png", data: new Uint8Array([137, 80, 78, 71]) }
        ]
      }
    ],
    script: [{ type: "text", text: "Hi there." }, finish()]
  },
  { kind: "stream", prompt: "Think first: what is 2 + 2?", script: [{ type: "reasoning", text: "Two and two." }, { type: "text", text: "It is 4." }, finish()] },
  // an extension of the history outside a call: sent and recorded with the next call
  { kind: "edit", edit: (h) => Prompt.merge(h, [{ role: "system", content: "Answer in English." }]) },
  {
    kind: "text",
    prompt: "Weather in Oslo and the key?",
    tools: true,
    script: [
      { type: "tool-call", id: "call-1", name: "weather", params: { city: "Oslo" } },
      { type: "tool-call", id: "call-2", name: "lookup", params: { key: "nope" } },
      finish("tool-calls")
    ]
  },
  {
    kind: "stream",
    prompt: "And the known key, streamed?",
    tools: true,
    script: [{ type: "text", text: "Looking." }, { type: "tool-call", id: "call-3", name: "lookup", params: { key: "known" } }, finish("tool-calls")]
  },
  { kind: "object", prompt: "Who wrote the first program?", script: [{ type: "text", text: "{\"name\":\"Ada\",\"age\":36}" }, finish()] },
  {
    kind: "text",
    prompt: "This call fails.",
    script: [{ type: "fail", error: new AiError.UnknownError({ module: "Test", method: "generateText", description: "boom" }) }]
  },
  {
    kind: "interrupt",
    prompt: "Tell me a long story.",
    // a finished block, then one cut off mid-stream (its deltas are chunks, not history)
    script: (reached) => [
      { type: "text", text: "Once upon a time" },
      { type: "raw", part: { type: "text-start", id: "cut" } },
      { type: "raw", part: { type: "text-delta", id: "cut", delta: "there was" } },
      { type: "hang", reached }
    ]
  },
  // a stream that fails after a finished block: @effect/ai keeps the prompt and that block
  {
    kind: "stream",
    prompt: "Stream, then fail.",
    script: [
      { type: "text", text: "A finished block." },
      { type: "fail", error: new AiError.UnknownError({ module: "Test", method: "streamText", description: "cut" }) }
    ]
  },
  // an edit that drops the second exchange: shadowed by a recorded replace, the rest written again
  { kind: "edit", edit: (h) => Prompt.fromMessages([...h.content.slice(0, 3), ...h.content.slice(5)]) },
  { kind: "text", prompt: "Go on.", script: [{ type: "text", text: "The end." }, finish()] }
]

/** The calls that reach the model. */
export const modelCalls = (calls: ReadonlyArray<ChatCall>) => calls.filter((c) => c.kind !== "edit")

/** The scripts of a conversation, in call order (the interrupt's script waits on `reached`). */
export const scriptsOf = (calls: ReadonlyArray<ChatCall>, reached: Deferred.Deferred<void>): ReadonlyArray<CallScript> =>
  calls.flatMap((c) => c.kind === "interrupt" ? [c.script(reached)] : c.kind === "edit" ? [] : [c.script])

/** The encoded form of a history (for deep equality). */
export const encodeHistory = (history: Prompt.Prompt): unknown => Schema.encodeSync(Prompt.Prompt)(history)

/** Drive one call through a persisted chat; failures and interruptions are outcomes, not test failures. */
export const runCall = (chat: Chat.Persisted, call: ChatCall, reached: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    switch (call.kind) {
      case "text":
        return call.tools === true
          ? yield* Effect.exit(chat.generateText({ prompt: call.prompt, toolkit }))
          : yield* Effect.exit(chat.generateText({ prompt: call.prompt }))
      case "stream":
        return call.tools === true
          ? yield* Effect.exit(Stream.runDrain(chat.streamText({ prompt: call.prompt, toolkit })))
          : yield* Effect.exit(Stream.runDrain(chat.streamText({ prompt: call.prompt })))
      case "object":
        return yield* Effect.exit(chat.generateObject({ prompt: call.prompt, schema: Person, objectName: "person" }))
      case "edit":
        return yield* Effect.exit(Ref.update(chat.history, call.edit))
      case "interrupt": {
        const fiber = yield* Effect.fork(Stream.runDrain(chat.streamText({ prompt: call.prompt })))
        yield* Deferred.await(reached)
        return yield* Fiber.interrupt(fiber)
      }
    }
  })

/** Run a conversation on chat `chatId` of the `Chat.Persistence` in context: the encoded history after every call. */
export const runConversation = (chatId: string, calls: ReadonlyArray<ChatCall>, reached: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const persistence = yield* Chat.Persistence
    const chat = yield* persistence.getOrCreate(chatId)
    const histories: Array<unknown> = [encodeHistory(yield* chat.history)]
    const outcomes: Array<string> = []
    for (const call of calls) {
      const exit = yield* runCall(chat, call, reached)
      outcomes.push(exit._tag)
      histories.push(encodeHistory(yield* chat.history))
    }
    return { histories, outcomes }
  })

/** The model, its handle, tool handlers and `@effect/ai` ids for one run of `calls`. */
export const modelLayer = (
  calls: ReadonlyArray<ChatCall>,
  reached: Deferred.Deferred<void>
): Layer.Layer<LanguageModel.LanguageModel | ScriptedModel | Tool.HandlersFor<typeof toolkit.tools> | AiIdGenerator.IdGenerator> =>
  Layer.mergeAll(
    layerScriptedLanguageModel({ scripts: scriptsOf(calls, reached), captureRequests: true }),
    handlers,
    aiIds
  )
