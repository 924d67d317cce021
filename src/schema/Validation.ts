/**
 * Single-event rule checks shared by append, seed construction, folds and stores: envelope
 * (B), vocabulary (K7, K9), legacy guard (I7, I8, K10), message shapes (H), request headers (I) and the stateless
 * surface-marker and provenance checks (D1–D5, E1–E6). Each returns the first error or undefined.
 */
import {
  InvalidEnvelope,
  LegacyFormRefused,
  MessageShapeInvalid,
  NotLosslessJson,
  ProvenanceInvalid,
  RequestHeaderInvalid,
  SurfaceMarkerInvalid,
  UnknownEventType
} from "./Errors.js"
import { ENVELOPE_KEYS, isSurfaceEligibleType, KNOWN_EVENT_TYPES } from "./Events.js"
import { HEADER_REASONS } from "./RequestHeader.js"

type Rec = Record<string, unknown>

/** A plain JSON object (not null, not an array). */
export const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v)

/** A failed lossless walk (A1–A9) of the value at `seq`, as its error. */
export const notLossless = (rule: string, seq: number, path: string, detail: string): NotLosslessJson =>
  new NotLosslessJson({ rule, seq, path, detail })
const isNonEmptyString = (v: unknown): v is string => typeof v === "string" && v.length > 0
const isSafeNonNegInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0
const envelopeKeySet: ReadonlySet<string> = new Set(ENVELOPE_KEYS)

/** B1, B8 (seed records): an object, and a plain one. Returns an error or undefined. */
export const checkRecordKind = (record: unknown, seq: number): InvalidEnvelope | NotLosslessJson | undefined => {
  let array: boolean
  let proto: unknown
  try {
    array = typeof record === "object" && record !== null && Array.isArray(record)
    proto = typeof record === "object" && record !== null ? Object.getPrototypeOf(record) : undefined
  } catch {
    // A12: a Proxy whose trap throws (or a revoked one) cannot be read
    return new NotLosslessJson({ rule: "A12", seq, path: "", detail: "reading the record threw (a Proxy trap)" })
  }
  if (typeof record !== "object" || record === null || array) {
    return new InvalidEnvelope({ rule: "B1", seq, field: "", detail: "invalid event envelope: record is not an object" })
  }
  if (proto !== Object.prototype && proto !== null) {
    return new NotLosslessJson({ rule: "B8", seq, path: "", detail: "record is not a plain object" })
  }
  return undefined
}

/** B1–B6 on a walked record (seeds and cold reads). */
export const checkEnvelope = (r: Rec, seq: number): InvalidEnvelope | undefined => {
  for (const key of Object.keys(r)) {
    if (!envelopeKeySet.has(key)) {
      return new InvalidEnvelope({ rule: "B1", seq, field: key, detail: `invalid event envelope: unexpected key "${key}"` })
    }
  }
  if (typeof r.type !== "string") {
    return new InvalidEnvelope({ rule: "B2", seq, field: "type", detail: "type must be a string" })
  }
  if (!isSafeNonNegInt(r.seq)) {
    return new InvalidEnvelope({ rule: "B3", seq, field: "seq", detail: "seq must be a non-negative safe integer" })
  }
  if (typeof r.time !== "number" || !Number.isSafeInteger(r.time)) {
    return new InvalidEnvelope({ rule: "B4", seq, field: "time", detail: "time must be a safe integer (epoch ms)" })
  }
  if (!("data" in r)) {
    return new InvalidEnvelope({ rule: "B5", seq, field: "data", detail: "data is absent" })
  }
  if ("ignorable" in r && r.ignorable !== true) {
    return new InvalidEnvelope({ rule: "B6", seq, field: "ignorable", detail: "ignorable must be exactly true when present" })
  }
  return undefined
}

/**
 * The tags of packed chunk rows (SPEC Appendix A; `PackedChunks.PACKED_ROW_TAGS`): a JSONL reader
 * decodes a line of such a type as a packed row, so no event may carry one.
 */
const PACKED_ROW_TYPES: ReadonlySet<string> = new Set(["text-chunks", "reasoning-chunks", "tool-call-chunks"])

/**
 * Vocabulary (K7 on a cold read, K9 at append): a type outside the known list (§1.4) must be
 * marked `ignorable: true`. The legacy types are left to the legacy guard (I8, K10). At append
 * (K9) a packed-row tag is refused even when ignorable: the event would read back as a malformed
 * packed row (Appendix A, L4), a log the session's next cold read refuses.
 */
