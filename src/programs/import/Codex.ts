/**
 * Import OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) as session
 * logs (docs/import.md): `session_meta` becomes the header, `turn_context` a request header,
 * `response_item` messages, reasoning, function and custom tool calls and their outputs become
 * turns, steps, messages, tool calls and results, `compacted` a `replace`; every other record
 * (`event_msg`, unknown types) is kept as an ignorable `import/source`. Two streamed passes: the
 * first finds the `session_meta`, the second maps.
 *
 * @since 0.2.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { encodeJson, type Json } from "../../schema/Json.js"
import type { ContentBlock } from "../../schema/Messages.js"
import { isAbsolutePath, type SessionHeader } from "../../schema/SessionHeader.js"
import type { SessionStore } from "../../services/SessionStore.js"
import { LogBuilder } from "./LogBuilder.js"
import { openWriter } from "./SessionWriter.js"
import { forEachLine, isObject, jsonText, keepRest, nonEmpty, omit, parseSourceLine, timeOf } from "./SourceLines.js"
import { DEFAULT_MAX_LINE_BYTES, type FileReport, IMPORT_ORIGIN, IMPORT_SOURCE, importPath, type ImportOptions, readFailure, RecordTally } from "./TranscriptImport.js"

type Rec = Readonly<Record<string, unknown>>

/**
 * The session id of an imported Codex session (`codex:<id>`).
 *
 * @since 0.2.0
 * @category utils
 */
export const codexSessionId = (id: string): string => `codex:${id}`

/** Context Codex injects as user-role messages (instructions, environment). */
const CONTEXT_PREFIXES = ["<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>"]

const textOf = (content: unknown): string =>
  Array.isArray(content)
    ? content.map((c) => (isObject(c) && typeof c.text === "string" ? c.text : "")).join("")
    : typeof content === "string"
    ? content
    : ""

/** One Codex content item as this log's block; unknown kinds are kept as they are (H10). */
const mapItem = (c: unknown): ContentBlock => {
  if (!isObject(c) || typeof c.type !== "string") return { type: "unknown", value: c }
  switch (c.type) {
    case "input_text":
    case "output_text":
    case "text":
      // annotations and logprobs stay beside the text
      return keepRest({ type: "text", text: typeof c.text === "string" ? c.text : "" }, c, ["type", "text"], "codex")
    case "input_image":
      return keepRest({ type: "image", attachment: { imageUrl: c.image_url ?? null } }, c, ["type", "image_url"], "codex")
    default:
      return c as ContentBlock
  }
}

const itemsOf = (content: unknown): Array<ContentBlock> =>
  typeof content === "string" ? [{ type: "text", text: content }] : Array.isArray(content) ? content.map(mapItem) : []

/** A tool output: a string, an array of items, or an object with `content` (newer versions). */
const outputOf = (output: unknown): Array<ContentBlock> => {
  if (typeof output === "string") return [{ type: "text", text: output }]
  if (Array.isArray(output)) return output.map(mapItem)
  if (isObject(output) && output.content !== undefined) return outputOf(output.content)
  return [{ type: "text", text: jsonText(output ?? null) }]
}

/**
 * One item of a `compacted` record's `replacement_history` as a compaction message's content:
 * a message's content items, a reasoning item's summary (its encrypted content kept, never text),
 * and any other item (remote compaction's encrypted `compaction`, a tool call or output) kept
 * whole as a block of its own kind; the source names the item's type and role.
 */
const replacementItem = (item: unknown): { readonly content: Array<ContentBlock>; readonly source: Record<string, unknown> } => {
  if (!isObject(item)) return { content: [{ type: "unknown", value: item }], source: { item: "none" } }
  const type = typeof item.type === "string" ? item.type : "message"
  if (type === "message" || (item.type === undefined && item.role !== undefined)) {
    return { content: itemsOf(item.content), source: { item: "message", ...(typeof item.role === "string" ? { role: item.role } : {}) } }
  }
  if (type === "reasoning") return { content: [reasoningBlock(item)], source: { item: type } }
  return { content: [{ ...item, type: `codex:${type}` } as ContentBlock], source: { item: type } }
}

