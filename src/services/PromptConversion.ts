/**
 * Conversions between the session log's messages and `@effect/ai` (SPEC §1.5): a request (header
 * + derived messages) to a `Prompt`, a `Prompt` back to messages, toolkit tools to header tool
 * specs, and tool calls' arguments and results. The response side — stream parts to the normative
 * `assistant/chunk` vocabulary (SPEC §1.3.5), chunk assembly, usage, finish reasons and provider
 * errors — is in `ResponseChunks` and re-exported here.
 */
import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import * as Context from "effect/Context"
import * as Schema from "effect/Schema"
import { encodeJson, type Json } from "../schema/Json.js"
import type { ContentBlock, Message, MessageSource } from "../schema/Messages.js"
import type { RequestConfig, RequestHeader, ToolSpec } from "../schema/RequestHeader.js"
import { isRecord } from "../schema/Validation.js"
import { asJson } from "./ResponseChunks.js"

export {
  aiErrorFailure,
  type Assembled,
  assembleChunks,
  type Chunk,
  ChunkTranslator,
  type Failure,
  type FinishReason,
  finishReasonOf,
  responsePartsToContent,
  usageOf
} from "./ResponseChunks.js"

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

/** A tool handler's encoded result as tool-result content: strings as text, other JSON as its text. */
export const toolOutputContent = (encoded: unknown): ReadonlyArray<ContentBlock> => {
  if (encoded === undefined) return []
  if (typeof encoded === "string") return [{ type: "text", text: encoded }]
  const json = asJson(encoded)
  return [{ type: "text", text: json === undefined ? String(encoded) : encodeJson(json) }]
}
