/**
 * The one event → `session/update` projection of the ACP adapter (docs/acp.md §2.5), used by live
 * updates (`live: true`: text and reasoning deltas as they are committed) and by `session/load`
 * replay (`live: false`: committed blocks, and each tool call folded into the `tool_call` that
 * announced it), so the two cannot drift: replay is what `coalesce` makes of the live updates.
 * Chunks of one model attempt share a `messageId` derived from the attempt's first chunk seq, which
 * both paths know (the library's message id is assigned only after the stream ended). Replacements
 * (compaction, pruning) are never shown as new messages; a compaction is a `compaction_update` for
 * clients that advertised it.
 */
import type * as acp from "@agentclientprotocol/sdk"
import type { Event } from "../../schema/Events.js"
import type { ContentBlock } from "../../schema/Messages.js"
import { type AcpMode, configOptions, MODE_EVENT } from "./AcpModes.js"

/** How a tool call is shown: a pure function of the tool's name and raw JSON arguments. */
export type ToolPresenter = (name: string, args: unknown) => {
  readonly title: string
  readonly kind: acp.ToolKind
  readonly locations?: ReadonlyArray<acp.ToolCallLocation>
}

/** Options of a projection. */
export interface ProjectionOptions {
  /** Live (deltas, mode updates) or load replay (committed blocks, user messages). */
  readonly live: boolean
  /** The client advertised `session.compaction`. */
  readonly compaction: boolean
  readonly presenter: ToolPresenter
  /**
   * The mode catalog: with it a live mode switch is also a `config_option_update` (the `mode`
   * select option), for clients that follow config options rather than session modes.
   */
  readonly modes?: ReadonlyArray<AcpMode>
}

/** The default presenter: the tool name as title, kind `other`. */
export const defaultPresenter: ToolPresenter = (name) => ({ title: name, kind: "other" })

