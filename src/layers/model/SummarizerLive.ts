/**
 * Summarizer implementations (SPEC §9.5): a LanguageModel-backed layer that streams one
 * summarisation call through `@effect/ai`, folds its parts as the agent loop does (`ResponseChunks`:
 * chunks, then content, usage and finish) and enforces the P7 failure cases, and the
 * deterministic layer used by tests and the demo (no model call, exact text output).
 *
 * @since 0.1.0
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { CompactionRejected } from "../../schema/Errors.js"
import type { ContentBlock, Message, TextBlock } from "../../schema/Messages.js"
import type { ToolSpec } from "../../schema/RequestHeader.js"
import { isRecord } from "../../schema/Validation.js"
import {
  SUMMARY_INSTRUCTION,
  Summarizer,
  type SummarizerShape,
  type SummaryInput,
  type SummaryOutput,
  type SummaryRoute
} from "../../services/Summarizer.js"
import { requestToPrompt } from "../../services/PromptConversion.js"
import { assembleChunks, type Chunk, ChunkTranslator } from "../../services/ResponseChunks.js"

type Rec = Record<string, unknown>

const p7 = (detail: string): CompactionRejected => new CompactionRejected({ rule: "P7", reason: "summary", detail })

// ---------------------------------------------------------------------------------------------
// Deterministic layer

const textOf = (message: Message): string => {
  let out = ""
  for (const block of message.content) {
    if (block.type === "text" && typeof block.text === "string") out += block.text
    else if (block.type === "tool-result" && Array.isArray(block.content)) {
      for (const inner of block.content as ReadonlyArray<unknown>) {
        if (isRecord(inner) && inner.type === "text" && typeof inner.text === "string") out += inner.text
      }
    }
  }
  return out
}

/**
 * One line of the deterministic summary: `- <role>: <text>` (SPEC §9.5).
 *
 * @since 0.1.0
 * @category utils
 */
export const deterministicLine = (message: Message): string => {
  const collapsed = textOf(message).replace(/\s+/g, " ").trim()
  if (collapsed.length === 0) return `- ${message.role}: (no text)`
  const points = Array.from(collapsed)
  const text = points.length > 80 ? `${points.slice(0, 80).join("")}…` : collapsed
  return `- ${message.role}: ${text}`
}

/**
 * The deterministic summariser: `provider: "deterministic"`, `model: "summary-v1"`, no model call.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeDeterministic = (): SummarizerShape => ({
  summarize: (input) =>
    Effect.sync((): SummaryOutput => ({
      blocks: [{ type: "text", text: input.messages.map(deterministicLine).join("\n") }],
      provider: "deterministic",
      model: "summary-v1"
    }))
})

/**
 * The deterministic Summarizer layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerDeterministic: Layer.Layer<Summarizer> = Layer.sync(
  Summarizer,
  makeDeterministic
)

// ---------------------------------------------------------------------------------------------
// LanguageModel-backed layer

/**
 * Options of the LanguageModel-backed summariser.
 *
 * @since 0.1.0
 * @category models
 */
export interface SummarizerLiveOptions {
  /** The configured summarisation route (used when both are given). */
  readonly provider?: string | undefined
  readonly model?: string | undefined
  /** Output ceiling of the summarisation call (default 8192). */
  readonly maxTokens?: number | undefined
  /**
   * Wraps the model call for its route, e.g. to pick a provider model or apply `maxTokens`
   * through a provider's config override (the generic `LanguageModel` has no such options).
   */
  readonly configure?:
    | ((request: SummaryRoute & { readonly maxTokens: number }) => <A, E>(self: Effect.Effect<A, E>) => Effect.Effect<A, E>)
    | undefined
}

/**
 * The default `maxTokens` of a summarisation call.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_SUMMARY_MAX_TOKENS = 8192

/**
 * The final user message of a summarisation request.
 *
 * @since 0.1.0
 * @category utils
 */
