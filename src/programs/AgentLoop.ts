/**
 * The agent loop (SPEC §1.6): runs turns against `@effect/ai`'s `LanguageModel` and a `Toolkit`,
 * writing the canonical event order — turn and step brackets, the claimed user batch, header
 * snapshots through `HeaderSnapshotter`, every stream part as an `assistant/chunk`, the assistant
 * message citing its attempt's chunks, tool calls and results — with the checkpoint policy of §7.3,
 * the context-overflow retry of §9.7 and finalisers that keep the log balanced on failure and
 * interruption.
 */
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type { RequestHeaderInvalid } from "../schema/Errors.js"
import type { Event, PayloadOf } from "../schema/Events.js"
import { encodeJson, type Json } from "../schema/Json.js"
import type { ContentBlock, MessageSource, ToolCallBlock } from "../schema/Messages.js"
import type { RequestConfig, RequestHeader } from "../schema/RequestHeader.js"
import { HeaderSnapshotter } from "../services/HeaderSnapshotter.js"
import { nextId } from "../services/IdGenerator.js"
import { REPAIR_TEXT_OUTCOME_UNKNOWN } from "../services/Repair.js"
import { type AppendError, type FlushError, Session, type SessionShape } from "../services/Session.js"
import type { Summarizer } from "../services/Summarizer.js"
import * as Checkpoint from "./Checkpoint.js"
import * as Compact from "./Compact.js"
import {
  aiErrorFailure,
  assembleChunks,
  type Chunk,
  ChunkTranslator,
  type Failure,
  ModelRequestConfig,
  parseArguments,
  requestToPrompt,
  toolOutputContent,
  toolSpecs
} from "../services/PromptConversion.js"

/** One input of a turn: a user prompt, or injected context (a `context/message`). */
export type UserInput =
  | {
    readonly type: "user"
    readonly content: string | ReadonlyArray<ContentBlock>
    readonly id?: string
  }
  | {
    readonly type: "context"
    readonly content: string | ReadonlyArray<ContentBlock>
    /** `source.kind` must not be `user` (H11). */
    readonly source: MessageSource
    readonly meta?: unknown
    readonly id?: string
  }

/** The model route: provider, model and capacity. */
export interface Route {
  readonly provider: string
  readonly model: string
  readonly maxTokens?: number
  readonly contextWindow?: number
}

/** What the pre-step hook sees (compaction and pruning run here, before `step/start`). */
export interface PreStepContext {
  readonly session: SessionShape
  readonly turn: number
  readonly step: number
  /** H, the header the next request of this loop will use (system and tools of the loop). */
  readonly header: RequestHeader | undefined
  /** The route's context window, if configured. */
  readonly contextWindow?: number | undefined
}

/**
 * The context-overflow retry of SPEC §9.7 (the shape of `Compact.onOverflow(policy)`): classify a
 * model error as an overflow, make room (prune and compact) and answer whether the request may be
 * retried, and reset the retry counter after a successful assistant message.
 */
export interface OverflowRetry<R = never> {
  readonly isOverflow: (error: unknown) => boolean
  readonly handle: (ctx: Compact.HookContext) => Effect.Effect<boolean, unknown, R>
  readonly reset: Effect.Effect<void>
}

/** The `overflow` option: an `onOverflow(policy)` handler (or any `OverflowRetry`), or a policy. */
export type OverflowOption = OverflowRetry<any> | Compact.CompactionPolicy

/** What the `overflow` option needs: the handler's requirements, or `Session | Summarizer` for a policy. */
export type OverflowRequirements<O> = O extends { readonly handle: (ctx: any) => Effect.Effect<any, any, infer R> } ? R
  : O extends Compact.CompactionPolicy ? Session | Summarizer
  : never

