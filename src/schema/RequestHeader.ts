/**
 * The `request/header` snapshot (SPEC §1.3.11, §5): the model-call envelope, its canonical form
 * and equality, plus the `request/context` route record (§1.3.12, §5.5).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { encodeJson, type Json } from "./Json.js"
import { ContentBlock, type Message } from "./Messages.js"

/**
 * The call scalars of a request.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RequestConfig = Schema.Struct({
  provider: Schema.NonEmptyString,
  model: Schema.NonEmptyString,
  reasoningEffort: Schema.optional(Schema.NonEmptyString),
  temperature: Schema.optional(Schema.Number),
  maxTokens: Schema.optional(Schema.Number),
  stop: Schema.optional(Schema.Array(Schema.String))
})
/**
 * The call scalars of a request.
 *
 * @since 0.1.0
 * @category models
 */
export type RequestConfig = typeof RequestConfig.Type

/**
 * Markers of config fields filled in by the model adapter.
 *
 * @since 0.1.0
 * @category schemas
 */
export const AdapterDefaults = Schema.Struct({
  reasoningEffort: Schema.optional(Schema.Literal(true)),
  maxTokens: Schema.optional(Schema.Literal(true))
}).annotations({ parseOptions: { onExcessProperty: "error" } }) // I4: no other keys

/**
 * One tool as offered to the model.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolSpec = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  parameters: Schema.Unknown
})
/**
 * One tool as offered to the model.
 *
 * @since 0.1.0
 * @category models
 */
export type ToolSpec = typeof ToolSpec.Type

/**
 * A message of a header's `messagePrefix` (I11): a non-empty string `id`, a role, an array
 * `content` and an object `source`; nothing else of it is checked (SPEC §1.5).
 *
 * @since 0.1.0
 * @category schemas
 */
export const PrefixMessage = Schema.Struct(
  {
    id: Schema.NonEmptyString,
    role: Schema.Literal("system", "user", "assistant"),
    content: Schema.Array(ContentBlock),
    source: Schema.Record({ key: Schema.String, value: Schema.Unknown })
  },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)

/**
 * The epoch header: config, adapter markers, system prompt, tools and the messages sent before
 * the history in every request of the epoch (`messagePrefix`, SPEC §1.3.11; format-0 logs).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RequestHeader = Schema.Struct({
  config: RequestConfig,
  adapterDefaults: Schema.optional(AdapterDefaults),
  system: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Array(ToolSpec)),
  messagePrefix: Schema.optional(Schema.Array(PrefixMessage))
}).pipe(
  // I6: an adapter default marks a config field that is present
  Schema.filter((h) =>
    (h.adapterDefaults?.reasoningEffort !== true || h.config.reasoningEffort !== undefined) &&
    (h.adapterDefaults?.maxTokens !== true || h.config.maxTokens !== undefined), {
    message: () => "an adapter default marks an absent config field"
  })
)
/**
 * The epoch header: config, adapter markers, system prompt, tools and the messages sent before
 * the history in every request of the epoch (`messagePrefix`, SPEC §1.3.11; format-0 logs).
 *
 * @since 0.1.0
 * @category models
 */
export type RequestHeader = typeof RequestHeader.Type

/**
 * Why a snapshot was written (SPEC §5.3).
 *
 * @since 0.1.0
 * @category schemas
 */
export const HeaderReason = Schema.Literal("initial", "resume", "change", "series")
/**
 * Why a snapshot was written (SPEC §5.3).
 *
 * @since 0.1.0
 * @category models
 */
export type HeaderReason = typeof HeaderReason.Type
/**
 * The reasons a `request/header` snapshot may give, in the order SPEC §5.3 lists them.
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER_REASONS: ReadonlyArray<string> = HeaderReason.literals

/**
 * Route capacity metadata (`request/context` data).
 *
 * @since 0.1.0
 * @category schemas
 */
export const RequestContext = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  contextWindow: Schema.optional(Schema.Number)
})
/**
 * Route capacity metadata (`request/context` data).
 *
 * @since 0.1.0
 * @category models
 */
export type RequestContext = typeof RequestContext.Type

/**
 * Canonical form (SPEC §5.1): `config` as is; `adapterDefaults` only with at least one `true`
 * marker; `system`, `tools` and `messagePrefix` only when non-empty.
 *
 * @since 0.1.0
 * @category utils
 */
export const canonicalHeader = (h: RequestHeader): RequestHeader => {
  const out: {
    config: RequestConfig
    adapterDefaults?: typeof AdapterDefaults.Type
    system?: string
    tools?: ReadonlyArray<ToolSpec>
    messagePrefix?: RequestHeader["messagePrefix"]
  } = { config: h.config }
  const ad = h.adapterDefaults
  if (ad !== undefined && (ad.reasoningEffort === true || ad.maxTokens === true)) out.adapterDefaults = ad
  if (typeof h.system === "string" && h.system.length > 0) out.system = h.system
  if (Array.isArray(h.tools) && h.tools.length > 0) out.tools = h.tools
  if (Array.isArray(h.messagePrefix) && h.messagePrefix.length > 0) out.messagePrefix = h.messagePrefix
  return out
}

const stopEquals = (a: ReadonlyArray<string> | undefined, b: ReadonlyArray<string> | undefined): boolean => {
  if (a === undefined || b === undefined) return a === b
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/**
 * Header equality on canonical forms (SPEC §5.2).
 *
 * @since 0.1.0
 * @category utils
 */
export const headerEquals = (x: RequestHeader, y: RequestHeader): boolean => {
  const a = canonicalHeader(x)
  const b = canonicalHeader(y)
  const ca = a.config
  const cb = b.config
  if (
    ca.provider !== cb.provider || ca.model !== cb.model || ca.reasoningEffort !== cb.reasoningEffort ||
    ca.temperature !== cb.temperature || ca.maxTokens !== cb.maxTokens
  ) return false
  if (!stopEquals(ca.stop, cb.stop)) return false
  if ((a.adapterDefaults?.reasoningEffort === true) !== (b.adapterDefaults?.reasoningEffort === true)) return false
  if ((a.adapterDefaults?.maxTokens === true) !== (b.adapterDefaults?.maxTokens === true)) return false
  if (a.system !== b.system) return false
  return sameJsonLists(a.tools, b.tools) && sameJsonLists(a.messagePrefix, b.messagePrefix)
}

/** Equal length and each pair serialising to the same JSON text; absent equals empty. */
const sameJsonLists = (x: ReadonlyArray<unknown> | undefined, y: ReadonlyArray<unknown> | undefined): boolean => {
  const a = x ?? []
  const b = y ?? []
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) {
    if (encodeJson(a[i] as Json) !== encodeJson(b[i] as Json)) return false
  }
  return true
}

/**
 * The messages of a provider request (SPEC §1.5): the header's `messagePrefix`, if any, then the
 * derived history in surface order.
 *
 * @since 0.1.0
 * @category utils
 */
export const requestMessages = (
  header: Pick<RequestHeader, "messagePrefix"> | undefined,
  history: ReadonlyArray<Message>
): ReadonlyArray<Message> => {
  const prefix = header?.messagePrefix
  return prefix === undefined || prefix.length === 0 ? history : [...(prefix as ReadonlyArray<Message>), ...history]
}
