/**
 * One step of the agent loop (SPEC §1.6): `step/start`, the claimed user batch, the model call,
 * the tool calls in model order (with checkpoint (b) of SPEC §7.3 before each body) and, always,
 * the step finaliser and `step/end`, so the log stays balanced on failure and interruption.
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import type { PayloadOf } from "../../schema/Events.js"
import type { ContentBlock } from "../../schema/Messages.js"
import { nextId } from "../../services/IdGenerator.js"
import { type FinishReason, parseArguments, toolOutputContent } from "../../services/PromptConversion.js"
import { REPAIR_TEXT_OUTCOME_UNKNOWN } from "../../services/Repair.js"
import { type FlushError, Session } from "../../services/Session.js"
import type { AgentError, UserInput } from "./TurnTypes.js"
import { assembledOf, modelCall } from "./ModelCall.js"
import { checkpointFailed, type StepState, toolError, type TurnContext, type TurnFailed } from "./TurnContext.js"
import * as Checkpoint from "./Checkpoint.js"

/** What a step that ran to its end reports to the turn. */
export interface StepOutcome {
  readonly finish: FinishReason | undefined
  readonly calls: number
}

const asBlocks = (content: string | ReadonlyArray<ContentBlock>): ReadonlyArray<ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : content

/** Write one input of the user batch of a step. */
const writeInput = <R>(ctx: TurnContext<R>, item: UserInput) =>
  Effect.gen(function*() {
    const id = item.id ?? (yield* nextId)
    const content = asBlocks(item.content)
    if (item.type === "user") {
      yield* Effect.uninterruptible(
        ctx.session.append("user/message", { id, role: "user", content, source: { kind: "user" } }, {
          surfaceOp: "append"
        })
      )
    } else {
      yield* Effect.uninterruptible(ctx.session.append("context/message", {
        id,
        role: "user",
        content,
        source: item.source,
        ...(item.meta === undefined ? {} : { meta: item.meta })
      }, { surfaceOp: "append" }))
    }
  })