/** A tool call about to start (the pre-execution policy sees it before `tool/call` is written). */
export interface ToolCallRequest {
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/** Options of one loop instance. */
export interface AgentLoopOptions<
  Tools extends Record<string, Tool.Any>,
  EP = never,
  RP = never,
  RB = never,
  O extends OverflowOption | undefined = undefined
> {
  readonly toolkit: Toolkit.Toolkit<Tools>
  /** The rendered system prompt. */
  readonly system: string
  readonly route: Route
  /** Runs at every pre-step boundary, inside the turn, before `step/start` (compaction, pruning). */
  readonly preStep?: (ctx: PreStepContext) => Effect.Effect<void, EP, RP>
  /** Pre-execution policy: runs before a call's `tool/call` is written (interruptible, e.g. approval). */
  readonly beforeToolCall?: (call: ToolCallRequest) => Effect.Effect<void, never, RB>
  /** Declare a new message series for the next model request. */
  readonly newSeries?: boolean
  /** The checkpoint policy of SPEC §7.3 (default on; a no-op on durable handles). */
  readonly checkpoint?: boolean
  /** Steps per turn before the turn ends `error` with code `MAX_STEPS` (default 50). */
  readonly maxSteps?: number
  /**
   * The context-overflow retry (SPEC §9.7): `Compact.onOverflow(policy)` or the policy itself.
   * When a model call fails with an error its predicate classifies as an overflow, `handle` runs
   * (prune, compact with `retainTokens = 0`); if it answers true the step's request is rebuilt from
   * the log and retried (header `series`, R5, unless it changed). The failed attempt's chunks stay
   * in the log. The counter is reset at the start of every turn and after every successful
   * assistant message, so `maxOverflowRetries` bounds consecutive retries within one turn.
   */
  readonly overflow?: O
}

/** Options of one turn. */
export interface TurnOptions {
  /** Declare a new message series for this turn's first model request. */
  readonly newSeries?: boolean
}

/** A `turn/end` reason written by the loop. */
export type TurnEndReason =
  | { readonly kind: "completed" }
  | { readonly kind: "max-tokens" }
  | { readonly kind: "error"; readonly error: Failure }
  | { readonly kind: "aborted"; readonly reason: { readonly kind: "user" } }

/** The outcome of a turn that ran to its `turn/end`. */
export interface TurnResult {
  readonly turn: number
  readonly reason: TurnEndReason
  readonly steps: number
}

/** Failures of a turn: the log itself could not be written (the turn still ends when it can). */
export type AgentError = AppendError | FlushError | RequestHeaderInvalid

/** A loop instance (SPEC §5.3): keeps its own first-request flag. */
export interface AgentLoop<R> {
  readonly runTurn: (
    input: ReadonlyArray<UserInput>,
    options?: TurnOptions
  ) => Effect.Effect<TurnResult, AgentError, R>
}

/** Internal: the model call, a checkpoint or a hook failed; the turn ends `error` with `failure`. */
class TurnFailed extends Schema.TaggedError<TurnFailed>()("TurnFailed", { failure: Schema.Unknown }) {}

type StepError = AgentError | TurnFailed
type Rec = Record<string, unknown>

/** The state of one step, read by its finaliser. */
interface StepState {
  phase: "input" | "streaming" | "tools"
  chunks: Array<Event>
  calls: ReadonlyArray<ToolCallBlock>
  /** callId → tool/call seq and whether the body started */
  dispatched: Map<string, { readonly seq: number; started: boolean }>
  answered: Set<string>
}

const asBlocks = (content: string | ReadonlyArray<ContentBlock>): ReadonlyArray<ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : content

/** Non-model failures flattened to `{ message: <cause chain text>, code: "UNKNOWN" }` (SPEC §1.3.2). */
const flattenCause = (cause: Cause.Cause<unknown>): Failure => {
  const texts: Array<string> = []
  for (const e of Cause.failures(cause)) texts.push(describe(e))
  for (const d of Cause.defects(cause)) texts.push(describe(d))
  return { message: texts.length === 0 ? "unknown failure" : texts.join(": "), code: "UNKNOWN" }
}

const describe = (e: unknown): string => {
  if (e instanceof Error) return e.cause === undefined ? e.message : `${e.message}: ${describe(e.cause)}`
  if (typeof e === "object" && e !== null && "message" in e) return String((e as { message: unknown }).message)
  return String(e)
}

/** The failure identity of a tool body that failed. */
const toolError = (cause: Cause.Cause<unknown>): { readonly name: string; readonly code: string; readonly text: string } => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const e = failure.value as Rec
    const name = typeof e?._tag === "string" ? e._tag : "ToolError"
    const code = typeof e?.code === "string" ? e.code : AiError.isAiError(failure.value) ? "TOOL_INPUT_INVALID" : "TOOL_FAILED"
    return { name, code, text: describe(failure.value) }
  }
  return { name: "ToolDefect", code: "TOOL_DEFECT", text: flattenCause(cause).message }
}

