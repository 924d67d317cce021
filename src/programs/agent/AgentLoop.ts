/**
 * The agent loop (SPEC §1.6): runs turns against `@effect/ai`'s `LanguageModel` and a `Toolkit`,
 * writing the canonical event order — turn and step brackets, the claimed user batch, header
 * snapshots through `HeaderSnapshotter`, every stream part as an `assistant/chunk`, the assistant
 * message citing its attempt's chunks, tool calls and results — with the checkpoint policy of §7.3,
 * the context-overflow retry of §9.7 and finalisers that keep the log balanced on failure and
 * interruption. The step is in `Step` (its model call in `ModelCall`); this module owns
 * the loop instance and the turn.
 *
 * @since 0.1.0
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import { encodeJson, type Json } from "../../schema/Json.js"
import { HeaderSnapshotter } from "../../services/HeaderSnapshotter.js"
import { type Failure, toolSpecs } from "../../services/PromptConversion.js"
import { Session, type SessionShape } from "../../services/Session.js"
import type {
  AgentError,
  AgentLoop,
  AgentLoopOptions,
  OverflowOption,
  OverflowRequirements,
  OverflowRetry,
  TurnEndReason,
  TurnOptions,
  TurnResult,
  UserInput
} from "./TurnTypes.js"
import { applyComposition, chooseHeader } from "./ModelCall.js"
import { runStep } from "./Step.js"
import { checkpointFailed, flattenCause, hookFailed, type LoopState, type TurnContext, TurnFailed } from "./TurnContext.js"
import * as Checkpoint from "./Checkpoint.js"
import { type CompactionPolicy, onOverflow } from "../compaction/Policy.js"

export type {
  /**
   * Failures of a turn: the log itself could not be written (the turn still ends when it can).
   *
   * @since 0.1.0
   * @category errors
   */
  AgentError,
  /**
   * A loop instance (SPEC §5.3): keeps its own first-request flag.
   *
   * @since 0.1.0
   * @category models
   */
  AgentLoop,
  /**
   * Options of one loop instance.
   *
   * @since 0.1.0
   * @category models
   */
  AgentLoopOptions,
  /**
   * The composition of the next model request (SPEC §5.3 "Choosing H"): the rendered system prompt
   * and, optionally, the names of the toolkit's tools offered to the model. A switch (a mode, a
   * config option) takes effect at the next model call, whose header then differs (`change`).
   *
   * @since 0.1.0
   * @category models
   */
  Composition,
  /**
   * The `overflow` option: an `onOverflow(policy)` handler (or any `OverflowRetry`), or a policy.
   *
   * @since 0.1.0
   * @category models
   */
  OverflowOption,
  /**
   * What the `overflow` option needs: the handler's requirements, or `Session | Summarizer` for a policy.
   *
   * @since 0.1.0
   * @category models
   */
  OverflowRequirements,
  /**
   * The context-overflow retry of SPEC §9.7 (the shape of `Compact.onOverflow(policy)`): classify a
   * model error as an overflow, make room (prune and compact) and answer whether the request may be
   * retried, and reset the retry counter after a successful assistant message.
   *
   * @since 0.1.0
   * @category models
   */
  OverflowRetry,
  /**
   * What the pre-step hook sees (compaction and pruning run here, before `step/start`).
   *
   * @since 0.1.0
   * @category models
   */
  PreStepContext,
  /**
   * The model route: provider, model and capacity.
   *
   * @since 0.1.0
   * @category models
   */
  Route,
  /**
   * What the pre-execution policy decides: run the call (`void`), or deny it — the call is
   * recorded (`tool/call`) and answered by an error `tool/result` with `text` and `code`, its body
   * never runs.
   *
   * @since 0.1.0
   * @category models
   */
  ToolCallDecision,
  /**
   * A tool call about to start (the pre-execution policy sees it before `tool/call` is written).
   *
   * @since 0.1.0
   * @category models
   */
  ToolCallRequest,
  /**
   * A `turn/end` reason written by the loop.
   *
   * @since 0.1.0
   * @category models
   */
  TurnEndReason,
  /**
   * Options of one turn.
   *
   * @since 0.1.0
   * @category models
   */
  TurnOptions,
  /**
   * The outcome of a turn that ran to its `turn/end`.
   *
   * @since 0.1.0
   * @category models
   */
  TurnResult,
  /**
   * One input of a turn: a user prompt, or injected context (a `context/message`).
   *
   * @since 0.1.0
   * @category models
   */
  UserInput
} from "./TurnTypes.js"

