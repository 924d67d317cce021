/**
 * The checkpoint policy of the agent loop (SPEC §7.3): flush the current `Session` before a model
 * request is pulled, before a top-level tool body runs (nested calls reuse the outer checkpoint)
 * and at every pre-step boundary. Fail-closed: a failed flush fails the checkpoint and neither
 * model nor tool runs. With a durable handle every checkpoint is a no-op (nothing is pending).
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as HashSet from "effect/HashSet"
import * as Stream from "effect/Stream"
import { type FlushError, Session } from "../../services/Session.js"

/**
 * The error code of a tool call that was not run because interruption landed on its checkpoint.
 *
 * @since 0.1.0
 * @category constants
 */
export const ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"

/**
 * Returned by `beforeToolBody` instead of running the body; the loop records an error result.
 *
 * @since 0.1.0
 * @category models
 */
export class AbortedBeforeDispatch {
  /**
   * Tells the marker apart from a tool's own result.
   *
   * @since 0.1.0
   */
  readonly _tag = "AbortedBeforeDispatch"
  /**
   * The error code of the canonical tool result it becomes (SPEC §1.3.9).
   *
   * @since 0.1.0
   */
  readonly code = ABORTED_BEFORE_DISPATCH
}

/**
 * Whether a `beforeToolBody` outcome is the abort marker.
 *
 * @since 0.1.0
 * @category utils
 */
export const isAbortedBeforeDispatch = (u: unknown): u is AbortedBeforeDispatch => u instanceof AbortedBeforeDispatch

/**
 * The `error` of the canonical tool result of an aborted call (SPEC §1.3.9).
 *
 * @since 0.1.0
 * @category utils
 */
export const abortedBeforeDispatchError = { name: "AbortedBeforeDispatchError", code: ABORTED_BEFORE_DISPATCH } as const

/**
 * The data of the canonical `tool/result` of a call skipped by its checkpoint (cite its `tool/call`).
 *
 * @since 0.1.0
 * @category utils
 */
export const abortedBeforeDispatchResult = (options: {
  readonly turn: number
  readonly step: number
  readonly callId: string
  readonly messageId?: string
}) => ({
  turn: options.turn,
  step: options.step,
  message: {
    id: options.messageId ?? `aborted-tool-result-${options.callId}`,
    role: "user" as const,
    content: [{
      type: "tool-result" as const,
      toolCallId: options.callId,
      content: [{ type: "text" as const, text: "This tool call was cancelled before it started, so it did not run." }],
      isError: true
    }],
    source: { kind: "tool" as const, callId: options.callId }
  },
  error: abortedBeforeDispatchError
})

/** Set while a tool body runs under its checkpoint: nested tool calls do not flush again. */
const insideToolBody = FiberRef.unsafeMake(false)

/**
 * (c) The pre-step checkpoint: flush everything pending.
 *
 * @since 0.1.0
 * @category accessors
 */
export const atPreStep: Effect.Effect<void, FlushError, Session> = Effect.flatMap(Session, (s) => s.flush).pipe(
  Effect.withSpan("Checkpoint.atPreStep")
)

/**
 * (a) The model-request checkpoint: flush after the header events, before the model is called.
 *
 * @since 0.1.0
 * @category accessors
 */
export const beforeModelRequest: Effect.Effect<void, FlushError, Session> = Effect.flatMap(Session, (s) => s.flush)
  .pipe(Effect.withSpan("Checkpoint.beforeModelRequest"))

/**
 * (a), lazily: the checkpoint runs when the model's response stream is first pulled.
 *
 * @since 0.1.0
 * @category utils
 */
export const guardModelStream = <A, E, R>(
  stream: Stream.Stream<A, E, R>
): Stream.Stream<A, E | FlushError, R | Session> => Stream.unwrap(Effect.as(beforeModelRequest, stream))

/**
 * (b) The tool checkpoint: flush, then run `body`. If interruption lands during the flush the
 * body is not run and `AbortedBeforeDispatch` is returned; the interruption stays pending, so
 * handle the marker in the same uninterruptible region, e.g.
 * `Effect.uninterruptibleMask((restore) => beforeToolBody(restore(body)).pipe(Effect.tap(record)))`.
 * A failed flush fails (fail-closed). Nested calls inside a body run directly.
 *
 * @since 0.1.0
 * @category utils
 */
export const beforeToolBody = <A, E, R>(
  body: Effect.Effect<A, E, R>
): Effect.Effect<A | AbortedBeforeDispatch, E | FlushError, R | Session> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      if (yield* FiberRef.get(insideToolBody)) return yield* restore(body)
      const session = yield* Session
      const flushed = yield* Effect.exit(Effect.interruptible(session.flush))
      if (Exit.isFailure(flushed)) {
        if (Cause.isInterruptedOnly(flushed.cause)) return new AbortedBeforeDispatch()
        return yield* Effect.failCause(flushed.cause)
      }
      // an interruption that arrived while an uninterruptible write of the flush was in progress
      if (HashSet.size((yield* Effect.descriptor).interruptors) > 0) return new AbortedBeforeDispatch()
      return yield* restore(Effect.locally(body, insideToolBody, true))
    })
  ).pipe(Effect.withSpan("Checkpoint.beforeToolBody"))