export const checkVocabulary = (
  type: string,
  ignorable: unknown,
  seq: number,
  rule: "K7" | "K9"
): UnknownEventType | undefined => {
  if (rule === "K9" && PACKED_ROW_TYPES.has(type)) {
    return new UnknownEventType({ rule, seq, eventType: type, detail: "reserved for packed chunk rows (SPEC Appendix A)" })
  }
  return KNOWN_EVENT_TYPES.has(type) || ignorable === true || type === "request/header-delta" || type === "mode/set"
    ? undefined
    : new UnknownEventType({ rule, seq, eventType: type })
}

/** Legacy guard (I8, I7, K10): forms no current reader accepts. */
export const checkLegacy = (
  type: string,
  data: unknown,
  seq: number
): RequestHeaderInvalid | LegacyFormRefused | undefined => {
  if (type === "request/header-delta") {
    return new RequestHeaderInvalid({ rule: "I8", seq, detail: "request/header-delta is a removed legacy form" })
  }
  if (type === "request/header" && isRecord(data) && data.reason === "fallback") {
    return new RequestHeaderInvalid({ rule: "I7", seq, detail: `reason "fallback" is a removed legacy form` })
  }
  if (type === "mode/set") return new LegacyFormRefused({ rule: "K10", seq, form: "mode/set" })
  return undefined
}

const shape = (rule: string, seq: number, eventType: string, detail: string) =>
  new MessageShapeInvalid({ rule, seq, eventType, detail })

/** H1–H9, H11 for the four surface-eligible types. */
export const checkMessageShape = (type: string, data: unknown, seq: number): MessageShapeInvalid | undefined => {
  let msg: unknown
  let role: string
  if (type === "user/message" || type === "context/message") {
    if (!isRecord(data) || !isNonEmptyString(data.id)) return shape("H1", seq, type, "lacks an identified message")
    msg = data
    role = "user"
  } else if (type === "assistant/message" || type === "tool/result") {
    if (!isRecord(data) || !isRecord(data.message) || !isNonEmptyString(data.message.id)) {
      return shape("H2", seq, type, "lacks an identified message (data.message with a non-empty id)")
    }
    msg = data.message
    role = type === "assistant/message" ? "assistant" : "user"
  } else {
    return undefined
  }
  const m = msg as Rec
  if (m.role !== role) return shape("H3", seq, type, `role must be "${role}"`)
  const source = m.source
  if (!isRecord(source) || !isNonEmptyString(source.kind)) {
    return shape("H4", seq, type, "source must be an object with a non-empty kind")
  }
  if (!Array.isArray(m.content)) return shape("H5", seq, type, "content must be an array")
  // H11 after H1–H9 (SPEC §3.1 step 5); H6–H9 do not apply to context/message
  if (type === "context/message" && source.kind === "user") {
    return shape("H11", seq, type, `a context/message source.kind must not be "user"`)
  }
  if (type === "assistant/message") {
    if (source.kind !== "model" || !isNonEmptyString(source.provider) || !isNonEmptyString(source.model)) {
      return shape("H6", seq, type, `source must be { kind: "model", provider, model } with non-empty provider and model`)
    }
  }
  if (type === "tool/result") {
    if (source.kind !== "tool" || !isNonEmptyString(source.callId)) {
      return shape("H7", seq, type, `source must be { kind: "tool", callId } with a non-empty callId`)
    }
    const content = m.content as ReadonlyArray<unknown>
    const block = content[0]
    if (content.length !== 1 || !isRecord(block) || block.type !== "tool-result" || !Array.isArray(block.content)) {
      return shape("H8", seq, type, "content must be exactly one tool-result block with an array content")
    }
    if (block.toolCallId !== source.callId) return shape("H9", seq, type, "mismatched tool call ids")
  }
  return undefined
}

const header = (rule: string, seq: number, detail: string) => new RequestHeaderInvalid({ rule, seq, detail })

/** I1–I6, then I9, then I11 for `request/header` data. */
export const checkRequestHeader = (data: unknown, seq: number): RequestHeaderInvalid | undefined => {
  const h = isRecord(data) ? data.header : undefined
  if (!isRecord(h) || !isRecord(h.config) || !isNonEmptyString(h.config.provider) || !isNonEmptyString(h.config.model)) {
    return header("I1", seq, "request header lacks provider/model")
  }
  const config = h.config
  if ("reasoningEffort" in config && !isNonEmptyString(config.reasoningEffort)) {
    return header("I2", seq, "config.reasoningEffort must be a non-empty string when present")
  }
  if ("adapterDefaults" in h) {
    const ad = h.adapterDefaults
    if (!isRecord(ad)) return header("I3", seq, "adapterDefaults must be an object")
    for (const key of Object.keys(ad)) {
      if (key !== "reasoningEffort" && key !== "maxTokens") {
        return header("I4", seq, `adapterDefaults key "${key}" is not reasoningEffort or maxTokens`)
      }
    }
    for (const key of Object.keys(ad)) {
      if (ad[key] !== true) return header("I5", seq, `adapterDefaults.${key} must be exactly true`)
    }
    for (const key of Object.keys(ad)) {
      if (config[key] === undefined) return header("I6", seq, `adapterDefaults.${key} marks an absent config field`)
    }
  }
  const reason = (data as Rec).reason
  if (typeof reason !== "string" || !HEADER_REASONS.includes(reason)) {
    return header("I9", seq, `reason must be one of ${HEADER_REASONS.join(", ")}`)
  }
  return "messagePrefix" in h ? checkMessagePrefix(h.messagePrefix, seq) : undefined
}

