/**
 * The Summarizer service (SPEC §9.5): turns the shadowed messages of a compaction into summary
 * text blocks. Owns the exact instruction and checkpoint texts and the checkpoint framing; the
 * LanguageModel-backed and deterministic implementations live in `layers/SummarizerLive.ts`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type { CompactionRejected } from "../schema/Errors.js"
import type { ContentBlock, Message, TextBlock, TokenUsage } from "../schema/Messages.js"
import type { ToolSpec } from "../schema/RequestHeader.js"

/**
 * The instruction appended as the final user message of a model summarisation request.
 *
 * @since 0.1.0
 * @category constants
 */
export const SUMMARY_INSTRUCTION =
  "Write a checkpoint summary of the conversation above so that the work can continue from it without the original messages. Use Markdown with exactly these sections, in this order: \"## Primary request and intent\", \"## Key technical concepts\", \"## Files and code\", \"## Errors and fixes\", \"## Pending tasks\", \"## Current work\", \"## Next step\", \"## Critical context\". Use short bullet points. Write \"(none)\" under a section with nothing to report. Keep exact file paths, commands, identifiers, names and numbers. If the conversation contains a <compacted-summary> block, merge its content into your summary instead of copying it. Do not mention that this is a summary or a compaction. Output only the summary."

/**
 * The preamble of every checkpoint message.
 *
 * @since 0.1.0
 * @category constants
 */
export const CHECKPOINT_PREAMBLE =
  "This is an automatic checkpoint that replaces the earlier part of this conversation. Treat it as established background and continue the work from where it left off, without acknowledging or mentioning the checkpoint."

/**
 * A model route.
 *
 * @since 0.1.0
 * @category models
 */
export interface SummaryRoute {
  readonly provider: string
  readonly model: string
}

/**
 * What the summariser is given.
 *
 * @since 0.1.0
 * @category models
 */
export interface SummaryInput {
  /** The latest header's system prompt (reused so the call shares the cached prefix). */
  readonly system?: string | undefined
  /** The latest header's tools. */
  readonly tools?: ReadonlyArray<ToolSpec> | undefined
  /** The projected messages of the shadowed nodes, in surface order. */
  readonly messages: ReadonlyArray<Message>
  /** The latest logged header's route. */
  readonly loggedRoute?: SummaryRoute | undefined
  /** The agent's configured route (last fallback). */
  readonly agentRoute?: SummaryRoute | undefined
}

/**
 * What the summariser returns.
 *
 * @since 0.1.0
 * @category models
 */
export interface SummaryOutput {
  /** The kept text blocks (non-blank). */
  readonly blocks: ReadonlyArray<TextBlock>
  readonly usage?: TokenUsage | undefined
  /** The complete content blocks the model returned (model layer only). */
  readonly rawOutput?: ReadonlyArray<ContentBlock> | undefined
  readonly provider: string
  readonly model: string
  readonly maxTokens?: number | undefined
  readonly llmStreamCall?: true | undefined
}

/**
 * The Summarizer shape. Failures are P7 (`CompactionRejected`, reason `summary`).
 *
 * @since 0.1.0
 * @category models
 */
export interface SummarizerShape {
  readonly summarize: (input: SummaryInput) => Effect.Effect<SummaryOutput, CompactionRejected>
}

/**
 * Produces compaction summaries.
 *
 * @since 0.1.0
 * @category tags
 */
export class Summarizer extends Context.Tag("effect-session-log/Summarizer")<Summarizer, SummarizerShape>() {}

/**
 * The checkpoint message content (SPEC §9.5):
 * `[text(PREAMBLE + "\n\n<compacted-summary>"), ...summary text blocks, text("</compacted-summary>")]`.
 *
 * @since 0.1.0
 * @category utils
 */
export const frameCheckpoint = (blocks: ReadonlyArray<TextBlock>): ReadonlyArray<TextBlock> => [
  { type: "text", text: `${CHECKPOINT_PREAMBLE}\n\n<compacted-summary>` },
  ...blocks.map((b): TextBlock => ({ type: "text", text: b.text })),
  { type: "text", text: "</compacted-summary>" }
]
