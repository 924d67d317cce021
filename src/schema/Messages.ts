/**
 * Model messages, content blocks and message sources (SPEC §1.5). These Schemas type the
 * typed append overloads and let programs decode what they read; core acceptance checks the
 * H rules by hand (Validation.ts) and never descends into open JSON positions.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A text block.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TextBlock = Schema.Struct({ type: Schema.Literal("text"), text: Schema.String })
/**
 * A text block.
 *
 * @since 0.1.0
 * @category models
 */
export type TextBlock = typeof TextBlock.Type

/**
 * A reasoning block.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ReasoningBlock = Schema.Struct({ type: Schema.Literal("reasoning"), text: Schema.String })

/**
 * An image block: a durable content-addressed reference.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ImageBlock = Schema.Struct({ type: Schema.Literal("image"), attachment: Schema.Unknown })

/**
 * An assistant's tool request; `arguments` is the raw JSON string the model produced.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolCallBlock = Schema.Struct({
  type: Schema.Literal("tool-call"),
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.String
})
/**
 * An assistant's tool request; `arguments` is the raw JSON string the model produced.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolCallBlock = typeof ToolCallBlock.Type

// the keys of an open union's member besides its discriminator, kept as they are
const OtherKeys = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * Content blocks form an open union keyed by `type` (H10): internals are not validated by core.
 *
 * @since 0.1.0
 * @category models
 */
export interface ContentBlock {
  readonly type: string
  readonly [key: string]: unknown
}
/**
 * The schema of `ContentBlock`: any object with a string `type`, other keys kept as they are.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ContentBlock: Schema.Schema<ContentBlock> = Schema.Struct({ type: Schema.String }, OtherKeys)

/**
 * The single block of a tool result message.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolResultBlock = Schema.Struct({
  type: Schema.Literal("tool-result"),
  toolCallId: Schema.String,
  content: Schema.Array(ContentBlock),
  isError: Schema.optional(Schema.Boolean)
})
/**
 * The single block of a tool result message.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolResultBlock = typeof ToolResultBlock.Type

/**
 * Message sources form an open union keyed by `kind`.
 *
 * @since 0.1.0
 * @category models
 */
export interface MessageSource {
  readonly kind: string
  readonly [key: string]: unknown
}
/**
 * The schema of `MessageSource`: any object with a non-empty string `kind`, other keys kept.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessageSource: Schema.Schema<MessageSource> = Schema.Struct({ kind: Schema.NonEmptyString }, OtherKeys)

/**
 * The source of an assistant message.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ModelSource = Schema.Struct({
  kind: Schema.Literal("model"),
  provider: Schema.NonEmptyString,
  model: Schema.NonEmptyString,
  replayState: Schema.optional(Schema.Unknown)
})

/**
 * The source of a tool result.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolSource = Schema.Struct({ kind: Schema.Literal("tool"), callId: Schema.NonEmptyString })

/**
 * A message as sent to a model.
 *
 * @since 0.1.0
 * @category models
 */
export interface Message {
  readonly id: string
  readonly role: "system" | "user" | "assistant"
  readonly content: ReadonlyArray<ContentBlock>
  readonly source: MessageSource
  readonly [key: string]: unknown
}

/**
 * A user-role message (`user/message` data, `context/message` projection, tool results).
 *
 * @since 0.1.0
 * @category schemas
 */
export const UserMessage = Schema.Struct({
  id: Schema.NonEmptyString,
  role: Schema.Literal("user"),
  content: Schema.Array(ContentBlock),
  source: MessageSource
})
/**
 * A user-role message (`user/message` data, `context/message` projection, tool results).
 *
 * @since 0.1.0
 * @category models
 */
export type UserMessage = typeof UserMessage.Type

/**
 * An assistant message.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AssistantMessage = Schema.Struct({
  id: Schema.NonEmptyString,
  role: Schema.Literal("assistant"),
  content: Schema.Array(ContentBlock),
  source: ModelSource
})
/**
 * An assistant message.
 *
 * @since 0.1.0
 * @category models
 */
export type AssistantMessage = typeof AssistantMessage.Type

/**
 * A tool result message: exactly one `tool-result` block answering `source.callId`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolResultMessage = Schema.Struct({
  id: Schema.NonEmptyString,
  role: Schema.Literal("user"),
  content: Schema.Tuple(ToolResultBlock),
  source: ToolSource
}).pipe(
  // H9: the result answers the call its source names
  Schema.filter((m) => m.content[0].toolCallId === m.source.callId, {
    message: () => "mismatched tool call ids",
    // generated results answer their own call (a filter over random ids would almost never pass)
    arbitrary: () => (fc) =>
      fc.record({ id: fc.string({ minLength: 1 }), callId: fc.string({ minLength: 1 }), text: fc.string(), isError: fc.boolean() })
        .map(({ callId, id, isError, text }) => ({
          id,
          role: "user" as const,
          content: [{ type: "tool-result" as const, toolCallId: callId, content: [{ type: "text", text }], isError }] as const,
          source: { kind: "tool" as const, callId }
        }))
  })
)
/**
 * A tool result message: exactly one `tool-result` block answering `source.callId`.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolResultMessage = typeof ToolResultMessage.Type

/**
 * Token usage with disjoint counts (billed input = input + cacheRead + cacheWrite).
 *
 * @since 0.1.0
 * @category schemas
 */
export const TokenUsage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  cacheReadTokens: Schema.optional(Schema.Number),
  cacheWriteTokens: Schema.optional(Schema.Number),
  reasoningTokens: Schema.optional(Schema.Number)
})
/**
 * Token usage with disjoint counts (billed input = input + cacheRead + cacheWrite).
 *
 * @since 0.1.0
 * @category models
 */
export type TokenUsage = typeof TokenUsage.Type
