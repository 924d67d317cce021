/**
 * The `request/header` snapshot (SPEC §1.3.11, §5): the model-call envelope, its canonical form
 * and equality, plus the `request/context` route record (§1.3.12, §5.5).
 */
import * as Schema from "effect/Schema"
import { encodeJson, type Json } from "./Json.js"

/** The call scalars of a request. */
export const RequestConfig = Schema.Struct({
  provider: Schema.NonEmptyString,
  model: Schema.NonEmptyString,
  reasoningEffort: Schema.optional(Schema.NonEmptyString),
  temperature: Schema.optional(Schema.Number),
  maxTokens: Schema.optional(Schema.Number),
  stop: Schema.optional(Schema.Array(Schema.String))
})
export type RequestConfig = typeof RequestConfig.Type

/** Markers of config fields filled in by the model adapter. */
export const AdapterDefaults = Schema.Struct({
  reasoningEffort: Schema.optional(Schema.Literal(true)),
  maxTokens: Schema.optional(Schema.Literal(true))
}).annotations({ parseOptions: { onExcessProperty: "error" } }) // I4: no other keys

/** One tool as offered to the model. */
export const ToolSpec = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  parameters: Schema.Unknown
})
export type ToolSpec = typeof ToolSpec.Type

/** The epoch header: config, adapter markers, system prompt and tools. */
export const RequestHeader = Schema.Struct({
  config: RequestConfig,
  adapterDefaults: Schema.optional(AdapterDefaults),
  system: Schema.optional(Schema.String),
  tools: Schema.optional(Schema.Array(ToolSpec))
}).pipe(
  // I6: an adapter default marks a config field that is present
  Schema.filter((h) =>
    (h.adapterDefaults?.reasoningEffort !== true || h.config.reasoningEffort !== undefined) &&
    (h.adapterDefaults?.maxTokens !== true || h.config.maxTokens !== undefined), {
    message: () => "an adapter default marks an absent config field"
  })
)
export type RequestHeader = typeof RequestHeader.Type

/** Why a snapshot was written (SPEC §5.3). */
export const HeaderReason = Schema.Literal("initial", "resume", "change", "series")
export type HeaderReason = typeof HeaderReason.Type
export const HEADER_REASONS: ReadonlyArray<string> = HeaderReason.literals

/** Route capacity metadata (`request/context` data). */
export const RequestContext = Schema.Struct({
  provider: Schema.String,
  model: Schema.String,
  contextWindow: Schema.optional(Schema.Number)
})
export type RequestContext = typeof RequestContext.Type

/**
 * Canonical form (SPEC §5.1): `config` as is; `adapterDefaults` only with at least one `true`
 * marker; `system` only when non-empty; `tools` only when non-empty.
 */
export const canonicalHeader = (h: RequestHeader): RequestHeader => {
  const out: {
    config: RequestConfig
    adapterDefaults?: typeof AdapterDefaults.Type
    system?: string
    tools?: ReadonlyArray<ToolSpec>
  } = { config: h.config }
  const ad = h.adapterDefaults
  if (ad !== undefined && (ad.reasoningEffort === true || ad.maxTokens === true)) out.adapterDefaults = ad
  if (typeof h.system === "string" && h.system.length > 0) out.system = h.system
  if (Array.isArray(h.tools) && h.tools.length > 0) out.tools = h.tools
  return out
}

const stopEquals = (a: ReadonlyArray<string> | undefined, b: ReadonlyArray<string> | undefined): boolean => {
  if (a === undefined || b === undefined) return a === b
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/** Header equality on canonical forms (SPEC §5.2). */
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
  const ta = a.tools ?? []
  const tb = b.tools ?? []
  if (ta.length !== tb.length) return false
  for (let i = 0; i < ta.length; i++) {
    if (encodeJson(ta[i] as unknown as Json) !== encodeJson(tb[i] as unknown as Json)) return false
  }
  return true
}
