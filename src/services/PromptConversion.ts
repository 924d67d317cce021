/**
 * Conversions between the session log's messages and `@effect/ai` (SPEC §1.5, §1.3.5): a
 * request (header + derived messages) to a `Prompt`, a `Prompt` back to messages, toolkit tools to
 * header tool specs, Response stream parts to the normative `assistant/chunk` vocabulary, chunks
 * to assembled content blocks, and provider usage, finish reasons and errors to log shapes.
 */
import type * as AiError from "@effect/ai/AiError"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import * as Tool from "@effect/ai/Tool"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { encodeJson, type Json, walkJson } from "../schema/Json.js"
import type { ContentBlock, Message, MessageSource, TokenUsage } from "../schema/Messages.js"
import type { RequestConfig, RequestHeader, ToolSpec } from "../schema/RequestHeader.js"

/** The provider-options key under which a Prompt part or message keeps its log identity. */
export const OPTIONS_KEY = "effect-session-log"

/**
 * The call scalars of the request being dispatched. The agent loop provides it around the model
 * stream; a model adapter (or the scripted model) reads it, since `@effect/ai`'s
 * `LanguageModel` options carry no model or token settings.
 */
export class ModelRequestConfig extends Context.Reference<ModelRequestConfig>()(
  "effect-session-log/ModelRequestConfig",
  { defaultValue: (): RequestConfig | undefined => undefined }
) {}

/** The request value a model call is built from (SPEC §1.5): header snapshot and derived messages. */
export interface RequestValue {
  readonly header: RequestHeader | undefined
  readonly messages: ReadonlyArray<Message>
}

type Rec = Record<string, unknown>
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v)

/** A JSON copy of an arbitrary value, or undefined when it is not lossless JSON. */
const asJson = (v: unknown): Json | undefined => {
  const w = walkJson(v)
  return w._tag === "Ok" ? (w.value as Json) : undefined
}

const stash = (value: Rec): { readonly [OPTIONS_KEY]: Rec } => ({ [OPTIONS_KEY]: value })
const stashed = (options: unknown): Rec | undefined =>
  isRecord(options) && isRecord(options[OPTIONS_KEY]) ? options[OPTIONS_KEY] : undefined

