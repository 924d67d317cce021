/**
 * The second pass of a Claude Code import (docs/import.md): one record of a chosen branch mapped
 * to the log (a model message assembled from the records that share its `message.id`, a person's
 * prompt, tool results, queued prompts, a compaction's boundary and summary), or the reason it is
 * kept aside; and Claude's content blocks as this log's. Internal to the import: `ClaudeCode` runs
 * it.
 *
 * @since 0.2.0
 */
import { encodeJson, type Json } from "../../schema/Json.js"
import type { ContentBlock, TokenUsage } from "../../schema/Messages.js"
import type { LogBuilder } from "./LogBuilder.js"
import type { SessionWriter } from "./SessionWriter.js"
import { isObject, jsonText, keepRest, nonEmpty, omit, timeOf } from "./SourceLines.js"
import { IMPORT_SOURCE } from "./TranscriptImport.js"

/**
 * A transcript record (a JSON object).
 *
 * @since 0.2.0
 * @category models
 */
export type Rec = Readonly<Record<string, unknown>>

const textBlock = (text: string): ContentBlock => ({ type: "text", text })

/**
 * One Claude content block as this log's block; unknown kinds are kept as they are (H10).
 *
 * @since 0.2.0
 * @category utils
 */
export const mapBlock = (b: unknown): ContentBlock => {
  if (typeof b === "string") return textBlock(b)
  if (!isObject(b) || typeof b.type !== "string") return { type: "unknown", value: b }
  switch (b.type) {
    case "text":
      return typeof b.text === "string" ? keepRest(textBlock(b.text), b, ["type", "text"], "claudeCode") : (b as ContentBlock)
    case "thinking":
      return keepRest(
        {
          type: "reasoning",
          text: typeof b.thinking === "string" ? b.thinking : "",
          // the signature a later request must send back with the thinking
          ...(b.signature === undefined ? {} : { signature: b.signature })
        },
        b,
        ["type", "thinking", "signature"],
        "claudeCode"
      )
    case "redacted_thinking":
      return keepRest({ type: "reasoning", text: "", redacted: b.data ?? null }, b, ["type", "data"], "claudeCode")
    case "tool_use":
      return keepRest(
        { type: "tool-call", id: String(b.id), name: String(b.name), arguments: jsonText(b.input ?? {}) },
        b,
        ["type", "id", "name", "input"],
        "claudeCode"
      )
    case "image":
      return keepRest({ type: "image", attachment: { source: b.source ?? null } }, b, ["type", "source"], "claudeCode")
    default:
      return b as ContentBlock
  }
}

/**
 * Claude message content (a string or blocks) as this log's blocks.
 *
 * @since 0.2.0
 * @category utils
 */
export const blocksOf = (content: unknown): Array<ContentBlock> =>
  typeof content === "string" ? [textBlock(content)] : Array.isArray(content) ? content.map(mapBlock) : []

const usageOf = (u: unknown): TokenUsage | undefined => {
  if (!isObject(u) || typeof u.input_tokens !== "number" || typeof u.output_tokens !== "number") return undefined
  return {
    inputTokens: u.input_tokens,
    outputTokens: u.output_tokens,
    ...(typeof u.cache_read_input_tokens === "number" ? { cacheReadTokens: u.cache_read_input_tokens } : {}),
    ...(typeof u.cache_creation_input_tokens === "number" ? { cacheWriteTokens: u.cache_creation_input_tokens } : {})
  }
}

/**
 * Whether a content block is a `tool_result` naming its call.
 *
 * @since 0.2.0
 * @category utils
 */
export const isToolResult = (b: unknown): b is Rec => isObject(b) && b.type === "tool_result" && typeof b.tool_use_id === "string"

/**
 * One session being written: its log builder and writer, the model message being assembled, the
 * last compaction boundary and the preserved segments' marks.
 *
 * @since 0.2.0
 * @category models
 */
export interface Target {
  readonly builder: LogBuilder
  readonly writer: SessionWriter
  /** The model message being assembled from records that share its `message.id`. */
  assistant:
    | { id: string; messageId: string; content: Array<ContentBlock>; model: string; usage: TokenUsage | undefined; time: number }
    | undefined
  /** The last compaction boundary, cited by the summary that follows it (and the seq its preserved segment starts at). */
  boundary: { readonly uuid: string; readonly seq: number; readonly keepFrom: number | undefined } | undefined
  /** Boundaries whose compaction preserved a segment, with the segment's first record. */
  readonly heads: ReadonlyMap<string, string>
  /** The first seq of each preserved segment's events (its first record's). */
  readonly marks: Map<string, number>
  /** The model of the last request header written. */
  model: string | undefined
}

/**
 * Write the model message being assembled, with a request header when its model changed.
 *
 * @since 0.2.0
 * @category utils
 */
export const flushAssistant = (t: Target) => {
  const a = t.assistant
  if (a === undefined) return
  t.assistant = undefined
  // the transcript names the model of each answer (not the system prompt or tools): a request
  // header with provider and model whenever it changes; "<synthetic>" marks Claude Code's own
  // messages, no model request
  const changed = a.model !== t.model && !a.model.startsWith("<") && a.model !== "unknown"
  if (changed) t.model = a.model
  t.builder.at(a.time).assistant(
    a.id,
    a.content,
    { provider: "anthropic", model: a.model },
    a.usage,
    changed ? { config: { provider: "anthropic", model: a.model } } : undefined
  )
}

/**
 * Map one record on a chosen branch; the reason when it is kept aside instead.
 *
 * @since 0.2.0
 * @category utils
 */