const uninterruptible = Effect.uninterruptible

/** The overflow handler of an `overflow` option: a handler as given, or `Compact.onOverflow(policy)`. */
const overflowRetryOf = (option: OverflowOption | undefined): OverflowRetry<any> | undefined => {
  if (option === undefined) return undefined
  const o = option as Rec
  return typeof o.handle === "function" && typeof o.isOverflow === "function"
    ? (option as OverflowRetry<any>)
    : Compact.onOverflow(option as Compact.CompactionPolicy)
}

/** A hook failure ends the turn `error` (code `UNKNOWN`); interruption propagates. */
const hookFailed = (cause: Cause.Cause<unknown>): Effect.Effect<never, TurnFailed> =>
  Cause.isInterruptedOnly(cause) ? Effect.interrupt : new TurnFailed({ failure: flattenCause(cause) })

/**
 * Make a loop instance. `runTurn` needs the `Session`, the `LanguageModel`, the `HeaderSnapshotter`
 * and the toolkit's handlers (plus what the hooks need).
 */
export const make = <
  Tools extends Record<string, Tool.Any>,
  EP = never,
  RP = never,
  RB = never,
  O extends OverflowOption | undefined = undefined
>(
  options: AgentLoopOptions<Tools, EP, RP, RB, O>
): AgentLoop<
  | Session
  | LanguageModel.LanguageModel
  | HeaderSnapshotter
  | Tool.HandlersFor<Tools>
  | Tool.Requirements<Tools[keyof Tools]>
  | RP
  | RB
  | OverflowRequirements<O>
