/**
 * Prompts in and stop reasons out (docs/acp.md §2.4): the baseline prompt capabilities (text and
 * resource links; nothing the library cannot store is advertised), one user message per prompt
 * (text blocks in order, resource links as bracketed references), and a turn's `turn/end` reason
 * as an ACP stop reason, or a failure.
 */
import type * as acp from "@agentclientprotocol/sdk"
import type { Event } from "../../schema/Events.js"
import type { TurnEndReason } from "../agent/TurnTypes.js"
import { AcpRejected, invalidParams } from "./AcpErrors.js"

/** What `initialize` advertises: the baseline only. */
export const PROMPT_CAPABILITIES: acp.PromptCapabilities = { image: false, audio: false, embeddedContext: false }

/** The prompt as the text of one user message, or a rejection of a block that is not advertised. */
export const promptText = (blocks: ReadonlyArray<acp.ContentBlock>, sessionId: string): string | AcpRejected => {
  const parts: Array<string> = []
  for (const block of blocks) {
    if (block.type === "text") parts.push(block.text)
    else if (block.type === "resource_link") parts.push(`[@${block.name}](${block.uri})`)
    else return invalidParams(`prompt content of type "${block.type}" is not supported`, sessionId)
  }
  const text = parts.join("\n")
  return text.trim() === "" ? invalidParams("the prompt is empty", sessionId) : text
}

/** Whether the turn's last model call finished with a provider refusal (content filter). */
const refused = (turnEvents: ReadonlyArray<Event>): boolean => {
  for (let i = turnEvents.length - 1; i >= 0; i--) {
    const e = turnEvents[i]!
    if (e.type !== "assistant/chunk") continue
    const chunk = (e.data as { chunk?: { type?: unknown; reason?: { providerReason?: unknown } } }).chunk
    if (chunk?.type === "finish") return chunk.reason?.providerReason === "content-filter"
  }
  return false
}

/** The stop reason of a turn that ran to its `turn/end`, or the failure to answer with. */
export const stopReasonOf = (
  reason: TurnEndReason,
  turnEvents: ReadonlyArray<Event>,
  sessionId: string
): acp.StopReason | AcpRejected => {
  switch (reason.kind) {
    case "completed":
      return refused(turnEvents) ? "refusal" : "end_turn"
    case "max-tokens":
      return "max_tokens"
    case "aborted":
      return "cancelled"
    case "error":
      return reason.error.code === "MAX_STEPS" ? "max_turn_requests" : new AcpRejected({
        code: "internal",
        detail: `the turn failed: ${reason.error.message}`,
        sessionId,
        data: { turnEnd: reason }
      })
  }
}
