/**
 * The exact mapping between `@effect/ai` Prompt messages and the session log's messages, used by
 * `ChatPersistence`. Every part a chat history keeps (text, reasoning, tool calls and results,
 * files, provider options on parts and messages) is written into content blocks and one `prompt`
 * key on the message, so the derived messages give back the same Prompt. Messages the chat did
 * not write (a compaction summary, an agent loop's turn) convert by their blocks. Internal to the
 * chat layer; `ChatPersistence.promptOf` is its public face.
 *
 * @since 0.2.0
 */
import * as Prompt from "@effect/ai/Prompt"
import { encodeJson, type Json } from "../../schema/Json.js"
import type { ContentBlock, Message } from "../../schema/Messages.js"
import { isRecord } from "../../schema/Validation.js"
import { pushUserRuns } from "../../services/PromptRuns.js"
import { asJson } from "../../services/ResponseChunks.js"

/**
 * What a message keeps of its Prompt message beyond the blocks (the `prompt` key).
 *
 * @since 0.2.0
 * @category models
 */
export interface PromptMark {
  /** The Prompt role when it is not the log role (`system` and `tool`). */
  readonly role?: "system" | "tool"
  /** The message's provider options, when not empty. */
  readonly options?: Json
  /** This tool result continues the Prompt tool message of the previous message. */
  readonly continues?: true
}

/**
 * One log message of a Prompt message, before it gets its event (ids and sources are the caller's).
 *
 * @since 0.2.0
 * @category models
 */
export interface PlannedMessage {
  readonly role: "user" | "assistant"
  readonly content: ReadonlyArray<ContentBlock>
  readonly prompt: PromptMark | undefined
  /** For a tool result: the call it answers. */
  readonly callId?: string
  /** For a system message: recorded with a plugin source. */
  readonly system?: true
}

const nonEmpty = (options: Prompt.ProviderOptions | undefined): Json | undefined => {
  if (options === undefined || Object.keys(options).length === 0) return undefined
  // options that are not lossless JSON are refused by the append (NotLosslessJson), not altered here
  return asJson(options) ?? (options as unknown as Json)
}

const withOptions = (block: Record<string, unknown>, options: Prompt.ProviderOptions | undefined): ContentBlock => {
  const json = nonEmpty(options)
  return (json === undefined ? block : { ...block, options: json }) as ContentBlock
}

const bytesToBase64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64")

/** A tool result's value as text: a string as it is, other values as their JSON text. */
const resultText = (result: unknown): { readonly text: string; readonly json: boolean } =>
  typeof result === "string"
    ? { text: result, json: false }
    : { text: encodeJson((asJson(result) ?? null) as Json), json: true }

/**
 * The content block of one Prompt part.
 *
 * @since 0.2.0
 * @category utils
 */
export const blockOfPart = (part: Prompt.Part): ContentBlock => {
  switch (part.type) {
    case "text":
      return withOptions({ type: "text", text: part.text }, part.options)
    case "reasoning":
      return withOptions({ type: "reasoning", text: part.text }, part.options)
    case "tool-call":
      return withOptions({
        type: "tool-call",
        id: part.id,
        name: part.name,
        arguments: encodeJson((asJson(part.params) ?? null) as Json),
        ...(part.providerExecuted ? { providerExecuted: true } : {})
      }, part.options)
    case "tool-result": {
      const { json, text } = resultText(part.result)
      return withOptions({
        type: "tool-result",
        toolCallId: part.id,
        name: part.name,
        content: [{ type: "text", text }],
        ...(part.isFailure ? { isError: true } : {}),
        ...(json ? { resultJson: true } : {}),
        ...(part.providerExecuted ? { providerExecuted: true } : {})
      }, part.options)
    }
    case "file": {
      const data = part.data
      return withOptions({
        type: "file",
        mediaType: part.mediaType,
        ...(part.fileName === undefined ? {} : { fileName: part.fileName }),
        data: typeof data === "string"
          ? data
          : data instanceof URL
          ? { url: data.href }
          : { base64: bytesToBase64(data) }
      }, part.options)
    }
  }
}

