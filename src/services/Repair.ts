/**
 * Crash repair (SPEC §6): explicit closers for an interrupted tail turn — results for pending
 * tool calls, then `step/end`, then `turn/end { kind: "interrupted" }` — as a pure function
 * behind the `Repair` tag, so a different policy can be provided as a layer.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import type { Event } from "../schema/Events.js"
import { isRecord } from "../schema/Validation.js"

/**
 * Text of the result for a call recorded as started (exact, SPEC §6).
 *
 * @since 0.1.0
 * @category constants
 */
export const REPAIR_TEXT_OUTCOME_UNKNOWN =
  "This tool call was interrupted after it was recorded as started, so its outcome is unknown: it may or may not have taken effect. Retry it only if it is read-only or idempotent. Otherwise check the current state first, or ask the user. Do not retry blindly."

/**
 * Text of the result for a call never recorded as started (exact, SPEC §6).
 *
 * @since 0.1.0
 * @category constants
 */
export const REPAIR_TEXT_NOT_STARTED =
  "This tool call was interrupted before it was recorded as started, so it did not run. Retry it if it is still needed."

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v)

/**
 * The closers for a contiguous log that may end inside a turn (empty if no turn is open): a
 * `tool/result` for every tool call of the unfinished step still unanswered
 * (`TOOL_OUTCOME_UNKNOWN` when its `tool/call` was recorded, `TOOL_NOT_STARTED` otherwise), then
 * `step/end` if a step is open, then `turn/end { kind: "interrupted" }`. Pure: the events are
 * numbered after the last one and nothing is appended (`Session.open` appends them).
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { Repair, Session, SessionLive } from "effect-session-log"
 *
 * // what opening session "s1" would append, without writing anything (needs a SessionStore)
 * const preview = Effect.map(SessionLive.inspect("s1"), (inspected) => inspected.closers)
 *
 * // the closers of the current session's log, computed in memory
 * const pending = Effect.flatMap(Session.Session, (session) => Effect.map(session.events, Repair.closers))
 * ```
 *
 * @since 0.1.0
 * @category utils
 */
export const closers = (events: ReadonlyArray<Event>): Array<Event> => {
  let openTurn: number | undefined
  let openStep: number | undefined
  let pending = new Map<string, { step: number; callSeq?: number }>()
  for (const event of events) {
    const data = event.data
    if (!isRecord(data)) continue
    switch (event.type) {
      case "turn/start":
        if (isInt(data.turn)) {
          openTurn = data.turn
          openStep = undefined
          pending = new Map()
        }
        break
      case "turn/end":
        openTurn = undefined
        openStep = undefined
        pending = new Map()
        break
      case "step/start":
        if (isInt(data.step)) openStep = data.step
        break
      case "step/end":
        pending = new Map()
        openStep = undefined
        break
      case "assistant/message": {
        const message = data.message
        if (!isRecord(message) || !Array.isArray(message.content) || !isInt(data.step)) break
        for (const block of message.content) {
          if (isRecord(block) && block.type === "tool-call" && typeof block.id === "string") {
            // re-registering keeps the map position
            pending.set(block.id, { step: data.step })
          }
        }
        break
      }
      case "tool/call": {
        if (typeof data.callId !== "string") break
        const entry = pending.get(data.callId)
        if (entry !== undefined) entry.callSeq = event.seq
        break
      }
      case "tool/result": {
        const message = data.message
        if (isRecord(message) && isRecord(message.source) && typeof message.source.callId === "string") {
          pending.delete(message.source.callId)
        }
        break
      }
    }
  }
  if (openTurn === undefined) return []
  const turn = openTurn
  const last = events[events.length - 1]
  const time = last.time
  let seq = last.seq + 1
  const out: Array<Event> = []
  for (const [callId, { callSeq, step }] of pending) {
    const recorded = callSeq !== undefined
    const data = {
      turn,
      step,
      message: {
        id: `interrupted-tool-result-${callId}-${seq}`,
        role: "user",
        content: [{
          type: "tool-result",
          toolCallId: callId,
          content: [{ type: "text", text: recorded ? REPAIR_TEXT_OUTCOME_UNKNOWN : REPAIR_TEXT_NOT_STARTED }],
          isError: true
        }],
        source: { kind: "tool", callId }
      },
      error: recorded
        ? { name: "ToolOutcomeUnknownError", code: "TOOL_OUTCOME_UNKNOWN" }
        : { name: "ToolNotStartedError", code: "TOOL_NOT_STARTED" }
    }
    out.push(
      recorded
        ? { type: "tool/result", seq, time, data, sourceEventSeqs: [callSeq], surfaceOp: "append" }
        : { type: "tool/result", seq, time, data, surfaceOp: "append" }
    )
    seq++
  }
  if (openStep !== undefined) {
    out.push({ type: "step/end", seq, time, data: { turn, step: openStep } })
    seq++
  }
  out.push({ type: "turn/end", seq, time, data: { turn, reason: { kind: "interrupted" } } })
  return out
}

/**
 * The Repair service shape.
 *
 * @since 0.1.0
 * @category models
 */
export interface RepairShape {
  readonly closers: (events: ReadonlyArray<Event>) => ReadonlyArray<Event>
}

/**
 * The Repair service: computes crash closers (the SPEC §6 policy unless a layer provides another).
 * `Session.open` and `inspect` read it; it is a `Context.Reference`, so nothing needs to provide it.
 *
 * @example
 * ```ts
 * import * as Layer from "effect/Layer"
 * import { Repair, SessionLive } from "effect-session-log"
 *
 * // the SPEC §6 closers, reported on stderr whenever a session is opened after a crash
 * const reportingRepair = Layer.succeed(Repair.Repair, {
 *   closers: (events) => {
 *     const closers = Repair.closers(events)
 *     if (closers.length > 0) console.error(`closing an interrupted turn with ${closers.length} events`)
 *     return closers
 *   }
 * })
 *
 * const session = SessionLive.layerOpen("s1").pipe(Layer.provide(reportingRepair))
 * ```
 *
 * @since 0.1.0
 * @category tags
 */
export class Repair extends Context.Reference<Repair>()("effect-session-log/Repair", {
  defaultValue: (): RepairShape => ({ closers })
}) {}

/**
 * The standard repair policy of SPEC §6 (the Reference's default, as a layer).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Repair> = Layer.succeed(Repair, { closers })
