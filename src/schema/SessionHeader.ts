/**
 * The session header (SPEC §2.1): out-of-log, immutable metadata with a closed key set, and
 * its validation (J1–J11, J16). The validator returns the walked, frozen copy.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { SessionHeaderInvalid } from "./Errors.js"
import { SESSION_FORMAT_VERSION } from "./Format.js"
import { walkJson } from "./Json.js"

/**
 * The session header record.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SessionHeader = Schema.Struct({
  version: Schema.Number,
  id: Schema.String,
  createdAt: Schema.Number,
  cwd: Schema.optional(Schema.String),
  parentSession: Schema.optional(Schema.String),
  seedLength: Schema.optional(Schema.Number),
  origin: Schema.optional(Schema.Literal("subagent")),
  delegationDepth: Schema.optional(Schema.Number),
  agentPreset: Schema.optional(Schema.String)
})
/**
 * The session header record.
 *
 * @since 0.1.0
 * @category models
 */
export type SessionHeader = typeof SessionHeader.Type

/**
 * The header keys in serialisation order (SPEC §2.1).
 *
 * @since 0.1.0
 * @category constants
 */
export const HEADER_KEYS = [
  "version",
  "id",
  "createdAt",
  "cwd",
  "parentSession",
  "seedLength",
  "origin",
  "delegationDepth",
  "agentPreset"
] as const

const headerKeySet: ReadonlySet<string> = new Set(HEADER_KEYS)
const RETIRED_KEYS: ReadonlySet<string> = new Set(["sandboxMode", "approvalPolicy"])

const isNonNegativeSafeInt = (n: unknown): boolean =>
  typeof n === "number" && Number.isSafeInteger(n) && n >= 0

/**
 * J5: textual absolute-path test, the same on every platform.
 *
 * @since 0.1.0
 * @category utils
 */
export const isAbsolutePath = (p: string): boolean =>
  p.startsWith("/") || p.startsWith("\\\\") || /^[A-Za-z]:[\\/]/.test(p)

const fail = (rule: string, field: string, detail: string) => new SessionHeaderInvalid({ rule, field, detail })

/**
 * Validate a session header (J1–J11, J16), optionally against the expected id (J3), and with the
 * version check of Session construction (J2) unless `checkVersion` is false (cold reads check the
 * version earlier, K1–K4). Returns the walked, deep-frozen copy with keys in §2.1 order.
 *
 * @since 0.1.0
 * @category utils
 */
export const validateSessionHeader = (
  value: unknown,
  options: { readonly expectedId?: string; readonly checkVersion?: boolean } = {}
): SessionHeaderInvalid | SessionHeader => {
  // J1: a plain JSON record
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return fail("J1", "", "the session header is not a JSON record")
  }
  const proto = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) {
    return fail("J1", "", "the session header is not a plain JSON record")
  }
  const walked = walkJson(value)
  if (walked._tag === "Fail") {
    return fail("J11", walked.path, `header is not losslessly JSON-serializable (${walked.rule}: ${walked.detail})`)
  }
  const h = walked.value as Record<string, unknown>
  for (const key of Object.keys(h)) {
    // the JSONL line-1 discriminator; any other `type` value is an unknown key (J16)
    if (key === "type" && h.type === "session") continue
    if (RETIRED_KEYS.has(key)) return fail("J16", key, `"${key}" is a retired header field`)
    if (!headerKeySet.has(key)) return fail("J16", key, `unknown header field "${key}"`)
  }
  if (options.checkVersion !== false && h.version !== SESSION_FORMAT_VERSION) {
    return fail("J2", "version", `version must be ${SESSION_FORMAT_VERSION}, got ${JSON.stringify(h.version) ?? "none"}`)
  }
  if (typeof h.id !== "string" || h.id.length === 0) return fail("J3", "id", "id must be a non-empty string")
  if (options.expectedId !== undefined && h.id !== options.expectedId) {
    return fail("J3", "id", `header id "${h.id}" differs from the session id "${options.expectedId}"`)
  }
  if (!isNonNegativeSafeInt(h.createdAt)) {
    return fail("J4", "createdAt", "createdAt must be a non-negative safe integer (epoch ms)")
  }
  if (h.cwd !== undefined && (typeof h.cwd !== "string" || !isAbsolutePath(h.cwd))) {
    return fail("J5", "cwd", "cwd must be an absolute path")
  }
  if (h.parentSession !== undefined && typeof h.parentSession !== "string") {
    return fail("J6", "parentSession", "parentSession must be a string")
  }
  if (h.seedLength !== undefined && !isNonNegativeSafeInt(h.seedLength)) {
    return fail("J7", "seedLength", "seedLength must be a non-negative safe integer")
  }
  if (h.origin !== undefined && h.origin !== "subagent") {
    return fail("J8", "origin", `origin must be "subagent"`)
  }
  if (h.delegationDepth !== undefined && !isNonNegativeSafeInt(h.delegationDepth)) {
    return fail("J9", "delegationDepth", "delegationDepth must be a non-negative safe integer")
  }
  if (h.agentPreset !== undefined && typeof h.agentPreset !== "string") {
    return fail("J10", "agentPreset", "agentPreset must be a string")
  }
  return orderHeader(h) as SessionHeader
}

/**
 * Rebuild a header with its keys in §2.1 order (frozen), dropping `type`.
 *
 * @since 0.1.0
 * @category utils
 */
export const orderHeader = (h: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const key of HEADER_KEYS) if (h[key] !== undefined) out[key] = h[key]
  return Object.freeze(out)
}

/**
 * The JSONL header record: `{"type":"session", ...header}` in §2.1 key order.
 *
 * @since 0.1.0
 * @category utils
 */
export const headerRecord = (h: SessionHeader): Record<string, unknown> => {
  const out: Record<string, unknown> = { type: "session" }
  const src = h as unknown as Record<string, unknown>
  for (const key of HEADER_KEYS) if (src[key] !== undefined) out[key] = src[key]
  return out
}
