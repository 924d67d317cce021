/**
 * The model call of one agent-loop step (SPEC §1.6, §5.3, §9.7): choose the request header, let
 * the `HeaderSnapshotter` record it, derive the request from the log, stream the model's parts as
 * `assistant/chunk` events, write the assistant message citing them, and retry in the same step
 * after a context overflow when the overflow handler made room.
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"
import type { ToolCallBlock } from "../../schema/Messages.js"
import { type RequestConfig, type RequestHeader, requestMessages } from "../../schema/RequestHeader.js"
import { nextId } from "../../services/IdGenerator.js"
import {
  aiErrorFailure,
  assembleChunks,
  type Chunk,
  ChunkTranslator,
  type FinishReason,
  ModelRequestConfig,
  requestToPrompt,
  toolSpecs
} from "../../services/PromptConversion.js"
import { Session } from "../../services/Session.js"
import type { AgentError } from "./TurnTypes.js"
import {
  checkpointFailed,
  hookFailed,
  type LoopState,
  type StepState,
  type TurnContext,
  TurnFailed
} from "./TurnContext.js"
import * as Checkpoint from "./Checkpoint.js"

/** SPEC §5.3 "Choosing H": the route seeds the first call; later calls inherit the logged config. */
export const chooseHeader = (loop: LoopState, latest: RequestHeader | undefined): RequestHeader => {
  const { route } = loop
  let config: RequestConfig
  const sameRoute = latest !== undefined && latest.config.provider === route.provider &&
    latest.config.model === route.model
  if (loop.firstOfInstance || latest === undefined || !sameRoute) {
    const effort = sameRoute && latest?.config.reasoningEffort !== undefined &&
        latest.adapterDefaults?.reasoningEffort !== true
      ? latest.config.reasoningEffort
      : undefined
    config = {
      provider: route.provider,
      model: route.model,
      ...(effort === undefined ? {} : { reasoningEffort: effort }),
      ...(route.maxTokens === undefined ? {} : { maxTokens: route.maxTokens })
    }
  } else {
    const { maxTokens, reasoningEffort, ...rest } = latest.config
    config = {
      ...rest,
      ...(reasoningEffort === undefined || latest.adapterDefaults?.reasoningEffort === true ? {} : { reasoningEffort }),
      ...(maxTokens === undefined || latest.adapterDefaults?.maxTokens === true ? {} : { maxTokens })
    }
  }
  return { config, system: loop.system, tools: loop.tools }
}

/** Apply the loop's composition hook, if any: the system prompt and the tools offered by the next call. */
export const applyComposition = (loop: LoopState, toolkit: { readonly tools: Record<string, unknown> }): Effect.Effect<void> =>
  loop.compose === undefined ? Effect.void : Effect.map(loop.compose, (composition) => {
    const all = Object.values(toolkit.tools) as ReadonlyArray<Tool.Any>
    const names = composition.tools
    const offered = names === undefined ? all : all.filter((tool) => names.includes(tool.name))
    loop.system = composition.system
    loop.tools = toolSpecs(offered)
    loop.offered = names === undefined ? undefined : offered.map((tool) => tool.name)
  })

/** The toolkit the model is offered: the loop's toolkit narrowed to the composition's tools. */
const offeredToolkit = (loop: LoopState, toolkit: Toolkit.WithHandler<any>): Toolkit.WithHandler<any> => {
  const names = loop.offered
  if (names === undefined) return toolkit
  const tools: Record<string, Tool.Any> = {}
  for (const [key, tool] of Object.entries(toolkit.tools as Record<string, Tool.Any>)) {
    if (names.includes(tool.name)) tools[key] = tool
  }
  return { tools, handle: toolkit.handle }
}

/** The contents of a chunk event (the loop writes only these). */
const chunkOf = (event: { readonly data: unknown }): Record<string, unknown> =>
  (event.data as { chunk: Record<string, unknown> }).chunk

/** The assembled chunks of the step's attempt (content, delivered prefix, usage, finish). */
export const assembledOf = (st: StepState) => assembleChunks(st.chunks.map(chunkOf))

/**
 * The model call of a step: header snapshots, the stream as chunks, the assistant message.
 * An overflow failure (SPEC §9.7) runs the overflow handler and, when it answers true, repeats
 * the attempt in the same step: the request is derived from the log again and the header
 * snapshotter decides anew (`series` after the compaction, R5). The failed attempt's chunks
 * stay in the log and are not cited by the message of a later attempt.
 */
