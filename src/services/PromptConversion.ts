/**
 * Conversions between the session log's messages and `@effect/ai` (SPEC §1.5): a request (header
 * + derived messages) to a `Prompt`, a `Prompt` back to messages, toolkit tools to header tool
 * specs, and tool calls' arguments and results. The response side — stream parts to the normative
 * `assistant/chunk` vocabulary (SPEC §1.3.5), chunk assembly, usage, finish reasons and provider
 * errors — is in `ResponseChunks` and re-exported here.
 *
 * @since 0.1.0
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { encodeJson, type Json } from "../schema/Json.js"
import type { ContentBlock, Message, MessageSource } from "../schema/Messages.js"
import type { RequestConfig, RequestHeader, ToolSpec } from "../schema/RequestHeader.js"
import { isRecord } from "../schema/Validation.js"
import { pushUserRuns } from "./PromptRuns.js"
import { asJson } from "./ResponseChunks.js"

export {
  /**
   * The failure of a provider error: code = the AiError tag, plus status, retry-after and request id when known.
   *
   * @since 0.1.0
   * @category utils
   */
  aiErrorFailure,
  /**
   * What a model call produced, folded from its chunks.
   *
   * @since 0.1.0
   * @category models
   */
  type Assembled,
  /**
   * Fold one attempt's chunks (in log order) into its content, delivered prefix, usage and finish reason.
   *
   * @since 0.1.0
   * @category utils
   */
  assembleChunks,
  /**
   * One chunk of the normative vocabulary (`assistant/chunk` data.chunk).
   *
   * @since 0.1.0
   * @category models
   */
  type Chunk,
  /**
   * Translates one model call's Response stream parts into chunks (SPEC §1.3.5). Blocks are indexed
   * in the order they start; a tool call announced whole (without params parts) is opened, given
   * its arguments in one delta and closed; the raw arguments are the concatenated params deltas. A
   * text or reasoning block still open at `finish` is ended there; a tool call never completed by its
   * `tool-call` part stays unended (its arguments may be partial), so it is not part of the message.
   *
   * @since 0.1.0
   * @category models
   */
  ChunkTranslator,
  /**
   * A failure as carried by `turn/end` error reasons and `error`/`aborted` finish reasons (SPEC §1.3.2).
   *
   * @since 0.1.0
   * @category models
   */
  type Failure,
  /**
   * A FinishReason of the chunk vocabulary (SPEC §1.3.5).
   *
   * @since 0.1.0
   * @category models
   */
  type FinishReason,
  /**
   * `@effect/ai`'s finish reason in the chunk vocabulary; reasons without a kind of their own are `stop`.
   *
   * @since 0.1.0
   * @category utils
   */
  finishReasonOf,
  /**
   * The content blocks of a (non-streamed) response: text, reasoning and tool calls, in order.
   *
   * @since 0.1.0
   * @category utils
   */
  responsePartsToContent,
  /**
   * Usage with disjoint counts (SPEC §1.3.6), or undefined when the model reported none. `@effect/ai`
   * reports cached input as part of `inputTokens`, so it is subtracted out into `cacheReadTokens`.
   *
   * @since 0.1.0
   * @category utils
   */
  usageOf
} from "./ResponseChunks.js"

/**
 * The provider-options key under which a Prompt part or message keeps its log identity.
 *
 * @since 0.1.0
 * @category constants
 */
export const OPTIONS_KEY = "effect-session-log"

/**
 * The call scalars of the request being dispatched. The agent loop provides it around the model
 * stream; a model adapter (or the scripted model) reads it, since `@effect/ai`'s
 * `LanguageModel` options carry no model or token settings.
 *
 * @since 0.1.0
 * @category models
 */
export class ModelRequestConfig extends Context.Reference<ModelRequestConfig>()(
  "effect-session-log/ModelRequestConfig",
  { defaultValue: (): RequestConfig | undefined => undefined }
) {}

/**
 * The request value a model call is built from (SPEC §1.5): header snapshot and derived messages.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestValue {
  readonly header: RequestHeader | undefined
  readonly messages: ReadonlyArray<Message>
}

type Rec = Record<string, unknown>

const stash = (value: Rec): { readonly [OPTIONS_KEY]: Rec } => ({ [OPTIONS_KEY]: value })
const stashed = (options: unknown): Rec | undefined =>
  isRecord(options) && isRecord(options[OPTIONS_KEY]) ? options[OPTIONS_KEY] : undefined

/**
 * Parse a tool call's raw arguments; invalid JSON is passed through as the raw string.
 *
 * @since 0.1.0
 * @category utils
 */
export const parseArguments = (raw: string): unknown => {
  try {
    return JSON.parse(raw)
  } catch {
    return raw
  }
}

/**
 * The tool specs of a toolkit as written into the request header (`{ name, description, parameters }`).
 *
 * @since 0.1.0
 * @category utils
 */
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

/**
 * A tool-result block's content as the Prompt result: its text when it is one text block, else the blocks.
 *
 * @since 0.1.0
 * @category utils
 */
export const toolResultValue = (content: ReadonlyArray<ContentBlock>): unknown =>
  content.length === 1 && content[0].type === "text" && typeof content[0].text === "string"
    ? content[0].text
    : content

const messageOptions = (m: Message) => stash({ id: m.id, source: m.source })

/**
 * The Prompt for a request (SPEC §1.5): the header's system prompt first, then every derived
 * message in surface order. A pure function of the request value; tool results become `tool`
 * messages whose tool name is taken from the assistant call they answer.
 *
 * @since 0.1.0
 * @category utils
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
    pushUserRuns(
      out,
      m.content.map((b): Prompt.UserMessagePart | Prompt.ToolResultPart => {
        if (b.type === "tool-result" && typeof b.toolCallId === "string") {
          const content = Array.isArray(b.content) ? (b.content as ReadonlyArray<ContentBlock>) : []
          return Prompt.makePart("tool-result", {
            id: b.toolCallId,
            name: callNames.get(b.toolCallId) ?? "unknown",
            isFailure: b.isError === true,
            result: toolResultValue(content),
            providerExecuted: false
          })
        }
        if (b.type === "text" && typeof b.text === "string") return Prompt.makePart("text", { text: b.text })
        return b.type === "image" ? filePart(b) : opaquePart(b)
      }),
      options,
      options
    )
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
 *
 * @since 0.1.0
 * @category utils
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

/**
 * A Prompt's encoded JSON form (for comparing two prompts).
 *
 * @since 0.1.0
 * @category utils
 */
export const encodePrompt = (prompt: Prompt.Prompt): unknown => Schema.encodeSync(Prompt.Prompt)(prompt)

/**
 * A tool handler's encoded result as tool-result content: strings as text, other JSON as its text.
 *
 * @since 0.1.0
 * @category utils
 */
export const toolOutputContent = (encoded: unknown): ReadonlyArray<ContentBlock> => {
  if (encoded === undefined) return []
  if (typeof encoded === "string") return [{ type: "text", text: encoded }]
  const json = asJson(encoded)
  return [{ type: "text", text: json === undefined ? String(encoded) : encodeJson(json) }]
}
