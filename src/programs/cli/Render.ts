/**
 * How the commands show events and messages to people: one line per event (seq, time, type,
 * surface marker, a short summary of its payload) and one line per message.
 */
import type { Event } from "../../schema/Events.js"
import type { Message } from "../../schema/Messages.js"
import { clip, clipId, formatTime, table } from "./Output.js"

/** The text of a message (or of a tool result's content), tool calls and results marked. */
export const textOf = (m: { readonly content: ReadonlyArray<unknown> }): string =>
  m.content.map((b) => {
    const block = b as Record<string, unknown>
    switch (block.type) {
      case "text":
      case "reasoning":
        return String(block.text)
      case "tool-call":
        return `→ ${String(block.name)}(${String(block.arguments)})`
      case "tool-result":
        return `← ${textOf({ content: (block.content as ReadonlyArray<unknown>) ?? [] })}`
      default:
        return `[${String(block.type)}]`
    }
  }).join(" ")

const surfaceLabel = (e: Event): string =>
  e.surfaceOp === undefined ? "" : e.surfaceOp === "append" ? "append" : `replace ${e.surfaceOp.start}..${e.surfaceOp.end}`

/** A one-line summary of an event's payload. */
export const summary = (e: Event): string => {
  const d = e.data as Record<string, unknown> | null
  if (d === null || typeof d !== "object") return ""
  switch (e.type) {
    case "user/message":
    case "context/message":
      return textOf(d as unknown as Message)
    case "assistant/message":
    case "tool/result":
      return textOf(d.message as Message)
    case "assistant/chunk": {
      const c = d.chunk as Record<string, unknown>
      return `${String(c.type)} ${c.text === undefined ? "" : JSON.stringify(c.text)}`
    }
    case "turn/start":
    case "step/start":
    case "step/end":
      return `turn ${String(d.turn)}${d.step === undefined ? "" : ` step ${String(d.step)}`}`
    case "turn/end":
      return `turn ${String(d.turn)} ${String((d.reason as Record<string, unknown>)?.kind)}`
    case "tool/call":
      return `${String(d.name)} ${String(d.callId)}`
    case "request/header": {
      const cfg = ((d.header as Record<string, unknown>)?.config ?? {}) as Record<string, unknown>
      return `${String(d.reason)} ${String(cfg.provider)}/${String(cfg.model)}`
    }
    default:
      return ""
  }
}

/** The columns of an event table. */
export const EVENT_COLUMNS: ReadonlyArray<string> = ["SEQ", "TIME", "TYPE", "SURFACE", "SUMMARY"]

/** An event's row of an event table. */
export const eventRow = (e: Event): ReadonlyArray<string> => [String(e.seq), formatTime(e.time), e.type, surfaceLabel(e), clip(summary(e))]

/** Events as a table: seq, time, type, surface marker, summary. */
export const eventTable = (events: ReadonlyArray<Event>): string => table(EVENT_COLUMNS, events.map(eventRow))

/** Append-origin events as a transcript table: seq, type, content. */
export const transcriptTable = (events: ReadonlyArray<Event>): string =>
  table(["SEQ", "TYPE", "CONTENT"], events.map((e) => [String(e.seq), e.type, clip(summary(e), 80)]))

/** Messages as a table: role, id, content. */
export const messageTable = (messages: ReadonlyArray<Message>): string =>
  table(["ROLE", "ID", "CONTENT"], messages.map((m) => [m.role, clipId(m.id), clip(textOf(m), 80)]))

/** Surface replacements as a table under `first` (the column naming the replacing seq). */
export const replacementTable = (
  first: string,
  replacements: ReadonlyArray<{ readonly seq: number; readonly start: number; readonly end: number; readonly shadowedSeqs: ReadonlyArray<number> }>
): string =>
  table(
    [first, "RANGE", "SHADOWED"],
    replacements.map((x) => [String(x.seq), `${x.start}..${x.end}`, x.shadowedSeqs.join(", ")])
  )
