/**
 * A deterministic, keyless `@effect/ai` `LanguageModel`: each model call consumes the next script
 * (text, reasoning, tool calls, usage and finish reasons, provider errors, or a hang until
 * interrupted), streamed one part per stream chunk. Every request received (prompt, tools, tool
 * choice and the call scalars of `ModelRequestConfig`) is captured; an exhausted script dies
 * loudly, and so does closing the layer with scripts left unconsumed.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { encodeJson, type Json } from "../../schema/Json.js"
import type { RequestConfig, ToolSpec } from "../../schema/RequestHeader.js"
import { ModelRequestConfig, toolSpecs } from "../../services/PromptConversion.js"

/**
 * One step of a call script.
 *
 * @since 0.1.0
 * @category models
 */
export type ScriptPart =
  /** A text block, streamed as start, one delta per word (or the given deltas), end. */
  | { readonly type: "text"; readonly text: string; readonly deltas?: ReadonlyArray<string> }
  /** A reasoning block, streamed like text. */
  | { readonly type: "reasoning"; readonly text: string; readonly deltas?: ReadonlyArray<string> }
  /** A tool call: params start, the JSON arguments as one delta (unless `whole`), params end, the call. */
  | {
    readonly type: "tool-call"
    readonly id: string
    readonly name: string
    readonly params: unknown
    readonly whole?: boolean
  }
  /** The finish part (default usage: all counts absent). */
  | {
    readonly type: "finish"
    readonly reason: Response.FinishReason
    readonly usage?: {
      readonly inputTokens?: number
      readonly outputTokens?: number
      readonly reasoningTokens?: number
      readonly cachedInputTokens?: number
    }
  }
  /** Any raw encoded stream part. */
  | { readonly type: "raw"; readonly part: Response.StreamPartEncoded }
  /** Fail the stream here with a provider error. */
  | { readonly type: "fail"; readonly error: AiError.AiError }
  /** Complete `reached` (if given), then never produce another part: the call hangs until interrupted. */
  | { readonly type: "hang"; readonly reached?: Deferred.Deferred<void> }

/**
 * The parts of one model call, in order.
 *
 * @since 0.1.0
 * @category models
 */
export type CallScript = ReadonlyArray<ScriptPart>

/**
 * One request the model received.
 *
 * @since 0.1.0
 * @category models
 */
export interface CapturedRequest {
  readonly prompt: Prompt.Prompt
  readonly tools: ReadonlyArray<ToolSpec>
  readonly toolChoice: unknown
  readonly config: RequestConfig | undefined
}

/**
 * Test access to the scripted model.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedModelShape {
  /**
   * Every request received so far, in order, when the model was made with `captureRequests`;
   * otherwise it dies (a model that keeps nothing cannot answer).
   */
  readonly requests: Effect.Effect<ReadonlyArray<CapturedRequest>>
  /** How many model calls were served so far. */
  readonly served: Effect.Effect<number>
  /** How many scripts are still unconsumed. */
  readonly remaining: Effect.Effect<number>
  /** Queue more call scripts. */
  readonly push: (...scripts: ReadonlyArray<CallScript>) => Effect.Effect<void>
}

/**
 * The scripted model's test handle.
 *
 * @since 0.1.0
 * @category tags
 */
export class ScriptedModel extends Context.Tag("effect-session-log/ScriptedModel")<ScriptedModel, ScriptedModelShape>() {}

/**
 * Options of the scripted model.
 *
 * @since 0.1.0
 * @category models
 */
export interface ScriptedLanguageModelOptions {
  readonly scripts: ReadonlyArray<CallScript>
  /** Die when the layer is released with scripts left (default true). */
  readonly requireConsumed?: boolean
  /**
   * Keep every request for `requests` (default false): tests that inspect requests opt in; a
   * long-lived model (the ACP agent's, the demo's) keeps none, so its memory does not grow per call.
   */
  readonly captureRequests?: boolean
}

const words = (text: string): ReadonlyArray<string> => {
  const out = text.split(/(?<= )/)
  return out.length === 0 ? [text] : out
}

const partsOf = (step: ScriptPart, n: number): ReadonlyArray<Response.StreamPartEncoded> => {
  switch (step.type) {
    case "text":
    case "reasoning": {
      const id = `${step.type}-${n}`
      const deltas = step.deltas ?? words(step.text)
      return [
        { type: `${step.type}-start`, id },
        ...deltas.map((delta) => ({ type: `${step.type}-delta` as const, id, delta })),
        { type: `${step.type}-end`, id }
      ] as ReadonlyArray<Response.StreamPartEncoded>
    }
    case "tool-call": {
      const args = encodeJson(step.params as Json)
      if (step.whole === true) return [{ type: "tool-call", id: step.id, name: step.name, params: step.params }]
      return [
        { type: "tool-params-start", id: step.id, name: step.name },
        { type: "tool-params-delta", id: step.id, delta: args },
        { type: "tool-params-end", id: step.id },
        { type: "tool-call", id: step.id, name: step.name, params: step.params }
      ]
    }
    case "finish":
      return [{
        type: "finish",
        reason: step.reason,
        usage: {
          inputTokens: step.usage?.inputTokens,
          outputTokens: step.usage?.outputTokens,
          totalTokens: step.usage?.inputTokens === undefined && step.usage?.outputTokens === undefined
            ? undefined
            : (step.usage?.inputTokens ?? 0) + (step.usage?.outputTokens ?? 0),
          ...(step.usage?.reasoningTokens === undefined ? {} : { reasoningTokens: step.usage.reasoningTokens }),
          ...(step.usage?.cachedInputTokens === undefined ? {} : { cachedInputTokens: step.usage.cachedInputTokens })
        }
      }]
    case "raw":
      return [step.part]
    default:
      return []
  }
}