> => {
  let firstOfInstance = true
  let newSeries = options.newSeries === true
  const checkpointOn = options.checkpoint !== false
  const maxSteps = options.maxSteps ?? 50
  const route = options.route
  const tools = toolSpecs(options.toolkit.tools)
  const overflow = overflowRetryOf(options.overflow)

  /** SPEC §5.3 "Choosing H": the route seeds the first call; later calls inherit the logged config. */
  const chooseHeader = (latest: RequestHeader | undefined): RequestHeader => {
    let config: RequestConfig
    const sameRoute = latest !== undefined && latest.config.provider === route.provider &&
      latest.config.model === route.model
    if (firstOfInstance || latest === undefined || !sameRoute) {
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
    return { config, system: options.system, tools }
  }

  const runTurn = (input: ReadonlyArray<UserInput>, turnOptions: TurnOptions = {}) =>
    Effect.gen(function*() {
      const session = yield* Session
      const snapshotter = yield* HeaderSnapshotter
      const toolkit = yield* options.toolkit
      if (turnOptions.newSeries === true) newSeries = true
      if (overflow !== undefined) yield* overflow.reset

      const append = session.append
      // a failed checkpoint is fail-closed: the turn ends `error` (SPEC §7.3)
      const checkpointFailed = (e: FlushError) =>
        new TurnFailed({ failure: { message: e.message, code: "CHECKPOINT_FAILED" } })
      const preStepCheckpoint: Effect.Effect<void, TurnFailed> = checkpointOn
        ? Effect.mapError(Checkpoint.atPreStep, checkpointFailed).pipe(Effect.provideService(Session, session))
        : Effect.void

      const encodeParams = (name: string, params: unknown): string => {
        const tool = (toolkit.tools as Record<string, Tool.Any>)[name]
        const encoded = tool === undefined
          ? params
          : Schema.encodeUnknownOption(tool.parametersSchema as Schema.Schema<unknown, unknown>)(params).pipe(
            Option.getOrElse(() => params)
          )
        return encodeJson(encoded as Json)
      }

      /** Write the user batch of a step. */
      const writeInput = (item: UserInput) =>
        Effect.gen(function*() {
          const id = item.id ?? (yield* nextId)
          const content = asBlocks(item.content)
          if (item.type === "user") {
            yield* uninterruptible(append("user/message", { id, role: "user", content, source: { kind: "user" } }, {
              surfaceOp: "append"
            }))
          } else {
            yield* uninterruptible(append("context/message", {
              id,
              role: "user",
              content,
              source: item.source,
              ...(item.meta === undefined ? {} : { meta: item.meta })
            }, { surfaceOp: "append" }))
          }
        })

      /** One tool/result (uninterruptible). */
      const writeResult = (
        turn: number,
        step: number,
        st: StepState,
        callId: string,
        callSeq: number,
        content: ReadonlyArray<ContentBlock>,
        error: { readonly name: string; readonly code: string } | undefined
      ) =>
        Effect.gen(function*() {
          const id = yield* nextId
          yield* uninterruptible(append("tool/result", {
            turn,
            step,
            message: {
              id,
              role: "user",
              content: [{
                type: "tool-result",
                toolCallId: callId,
                content,
                ...(error === undefined ? {} : { isError: true })
              }],
              source: { kind: "tool", callId }
            },
            ...(error === undefined ? {} : { error })
          }, { surfaceOp: "append", sourceEventSeqs: [callSeq] }))
          st.answered.add(callId)
        })

      /** The canonical ABORTED_BEFORE_DISPATCH result of a call whose body never ran (uninterruptible). */
      const writeAborted = (turn: number, step: number, st: StepState, callId: string, callSeq: number) =>
        Effect.gen(function*() {
          const messageId = yield* nextId
          yield* uninterruptible(append(
            "tool/result",
            // the builder types `content` as an array; it holds exactly one block
            Checkpoint.abortedBeforeDispatchResult({ turn, step, callId, messageId }) as unknown as PayloadOf<"tool/result">,
            { surfaceOp: "append", sourceEventSeqs: [callSeq] }
          ))
          st.answered.add(callId)
        })

      /**
       * The model call of a step: header snapshots, the stream as chunks, the assistant message.
       * An overflow failure (SPEC §9.7) runs the overflow handler and, when it answers true, repeats
       * the attempt in the same step: the request is derived from the log again and the header
       * snapshotter decides anew (`series` after the compaction, R5). The failed attempt's chunks
       * stay in the log and are not cited by the message of a later attempt.
       */
      const modelCall = (turn: number, step: number, st: StepState) =>
        Effect.gen(function*() {
          for (;;) {
            const header = chooseHeader(yield* session.requestHeader)
            yield* snapshotter.record(session, {
              header,
              context: {
                provider: route.provider,
                model: route.model,
                ...(route.contextWindow === undefined ? {} : { contextWindow: route.contextWindow })
              },
              firstOfInstance,
              newSeries
            })
            firstOfInstance = false
            newSeries = false
            // the request is derived from the log as it stands now (SPEC §1.6 notes)
            const latest = yield* session.requestHeader
            const messages = yield* session.messages
            const prompt = requestToPrompt({ header: latest, messages })
            const config = latest?.config ?? header.config
            st.phase = "streaming"
            st.chunks = []
            const translator = new ChunkTranslator()
            const stream = LanguageModel.streamText({ prompt, toolkit, disableToolCallResolution: true }) as Stream.Stream<
              Response.StreamPart<any>,
              AiError.AiError,
              LanguageModel.LanguageModel
            >
            // checkpoint (a), when the stream is first pulled: fail-closed, the model is not invoked
            const guarded: Stream.Stream<Response.StreamPart<any>, AiError.AiError | TurnFailed, LanguageModel.LanguageModel> =
              (checkpointOn ? Checkpoint.guardModelStream(stream).pipe(Stream.provideService(Session, session)) : stream)
                .pipe(Stream.mapError((e) => AiError.isAiError(e) ? e : checkpointFailed(e)))
            const streamed = yield* guarded.pipe(
              Stream.runForEach((part) =>
                Effect.forEach(
                  translator.translate(part, encodeParams),
                  (chunk: Chunk) =>
                    uninterruptible(
                      append("assistant/chunk", { turn, step, chunk: chunk as never }).pipe(
                        Effect.tap((e) => Effect.sync(() => st.chunks.push(e)))
                      )
                    ),
                  { discard: true }
                )
              ),
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
            const assembled = assembleChunks(st.chunks.map((e) => (e.data as { chunk: Rec }).chunk))
            const id = yield* nextId
            yield* uninterruptible(append("assistant/message", {
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
            if (overflow !== undefined) yield* overflow.reset
            st.calls = assembled.content.filter((b): b is ToolCallBlock =>
              b.type === "tool-call" && typeof b.id === "string" && typeof b.name === "string" &&
              typeof b.arguments === "string"
            )
            st.phase = "tools"
            return assembled.finish
          }
        })

      /** Run the step's tool calls in model order. */
      const runTools = (turn: number, step: number, st: StepState) =>
        Effect.forEach(st.calls, (call) =>
          Effect.gen(function*() {
            if (options.beforeToolCall !== undefined) {
              yield* options.beforeToolCall({ turn, step, callId: call.id, name: call.name, arguments: call.arguments })
            }
            const callEvent = yield* uninterruptible(
              append("tool/call", { turn, step, callId: call.id, name: call.name, arguments: call.arguments })
            )
            const slot = { seq: callEvent.seq, started: false }
            st.dispatched.set(call.id, slot)
            const body = Effect.suspend(() => {
              slot.started = true
              return toolkit.handle(call.name as keyof Tools, parseArguments(call.arguments) as never)
            })
            // checkpoint (b): interruption during the flush answers the call ABORTED_BEFORE_DISPATCH
            const exit = yield* Effect.uninterruptibleMask((restore) =>
              Effect.gen(function*() {
                const outcome = yield* Effect.exit(
                  checkpointOn
                    ? Checkpoint.beforeToolBody(restore(body)).pipe(Effect.provideService(Session, session))
                    : restore(body)
                )
                if (Exit.isSuccess(outcome) && Checkpoint.isAbortedBeforeDispatch(outcome.value)) {
                  yield* writeAborted(turn, step, st, call.id, slot.seq)
                }
                return outcome
              })
            )
            if (Exit.isSuccess(exit) && Checkpoint.isAbortedBeforeDispatch(exit.value)) return yield* Effect.interrupt
            if (Exit.isFailure(exit) && !slot.started && !Cause.isInterruptedOnly(exit.cause)) {
              // the checkpoint flush failed: fail-closed, the body never ran
              const flushError = Cause.failureOption(exit.cause)
              if (Option.isSome(flushError)) return yield* checkpointFailed(flushError.value as FlushError)
            }
            if (Exit.isSuccess(exit)) {
              const { encodedResult, isFailure, result } = exit.value as Tool.HandlerResult<Tool.Any>
              const r = result as Rec
              const error = isFailure
                ? {
                  name: typeof r?._tag === "string" ? r._tag : "ToolFailure",
                  code: typeof r?.code === "string" ? r.code : "TOOL_FAILED"
                }
                : undefined
              yield* writeResult(turn, step, st, call.id, slot.seq, toolOutputContent(encodedResult), error)
            } else if (Cause.isInterruptedOnly(exit.cause)) {
              return yield* Effect.failCause(exit.cause)
            } else {
              const { code, name, text } = toolError(exit.cause)
              yield* writeResult(turn, step, st, call.id, slot.seq, [{ type: "text", text }], { name, code })
            }
          }), { discard: true })

      /**
       * The step finaliser (uninterruptible): a non-empty delivered prefix of an unfinished stream
       * becomes an `interrupted` assistant message (on interruption only); every call of the
       * written message gets its result — `ABORTED_BEFORE_DISPATCH` when its body never ran,
       * `TOOL_OUTCOME_UNKNOWN` when it was cut off inside the body.
       */
      const closeStep = (turn: number, step: number, st: StepState, interrupted: boolean) =>
        Effect.gen(function*() {
          if (st.phase === "streaming" && interrupted) {
            const prefix = assembleChunks(st.chunks.map((e) => (e.data as { chunk: Rec }).chunk)).deliveredPrefix
            if (prefix.length > 0) {
              const id = yield* nextId
              yield* append("assistant/message", {
                turn,
                step,
                message: { id, role: "assistant", content: prefix, source: { kind: "model", provider: route.provider, model: route.model } },
                interrupted: true
              }, { surfaceOp: "append", sourceEventSeqs: st.chunks.map((e) => e.seq) })
            }
          }
          if (st.phase !== "tools") return
          for (const call of st.calls) {
            if (st.answered.has(call.id)) continue
            const slot = st.dispatched.get(call.id)
            if (slot !== undefined && slot.started) {
              yield* writeResult(turn, step, st, call.id, slot.seq, [{ type: "text", text: REPAIR_TEXT_OUTCOME_UNKNOWN }], {
                name: "ToolOutcomeUnknownError",
                code: "TOOL_OUTCOME_UNKNOWN"
              })
              continue
            }
            const seq = slot?.seq ??
              (yield* append("tool/call", { turn, step, callId: call.id, name: call.name, arguments: call.arguments })).seq
            yield* writeAborted(turn, step, st, call.id, seq)
          }
        })

      /** One step: `step/start`, the batch, the model call, the tools, and `step/end` (always). */
      const runStep = (turn: number, step: number, batch: ReadonlyArray<UserInput>) =>
        Effect.uninterruptibleMask((restore) =>
          Effect.gen(function*() {
            yield* append("step/start", { turn, step })
            const st: StepState = { phase: "input", chunks: [], calls: [], dispatched: new Map(), answered: new Set() }
            const exit = yield* Effect.exit(restore(Effect.gen(function*() {
              for (const item of batch) yield* writeInput(item)
              const finish = yield* modelCall(turn, step, st)
              yield* runTools(turn, step, st)
              return { finish, calls: st.calls.length }
            })))
            const closed = yield* Effect.exit(closeStep(turn, step, st, Exit.isInterrupted(exit)))
            const ended = yield* Effect.exit(append("step/end", { turn, step }))
            if (Exit.isFailure(exit)) return yield* Effect.failCause(exit.cause as Cause.Cause<StepError>)
            if (Exit.isFailure(closed)) return yield* Effect.failCause(closed.cause)
            if (Exit.isFailure(ended)) return yield* Effect.failCause(ended.cause)
            return exit.value
          })
        )

      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const events = yield* session.events
          let turn = 1
          for (const e of events) if (e.type === "turn/start") turn++
          yield* append("turn/start", { turn })
          let maxTokens = false
          let steps = 0
          const exit = yield* Effect.exit(restore(Effect.gen(function*() {
            let batch = input
            for (let step = 1;; step++) {
              // checkpoint (c) and the pre-step hook, inside the turn, before step/start
              yield* preStepCheckpoint
              if (options.preStep !== undefined) {
                const header = chooseHeader(yield* session.requestHeader)
                yield* options.preStep({
                  session,
                  turn,
                  step,
                  header,
                  ...(route.contextWindow === undefined ? {} : { contextWindow: route.contextWindow })
                }).pipe(Effect.catchAllCause(hookFailed))
              }
              if (step === 1 && batch.length === 0) return { kind: "completed" } as TurnEndReason
              if (step > maxSteps) {
                return { kind: "error", error: { message: `more than ${maxSteps} steps`, code: "MAX_STEPS" } } as TurnEndReason
              }
              steps = step
              const outcome = yield* runStep(turn, step, batch)
              batch = []
              if (outcome.finish?.kind === "max-tokens") maxTokens = true
              if (outcome.calls === 0) return { kind: maxTokens ? "max-tokens" : "completed" } as TurnEndReason
            }
          })))
          let reason: TurnEndReason
          if (Exit.isSuccess(exit)) reason = exit.value
          else if (Exit.isInterrupted(exit)) reason = { kind: "aborted", reason: { kind: "user" } }
          else {
            const failed = Cause.failureOption(exit.cause).pipe(
              Option.filter((e): e is TurnFailed => e instanceof TurnFailed)
            )
            reason = Option.isSome(failed)
              ? { kind: "error", error: failed.value.failure as Failure }
              : { kind: "error", error: flattenCause(exit.cause) }
          }
          const ended = yield* Effect.exit(append("turn/end", { turn, reason }))
          if (Exit.isFailure(exit)) {
            // provider, checkpoint and hook failures end the turn `error`; interruption, log failures and defects propagate
            const turnFailed = Option.isSome(Cause.failureOption(exit.cause).pipe(
              Option.filter((e) => e instanceof TurnFailed)
            )) && !Cause.isDie(exit.cause)
            if (!turnFailed) return yield* Effect.failCause(exit.cause as Cause.Cause<AgentError>)
          }
          if (Exit.isFailure(ended)) return yield* Effect.failCause(ended.cause)
          return { turn, reason, steps } satisfies TurnResult
        })
      )
    }).pipe(Effect.withSpan("AgentLoop.runTurn"))

  return { runTurn }
}