/** A reasoning item as a `reasoning` block: its summary as text, encrypted content kept apart. */
const reasoningBlock = (payload: Rec): ContentBlock => {
  const summary = Array.isArray(payload.summary) ? payload.summary : []
  return {
    type: "reasoning",
    text: summary.map((s) => (isObject(s) && typeof s.text === "string" ? s.text : "")).join("\n\n"),
    // encrypted reasoning is kept for a replay, never shown as text
    ...(payload.encrypted_content === undefined ? {} : { encryptedContent: payload.encrypted_content }),
    ...(payload.content === undefined || payload.content === null ? {} : { rawContent: payload.content })
  } as ContentBlock
}

/** Whether a tool output reports failure (`{ success: false }`). */
const failed = (output: unknown): boolean => isObject(output) && output.success === false

/** Payload keys carried into this log's events; the rest of a mapped record is its `import/source`. */
const MAPPED_KEYS = ["content", "arguments", "input", "output", "summary", "encrypted_content"]

interface Meta {
  id: string | undefined
  cwd: string | undefined
  time: number | undefined
  provider: string | undefined
  /** The session this one was spawned by (a subagent) or forked from. */
  parent: { readonly id: string; readonly subagent: boolean; readonly depth: number } | undefined
}

/**
 * Whom a rollout's `session_meta` names as its parent: a subagent's spawning thread
 * (`parent_thread_id`, or `source.subagent.thread_spawn.parent_thread_id` with its `depth`; a
 * `source.subagent` of another kind with `forked_from_id`), else the session it was forked from.
 */
const parentOf = (payload: Rec): Meta["parent"] => {
  const source = isObject(payload.source) ? payload.source : undefined
  const spawn = isObject(source?.subagent) && isObject(source.subagent.thread_spawn) ? source.subagent.thread_spawn : undefined
  const subagent = source?.subagent !== undefined || payload.thread_source === "subagent"
  const spawner = nonEmpty(payload.parent_thread_id) ?? nonEmpty(spawn?.parent_thread_id)
  const forked = nonEmpty(payload.forked_from_id)
  const depth = typeof spawn?.depth === "number" && Number.isSafeInteger(spawn.depth) && spawn.depth > 0 ? spawn.depth : 1
  if (spawner !== undefined) return { id: spawner, subagent: true, depth }
  if (forked !== undefined) return { id: forked, subagent, depth }
  return undefined
}

interface Pending {
  readonly id: string
  readonly content: Array<ContentBlock>
  readonly time: number
}

/**
 * Import one Codex rollout file into the store in context.
 *
 * @since 0.2.0
 * @category constructors
 */