/** The non-streamed parts of a script (generateText): whole text, reasoning and tool-call parts. */
const generateScript = (script: CallScript): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError> =>
  Effect.gen(function*() {
    const out: Array<Response.PartEncoded> = []
    for (const [n, step] of script.entries()) {
      switch (step.type) {
        case "text":
        case "reasoning":
          out.push({ type: step.type, text: step.text })
          break
        case "tool-call":
          out.push({ type: "tool-call", id: step.id, name: step.name, params: step.params })
          break
        case "fail":
          return yield* Effect.fail(step.error)
        case "hang":
          if (step.reached !== undefined) yield* Deferred.succeed(step.reached, undefined)
          return yield* Effect.never
        case "raw":
          out.push(step.part as Response.PartEncoded)
          break
        default:
          out.push(...(partsOf(step, n) as ReadonlyArray<Response.PartEncoded>))
      }
    }
    return out
  })

const streamScript = (script: CallScript): Stream.Stream<Response.StreamPartEncoded, AiError.AiError> =>
  Stream.fromIterable(script.map((step, n) => [step, n] as const)).pipe(
    Stream.flatMap(([step, n]) => {
      switch (step.type) {
        case "fail":
          return Stream.fail(step.error)
        case "hang":
          return Stream.fromEffect(
            (step.reached === undefined ? Effect.void : Deferred.succeed(step.reached, undefined)).pipe(
              Effect.zipRight(Effect.never)
            )
          )
        default:
          return Stream.fromIterable(partsOf(step, n))
      }
    })
  )

/**
 * Build the scripted model: the `LanguageModel` service and its test handle.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: ScriptedLanguageModelOptions
): Effect.Effect<{ readonly model: LanguageModel.Service; readonly handle: ScriptedModelShape }> =>
  Effect.gen(function*() {
    const queue: Array<CallScript> = [...options.scripts]
    const captured: Array<CapturedRequest> = []
    let served = 0
    const nextScript = (providerOptions: LanguageModel.ProviderOptions) =>
      Effect.gen(function*() {
        const config = yield* ModelRequestConfig
        served++
        if (options.captureRequests === true) {
          captured.push({
            prompt: providerOptions.prompt,
            tools: toolSpecs(providerOptions.tools),
            toolChoice: providerOptions.toolChoice,
            config
          })
        }
        const script = queue.shift()
        if (script === undefined) {
          return yield* Effect.dieMessage(
            `ScriptedLanguageModel: script exhausted at model call ${served} (no script left)`
          )
        }
        return script
      })
    const model = yield* LanguageModel.make({
      generateText: (providerOptions) => Effect.flatMap(nextScript(providerOptions), generateScript),
      streamText: (providerOptions) => Stream.unwrap(Effect.map(nextScript(providerOptions), streamScript))
    })
    const handle: ScriptedModelShape = {
      requests: options.captureRequests === true
        ? Effect.sync(() => captured.slice())
        : Effect.dieMessage("ScriptedLanguageModel: requests are not kept (make the model with captureRequests: true)"),
      served: Effect.sync(() => served),
      remaining: Effect.sync(() => queue.length),
      push: (...scripts) => Effect.sync(() => void queue.push(...scripts))
    }
    return { model, handle }
  })

/**
 * The scripted `LanguageModel` plus its `ScriptedModel` handle; dies on release with unconsumed scripts.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: ScriptedLanguageModelOptions
): Layer.Layer<LanguageModel.LanguageModel | ScriptedModel> =>
  Layer.scopedContext(Effect.gen(function*() {
    const { handle, model } = yield* make(options)
    if (options.requireConsumed !== false) {
      yield* Effect.addFinalizer(() =>
        Effect.flatMap(handle.remaining, (n) =>
          n === 0 ? Effect.void : Effect.dieMessage(`ScriptedLanguageModel: ${n} script(s) left unconsumed`))
      )
    }
    return Context.make(LanguageModel.LanguageModel, model).pipe(Context.add(ScriptedModel, handle))
  }))

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `ScriptedLanguageModel.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makeScriptedLanguageModel = make

/**
 * `layer` under its earlier name.
 *
 * @deprecated since 0.2.0: use `ScriptedLanguageModel.layer`.
 * @since 0.1.0
 * @category layers
 */
export const layerScriptedLanguageModel = layer
