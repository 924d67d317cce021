/**
 * What the log says about a prompt's attempts (docs/fleet.md): the attempts found for a prompt id,
 * which of them answered it, and the store-retry policy of a prompt (which failures are transient,
 * the default schedule, the defect when the store stays unreachable). Internal to the fleet:
 * `Fleet` re-exports the public part.
 *
 * @since 0.2.0
 */
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type { StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"

/**
 * One attempt at a prompt found in the log: its turn, the assistant's text in it and, once
 * written, how the turn ended (its `turn/end` reason's kind). `storeFailed` is the message of a
 * turn that ended `error` because a checkpoint could not be written for a transient store failure
 * (`CHECKPOINT_FAILED` of a `StoreFailure` without a rule id): such a turn did not answer its prompt.
 *
 * @since 0.2.0
 * @category models
 */
export interface Attempt {
  readonly turn: number
  end: string | undefined
  text: string
  storeFailed?: string
}

// how a StoreFailure without a rule id renders (StoreFailure.message): what says "transient" in a
// CHECKPOINT_FAILED end written before the end carried its `transient` flag
const TRANSIENT_STORE_MESSAGE = "store failure in "

/**
 * The message of a `turn/end` reason that a transient store failure of a checkpoint caused: a
 * `CHECKPOINT_FAILED` error whose `transient` flag is `true`, or, in an end written before the flag
 * was (no `transient` key), whose message is that of a `StoreFailure` without a rule id.
 *
 * @since 0.2.0
 * @category utils
 */
export const storeFailedOf = (reason: unknown): string | undefined => {
  const r = reason as
    | { readonly kind?: unknown; readonly error?: { readonly code?: unknown; readonly message?: unknown; readonly transient?: unknown } }
    | undefined
  const error = r?.error
  if (r?.kind !== "error" || error?.code !== "CHECKPOINT_FAILED" || typeof error.message !== "string") return undefined
  const transient = typeof error.transient === "boolean"
    ? error.transient
    : error.message.startsWith(TRANSIENT_STORE_MESSAGE)
  return transient ? error.message : undefined
}

/**
 * The text of a message's content: its text blocks joined.
 *
 * @since 0.2.0
 * @category utils
 */
export const textOf = (content: unknown): string =>
  Array.isArray(content)
    ? content.flatMap((b: { readonly type?: unknown; readonly text?: unknown }) =>
      b?.type === "text" && typeof b.text === "string" ? [b.text] : []
    ).join("")
    : ""

/**
 * The id of the user message of attempt `n` at `promptId`: `<promptId>`, then `<promptId>#<n>`.
 *
 * @since 0.2.0
 * @category utils
 */
export const attemptId = (promptId: string, n: number): string => n === 1 ? promptId : `${promptId}#${n}`

/**
 * The attempts at `promptId` in a log, in order: each `user/message` whose id is the prompt's
 * (`<promptId>` or `<promptId>#<n>`), the turn it opened, the assistant text of that turn and its
 * `turn/end` reason.
 *
 * @since 0.2.0
 * @category utils
 */
export const attemptsOf = (events: ReadonlyArray<Event>, promptId: string): ReadonlyArray<Attempt> => {
  const attempts: Array<Attempt> = []
  const byTurn = new Map<number, Attempt>()
  let turn = 0
  for (const e of events) {
    const data = e.data as Record<string, unknown>
    if (e.type === "turn/start") turn = data.turn as number
    else if (e.type === "user/message") {
      const id = (data as { readonly id?: unknown }).id
      if (typeof id === "string" && (id === promptId || id.startsWith(`${promptId}#`)) && !byTurn.has(turn)) {
        const a: Attempt = { turn, end: undefined, text: "" }
        attempts.push(a)
        byTurn.set(turn, a)
      }
    } else if (e.type === "assistant/message") {
      const a = byTurn.get(data.turn as number)
      if (a !== undefined) a.text += textOf((data.message as { readonly content?: unknown }).content)
    } else if (e.type === "turn/end") {
      const a = byTurn.get(data.turn as number)
      if (a !== undefined) {
        const reason = data.reason as { readonly kind: string }
        a.end = reason.kind
        const failed = storeFailedOf(reason)
        if (failed !== undefined) a.storeFailed = failed
      }
    }
  }
  return attempts
}

/**
 * Whether an attempt answered its prompt. A turn cut by a runner's death (repair's closers) or by
 * a shard move (interrupted: `aborted`), or ended by a store that could not be reached, did not
 * answer its prompt: it is run again.
 *
 * @since 0.2.0
 * @category utils
 */
export const answered = (a: Attempt): boolean =>
  a.end !== undefined && a.end !== "interrupted" && a.end !== "aborted" && a.storeFailed === undefined

/**
 * Whether an error is a transient failure of the store: a `StoreFailure` without a rule id (the
 * database could not be reached, a query timed out). A `StoreFailure` carrying a rule id is a
 * verdict on the data (a rule broken), as are the other errors: those are a prompt's answer.
 *
 * @since 0.2.0
 * @category utils
 */
export const isTransientStoreFailure = (error: unknown): error is StoreFailure =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "StoreFailure" &&
  (error as { readonly rule?: unknown }).rule === undefined

/**
 * The default of `FleetOptions.storeRetry`: six retries, 100 ms apart then doubling (6.3 s of
 * waits, about 10 s in all with the failing attempts' own time).
 *
 * @since 0.2.0
 * @category constants
 */
export const DEFAULT_STORE_RETRY: Schedule.Schedule<unknown, unknown> = Schedule.exponential("100 millis").pipe(
  Schedule.intersect(Schedule.recurs(6))
)

/**
 * The defect a prompt dies with when the store stayed unreachable through its retries. A defect
 * is not stored as the prompt's reply: the cluster restarts the entity and delivers the prompt
 * again (with its own backoff, at most 10 s apart) until the store answers.
 *
 * @since 0.2.0
 * @category errors
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  sessionId: Schema.String,
  promptId: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `the store of session ${this.sessionId} stayed unreachable while prompt ${this.promptId} was served ` +
      `(${cause}); the prompt stays stored and is delivered again`
  }
}