const PREFIX_ROLES: ReadonlyArray<unknown> = ["system", "user", "assistant"]

/** I11: a `messagePrefix` is an array of messages (SPEC §1.5: id, role, content, source). */
const checkMessagePrefix = (prefix: unknown, seq: number): RequestHeaderInvalid | undefined => {
  if (!Array.isArray(prefix)) return header("I11", seq, "messagePrefix must be an array of messages")
  for (let i = 0; i < prefix.length; i++) {
    const m: unknown = prefix[i]
    if (
      !isRecord(m) || !isNonEmptyString(m.id) || !PREFIX_ROLES.includes(m.role) || !Array.isArray(m.content) ||
      !isRecord(m.source)
    ) {
      return header(
        "I11",
        seq,
        `messagePrefix[${i}] is not a message (a non-empty string id, role system/user/assistant, array content, object source)`
      )
    }
  }
  return undefined
}

/** Type shapes: request headers (I) and messages (H). */
export const checkTypeShape = (
  type: string,
  data: unknown,
  seq: number
): RequestHeaderInvalid | MessageShapeInvalid | undefined =>
  type === "request/header" ? checkRequestHeader(data, seq) : checkMessageShape(type, data, seq)

/** D1–D5 and E1–E6: the stateless marker and provenance checks of the surface plan. */
export const checkMarkers = (
  type: string,
  surfaceOp: unknown,
  sourceEventSeqs: unknown,
  seq: number
): SurfaceMarkerInvalid | ProvenanceInvalid | undefined => {
  const eligible = isSurfaceEligibleType(type)
  if (!eligible) {
    if (surfaceOp !== undefined) {
      return new SurfaceMarkerInvalid({
        rule: "D1",
        seq,
        eventType: type,
        detail: "is not surface-eligible and cannot carry surfaceOp"
      })
    }
    if (sourceEventSeqs !== undefined) {
      return new SurfaceMarkerInvalid({
        rule: "D2",
        seq,
        eventType: type,
        detail: "is not surface-eligible and cannot carry sourceEventSeqs"
      })
    }
    return undefined
  }
  if (surfaceOp === undefined) {
    return new SurfaceMarkerInvalid({ rule: "D3", seq, eventType: type, detail: "requires a surfaceOp marker" })
  }
  if (surfaceOp !== "append") {
    if (!isRecord(surfaceOp)) {
      return new SurfaceMarkerInvalid({ rule: "D4", seq, eventType: type, detail: "invalid surfaceOp" })
    }
    const keys = Object.keys(surfaceOp)
    if (
      keys.length !== 3 || surfaceOp.op !== "replace" || !isSafeNonNegInt(surfaceOp.start) ||
      !isSafeNonNegInt(surfaceOp.end)
    ) {
      return new SurfaceMarkerInvalid({
        rule: "D5",
        seq,
        eventType: type,
        detail: "invalid replace surfaceOp: expected exactly { op: \"replace\", start, end } with non-negative safe integers"
      })
    }
  }
  if (sourceEventSeqs === undefined) return undefined
  if (!Array.isArray(sourceEventSeqs)) {
    return new ProvenanceInvalid({ rule: "E1", seq, detail: "sourceEventSeqs must be an array" })
  }
  if (sourceEventSeqs.length === 0 && type !== "assistant/message") {
    return new ProvenanceInvalid({ rule: "E2", seq, detail: `an empty sourceEventSeqs is legal only on assistant/message` })
  }
  const seen = new Set<number>()
  for (let i = 0; i < sourceEventSeqs.length; i++) {
    const s: unknown = sourceEventSeqs[i]
    if (!isSafeNonNegInt(s)) {
      return new ProvenanceInvalid({ rule: "E4", seq, detail: `element ${i} is not a non-negative safe integer` })
    }
    if (seen.has(s)) return new ProvenanceInvalid({ rule: "E5", seq, detail: `duplicate element ${s}` })
    seen.add(s)
    if (s >= seq) {
      return new ProvenanceInvalid({ rule: "E6", seq, detail: `element ${s} is not earlier than the event's own seq ${seq}` })
    }
  }
  return undefined
}