/** Arguments as JSON when they parse, else the raw text. */
export const parseArgs = (raw: unknown): unknown => {
  if (typeof raw !== "string") return raw
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

const record = (v: unknown): Record<string, unknown> =>
  typeof v === "object" && v !== null ? (v as Record<string, unknown>) : {}

/** The text of content blocks: text blocks as they are, other blocks as JSON (shown, not lost). */
export const blocksText = (blocks: ReadonlyArray<ContentBlock>): string =>
  blocks.map((b) => b.type === "text" && typeof b.text === "string" ? b.text : JSON.stringify(b)).join("\n")

const messageIdOfAttempt = (firstChunkSeq: number | string): string => `m${firstChunkSeq}`

type ChunkKind = "agent_message_chunk" | "agent_thought_chunk"

/** No update (shared: most events project to none). */
const none: ReadonlyArray<acp.SessionUpdate> = []

const chunk = (kind: ChunkKind, text: string, messageId: string): acp.SessionUpdate => ({
  sessionUpdate: kind,
  content: { type: "text", text },
  messageId
})

/** A projector: state across the events of one session (live: the attempt in flight). */
export interface Projector {
  readonly project: (event: Event) => ReadonlyArray<acp.SessionUpdate>
}

/** A fresh projector (replay uses a throwaway one, so nothing of history leaks into the live one). */
export const makeProjector = (options: ProjectionOptions): Projector => {
  /** Live: the seq of the first chunk of the attempt in flight. */
  let attemptStart: number | undefined

  const assistantBlocks = (data: Record<string, unknown>, sourceSeqs: ReadonlyArray<number> | undefined) => {
    const message = record(data.message)
    const content = (Array.isArray(message.content) ? message.content : []) as ReadonlyArray<ContentBlock>
    const messageId = messageIdOfAttempt(sourceSeqs?.[0] ?? String(message.id))
    const out: Array<acp.SessionUpdate> = []
    if (!options.live) {
      // coalesced: adjacent blocks of one kind are one chunk, as live deltas coalesce
      let pending: { kind: ChunkKind; text: string } | undefined
      for (const block of content) {
        const kind: ChunkKind | undefined = block.type === "text"
          ? "agent_message_chunk"
          : block.type === "reasoning"
          ? "agent_thought_chunk"
          : undefined
        if (kind === undefined || typeof block.text !== "string" || block.text === "") continue
        if (pending !== undefined && pending.kind === kind) pending.text += block.text
        else {
          if (pending !== undefined) out.push(chunk(pending.kind, pending.text, messageId))
          pending = { kind, text: block.text }
        }
      }
      if (pending !== undefined) out.push(chunk(pending.kind, pending.text, messageId))
    }
    for (const block of content) {
      if (block.type !== "tool-call" || typeof block.id !== "string" || typeof block.name !== "string") continue
      const rawInput = parseArgs(block.arguments)
      const shown = options.presenter(block.name, rawInput)
      out.push({
        sessionUpdate: "tool_call",
        toolCallId: block.id,
        title: shown.title,
        kind: shown.kind,
        status: "pending",
        rawInput,
        ...(shown.locations === undefined ? {} : { locations: [...shown.locations] })
      })
    }
    return out
  }

  const project = (event: Event): ReadonlyArray<acp.SessionUpdate> => {
    // replay passes over the bulk of a log (streamed chunks) without looking into it
    if (!options.live && event.type === "assistant/chunk") return none
    const data = record(event.data)
    switch (event.type) {
      case "assistant/chunk": {
        attemptStart ??= event.seq
        const c = record(data.chunk)
        if ((c.type === "text-delta" || c.type === "reasoning-delta") && typeof c.text === "string" && c.text !== "") {
          const kind = c.type === "text-delta" ? "agent_message_chunk" : "agent_thought_chunk"
          return [chunk(kind, c.text, messageIdOfAttempt(attemptStart))]
        }
        return none
      }
      case "assistant/message": {
        attemptStart = undefined
        if (event.surfaceOp !== "append") return none
        return assistantBlocks(data, event.sourceEventSeqs as ReadonlyArray<number> | undefined)
      }
      case "tool/call":
        attemptStart = undefined
        return typeof data.callId === "string"
          ? [{ sessionUpdate: "tool_call_update", toolCallId: data.callId, status: "in_progress" }]
          : none
      case "tool/result": {
        attemptStart = undefined
        if (event.surfaceOp !== "append") return none // a pruning rewrite: nothing new happened
        const message = record(data.message)
        const block = record((Array.isArray(message.content) ? message.content : [])[0])
        if (typeof block.toolCallId !== "string") return none
        const inner = (Array.isArray(block.content) ? block.content : []) as ReadonlyArray<ContentBlock>
        return [{
          sessionUpdate: "tool_call_update",
          toolCallId: block.toolCallId,
          status: block.isError === true ? "failed" : "completed",
          content: [{ type: "content", content: { type: "text", text: blocksText(inner) } }]
        }]
      }
      case "user/message": {
        attemptStart = undefined
        const source = record(data.source)
        const content = (Array.isArray(data.content) ? data.content : []) as ReadonlyArray<ContentBlock>
        if (event.surfaceOp === "append") {
          // the client shows its own prompt live; replay restores it (opencode PR #22468)
          if (options.live || source.kind !== "user") return none
          return content.map((b) => ({
            sessionUpdate: "user_message_chunk",
            content: { type: "text", text: b.type === "text" && typeof b.text === "string" ? b.text : JSON.stringify(b) },
            messageId: String(data.id)
          }))
        }
        if (!options.compaction || source.plugin !== "compact") return none
        return [{
          sessionUpdate: "compaction_update",
          compactionId: typeof source.compactionId === "string" ? source.compactionId : `compaction-${event.seq}`,
          status: "completed",
          summary: [{ type: "text", text: blocksText(content) }]
        }]
      }
      case MODE_EVENT:
        if (!options.live || typeof data.modeId !== "string") return none
        return options.modes === undefined
          ? [{ sessionUpdate: "current_mode_update", currentModeId: data.modeId }]
          : [
            { sessionUpdate: "current_mode_update", currentModeId: data.modeId },
            { sessionUpdate: "config_option_update", configOptions: configOptions(options.modes, data.modeId) }
          ]
      default:
        // an attempt is the run of chunks between other events; mode switches do not split it
        if (event.ignorable !== true) attemptStart = undefined
        return none
    }
  }
  return { project }
}

/**
 * The whole transcript of a log as replay updates (docs/acp.md §2.5): no cap, coalesced (`coalesce`), so
 * a tool call is one `tool_call` in its settled state.
 */
export const projectTranscript = (
  events: ReadonlyArray<Event>,
  options: Omit<ProjectionOptions, "live">
): ReadonlyArray<acp.SessionUpdate> => {
  const projector = makeProjector({ ...options, live: false })
  const out: Array<acp.SessionUpdate> = []
  for (const e of events) for (const u of projector.project(e)) out.push(u)
  return coalesce(out)
}

type ToolCallUpdate = Extract<acp.SessionUpdate, { sessionUpdate: "tool_call_update" }>
type ToolCallShown = Extract<acp.SessionUpdate, { sessionUpdate: "tool_call" | "tool_call_update" }>

/** A later update of a tool call applied to an earlier one (ACP: updates patch; `content` replaces). */
const patchToolCall = (shown: ToolCallShown, later: ToolCallUpdate): ToolCallShown => {
  const out: Record<string, unknown> = { ...shown }
  for (const [key, value] of Object.entries(later)) {
    // the projection never sends a null patch (only omitted fields)
    if (key !== "sessionUpdate" && value !== undefined && value !== null) out[key] = value
  }
  return out as ToolCallShown
}

/**
 * Live updates coalesced, as `session/load` replays them: adjacent text chunks of one kind and
 * `messageId` become one chunk, and every later `tool_call_update` of a tool call is folded into the
 * update that announced it (its `tool_call`), at that position.
 */
export const coalesce = (updates: ReadonlyArray<acp.SessionUpdate>): ReadonlyArray<acp.SessionUpdate> => {
  const out: Array<acp.SessionUpdate> = []
  /** Where each tool call is shown in `out`. */
  const shownAt = new Map<string, number>()
  for (const u of updates) {
    if (u.sessionUpdate === "tool_call_update") {
      const at = shownAt.get(u.toolCallId)
      const shown = at === undefined ? undefined : out[at]
      if (at !== undefined && shown !== undefined && (shown.sessionUpdate === "tool_call" || shown.sessionUpdate === "tool_call_update")) {
        out[at] = patchToolCall(shown, u)
        continue
      }
    }
    if (u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") shownAt.set(u.toolCallId, out.length)
    const last = out[out.length - 1]
    if (
      last !== undefined && (u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "agent_thought_chunk") &&
      last.sessionUpdate === u.sessionUpdate && last.messageId === u.messageId &&
      last.content.type === "text" && u.content.type === "text"
    ) {
      out[out.length - 1] = { ...last, content: { type: "text", text: last.content.text + u.content.text } }
    } else out.push(u)
  }
  return out
}