/** One tool/result (uninterruptible). */
const writeResult = <R>(
  ctx: TurnContext<R>,
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
    yield* Effect.uninterruptible(ctx.session.append("tool/result", {
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
const writeAborted = <R>(ctx: TurnContext<R>, turn: number, step: number, st: StepState, callId: string, callSeq: number) =>
  Effect.gen(function*() {
    const messageId = yield* nextId
    yield* Effect.uninterruptible(ctx.session.append(
      "tool/result",
      // the builder types `content` as an array; it holds exactly one block
      Checkpoint.abortedBeforeDispatchResult({ turn, step, callId, messageId }) as unknown as PayloadOf<"tool/result">,
      { surfaceOp: "append", sourceEventSeqs: [callSeq] }
    ))
    st.answered.add(callId)
  })

/** Run the step's tool calls in model order. */
const runTools = <R>(ctx: TurnContext<R>, turn: number, step: number, st: StepState) =>
  Effect.forEach(st.calls, (call) =>
    Effect.gen(function*() {
      const { session } = ctx
      const decision = ctx.beforeToolCall === undefined
        ? undefined
        : yield* ctx.beforeToolCall({ turn, step, callId: call.id, name: call.name, arguments: call.arguments })
      const callEvent = yield* Effect.uninterruptible(
        session.append("tool/call", { turn, step, callId: call.id, name: call.name, arguments: call.arguments })
      )
      if (decision !== undefined && decision !== null && "deny" in decision) {
        // denied by the pre-execution policy: recorded, answered with an error, the body never runs
        const { code, name, text } = decision.deny
        st.dispatched.set(call.id, { seq: callEvent.seq, started: false })
        return yield* writeResult(ctx, turn, step, st, call.id, callEvent.seq, [{ type: "text", text }], {
          name: name ?? "ToolCallDenied",
          code
        })
      }
      const slot = { seq: callEvent.seq, started: false }
      st.dispatched.set(call.id, slot)
      const body = Effect.suspend(() => {
        slot.started = true
        return ctx.handle(call.name, parseArguments(call.arguments))
      })
      // checkpoint (b): interruption during the flush answers the call ABORTED_BEFORE_DISPATCH
      const exit = yield* Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          const outcome = yield* Effect.exit(
            ctx.checkpointOn
              ? Checkpoint.beforeToolBody(restore(body)).pipe(Effect.provideService(Session, session))
              : restore(body)
          )
          if (Exit.isSuccess(outcome) && Checkpoint.isAbortedBeforeDispatch(outcome.value)) {
            yield* writeAborted(ctx, turn, step, st, call.id, slot.seq)
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
        const r = result as Record<string, unknown>
        const error = isFailure
          ? {
            name: typeof r?._tag === "string" ? r._tag : "ToolFailure",
            code: typeof r?.code === "string" ? r.code : "TOOL_FAILED"
          }
          : undefined
        yield* writeResult(ctx, turn, step, st, call.id, slot.seq, toolOutputContent(encodedResult), error)
      } else if (Cause.isInterruptedOnly(exit.cause)) {
        return yield* Effect.failCause(exit.cause)
      } else {
        const { code, name, text } = toolError(exit.cause)
        yield* writeResult(ctx, turn, step, st, call.id, slot.seq, [{ type: "text", text }], { name, code })
      }
    }), { discard: true })

/**
 * The step finaliser (uninterruptible): a non-empty delivered prefix of an unfinished stream
 * becomes an `interrupted` assistant message (on interruption only); every call of the
 * written message gets its result — `ABORTED_BEFORE_DISPATCH` when its body never ran,
 * `TOOL_OUTCOME_UNKNOWN` when it was cut off inside the body.
 */
const closeStep = <R>(ctx: TurnContext<R>, turn: number, step: number, st: StepState, interrupted: boolean) =>
  Effect.gen(function*() {
    const { session } = ctx
    const { route } = ctx.loop
    if (st.phase === "streaming" && interrupted) {
      const prefix = assembledOf(st).deliveredPrefix
      if (prefix.length > 0) {
        const id = yield* nextId
        yield* session.append("assistant/message", {
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
        yield* writeResult(ctx, turn, step, st, call.id, slot.seq, [{ type: "text", text: REPAIR_TEXT_OUTCOME_UNKNOWN }], {
          name: "ToolOutcomeUnknownError",
          code: "TOOL_OUTCOME_UNKNOWN"
        })
        continue
      }
      const seq = slot?.seq ??
        (yield* session.append("tool/call", { turn, step, callId: call.id, name: call.name, arguments: call.arguments })).seq
      yield* writeAborted(ctx, turn, step, st, call.id, seq)
    }
  })

/** One step: `step/start`, the batch, the model call, the tools, and `step/end` (always). */
export const runStep = <R>(
  ctx: TurnContext<R>,
  turn: number,
  step: number,
  batch: ReadonlyArray<UserInput>
): Effect.Effect<StepOutcome, AgentError | TurnFailed, R | LanguageModel.LanguageModel> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const { session } = ctx
      yield* session.append("step/start", { turn, step })
      const st: StepState = { phase: "input", chunks: [], calls: [], dispatched: new Map(), answered: new Set() }
      const exit = yield* Effect.exit(restore(Effect.gen(function*() {
        for (const item of batch) yield* writeInput(ctx, item)
        const finish = yield* modelCall(ctx, turn, step, st)
        yield* runTools(ctx, turn, step, st)
        return { finish, calls: st.calls.length }
      })))
      const closed = yield* Effect.exit(closeStep(ctx, turn, step, st, Exit.isInterrupted(exit)))
      const ended = yield* Effect.exit(session.append("step/end", { turn, step }))
      if (Exit.isFailure(exit)) return yield* Effect.failCause(exit.cause as Cause.Cause<AgentError | TurnFailed>)
      if (Exit.isFailure(closed)) return yield* Effect.failCause(closed.cause)
      if (Exit.isFailure(ended)) return yield* Effect.failCause(ended.cause)
      return exit.value
    })
  )
