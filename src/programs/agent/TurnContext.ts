/**
 * What one running turn of the agent loop shares with its steps (SPEC §1.6): the loop instance's
 * request state, the turn's session, services and hooks, the state of the step in flight, and how
 * failures become `turn/end` error reasons (SPEC §1.3.2).
 */
import * as AiError from "@effect/ai/AiError"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type { Event } from "../../schema/Events.js"
import type { ToolCallBlock } from "../../schema/Messages.js"
import type { ToolSpec } from "../../schema/RequestHeader.js"
import type { HeaderSnapshotterShape } from "../../services/HeaderSnapshotter.js"
import type { Failure } from "../../services/PromptConversion.js"
import type { FlushError, SessionShape } from "../../services/Session.js"
import type { Composition, OverflowRetry, Route, ToolCallDecision, ToolCallRequest } from "./TurnTypes.js"

/** Internal: the model call, a checkpoint or a hook failed; the turn ends `error` with `failure`. */
export class TurnFailed extends Schema.TaggedError<TurnFailed>()("TurnFailed", { failure: Schema.Unknown }) {}

/** The request state of one loop instance (SPEC §5.3): its first-request flag and a pending new series. */
export interface LoopState {
  system: string
  readonly route: Route
  tools: ReadonlyArray<ToolSpec>
  /** The composition hook (modes); when set, `system`, `tools` and `offered` follow it per call. */
  readonly compose?: Effect.Effect<Composition> | undefined
  /** The names of the tools offered by the latest composition (undefined: all). */
  offered?: ReadonlyArray<string> | undefined
  firstOfInstance: boolean
  newSeries: boolean
}

/** What a running turn shares with its steps; `R` is what the tool handlers and the hooks need. */
export interface TurnContext<R> {
  readonly loop: LoopState
  readonly session: SessionShape
  readonly snapshotter: HeaderSnapshotterShape
  readonly toolkit: Toolkit.WithHandler<any>
  /** Runs a tool's handler with parsed arguments. */
  readonly handle: (name: string, params: unknown) => Effect.Effect<unknown, unknown, R>
  /** A tool call's parameters as the raw JSON arguments of its chunks. */
  readonly encodeParams: (name: string, params: unknown) => string
  /** The checkpoint policy of SPEC §7.3 is on. */
  readonly checkpointOn: boolean
  readonly overflow: OverflowRetry<R> | undefined
  readonly beforeToolCall: ((call: ToolCallRequest) => Effect.Effect<ToolCallDecision, never, R>) | undefined
}

/** The state of one step, read by its finaliser. */
export interface StepState {
  phase: "input" | "streaming" | "tools"
  chunks: Array<Event>
  calls: ReadonlyArray<ToolCallBlock>
  /** callId → tool/call seq and whether the body started */
  dispatched: Map<string, { readonly seq: number; started: boolean }>
  answered: Set<string>
}

const describe = (e: unknown): string => {
  if (e instanceof Error) return e.cause === undefined ? e.message : `${e.message}: ${describe(e.cause)}`
  if (typeof e === "object" && e !== null && "message" in e) return String((e as { message: unknown }).message)
  return String(e)
}

/** Non-model failures flattened to `{ message: <cause chain text>, code: "UNKNOWN" }` (SPEC §1.3.2). */
export const flattenCause = (cause: Cause.Cause<unknown>): Failure => {
  const texts: Array<string> = []
  for (const e of Cause.failures(cause)) texts.push(describe(e))
  for (const d of Cause.defects(cause)) texts.push(describe(d))
  return { message: texts.length === 0 ? "unknown failure" : texts.join(": "), code: "UNKNOWN" }
}

/** The failure identity of a tool body that failed. */
export const toolError = (
  cause: Cause.Cause<unknown>
): { readonly name: string; readonly code: string; readonly text: string } => {
  const failure = Cause.failureOption(cause)
  if (Option.isSome(failure)) {
    const e = failure.value as Record<string, unknown>
    const name = typeof e?._tag === "string" ? e._tag : "ToolError"
    const code = typeof e?.code === "string" ? e.code : AiError.isAiError(failure.value) ? "TOOL_INPUT_INVALID" : "TOOL_FAILED"
    return { name, code, text: describe(failure.value) }
  }
  return { name: "ToolDefect", code: "TOOL_DEFECT", text: flattenCause(cause).message }
}

/** A hook failure ends the turn `error` (code `UNKNOWN`); interruption propagates. */
export const hookFailed = (cause: Cause.Cause<unknown>): Effect.Effect<never, TurnFailed> =>
  Cause.isInterruptedOnly(cause) ? Effect.interrupt : new TurnFailed({ failure: flattenCause(cause) })

/**
 * A failed checkpoint is fail-closed: the turn ends `error` with `CHECKPOINT_FAILED` (SPEC §7.3).
 * `transient` says whether the store could not be reached (a `StoreFailure` without a rule id), as
 * opposed to a verdict on the data: the fleet runs the prompt of such a turn again.
 */
export const checkpointFailed = (e: FlushError): TurnFailed =>
  new TurnFailed({
    failure: {
      message: e.message,
      code: "CHECKPOINT_FAILED",
      transient: e._tag === "StoreFailure" && e.rule === undefined
    }
  })