const markOf = (mark: PromptMark): PromptMark | undefined => Object.keys(mark).length === 0 ? undefined : mark

/**
 * The log messages of one Prompt message: a tool message becomes one message per result (the log
 * keeps one result per `tool/result`), the later ones marked as continuing the first.
 *
 * @since 0.2.0
 * @category utils
 */
export const planMessage = (message: Prompt.Message): ReadonlyArray<PlannedMessage> => {
  const options = nonEmpty(message.options)
  const base = options === undefined ? {} : { options }
  switch (message.role) {
    case "system":
      return [{
        role: "user",
        content: [{ type: "text", text: message.content }],
        prompt: { role: "system", ...base },
        system: true
      }]
    case "user":
      return [{ role: "user", content: message.content.map(blockOfPart), prompt: markOf(base) }]
    case "assistant":
      return [{ role: "assistant", content: message.content.map(blockOfPart), prompt: markOf(base) }]
    case "tool":
      return message.content.map((part, i) => ({
        role: "user",
        content: [blockOfPart(part)],
        prompt: i === 0 ? { role: "tool", ...base } : { role: "tool", continues: true },
        callId: part.id
      }))
  }
}

type Rec = Record<string, unknown>

const optionsOf = (value: unknown): Prompt.ProviderOptions =>
  isRecord(value) ? (value as Prompt.ProviderOptions) : {}

const textOfBlocks = (content: ReadonlyArray<ContentBlock>): string =>
  content.filter((b) => b.type === "text" && typeof b.text === "string").map((b) => b.text as string).join("\n")

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const fileData = (data: unknown): string | Uint8Array | URL => {
  if (typeof data === "string") return data
  if (isRecord(data) && typeof data.url === "string") return new URL(data.url)
  if (isRecord(data) && typeof data.base64 === "string") return new Uint8Array(Buffer.from(data.base64, "base64"))
  return encodeJson((asJson(data) ?? null) as Json)
}

const toolResultPart = (b: Rec, names: Map<string, string>): Prompt.ToolResultPart => {
  const content = Array.isArray(b.content) ? (b.content as ReadonlyArray<ContentBlock>) : []
  const text = textOfBlocks(content)
  const id = typeof b.toolCallId === "string" ? b.toolCallId : ""
  return Prompt.makePart("tool-result", {
    id,
    name: typeof b.name === "string" ? b.name : names.get(id) ?? "unknown",
    isFailure: b.isError === true,
    result: b.resultJson === true ? parseJson(text) : text,
    providerExecuted: b.providerExecuted === true,
    options: optionsOf(b.options)
  })
}

/** The Prompt part of one block (a block with no Prompt counterpart travels as its JSON text). */
const partOfBlock = (b: ContentBlock, names: Map<string, string>): Prompt.Part => {
  const options = optionsOf(b.options)
  switch (b.type) {
    case "text":
      if (typeof b.text === "string") return Prompt.makePart("text", { text: b.text, options })
      break
    case "reasoning":
      if (typeof b.text === "string") return Prompt.makePart("reasoning", { text: b.text, options })
      break
    case "tool-call":
      if (typeof b.id === "string" && typeof b.name === "string") {
        names.set(b.id, b.name)
        return Prompt.makePart("tool-call", {
          id: b.id,
          name: b.name,
          params: typeof b.arguments === "string" ? parseJson(b.arguments) : null,
          providerExecuted: b.providerExecuted === true,
          options
        })
      }
      break
    case "tool-result":
      return toolResultPart(b, names)
    case "file":
      if (typeof b.mediaType === "string") {
        return Prompt.makePart("file", {
          mediaType: b.mediaType,
          ...(typeof b.fileName === "string" ? { fileName: b.fileName } : {}),
          data: fileData(b.data),
          options
        })
      }
      break
    case "image": {
      const attachment = isRecord(b.attachment) ? b.attachment : {}
      return Prompt.makePart("file", {
        mediaType: typeof attachment.mediaType === "string" ? attachment.mediaType : "application/octet-stream",
        data: typeof attachment.id === "string" ? attachment.id : encodeJson((asJson(b.attachment) ?? null) as Json)
      })
    }
  }
  return Prompt.makePart("text", { text: encodeJson((asJson(b) ?? null) as Json) })
}