export const mapRecord = (t: Target, rec: Rec, line: number, uuid: string): string | undefined => {
  const b = t.builder
  const time = timeOf(rec.timestamp)
  const message = isObject(rec.message) ? rec.message : undefined
  const envelope = () =>
    b.at(time).ignorable(IMPORT_SOURCE, {
      line,
      mapped: true,
      record: omit(rec, ["message"]),
      ...(message === undefined ? {} : { message: omit(message, ["content"]) })
    })
  switch (rec.type) {
    case "assistant": {
      if (message === undefined) return "no-message"
      const messageId = nonEmpty(message.id) ?? uuid
      const blocks = blocksOf(message.content)
      if (t.assistant !== undefined && t.assistant.messageId === messageId) {
        // one record per content block; a record that repeats the blocks so far (a snapshot of
        // the message) adds only what is new
        const held = t.assistant.content
        const repeats = blocks.length >= held.length && held.every((b, k) => encodeJson(b as Json) === encodeJson(blocks[k] as Json))
        if (repeats) held.push(...blocks.slice(held.length))
        else held.push(...blocks)
        t.assistant.usage = usageOf(message.usage) ?? t.assistant.usage
      } else {
        flushAssistant(t)
        t.assistant = {
          id: messageId,
          messageId,
          content: blocks,
          model: nonEmpty(message.model) ?? "unknown",
          usage: usageOf(message.usage),
          time: time ?? b.time
        }
      }
      envelope()
      return undefined
    }
    case "user": {
      if (message === undefined) return "no-message"
      // a person's record ends the model message being assembled (its tool calls are known then)
      flushAssistant(t)
      const content = message.content
      if (rec.isCompactSummary === true) {
        const seq = envelope()
        const boundary = t.boundary
        t.boundary = undefined
        b.compaction(uuid, blocksOf(content), boundary?.uuid ?? uuid, boundary === undefined ? [seq] : [boundary.seq, seq], {}, boundary?.keepFrom)
        return undefined
      }
      const all = Array.isArray(content) ? content : undefined
      const results = all === undefined ? [] : all.filter(isToolResult)
      if (results.length > 0) {
        const answering = new Set<string>()
        for (const r of results) {
          const callId = String(r.tool_use_id)
          const can = answering.has(callId) ? "duplicate-result" : b.canAnswer(callId)
          if (can !== true) return can
          answering.add(callId)
        }
        envelope()
        for (const r of results) {
          // the result block's keys the mapping does not use go to the result's meta (hidden from the model)
          const rest = omit(r, ["type", "tool_use_id", "content", "is_error"])
          b.toolResult(
            `${uuid}/${String(r.tool_use_id)}`,
            String(r.tool_use_id),
            blocksOf(r.content ?? ""),
            r.is_error === true,
            Object.keys(rest).length === 0 ? undefined : { claudeCode: rest }
          )
        }
        const others = (all ?? []).filter((x) => !isToolResult(x))
        if (others.length > 0) b.userInTurn(uuid, others.map(mapBlock))
        return undefined
      }
      envelope()
      // newer versions (2.1.x) say who wrote a user entry: `origin.kind` "human", or "peer" (a
      // subagent's hand-back), "task-notification", ...; only a person's words open a turn
      const origin = isObject(rec.origin) && typeof rec.origin.kind === "string" ? rec.origin.kind : undefined
      if (rec.isMeta === true) b.context(uuid, blocksOf(content), { kind: "import", tool: "claude-code", form: "meta" })
      else if (origin !== undefined && origin !== "human") {
        b.context(uuid, blocksOf(content), { kind: "import", tool: "claude-code", form: "origin", origin })
      } else b.prompt(uuid, blocksOf(content))
      return undefined
    }
    case "attachment": {
      // what Claude Code added to the next request; a prompt typed while a turn ran is one
      const a = isObject(rec.attachment) ? rec.attachment : undefined
      if (a === undefined || a.type !== "queued_command") return bookkeeping(rec)
      const content = blocksOf(a.prompt)
      if (content.length === 0) return "attachment:queued_command"
      flushAssistant(t)
      b.at(time).ignorable(IMPORT_SOURCE, { line, mapped: true, record: omit(rec, ["attachment"]), attachment: omit(a, ["prompt"]) })
      const mode = typeof a.commandMode === "string" ? a.commandMode : "prompt"
      // a person's queued prompt joins the running turn where the model received it; a queued
      // notification (a background task's) is context, not the person's words
      if (mode === "prompt") b.userInTurn(uuid, content)
      else b.context(uuid, content, { kind: "import", tool: "claude-code", form: "queued_command", commandMode: mode })
      return undefined
    }
    case "system": {
      if (rec.subtype !== "compact_boundary") return `system:${typeof rec.subtype === "string" ? rec.subtype : "other"}`
      flushAssistant(t)
      const head = t.heads.get(uuid)
      t.boundary = { uuid, seq: envelope(), keepFrom: head === undefined ? undefined : t.marks.get(head) }
      return undefined
    }
    default:
      return bookkeeping(rec)
  }
}

/**
 * The reason a record that is no conversation is kept aside: its type (an attachment's kind).
 *
 * @since 0.2.0
 * @category utils
 */
export const bookkeeping = (rec: Rec): string =>
  rec.type === "attachment"
    ? `attachment:${isObject(rec.attachment) && typeof rec.attachment.type === "string" ? rec.attachment.type : "none"}`
    : `type:${typeof rec.type === "string" ? rec.type : "none"}`