export const instructionMessage: Message = {
  id: "compaction-summarizer-instruction",
  role: "user",
  content: [{ type: "text", text: SUMMARY_INSTRUCTION }],
  source: { kind: "plugin", plugin: "compaction-summarizer" }
}

/**
 * The summarisation request in the library's vocabulary (pure).
 *
 * @since 0.1.0
 * @category models
 */
export interface SummaryRequest {
  readonly provider: string
  readonly model: string
  readonly maxTokens: number
  readonly system: string | undefined
  readonly tools: ReadonlyArray<ToolSpec>
  readonly messages: ReadonlyArray<Message>
}

/**
 * Resolve the route (configured, else logged header, else agent); `undefined` when none (P7).
 *
 * @since 0.1.0
 * @category utils
 */
export const resolveRoute = (options: SummarizerLiveOptions, input: SummaryInput): SummaryRoute | undefined => {
  if (options.provider !== undefined && options.model !== undefined) {
    return { provider: options.provider, model: options.model }
  }
  return input.loggedRoute ?? input.agentRoute
}

/**
 * Build the request: shadowed messages plus the instruction; system and tools from the header.
 *
 * @since 0.1.0
 * @category utils
 */
export const buildSummaryRequest = (
  options: SummarizerLiveOptions,
  input: SummaryInput
): SummaryRequest | CompactionRejected => {
  const route = resolveRoute(options, input)
  if (route === undefined) return p7("no summarisation route (no configured, logged or agent provider/model)")
  return {
    provider: route.provider,
    model: route.model,
    maxTokens: options.maxTokens ?? DEFAULT_SUMMARY_MAX_TOKENS,
    system: input.system,
    tools: input.tools ?? [],
    messages: [...input.messages, instructionMessage]
  }
}

/** The header's tools as an `@effect/ai` toolkit whose calls are never resolved. */
const toToolkit = (tools: ReadonlyArray<ToolSpec>): Toolkit.WithHandler<Record<string, Tool.Any>> | undefined => {
  if (tools.length === 0) return undefined
  const record: Record<string, Tool.Any> = {}
  for (const spec of tools) {
    record[spec.name] = Tool.make(spec.name, { description: spec.description }).setParameters(
      Schema.Struct({}).annotations({ jsonSchema: spec.parameters as object })
    ) as unknown as Tool.Any
  }
  return {
    tools: record,
    handle: () => Effect.die(new Error("the compaction summariser never runs tools"))
  } as unknown as Toolkit.WithHandler<Record<string, Tool.Any>>
}

/**
 * One summarisation stream folded the way the agent loop folds a model call (`ResponseChunks`):
 * its parts translated to chunks, which `assembleChunks` turns into content, usage and finish.
 * Besides, what the chunk vocabulary has no place for: attachments returned (an image is P7) and
 * an error part.
 */
interface Folded {
  readonly translator: ChunkTranslator
  readonly chunks: Array<Chunk>
  readonly attachments: Array<Rec>
  rawFinish: Response.FinishReason | undefined
  error: unknown
  sawError: boolean
}

const foldPart = (state: Folded, part: Response.StreamPart<Record<string, Tool.Any>>): Folded => {
  for (const chunk of state.translator.translate(part)) state.chunks.push(chunk)
  switch (part.type) {
    case "file":
      state.attachments.push({
        type: part.mediaType.startsWith("image/") ? "image" : "file",
        attachment: { mediaType: part.mediaType, byteSize: part.data.byteLength }
      })
      break
    case "finish":
      state.rawFinish = part.reason
      break
    case "error":
      state.sawError = true
      state.error = part.error
      break
  }
  return state
}

const emptyFold = (): Folded => ({
  translator: new ChunkTranslator(),
  chunks: [],
  attachments: [],
  rawFinish: undefined,
  error: undefined,
  sawError: false
})

const errorText = (e: unknown): string =>
  e instanceof Error ? e.message : isRecord(e) && typeof e.message === "string" ? e.message : String(e)

