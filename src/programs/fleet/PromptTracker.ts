/**
 * The updates of a streamed prompt (docs/fleet.md "Streaming"): `PromptUpdate`, and the pure
 * tracker that turns a session's committed events into the updates of one prompt's attempts.
 * Internal to the fleet: `Fleet` re-exports it.
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"
import { PromptAnswer } from "./Protocol.js"

/**
 * One update of a streamed prompt (`promptStream`), each from a committed event of the session's
 * log (`seq`): the prompt's turn started (`TurnStarted`: its user message is stored), a text delta
 * of the assistant (`TextDelta`), a tool call (`ToolCall`) and its result (`ToolResult`), the turn
 * ended (`TurnEnded`, with its `turn/end` reason's kind: `interrupted` for a turn a dead runner
 * left open, closed by the new owner's repair), and last the prompt's answer (`Answered`).
 * `attempt` is the attempt the turn belongs to (1, then 2 when a runner died or was moved mid-turn).
 *
 * @since 0.2.0
 * @category models
 */
export const PromptUpdate = Schema.Union(
  Schema.TaggedStruct("TurnStarted", { turn: Schema.Number, attempt: Schema.Number, seq: Schema.Number }),
  Schema.TaggedStruct("TextDelta", { turn: Schema.Number, attempt: Schema.Number, seq: Schema.Number, text: Schema.String }),
  Schema.TaggedStruct("ToolCall", {
    turn: Schema.Number,
    attempt: Schema.Number,
    seq: Schema.Number,
    callId: Schema.String,
    name: Schema.String,
    arguments: Schema.String
  }),
  Schema.TaggedStruct("ToolResult", {
    turn: Schema.Number,
    attempt: Schema.Number,
    seq: Schema.Number,
    callId: Schema.String,
    isError: Schema.Boolean
  }),
  Schema.TaggedStruct("TurnEnded", { turn: Schema.Number, attempt: Schema.Number, seq: Schema.Number, reason: Schema.String }),
  Schema.TaggedStruct("Answered", { answer: PromptAnswer })
)

/**
 * One update of a streamed prompt.
 *
 * @since 0.2.0
 * @category models
 */
export type PromptUpdate = typeof PromptUpdate.Type

/**
 * The attempt a user message's id names for `promptId`: 1 for `<promptId>`, n for
 * `<promptId>#<n>`, undefined for another prompt's message.
 *
 * @since 0.2.0
 * @category utils
 */
export const attemptOf = (messageId: unknown, promptId: string): number | undefined => {
  if (messageId === promptId) return 1
  if (typeof messageId !== "string" || !messageId.startsWith(`${promptId}#`)) return undefined
  const n = Number(messageId.slice(promptId.length + 1))
  return Number.isInteger(n) && n >= 2 ? n : undefined
}

/**
 * The state of `trackPrompt`: the turn the log is in (0 outside a turn, or when its `turn/start`
 * was not read) and the turns of the prompt's attempts.
 *
 * @since 0.2.0
 * @category models
 */
export interface PromptTracker {
  readonly promptId: string
  turn: number
  readonly attempts: Map<number, number>
}

/**
 * A tracker of `promptId`'s turns, for a log read from any seq on.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makePromptTracker = (promptId: string): PromptTracker => ({ promptId, turn: 0, attempts: new Map() })

/**
 * The updates one committed event makes for the tracked prompt (none for another prompt's turns).
 * Fed the events of a log in seq order, in chunks of any size, it gives the same updates.
 *
 * @since 0.2.0
 * @category utils
 */
export const trackPrompt = (tracker: PromptTracker, event: unknown): ReadonlyArray<PromptUpdate> => {
  const e = event as { readonly seq: number; readonly type: string; readonly data: Record<string, any> }
  const data = e.data ?? {}
  switch (e.type) {
    case "turn/start":
      tracker.turn = data.turn as number
      return []
    case "user/message": {
      const attempt = attemptOf(data.id, tracker.promptId)
      // a message whose turn/start came before the followed part of the log is not tracked
      if (attempt === undefined || tracker.turn === 0 || tracker.attempts.has(tracker.turn)) return []
      tracker.attempts.set(tracker.turn, attempt)
      return [{ _tag: "TurnStarted", turn: tracker.turn, attempt, seq: e.seq }]
    }
    case "assistant/chunk": {
      const attempt = tracker.attempts.get(data.turn)
      const chunk = data.chunk as { readonly type?: unknown; readonly text?: unknown }
      return attempt !== undefined && chunk?.type === "text-delta" && typeof chunk.text === "string" && chunk.text !== ""
        ? [{ _tag: "TextDelta", turn: data.turn, attempt, seq: e.seq, text: chunk.text }]
        : []
    }
    case "tool/call": {
      const attempt = tracker.attempts.get(data.turn)
      return attempt === undefined ? [] : [{
        _tag: "ToolCall",
        turn: data.turn,
        attempt,
        seq: e.seq,
        callId: String(data.callId),
        name: String(data.name),
        arguments: String(data.arguments)
      }]
    }
    case "tool/result": {
      const attempt = tracker.attempts.get(data.turn)
      const block = (data.message?.content ?? [])[0] as { readonly toolCallId?: unknown; readonly isError?: unknown } | undefined
      return attempt === undefined ? [] : [{
        _tag: "ToolResult",
        turn: data.turn,
        attempt,
        seq: e.seq,
        callId: String(block?.toolCallId ?? data.message?.source?.callId ?? ""),
        isError: block?.isError === true
      }]
    }
    case "turn/end": {
      const attempt = tracker.attempts.get(data.turn)
      tracker.turn = 0
      return attempt === undefined ? [] : [{ _tag: "TurnEnded", turn: data.turn, attempt, seq: e.seq, reason: String(data.reason?.kind) }]
    }
    default:
      return []
  }
}