export const importCodexFile = (
  file: string,
  existing: Set<string>,
  options: ImportOptions = {}
): Effect.Effect<FileReport, never, SessionStore | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES
    const tally = new RecordTally()
    const meta: Meta = { id: undefined, cwd: undefined, time: undefined, provider: undefined, parent: undefined }
    const first = yield* Effect.either(forEachLine(file, max, (l) =>
      Effect.sync(() => {
        if (l._tag !== "Text" || meta.id !== undefined) return
        const p = parseSourceLine(l.text)
        if (p._tag !== "Json" || !isObject(p.value) || p.value.type !== "session_meta" || !isObject(p.value.payload)) return
        const payload = p.value.payload
        meta.id = nonEmpty(payload.id)
        if (typeof payload.cwd === "string" && isAbsolutePath(payload.cwd)) meta.cwd = payload.cwd
        meta.time = timeOf(payload.timestamp) ?? timeOf(p.value.timestamp)
        meta.provider = nonEmpty(payload.model_provider)
        meta.parent = parentOf(payload)
      })))
    if (first._tag === "Left") return tally.report(file, "codex", [], readFailure(file, first.left))
    const base = meta.id ?? file.replace(/^.*\//, "").replace(/\.jsonl$/, "")
    const header: SessionHeader = {
      version: 1,
      id: codexSessionId(base),
      createdAt: meta.time !== undefined && meta.time >= 0 ? meta.time : 0,
      ...(meta.cwd === undefined ? {} : { cwd: meta.cwd }),
      // a subagent is a child session; a fork names the session it came from
      ...(meta.parent === undefined
        ? {}
        : meta.parent.subagent
        ? { parentSession: codexSessionId(meta.parent.id), origin: "subagent" as const, delegationDepth: meta.parent.depth }
        : { parentSession: codexSessionId(meta.parent.id) })
    }
    const writer = yield* openWriter(header, existing, options.force === true)
    const b = new LogBuilder().at(meta.time)
    b.ignorable(IMPORT_ORIGIN, {
      tool: "codex",
      file,
      sourceSessionId: base,
      ...(meta.parent === undefined ? {} : meta.parent.subagent ? { spawnedBy: meta.parent.id } : { forkedFrom: meta.parent.id })
    })
    let pending: Pending | undefined
    let model: { model: string; effort: string | undefined } | undefined
    const provider = meta.provider ?? "openai"
    const flush = () => {
      const p = pending
      if (p === undefined) return
      pending = undefined
      b.at(p.time).assistant(p.id, p.content, { provider, model: model?.model ?? "unknown" })
    }
    const assistantPart = (id: string, blocks: ReadonlyArray<ContentBlock>, time: number) => {
      if (pending === undefined) pending = { id, content: [], time }
      pending.content.push(...blocks)
    }
    const keep = (line: number, reason: string, data: Rec) => {
      tally.keep(reason)
      b.ignorable(IMPORT_SOURCE, { line, kept: reason, ...data })
    }
    /** Map one record; the reason when it is kept aside instead. */
    const map = (rec: Rec, line: number): string | undefined => {
      const time = timeOf(rec.timestamp)
      const payload = isObject(rec.payload) ? rec.payload : undefined
      const envelope = () =>
        b.at(time).ignorable(IMPORT_SOURCE, {
          line,
          mapped: true,
          // a structured tool output keeps its other fields (`success`, ...) here
          record: payload === undefined
            ? rec
            : { ...omit(rec, ["payload"]), payload: omit(payload, MAPPED_KEYS.filter((k) => k !== "output" || typeof payload.output === "string")) }
        })
      const idOf = () => nonEmpty(payload?.id) ?? `${base}:${line}`
      switch (rec.type) {
        case "session_meta":
          envelope()
          return undefined
        case "turn_context": {
          const m = nonEmpty(payload?.model)
          if (m === undefined) return "turn_context:no-model"
          flush()
          const effort = nonEmpty(payload?.effort)
          const changed = model === undefined || model.model !== m || model.effort !== effort
          model = { model: m, effort }
          // the request header carries model and effort; cwd and policies stay in its import/source
          b.at(time).ignorable(IMPORT_SOURCE, { line, mapped: true, record: rec })
          if (changed) {
            b.requestHeader({ config: { provider, model: m, ...(effort === undefined ? {} : { reasoningEffort: effort }) } })
          }
          return undefined
        }
        case "compacted": {
          flush()
          const id = `${base}:${line}`
          const history = Array.isArray(payload?.replacement_history) ? payload.replacement_history : []
          if (history.length === 0) {
            // older versions: the summary text alone replaced the history
            const seq = envelope()
            b.compaction(id, [{ type: "text", text: nonEmpty(payload?.message) ?? "" }], id, [seq])
            return undefined
          }
          // newer versions: the history the next request started from, item by item (the
          // summary, remote compaction's encrypted item, the user messages kept); the items are
          // the events, the envelope keeps the rest of the record
          const seq = b.at(time).ignorable(IMPORT_SOURCE, {
            line,
            mapped: true,
            record: { ...omit(rec, ["payload"]), payload: omit(payload ?? {}, ["replacement_history"]) }
          })
          history.forEach((item, k) => {
            const { content, source } = replacementItem(item)
            if (k === 0) b.compaction(`${id}/0`, content, id, [seq], source)
            else b.compactionPart(`${id}/${k}`, content, id, source)
          })
          return undefined
        }
        case "response_item": {
          if (payload === undefined) return "response_item:no-payload"
          const kind = typeof payload.type === "string" ? payload.type : "none"
          switch (kind) {
            case "message": {
              const role = payload.role
              if (role === "assistant") {
                envelope()
                assistantPart(idOf(), itemsOf(payload.content), time ?? b.time)
                return undefined
              }
              if (role !== "user" && role !== "developer" && role !== "system") return `message:${String(role)}`
              flush()
              envelope()
              const text = textOf(payload.content)
              if (role === "user" && !CONTEXT_PREFIXES.some((p) => text.trimStart().startsWith(p))) {
                b.prompt(idOf(), itemsOf(payload.content))
              } else {
                b.context(idOf(), itemsOf(payload.content), { kind: "import", tool: "codex", role })
              }
              return undefined
            }
            case "reasoning": {
              envelope()
              assistantPart(idOf(), [reasoningBlock(payload)], time ?? b.time)
              return undefined
            }
            case "function_call":
            case "custom_tool_call":
            case "local_shell_call": {
              const callId = nonEmpty(payload.call_id) ?? nonEmpty(payload.id)
              if (callId === undefined) return `${kind}:no-call-id`
              envelope()
              const name = kind === "local_shell_call" ? "local_shell" : String(payload.name ?? kind)
              const args = kind === "function_call"
                ? jsonText(payload.arguments ?? "")
                // a custom tool's input is free text: its arguments are that text as a JSON string
                : encodeJson((kind === "custom_tool_call" ? payload.input ?? "" : payload.action ?? null) as Json)
              assistantPart(idOf(), [{ type: "tool-call", id: callId, name, arguments: args }], time ?? b.time)
              return undefined
            }
            case "function_call_output":
            case "custom_tool_call_output": {
              const callId = nonEmpty(payload.call_id)
              if (callId === undefined) return `${kind}:no-call-id`
              flush()
              const can = b.canAnswer(callId)
              if (can !== true) return can
              envelope()
              b.toolResult(`${base}:${line}`, callId, outputOf(payload.output), failed(payload.output))
              return undefined
            }
            default:
              return `response_item:${kind}`
          }
        }
        case "event_msg":
          return `event_msg:${isObject(payload) && typeof payload.type === "string" ? payload.type : "none"}`
        default:
          return `type:${typeof rec.type === "string" ? rec.type : "none"}`
      }
    }
    const second = yield* Effect.either(forEachLine(file, max, (l) =>
      Effect.suspend(() => {
        tally.read++
        if (l._tag === "Refused") tally.refuse(l.line, l.reason)
        else {
          const p = parseSourceLine(l.text)
          if (p._tag === "NotJson") keep(l.line, p.reason, { text: l.text })
          else if (!isObject(p.value)) keep(l.line, "not-an-object", { record: p.value })
          else {
            const kept = map(p.value, l.line)
            if (kept === undefined) tally.mapped++
            else keep(l.line, kept, { record: p.value })
          }
        }
        return writer.write(b.take())
      })))
    if (second._tag === "Left") return tally.report(file, "codex", [], readFailure(file, second.left))
    flush()
    b.finish()
    yield* writer.write(b.take())
    return tally.report(file, "codex", [yield* writer.close(b.counts)])
  })

/**
 * Import the Codex rollouts at `path` (a file, or a directory such as `~/.codex/sessions`): one
 * report per file.
 *
 * @since 0.2.0
 * @category constructors
 */
export const importCodex = (path: string, options: ImportOptions = {}) =>
  importPath(path, "codex", (file, existing) => importCodexFile(file, existing, options))