const markOfMessage = (m: Message): PromptMark => (isRecord(m.prompt) ? (m.prompt as PromptMark) : {})

/** Append the Prompt messages of one log message to `out` (a continuing tool result joins the last one). */
const pushMessage = (out: Array<Prompt.Message>, names: Map<string, string>, m: Message): void => {
  const mark = markOfMessage(m)
  const options = optionsOf(mark.options)
  if (mark.role === "system") {
    out.push(Prompt.makeMessage("system", { content: textOfBlocks(m.content), options }))
    return
  }
  if (m.role === "system") {
    out.push(Prompt.makeMessage("system", { content: textOfBlocks(m.content) }))
    return
  }
  if (m.role === "assistant") {
    const content = m.content.map((b) => partOfBlock(b, names)) as Array<Prompt.AssistantMessagePart>
    out.push(Prompt.makeMessage("assistant", { content, options }))
    return
  }
  if (mark.role === "tool") {
    const parts = m.content.map((b) => toolResultPart(b as Rec, names))
    const previous = out[out.length - 1]
    if (mark.continues === true && previous !== undefined && previous.role === "tool") {
      out[out.length - 1] = Prompt.makeMessage("tool", {
        content: [...previous.content, ...parts],
        options: previous.options
      })
    } else {
      out.push(Prompt.makeMessage("tool", { content: parts, options }))
    }
    return
  }
  // a user-role message: runs of tool results become tool messages, other runs user messages
  pushUserRuns(
    out,
    m.content.map((b): Prompt.UserMessagePart | Prompt.ToolResultPart => {
      if (b.type === "tool-result") return toolResultPart(b, names)
      const part = partOfBlock(b, names)
      return part.type === "text" || part.type === "file"
        ? part
        : Prompt.makePart("text", { text: encodeJson((asJson(b) ?? null) as Json) })
    }),
    options,
    undefined
  )
  if (m.content.length === 0) out.push(Prompt.makeMessage("user", { content: [], options }))
}

/**
 * The Prompt of derived messages, kept up to date incrementally: when the messages of the
 * previous call are a prefix of the new ones (the same objects: a session shares its derived
 * messages until a replacement), only the new ones are converted; else everything is.
 *
 * @since 0.2.0
 * @category models
 */
export class PromptFold {
  private readonly inputs: Array<Message> = []
  private readonly out: Array<Prompt.Message> = []
  private readonly names = new Map<string, string>()

  /**
   * The Prompt of `messages`.
   *
   * @since 0.2.0
   */
  of(messages: ReadonlyArray<Message>): Prompt.Prompt {
    let prefix = this.inputs.length <= messages.length
    for (let i = this.inputs.length - 1; prefix && i >= 0; i--) prefix = this.inputs[i] === messages[i]
    if (!prefix) {
      this.inputs.length = 0
      this.out.length = 0
      this.names.clear()
    }
    for (let i = this.inputs.length; i < messages.length; i++) {
      pushMessage(this.out, this.names, messages[i])
      this.inputs.push(messages[i])
    }
    return Prompt.fromMessages(this.out.slice())
  }
}

/**
 * The Prompt of derived messages: the exact inverse of `planMessage` for messages the chat wrote;
 * other messages by their blocks (tool results in user-role messages become tool messages).
 *
 * @since 0.2.0
 * @category utils
 */
export const messagesToPrompt = (messages: ReadonlyArray<Message>): Prompt.Prompt => new PromptFold().of(messages)