/**
 * Judge a finished stream (SPEC §9.5 outcome rules); pure.
 *
 * @since 0.1.0
 * @category utils
 */
export const judgeOutput = (request: SummaryRequest, folded: Folded): SummaryOutput | CompactionRejected => {
  if (folded.sawError) return p7(`summariser stream reported an error: ${errorText(folded.error)}`)
  const reason = folded.rawFinish
  if (reason === undefined) return p7("summariser stream ended without a finish")
  switch (reason) {
    case "error":
      return p7("summariser finished with an error")
    case "length":
      return p7("summariser hit max-tokens (incomplete summary)")
    case "content-filter":
    case "pause":
      return p7(`summariser was aborted (${reason})`)
  }
  if (folded.attachments.some((b) => b.type === "image")) return p7("summariser returned an image block")
  const assembled = assembleChunks(folded.chunks as unknown as ReadonlyArray<Rec>)
  const kept: Array<TextBlock> = []
  for (const b of assembled.content) if (b.type === "text") kept.push({ type: "text", text: b.text as string })
  if (kept.every((b) => b.text.trim().length === 0)) return p7("summariser returned no text")
  return {
    blocks: kept,
    ...(assembled.usage === undefined ? {} : { usage: assembled.usage }),
    rawOutput: [...assembled.content, ...(folded.attachments as unknown as ReadonlyArray<ContentBlock>)],
    provider: request.provider,
    model: request.model,
    maxTokens: request.maxTokens,
    llmStreamCall: true
  }
}

/**
 * The LanguageModel-backed summariser (one streamed call per summary).
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeModel = (
  options: SummarizerLiveOptions = {}
): Effect.Effect<SummarizerShape, never, LanguageModel.LanguageModel> =>
  Effect.map(LanguageModel.LanguageModel, (model): SummarizerShape => ({
    summarize: Effect.fn("Summarizer.summarize")(function*(input: SummaryInput) {
      const request = buildSummaryRequest(options, input)
      if (request instanceof CompactionRejected) return yield* request
      const toolkit = toToolkit(request.tools)
      // the one Message -> Prompt translation of the agent loop (SPEC §1.5)
      const prompt = requestToPrompt({ header: { system: request.system }, messages: request.messages })
      const stream = toolkit === undefined
        ? model.streamText({ prompt })
        : model.streamText({ prompt, toolkit, toolChoice: "none", disableToolCallResolution: true })
      // a fresh fold for each run of the stream (a retry that `configure` adds included)
      const run = Effect.suspend(() => Stream.runFold(stream, emptyFold(), foldPart))
      const configured = options.configure === undefined
        ? run
        : options.configure({ provider: request.provider, model: request.model, maxTokens: request.maxTokens })(run)
      const folded = yield* configured.pipe(
        Effect.mapError((e) => p7(`summariser model call failed: ${errorText(e)}`))
      )
      const judged = judgeOutput(request, folded)
      if (judged instanceof CompactionRejected) return yield* judged
      return judged
    })
  }))

/**
 * The LanguageModel-backed Summarizer layer.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerModel = (
  options: SummarizerLiveOptions = {}
): Layer.Layer<Summarizer, never, LanguageModel.LanguageModel> =>
  Layer.effect(Summarizer, makeModel(options))

/**
 * `makeDeterministic` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SummarizerLive.makeDeterministic`.
 * @since 0.1.0
 * @category constructors
 */
export const makeSummarizerDeterministic = makeDeterministic

/**
 * `layerDeterministic` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SummarizerLive.layerDeterministic`.
 * @since 0.1.0
 * @category layers
 */
export const layerSummarizerDeterministic = layerDeterministic

/**
 * `makeModel` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SummarizerLive.makeModel`.
 * @since 0.1.0
 * @category constructors
 */
export const makeSummarizerModel = makeModel

/**
 * `layerModel` under its earlier name.
 *
 * @deprecated since 0.2.0: use `SummarizerLive.layerModel`.
 * @since 0.1.0
 * @category layers
 */
export const layerSummarizerModel = layerModel