/** The overflow handler of an `overflow` option: a handler as given, or `Compact.onOverflow(policy)`. */
const overflowRetryOf = (option: OverflowOption | undefined): OverflowRetry<any> | undefined => {
  if (option === undefined) return undefined
  const o = option as Record<string, unknown>
  return typeof o.handle === "function" && typeof o.isOverflow === "function"
    ? (option as OverflowRetry<any>)
    : onOverflow(option as CompactionPolicy)
}

/** The turn's `turn/end` reason from how its steps ended. */
const endReason = (exit: Exit.Exit<TurnEndReason, unknown>): TurnEndReason => {
  if (Exit.isSuccess(exit)) return exit.value
  if (Exit.isInterrupted(exit)) return { kind: "aborted", reason: { kind: "user" } }
  const failed = Cause.failureOption(exit.cause).pipe(
    Option.filter((e): e is TurnFailed => e instanceof TurnFailed)
  )
  return Option.isSome(failed)
    ? { kind: "error", error: failed.value.failure as Failure }
    : { kind: "error", error: flattenCause(exit.cause) }
}

/**
 * Make a loop instance. `runTurn` needs the `Session`, the `LanguageModel`, the `HeaderSnapshotter`
 * and the toolkit's handlers (plus what the hooks need). Each `runTurn` writes one whole turn,
 * `turn/start` to `turn/end`: provider, checkpoint and hook failures end it `error`, interruption
 * ends it `aborted`; the effect fails only when the log itself cannot be written.
 *
 * @example
 * ```ts
 * import * as Tool from "@effect/ai/Tool"
 * import * as Toolkit from "@effect/ai/Toolkit"
 * import * as Effect from "effect/Effect"
 * import * as Schema from "effect/Schema"
 * import { AgentLoop, Compact } from "effect-session-log"
 *
 * const ReadFile = Tool.make("read_file", {
 *   description: "Read a file of the workspace",
 *   parameters: { path: Schema.String },
 *   success: Schema.String
 * })
 * const toolkit = Toolkit.make(ReadFile)
 * const handlers = toolkit.toLayer({ read_file: ({ path }) => Effect.succeed(`contents of ${path}`) })
 *
 * const loop = AgentLoop.make({
 *   toolkit,
 *   system: "You are a careful coding agent.",
 *   route: { provider: "openai", model: "gpt-4o", contextWindow: 128_000 },
 *   preStep: Compact.preStepHook({ thresholdRatio: 0.8 })
 * })
 *
 * const turn = loop.runTurn([{ type: "user", content: "What is in README.md?" }]).pipe(
 *   Effect.tap((result) => Effect.log(`turn ${result.turn} ended ${result.reason.kind} after ${result.steps} steps`))
 * )
 * // provide: a Session (SessionLive.layerCreate / layerOpen over a store), a LanguageModel,
 * // HeaderSnapshotterLive.layer, a Summarizer (for the pre-step hook) and `handlers`
 * ```
 *
 * @since 0.1.0
 * @category constructors
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
  type R = Tool.Requirements<Tools[keyof Tools]> | RB | OverflowRequirements<O>
  const loop: LoopState = {
    system: options.system,
    route: options.route,
    tools: toolSpecs(options.toolkit.tools),
    compose: options.compose,
    firstOfInstance: true,
    newSeries: options.newSeries === true
  }
  const checkpointOn = options.checkpoint !== false
  const maxSteps = options.maxSteps ?? 50
  const route = options.route
  const overflow = overflowRetryOf(options.overflow)
  // checkpoint (c), before the pre-step hook: fail-closed
  const preStepCheckpoint = (session: SessionShape): Effect.Effect<void, TurnFailed> =>
    checkpointOn
      ? Effect.mapError(Checkpoint.atPreStep, checkpointFailed).pipe(Effect.provideService(Session, session))
      : Effect.void

  /** The steps of a turn, from its first pre-step boundary to the step without tool calls. */
  const runSteps = (ctx: TurnContext<R>, turn: number, input: ReadonlyArray<UserInput>, progress: { steps: number }) =>
    Effect.gen(function*() {
      const { session } = ctx
      let batch = input
      let maxTokens = false
      for (let step = 1;; step++) {
        // checkpoint (c) and the pre-step hook, inside the turn, before step/start
        yield* preStepCheckpoint(session)
        if (options.preStep !== undefined) {
          yield* applyComposition(loop, ctx.toolkit)
          const header = chooseHeader(loop, yield* session.requestHeader)
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
        progress.steps = step
        const outcome = yield* runStep(ctx, turn, step, batch)
        batch = []
        if (outcome.finish?.kind === "max-tokens") maxTokens = true
        if (outcome.calls === 0) return { kind: maxTokens ? "max-tokens" : "completed" } as TurnEndReason
      }
    })

  const runTurn = (input: ReadonlyArray<UserInput>, turnOptions: TurnOptions = {}) =>
    Effect.gen(function*() {
      const session = yield* Session
      const snapshotter = yield* HeaderSnapshotter
      const toolkit = yield* options.toolkit
      if (turnOptions.newSeries === true) loop.newSeries = true
      if (overflow !== undefined) yield* overflow.reset
      const ctx: TurnContext<R> = {
        loop,
        session,
        snapshotter,
        toolkit,
        handle: (name, params) => toolkit.handle(name as keyof Tools, params as never),
        encodeParams: (name, params) => {
          const tool = (toolkit.tools as Record<string, Tool.Any>)[name]
          const encoded = tool === undefined
            ? params
            : Schema.encodeUnknownOption(tool.parametersSchema as Schema.Schema<unknown, unknown>)(params).pipe(
              Option.getOrElse(() => params)
            )
          return encodeJson(encoded as Json)
        },
        checkpointOn,
        overflow,
        beforeToolCall: options.beforeToolCall
      }

      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.gen(function*() {
          // the turn number from a count kept as events commit: no copy of the log per turn
          const turn = (yield* session.counts).turnStarts + 1
          yield* session.append("turn/start", { turn })
          const progress = { steps: 0 }
          const exit = yield* Effect.exit(restore(runSteps(ctx, turn, input, progress)))
          const reason = endReason(exit)
          // the turn's end, then checkpoint (d): a finished turn is stored before runTurn returns
          const ended = yield* Effect.exit(
            checkpointOn ? Effect.zipLeft(session.append("turn/end", { turn, reason }), session.flush) : session.append("turn/end", { turn, reason })
          )
          if (Exit.isFailure(exit)) {
            // provider, checkpoint and hook failures end the turn `error`; interruption, log failures and defects propagate
            const turnFailed = Option.isSome(Cause.failureOption(exit.cause).pipe(
              Option.filter((e) => e instanceof TurnFailed)
            )) && !Cause.isDie(exit.cause)
            if (!turnFailed) return yield* Effect.failCause(exit.cause as Cause.Cause<AgentError>)
          }
          if (Exit.isFailure(ended)) return yield* Effect.failCause(ended.cause)
          return { turn, reason, steps: progress.steps } satisfies TurnResult
        })
      )
    }).pipe(Effect.withSpan("AgentLoop.runTurn"))

  return { runTurn }
}