export const modelCall = <R>(
  ctx: TurnContext<R>,
  turn: number,
  step: number,
  st: StepState
): Effect.Effect<FinishReason | undefined, AgentError | TurnFailed, R | LanguageModel.LanguageModel> =>
  Effect.gen(function*() {
    const { loop, overflow, session } = ctx
    const { route } = loop
    for (;;) {
      yield* applyComposition(loop, ctx.toolkit)
      const header = chooseHeader(loop, yield* session.requestHeader)
      yield* ctx.snapshotter.record(session, {
        header,
        context: {
          provider: route.provider,
          model: route.model,
          ...(route.contextWindow === undefined ? {} : { contextWindow: route.contextWindow })
        },
        firstOfInstance: loop.firstOfInstance,
        newSeries: loop.newSeries
      })
      loop.firstOfInstance = false
      loop.newSeries = false
      // the request is derived from the log as it stands now (SPEC §1.6 notes)
      const latest = yield* session.requestHeader
      // SPEC §1.5: the header's messagePrefix (none in a header this loop writes) then the history
      const messages = requestMessages(latest, yield* session.messages)
      const prompt = requestToPrompt({ header: latest, messages })
      const config = latest?.config ?? header.config
      st.phase = "streaming"
      st.chunks = []
      const streamed = yield* streamChunks(ctx, turn, step, st, prompt).pipe(
        Effect.provideService(ModelRequestConfig, config),
        Effect.either
      )
      if (Either.isLeft(streamed)) {
        const error = streamed.left
        if (!AiError.isAiError(error)) return yield* Effect.fail(error)
        if (overflow !== undefined && overflow.isOverflow(error)) {
          // the failed attempt is over: its chunks stay in the log, it is no interrupted prefix
          st.phase = "input"
          st.chunks = []
          const retry = yield* overflow.handle({
            turn,
            header: latest,
            ...(route.contextWindow === undefined ? {} : { contextWindow: route.contextWindow })
          }).pipe(Effect.catchAllCause(hookFailed))
          if (retry) continue
        }
        return yield* new TurnFailed({ failure: aiErrorFailure(error) })
      }
      return yield* writeAssistantMessage(ctx, turn, step, st)
    }
  })

/** Stream one attempt: every part of the model's response as `assistant/chunk` events, in order. */
const streamChunks = <R>(
  ctx: TurnContext<R>,
  turn: number,
  step: number,
  st: StepState,
  prompt: ReturnType<typeof requestToPrompt>
) => {
  const { session } = ctx
  const toolkit = offeredToolkit(ctx.loop, ctx.toolkit)
  const translator = new ChunkTranslator()
  const stream = LanguageModel.streamText({ prompt, toolkit, disableToolCallResolution: true }) as Stream.Stream<
    Response.StreamPart<any>,
    AiError.AiError,
    LanguageModel.LanguageModel
  >
  // checkpoint (a), when the stream is first pulled: fail-closed, the model is not invoked
  const guarded: Stream.Stream<Response.StreamPart<any>, AiError.AiError | TurnFailed, LanguageModel.LanguageModel> =
    (ctx.checkpointOn ? Checkpoint.guardModelStream(stream).pipe(Stream.provideService(Session, session)) : stream)
      .pipe(Stream.mapError((e) => AiError.isAiError(e) ? e : checkpointFailed(e)))
  return guarded.pipe(
    Stream.runForEach((part) =>
      Effect.forEach(
        translator.translate(part, ctx.encodeParams),
        (chunk: Chunk) =>
          Effect.uninterruptible(
            session.append("assistant/chunk", { turn, step, chunk: chunk as never }).pipe(
              Effect.tap((e) => Effect.sync(() => st.chunks.push(e)))
            )
          ),
        { discard: true }
      )
    )
  )
}

/** The assistant message of a finished attempt, citing its chunks; its tool calls become the step's calls. */
const writeAssistantMessage = <R>(ctx: TurnContext<R>, turn: number, step: number, st: StepState) =>
  Effect.gen(function*() {
    const { route } = ctx.loop
    const assembled = assembledOf(st)
    const id = yield* nextId
    yield* Effect.uninterruptible(ctx.session.append("assistant/message", {
      turn,
      step,
      message: {
        id,
        role: "assistant",
        content: assembled.content,
        source: { kind: "model", provider: route.provider, model: route.model }
      },
      ...(assembled.usage === undefined ? {} : { usage: assembled.usage })
    }, { surfaceOp: "append", sourceEventSeqs: st.chunks.map((e) => e.seq) }))
    if (ctx.overflow !== undefined) yield* ctx.overflow.reset
    st.calls = assembled.content.filter((b): b is ToolCallBlock =>
      b.type === "tool-call" && typeof b.id === "string" && typeof b.name === "string" &&
      typeof b.arguments === "string"
    )
    st.phase = "tools"
    return assembled.finish
  })
