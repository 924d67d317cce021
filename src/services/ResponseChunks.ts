/**
 * Model responses in the log's vocabulary (SPEC §1.3.5–§1.3.6): `@effect/ai` Response stream parts
 * translated to the normative `assistant/chunk` chunks, one attempt's chunks assembled into content
 * blocks and a delivered prefix, and provider usage, finish reasons and errors as log shapes.
 */
import type * as AiError from "@effect/ai/AiError"
import type * as Response from "@effect/ai/Response"
import { encodeJson, type Json, walkJson } from "../schema/Json.js"
import type { ContentBlock, TokenUsage } from "../schema/Messages.js"
import { isRecord } from "../schema/Validation.js"

/** A JSON copy of an arbitrary value, or undefined when it is not lossless JSON. */
export const asJson = (v: unknown): Json | undefined => {
  const w = walkJson(v)
  return w._tag === "Ok" ? (w.value as Json) : undefined
}

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
 * its arguments in one delta and closed; the raw arguments are the concatenated params deltas. A
 * text or reasoning block still open at `finish` is ended there; a tool call never completed by its
 * `tool-call` part stays unended (its arguments may be partial), so it is not part of the message.
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
        // a text or reasoning block the provider never ended is complete once the call finishes:
        // it is ended here (in block order), so the message holds what the stream delivered
        const unended = [...this.open.entries()].filter(([, b]) => b.kind !== "tool-call").sort((a, b) => a[1].index - b[1].index)
        for (const [key, block] of unended) {
          this.open.delete(key)
          out.push({ type: "block-end", index: block.index, block: { type: block.kind as "text" | "reasoning", text: block.text } })
        }
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
export const assembleChunks = (chunks: ReadonlyArray<Record<string, unknown>>): Assembled => {
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
