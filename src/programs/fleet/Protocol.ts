/**
 * The `AgentSession` entity's RPC protocol (docs/fleet.md): the prompt request, its answer, the
 * status and transcript payloads, and the four RPCs (`prompt`, `cancel`, `status`, `load`).
 * Internal to the fleet: `Fleet` re-exports it.
 *
 * @since 0.2.0
 */
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import * as Rpc from "@effect/rpc/Rpc"
import * as PrimaryKey from "effect/PrimaryKey"
import * as Schema from "effect/Schema"
import { SessionLogError } from "../../schema/Errors.js"


/**
 * A prompt for a session. `promptId` names it: the cluster stores the message under it (a prompt
 * sent twice with one id is run once), and the turn's user message carries it as its id
 * (`<promptId>` for the first attempt, `<promptId>#<n>` for a later one), so the log tells whether
 * the prompt was answered.
 *
 * @since 0.2.0
 * @category models
 */
export class PromptRequest extends Schema.Class<PromptRequest>("effect-session-log/fleet/PromptRequest")({
  promptId: Schema.NonEmptyString,
  text: Schema.String
}) {
  /**
   * The cluster's deduplication key (per session): the prompt id.
   *
   * @since 0.2.0
   */
  [PrimaryKey.symbol](): string {
    return this.promptId
  }
}

/**
 * The answer to a prompt: the turn that answered it, how it ended, the assistant's text, which
 * attempt answered (1 unless a runner died or was moved mid-turn) and the runner that ran it.
 * `replayed` is true when the answer was read from the log (the turn had ended before the reply
 * could be sent) rather than produced by this delivery.
 *
 * @since 0.2.0
 * @category models
 */
export const PromptAnswer = Schema.Struct({
  sessionId: Schema.String,
  promptId: Schema.String,
  turn: Schema.Number,
  reason: Schema.String,
  text: Schema.String,
  attempt: Schema.Number,
  runner: Schema.String,
  replayed: Schema.Boolean
})

/**
 * The answer to a prompt.
 *
 * @since 0.2.0
 * @category models
 */
export type PromptAnswer = typeof PromptAnswer.Type

/**
 * What `status` reports: the owning runner, the log's length and turns, and whether a turn runs.
 *
 * @since 0.2.0
 * @category models
 */
export const SessionStatus = Schema.Struct({
  sessionId: Schema.String,
  runner: Schema.String,
  events: Schema.Number,
  turns: Schema.Number,
  busy: Schema.Boolean
})

/**
 * What `status` reports.
 *
 * @since 0.2.0
 * @category models
 */
export type SessionStatus = typeof SessionStatus.Type

/**
 * One entry of the transcript `load` returns: an append-origin message event and its text.
 *
 * @since 0.2.0
 * @category models
 */
export const TranscriptEntry = Schema.Struct({
  seq: Schema.Number,
  type: Schema.String,
  text: Schema.String
})

/**
 * One transcript entry.
 *
 * @since 0.2.0
 * @category models
 */
export type TranscriptEntry = typeof TranscriptEntry.Type

/**
 * `prompt`: run a turn for the prompt (or answer it from the log when it was answered already).
 * Persisted: the message is stored in the cluster's SQL message storage before it is delivered,
 * and a runner that takes the session's shard over delivers it again when no reply was stored.
 * A client that stops waiting does not cancel it (uninterruptible for the client): `cancel` does.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Prompt = Rpc.make("prompt", { payload: PromptRequest, success: PromptAnswer, error: SessionLogError })
  .annotate(ClusterSchema.Persisted, true)
  // a client that stops waiting (a timeout, Ctrl-C, its process ending) does not cancel the
  // prompt: it stays stored and runs; `cancel` is the way to stop a turn
  .annotate(ClusterSchema.Uninterruptible, "client")

/**
 * `cancel`: interrupt the turn in flight (it ends `aborted`); answers whether one was running.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Cancel = Rpc.make("cancel", { success: Schema.Boolean })

/**
 * `status`: the owning runner and the session's size.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Status = Rpc.make("status", { success: SessionStatus, error: SessionLogError })

/**
 * `load`: the transcript (SPEC §4.7) as text entries.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Load = Rpc.make("load", { success: Schema.Array(TranscriptEntry), error: SessionLogError })

/**
 * The `AgentSession` entity: one per session id.
 *
 * @since 0.2.0
 * @category entities
 */
export const AgentSession = Entity.make("AgentSession", [Prompt, Cancel, Status, Load])
