/**
 * The public models of the agent loop (SPEC §1.6): what a turn takes (user inputs, the route, the
 * loop options and their hooks), what it returns (`TurnResult` with its `turn/end` reason) and what
 * it fails with. `AgentLoop` re-exports them; the loop itself is in `AgentLoop.make`.
 */
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import type * as Effect from "effect/Effect"
import type { RequestHeaderInvalid } from "../../schema/Errors.js"
import type { ContentBlock, MessageSource } from "../../schema/Messages.js"
import type { RequestHeader } from "../../schema/RequestHeader.js"
import type { Failure } from "../../services/PromptConversion.js"
import type { AppendError, FlushError, Session, SessionShape } from "../../services/Session.js"
import type { Summarizer } from "../../services/Summarizer.js"
import type { CompactionPolicy, HookContext } from "../compaction/Policy.js"

/**
 * One input of a turn: a user prompt, or injected context (a `context/message`).
 *
 * @example
 * ```ts
 * import type { AgentLoop } from "effect-session-log"
 *
 * const input: ReadonlyArray<AgentLoop.UserInput> = [
 *   { type: "context", content: "Open file: src/index.ts", source: { kind: "plugin", plugin: "editor" } },
 *   { type: "user", content: "Why does the build fail?" }
 * ]
 * ```
 *
 * @since 0.1.0
 * @category models
 */
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

/**
 * The model route: provider, model and capacity.
 *
 * @since 0.1.0
 * @category models
 */
export interface Route {
  readonly provider: string
  readonly model: string
  readonly maxTokens?: number
  readonly contextWindow?: number
}

/**
 * What the pre-step hook sees (compaction and pruning run here, before `step/start`).
 *
 * @since 0.1.0
 * @category models
 */
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
 *
 * @since 0.1.0
 * @category models
 */
export interface OverflowRetry<R = never> {
  readonly isOverflow: (error: unknown) => boolean
  readonly handle: (ctx: HookContext) => Effect.Effect<boolean, unknown, R>
  readonly reset: Effect.Effect<void>
}

/**
 * The `overflow` option: an `onOverflow(policy)` handler (or any `OverflowRetry`), or a policy.
 *
 * @since 0.1.0
 * @category models
 */
export type OverflowOption = OverflowRetry<any> | CompactionPolicy

/**
 * What the `overflow` option needs: the handler's requirements, or `Session | Summarizer` for a policy.
 *
 * @since 0.1.0
 * @category models
 */
export type OverflowRequirements<O> = O extends { readonly handle: (ctx: any) => Effect.Effect<any, any, infer R> } ? R
  : O extends CompactionPolicy ? Session | Summarizer
  : never

/**
 * A tool call about to start (the pre-execution policy sees it before `tool/call` is written).
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolCallRequest {
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/**
 * The composition of the next model request (SPEC §5.3 "Choosing H"): the rendered system prompt
 * and, optionally, the names of the toolkit's tools offered to the model. A switch (a mode, a
 * config option) takes effect at the next model call, whose header then differs (`change`).
 *
 * @since 0.1.0
 * @category models
 */
export interface Composition {
  readonly system: string
  /** The toolkit's tools offered, by name, in toolkit order (default: all of them). */
  readonly tools?: ReadonlyArray<string>
}

/**
 * What the pre-execution policy decides: run the call (`void`), or deny it — the call is
 * recorded (`tool/call`) and answered by an error `tool/result` with `text` and `code`, its body
 * never runs.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolCallDecision = void | {
  readonly deny: { readonly text: string; readonly code: string; readonly name?: string }
}

/**
 * Options of one loop instance.
 *
 * @since 0.1.0
 * @category models
 */
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
  /** Read before every model call: replaces `system` and narrows the tools offered (modes). */
  readonly compose?: Effect.Effect<Composition>
  /** Runs at every pre-step boundary, inside the turn, before `step/start` (compaction, pruning). */
  readonly preStep?: (ctx: PreStepContext) => Effect.Effect<void, EP, RP>
  /** Pre-execution policy: runs before a call's `tool/call` is written (interruptible, e.g. approval); may deny. */
  readonly beforeToolCall?: (call: ToolCallRequest) => Effect.Effect<ToolCallDecision, never, RB>
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

/**
 * Options of one turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnOptions {
  /** Declare a new message series for this turn's first model request. */
  readonly newSeries?: boolean
}

/**
 * A `turn/end` reason written by the loop.
 *
 * @since 0.1.0
 * @category models
 */
export type TurnEndReason =
  | { readonly kind: "completed" }
  | { readonly kind: "max-tokens" }
  | { readonly kind: "error"; readonly error: Failure }
  | { readonly kind: "aborted"; readonly reason: { readonly kind: "user" } }

/**
 * The outcome of a turn that ran to its `turn/end`.
 *
 * @since 0.1.0
 * @category models
 */
export interface TurnResult {
  readonly turn: number
  readonly reason: TurnEndReason
  readonly steps: number
}

/**
 * Failures of a turn: the log itself could not be written (the turn still ends when it can).
 *
 * @since 0.1.0
 * @category errors
 */
export type AgentError = AppendError | FlushError | RequestHeaderInvalid

/**
 * A loop instance (SPEC §5.3): keeps its own first-request flag.
 *
 * @since 0.1.0
 * @category models
 */
export interface AgentLoop<R> {
  readonly runTurn: (
    input: ReadonlyArray<UserInput>,
    options?: TurnOptions
  ) => Effect.Effect<TurnResult, AgentError, R>
}