/** Parse a tool call's raw arguments; invalid JSON is passed through as the raw string. */
export const parseArguments = (raw: string): unknown => {
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/** The tool specs of a toolkit as written into the request header (`{ name, description, parameters }`). */
export const toolSpecs = (tools: Record<string, Tool.Any> | ReadonlyArray<Tool.Any>): ReadonlyArray<ToolSpec> =>
  (Array.isArray(tools) ? tools : Object.values(tools)).map((tool: Tool.Any) => ({
    name: tool.name,
    description: Tool.getDescription(tool as never) ?? "",
    parameters: asJson(Tool.getJsonSchema(tool as never)) ?? {}
  }))

const textOf = (content: ReadonlyArray<ContentBlock>): string =>
  content.filter((b) => b.type === "text" && typeof b.text === "string").map((b) => b.text as string).join("\n")

/** A block that has no Prompt counterpart travels as text with the original kept in the options. */
const opaquePart = (block: ContentBlock): Prompt.TextPart =>
  Prompt.makePart("text", { text: encodeJson(block as unknown as Json), options: stash({ block }) })

const filePart = (block: ContentBlock): Prompt.FilePart => {
  const attachment = isRecord(block.attachment) ? block.attachment : {}
  const mediaType = typeof attachment.mediaType === "string" ? attachment.mediaType : "application/octet-stream"
  const data = typeof attachment.id === "string" ? attachment.id : encodeJson((block.attachment ?? null) as Json)
  return Prompt.makePart("file", { mediaType, data, options: stash({ block }) })
}

/** A tool-result block's content as the Prompt result: its text when it is one text block, else the blocks. */
export const toolResultValue = (content: ReadonlyArray<ContentBlock>): unknown =>
  content.length === 1 && content[0].type === "text" && typeof content[0].text === "string"
    ? content[0].text
    : content

const messageOptions = (m: Message) => stash({ id: m.id, source: m.source })

/**
 * The Prompt for a request (SPEC §1.5): the header's system prompt first, then every derived
 * message in surface order. A pure function of the request value; tool results become `tool`
 * messages whose tool name is taken from the assistant call they answer.
 */
export const requestToPrompt = (request: {
  readonly header: Pick<RequestHeader, "system"> | undefined
  readonly messages: ReadonlyArray<Message>
}): Prompt.Prompt => {
  const out: Array<Prompt.Message> = []
  const system = request.header?.system
  if (typeof system === "string" && system.length > 0) out.push(Prompt.makeMessage("system", { content: system }))
  const callNames = new Map<string, string>()
  for (const m of request.messages) {
    const options = messageOptions(m)
    if (m.role === "system") {
      out.push(Prompt.makeMessage("system", { content: textOf(m.content), options }))
      continue
    }
    if (m.role === "assistant") {
      const parts: Array<Prompt.AssistantMessagePart> = []
      for (const b of m.content) {
        if (b.type === "text" && typeof b.text === "string") parts.push(Prompt.makePart("text", { text: b.text }))
        else if (b.type === "reasoning" && typeof b.text === "string") {
          parts.push(Prompt.makePart("reasoning", { text: b.text }))
        } else if (b.type === "tool-call" && typeof b.id === "string" && typeof b.name === "string") {
          const raw = typeof b.arguments === "string" ? b.arguments : ""
          callNames.set(b.id, b.name)
          parts.push(Prompt.makePart("tool-call", {
            id: b.id,
            name: b.name,
            params: parseArguments(raw),
            providerExecuted: false,
            options: stash({ arguments: raw })
          }))
        } else if (b.type === "image") parts.push(filePart(b))
        else parts.push(opaquePart(b))
      }
      out.push(Prompt.makeMessage("assistant", { content: parts, options }))
      continue
    }
    // user role: runs of tool-result blocks become tool messages, other runs user messages
    let userRun: Array<Prompt.UserMessagePart> = []
    let toolRun: Array<Prompt.ToolResultPart> = []
    const flushUser = () => {
      if (userRun.length > 0) out.push(Prompt.makeMessage("user", { content: userRun, options }))
      userRun = []
    }
    const flushTool = () => {
      if (toolRun.length > 0) out.push(Prompt.makeMessage("tool", { content: toolRun, options }))
      toolRun = []
    }
    for (const b of m.content) {
      if (b.type === "tool-result" && typeof b.toolCallId === "string") {
        flushUser()
        const content = Array.isArray(b.content) ? (b.content as ReadonlyArray<ContentBlock>) : []
        toolRun.push(Prompt.makePart("tool-result", {
          id: b.toolCallId,
          name: callNames.get(b.toolCallId) ?? "unknown",
          isFailure: b.isError === true,
          result: toolResultValue(content),
          providerExecuted: false
        }))
        continue
      }
      flushTool()
      if (b.type === "text" && typeof b.text === "string") userRun.push(Prompt.makePart("text", { text: b.text }))
      else if (b.type === "image") userRun.push(filePart(b))
      else userRun.push(opaquePart(b))
    }
    flushUser()
    flushTool()
  }
  return Prompt.fromMessages(out)
}

const blockOfPart = (part: Prompt.Part): ContentBlock => {
  const original = stashed(part.options)?.block
  if (isRecord(original) && typeof original.type === "string") return original as ContentBlock
  switch (part.type) {
    case "text":
      return { type: "text", text: part.text }
    case "reasoning":
      return { type: "reasoning", text: part.text }
    case "tool-call": {
      const raw = stashed(part.options)?.arguments
      return {
        type: "tool-call",
        id: part.id,
        name: part.name,
        arguments: typeof raw === "string" ? raw : encodeJson((asJson(part.params) ?? null) as Json)
      }
    }
    case "tool-result": {
      const result = part.result
      const content: ReadonlyArray<ContentBlock> = typeof result === "string"
        ? [{ type: "text", text: result }]
        : Array.isArray(result)
        ? (result as ReadonlyArray<ContentBlock>)
        : [{ type: "text", text: encodeJson((asJson(result) ?? null) as Json) }]
      return { type: "tool-result", toolCallId: part.id, content, ...(part.isFailure ? { isError: true } : {}) }
    }
    case "file":
      return { type: "image", attachment: { id: typeof part.data === "string" ? part.data : "", mediaType: part.mediaType } }
  }
}

/**
 * The messages of a Prompt (the inverse of `requestToPrompt` for prompts it built): the leading
 * system prompt, and the messages, merging consecutive Prompt messages that came from one of ours.
 * Foreign messages get positional ids and a default source.
 */
export const promptToRequest = (prompt: Prompt.Prompt): { readonly system: string | undefined; readonly messages: Array<Message> } => {
  let system: string | undefined
  const messages: Array<Message> = []
  let lastId: string | undefined
  prompt.content.forEach((pm, i) => {
    const identity = stashed(pm.options)
    if (pm.role === "system" && identity === undefined && i === 0) {
      system = pm.content
      return
    }
    const id = typeof identity?.id === "string" ? identity.id : `prompt-${i}`
    const role = pm.role === "tool" ? "user" : pm.role
    const source: MessageSource = isRecord(identity?.source) && typeof identity.source.kind === "string"
      ? (identity.source as MessageSource)
      : pm.role === "assistant"
      ? { kind: "model", provider: "unknown", model: "unknown" }
      : pm.role === "tool"
      ? { kind: "tool", callId: pm.content[0]?.id ?? "" }
      : { kind: "user" }
    const content: Array<ContentBlock> = pm.role === "system"
      ? [{ type: "text", text: pm.content }]
      : (pm.content as ReadonlyArray<Prompt.Part>).map(blockOfPart)
    const previous = messages[messages.length - 1]
    if (identity !== undefined && lastId === id && previous !== undefined && previous.role === role) {
      messages[messages.length - 1] = { ...previous, content: [...previous.content, ...content] }
    } else {
      messages.push({ id, role, content, source })
    }
    lastId = identity === undefined ? undefined : id
  })
  return { system, messages }
}

/** A Prompt's encoded JSON form (for comparing two prompts). */
export const encodePrompt = (prompt: Prompt.Prompt): unknown => Schema.encodeSync(Prompt.Prompt)(prompt)

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/** A failure as carried by `turn/end` error reasons and `error`/`aborted` finish reasons (SPEC §1.3.2). */
export interface Failure {
  readonly message: string
  readonly code: string
  readonly status?: number
  readonly providerRetryAfterMs?: number
  readonly requestId?: string
}

const headerValue = (headers: Record<string, string> | undefined, name: string): string | undefined => {
  if (headers === undefined) return undefined
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v
  return undefined
}

/** The failure of a provider error: code = the AiError tag, plus status, retry-after and request id when known. */
export const aiErrorFailure = (error: AiError.AiError): Failure => {
  const out: { -readonly [K in keyof Failure]: Failure[K] } = { message: error.message, code: error._tag }
  if (error._tag === "HttpResponseError") {
    out.status = error.response.status
    const retry = headerValue(error.response.headers, "retry-after-ms") ??
      headerValue(error.response.headers, "retry-after")
    const seconds = headerValue(error.response.headers, "retry-after-ms") === undefined
    const n = retry === undefined ? NaN : Number(retry)
    if (Number.isFinite(n) && n >= 0) out.providerRetryAfterMs = Math.round(seconds ? n * 1000 : n)
    const requestId = headerValue(error.response.headers, "x-request-id") ?? headerValue(error.response.headers, "request-id")
    if (requestId !== undefined) out.requestId = requestId
  }
  return out
}

/** A FinishReason of the chunk vocabulary (SPEC §1.3.5). */
export type FinishReason =
  | { readonly kind: "stop"; readonly providerReason?: string }
  | { readonly kind: "tool-calls" }
  | { readonly kind: "max-tokens" }
  | { readonly kind: "aborted"; readonly failure: Failure }
  | { readonly kind: "error"; readonly failure: Failure }

/** `@effect/ai`'s finish reason in the chunk vocabulary; reasons without a kind of their own are `stop`. */
export const finishReasonOf = (reason: Response.FinishReason): FinishReason => {
  switch (reason) {
    case "stop":
      return { kind: "stop" }
    case "tool-calls":
      return { kind: "tool-calls" }
    case "length":
      return { kind: "max-tokens" }
    case "error":
      return { kind: "error", failure: { message: "the model reported an error", code: "PROVIDER_FINISH_ERROR" } }
    default:
      return { kind: "stop", providerReason: reason }
  }
}

/**
 * Usage with disjoint counts (SPEC §1.3.6), or undefined when the model reported none. `@effect/ai`
 * reports cached input as part of `inputTokens`, so it is subtracted out into `cacheReadTokens`.
 */
export const usageOf = (usage: Response.Usage): TokenUsage | undefined => {
  const { cachedInputTokens, inputTokens, outputTokens, reasoningTokens } = usage
  if (
    inputTokens === undefined && outputTokens === undefined && cachedInputTokens === undefined &&
    reasoningTokens === undefined
  ) return undefined
  const cached = cachedInputTokens ?? 0
  return {
    inputTokens: Math.max(0, (inputTokens ?? 0) - cached),
    outputTokens: outputTokens ?? 0,
    ...(cachedInputTokens === undefined ? {} : { cacheReadTokens: cachedInputTokens }),
    ...(reasoningTokens === undefined ? {} : { reasoningTokens })
  }
}

/** One chunk of the normative vocabulary (`assistant/chunk` data.chunk). */
export type Chunk =
  | { readonly type: "block-start"; readonly index: number; readonly blockType: string }
  | { readonly type: "text-delta"; readonly index: number; readonly text: string }
  | { readonly type: "reasoning-delta"; readonly index: number; readonly text: string }
  | {
    readonly type: "tool-call-delta"
    readonly index: number
    readonly id: string
    readonly name?: string
    readonly argumentsDelta: string
  }
  | { readonly type: "block-end"; readonly index: number; readonly block: ContentBlock }
  | { readonly type: "usage"; readonly usage: TokenUsage }
  | { readonly type: "finish"; readonly reason: FinishReason }

interface OpenBlock {
  readonly index: number
  readonly kind: "text" | "reasoning" | "tool-call"
  text: string
  name: string | undefined
  namedOnce: boolean
}

/**
 * Translates one model call's Response stream parts into chunks (SPEC §1.3.5). Blocks are indexed
 * in the order they start; a tool call announced whole (without params parts) is opened, given
 * its arguments in one delta and closed; the raw arguments are the concatenated params deltas.
 */
export class ChunkTranslator {
  private next = 0
  private readonly open = new Map<string, OpenBlock>()
  private readonly keyOf = (kind: OpenBlock["kind"], id: string) => `${kind}:${id}`

  private start(kind: OpenBlock["kind"], id: string, out: Array<Chunk>, name?: string): OpenBlock {
    const block: OpenBlock = { index: this.next++, kind, text: "", name, namedOnce: false }
    this.open.set(this.keyOf(kind, id), block)
    out.push({ type: "block-start", index: block.index, blockType: kind })
    return block
  }

  private get(kind: OpenBlock["kind"], id: string, out: Array<Chunk>, name?: string): OpenBlock {
    return this.open.get(this.keyOf(kind, id)) ?? this.start(kind, id, out, name)
  }

  private toolDelta(block: OpenBlock, id: string, delta: string): Chunk {
    block.text += delta
    const named = !block.namedOnce && block.name !== undefined
    block.namedOnce = block.namedOnce || named
    return {
      type: "tool-call-delta",
      index: block.index,
      id,
      ...(named && block.name !== undefined ? { name: block.name } : {}),
      argumentsDelta: delta
    }
  }

  /** The chunks for one stream part (possibly none). */
  translate(part: Response.StreamPart<any>, encodeParams?: (name: string, params: unknown) => string): Array<Chunk> {
    const out: Array<Chunk> = []
    switch (part.type) {
      case "text-start":
        this.start("text", part.id, out)
        break
      case "reasoning-start":
        this.start("reasoning", part.id, out)
        break
      case "text-delta":
      case "reasoning-delta": {
        const kind = part.type === "text-delta" ? "text" : "reasoning"
        const block = this.get(kind, part.id, out)
        block.text += part.delta
        out.push({ type: part.type, index: block.index, text: part.delta })
        break
      }
      case "text-end":
      case "reasoning-end": {
        const kind = part.type === "text-end" ? "text" : "reasoning"
        const block = this.get(kind, part.id, out)
        this.open.delete(this.keyOf(kind, part.id))
        out.push({ type: "block-end", index: block.index, block: { type: kind, text: block.text } })
        break
      }
      case "tool-params-start":
        this.start("tool-call", part.id, out, part.name)
        break
      case "tool-params-delta": {
        const block = this.get("tool-call", part.id, out)
        out.push(this.toolDelta(block, part.id, part.delta))
        break
      }
      case "tool-params-end":
        break
      case "tool-call": {
        const key = this.keyOf("tool-call", part.id)
        const known = this.open.get(key)
        const block = known ?? this.start("tool-call", part.id, out, part.name)
        if (block.name === undefined) block.name = part.name
        if (known === undefined || block.text.length === 0) {
          const raw = encodeParams !== undefined
            ? encodeParams(part.name, part.params)
            : encodeJson((asJson(part.params) ?? null) as Json)
          out.push(this.toolDelta(block, part.id, raw))
        }
        this.open.delete(key)
        out.push({
          type: "block-end",
          index: block.index,
          block: { type: "tool-call", id: part.id, name: part.name, arguments: block.text }
        })
        break
      }
      case "finish": {
        const usage = usageOf(part.usage)
        if (usage !== undefined) out.push({ type: "usage", usage })
        out.push({ type: "finish", reason: finishReasonOf(part.reason) })
        break
      }
      default:
        // response-metadata, files, sources, provider-executed tool results: not part of the vocabulary
        break
    }
    return out
  }
}

/** What a model call produced, folded from its chunks. */
export interface Assembled {
  /** Completed blocks in index order (the assistant message content). */
  readonly content: ReadonlyArray<ContentBlock>
  /** Text and reasoning delivered so far, including unfinished blocks; tool calls dropped (SPEC §1.3.6). */
  readonly deliveredPrefix: ReadonlyArray<ContentBlock>
  readonly usage: TokenUsage | undefined
  readonly finish: FinishReason | undefined
}

/** Fold one attempt's chunks (in log order) into its content, delivered prefix, usage and finish reason. */
export const assembleChunks = (chunks: ReadonlyArray<Rec>): Assembled => {
  const blocks = new Map<number, { kind: string; text: string; done: ContentBlock | undefined }>()
  let usage: TokenUsage | undefined
  let finish: FinishReason | undefined
  for (const c of chunks) {
    const index = typeof c.index === "number" ? c.index : -1
    switch (c.type) {
      case "block-start":
        blocks.set(index, { kind: String(c.blockType), text: "", done: undefined })
        break
      case "text-delta":
      case "reasoning-delta": {
        const b = blocks.get(index) ?? { kind: c.type === "text-delta" ? "text" : "reasoning", text: "", done: undefined }
        b.text += typeof c.text === "string" ? c.text : ""
        blocks.set(index, b)
        break
      }
      case "tool-call-delta": {
        const b = blocks.get(index) ?? { kind: "tool-call", text: "", done: undefined }
        b.text += typeof c.argumentsDelta === "string" ? c.argumentsDelta : ""
        blocks.set(index, b)
        break
      }
      case "block-end": {
        const b = blocks.get(index) ?? { kind: "", text: "", done: undefined }
        if (isRecord(c.block)) b.done = c.block as ContentBlock
        blocks.set(index, b)
        break
      }
      case "usage":
        if (isRecord(c.usage)) usage = c.usage as unknown as TokenUsage
        break
      case "finish":
        if (isRecord(c.reason)) finish = c.reason as unknown as FinishReason
        break
    }
  }
  const ordered = [...blocks.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b)
  const content: Array<ContentBlock> = []
  const deliveredPrefix: Array<ContentBlock> = []
  for (const b of ordered) {
    if (b.done !== undefined) content.push(b.done)
    if (b.kind === "text" || b.kind === "reasoning") {
      const text = b.done !== undefined && typeof b.done.text === "string" ? b.done.text : b.text
      if (text.length > 0) deliveredPrefix.push({ type: b.kind, text })
    }
  }
  return { content, deliveredPrefix, usage, finish }
}

/** The content blocks of a (non-streamed) response: text, reasoning and tool calls, in order. */
export const responsePartsToContent = (parts: ReadonlyArray<Response.AllParts<any>>): Array<ContentBlock> => {
  const out: Array<ContentBlock> = []
  for (const p of parts) {
    if (p.type === "text") out.push({ type: "text", text: p.text })
    else if (p.type === "reasoning") out.push({ type: "reasoning", text: p.text })
    else if (p.type === "tool-call") {
      out.push({ type: "tool-call", id: p.id, name: p.name, arguments: encodeJson((asJson(p.params) ?? null) as Json) })
    }
  }
  return out
}

/** A tool handler's encoded result as tool-result content: strings as text, other JSON as its text. */
export const toolOutputContent = (encoded: unknown): ReadonlyArray<ContentBlock> => {
  if (encoded === undefined) return []
  if (typeof encoded === "string") return [{ type: "text", text: encoded }]
  const json = asJson(encoded)
  return [{ type: "text", text: json === undefined ? String(encoded) : encodeJson(json) }]
}
