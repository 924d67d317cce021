/**
 * The errors of the rules on data (docs/guide.md "Errors"): lossless JSON, the envelope, seq
 * contiguity, surface markers, provenance, replace ranges, tool-result rewrites, message shapes,
 * request and session headers, and legacy forms. Internal to the catalogue: `Errors` re-exports
 * every one.
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"
import { at, OptDetail, OptSeq, Rule, tail } from "./ErrorFields.js"

// the fields and message of an error on one event's part (D, H): `[rule] <type> at seq <seq>: <detail>`
const EventPartFields = { rule: Rule, seq: OptSeq, eventType: Schema.String, detail: OptDetail }
const eventPartMessage = (e: Schema.Struct.Type<typeof EventPartFields>): string =>
  `[${e.rule}] ${e.eventType}${at(e.seq)}${tail(e.detail)}`

// the fields and message of an invalid element of one event (E, G, I): `[rule] invalid <what> at seq <seq>: <detail>`
const InvalidPartFields = { rule: Rule, seq: OptSeq, detail: Schema.String }
const invalidPartMessage = (what: string, e: Schema.Struct.Type<typeof InvalidPartFields>): string =>
  `[${e.rule}] invalid ${what}${at(e.seq)}: ${e.detail}`

/**
 * A value is not lossless JSON (A1–A9, B8).
 *
 * @since 0.1.0
 * @category errors
 */
export class NotLosslessJson extends Schema.TaggedError<NotLosslessJson>()("NotLosslessJson", {
  rule: Rule,
  seq: OptSeq,
  path: Schema.String,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] value is not lossless JSON${at(this.seq)}, path "${this.path}"${tail(this.detail)}`
  }
}

/**
 * The event envelope is malformed (B1–B6, B10).
 *
 * @since 0.1.0
 * @category errors
 */
export class InvalidEnvelope extends Schema.TaggedError<InvalidEnvelope>()("InvalidEnvelope", {
  rule: Rule,
  seq: OptSeq,
  field: Schema.String,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] invalid event envelope${at(this.seq)}, field "${this.field}"${tail(this.detail)}`
  }
}

/**
 * A seq is not where contiguity requires it (C1–C3, L10).
 *
 * @since 0.1.0
 * @category errors
 */
export class SeqNotContiguous extends Schema.TaggedError<SeqNotContiguous>()("SeqNotContiguous", {
  rule: Rule,
  seq: OptSeq,
  expected: Schema.Number,
  actual: Schema.Unknown,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] seq not contiguous${at(this.seq)}: expected ${this.expected}, got ${
      String(this.actual)
    }${tail(this.detail)}`
  }
}

/**
 * A surface marker is missing, forbidden or malformed (D1–D6).
 *
 * @since 0.1.0
 * @category errors
 */
export class SurfaceMarkerInvalid extends Schema.TaggedError<SurfaceMarkerInvalid>()("SurfaceMarkerInvalid", EventPartFields) {
  override get message(): string {
    return eventPartMessage(this)
  }
}

/**
 * `sourceEventSeqs` is malformed (E1–E6).
 *
 * @since 0.1.0
 * @category errors
 */
export class ProvenanceInvalid extends Schema.TaggedError<ProvenanceInvalid>()("ProvenanceInvalid", InvalidPartFields) {
  override get message(): string {
    return invalidPartMessage("sourceEventSeqs", this)
  }
}

/**
 * A replace range does not name a valid span of the current surface (F1–F4).
 *
 * @since 0.1.0
 * @category errors
 */
export class ReplaceRangeInvalid extends Schema.TaggedError<ReplaceRangeInvalid>()("ReplaceRangeInvalid", {
  rule: Rule,
  seq: OptSeq,
  start: Schema.Number,
  end: Schema.Number,
  missing: Schema.optional(Schema.Array(Schema.Number)),
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] invalid replace range [${this.start}, ${this.end}]${at(this.seq)}${tail(this.detail)}`
  }
}

/**
 * A `tool/result` replacement changes more than the result content (G1–G3).
 *
 * @since 0.1.0
 * @category errors
 */
export class ToolResultRewriteInvalid extends Schema.TaggedError<ToolResultRewriteInvalid>()(
  "ToolResultRewriteInvalid",
  InvalidPartFields
) {
  override get message(): string {
    return invalidPartMessage("tool/result rewrite", this)
  }
}

/**
 * A message-producing event has the wrong shape (H1–H9, H11).
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageShapeInvalid extends Schema.TaggedError<MessageShapeInvalid>()("MessageShapeInvalid", EventPartFields) {
  override get message(): string {
    return eventPartMessage(this)
  }
}

/**
 * A `request/header` event is malformed or a legacy form (I1–I9).
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestHeaderInvalid extends Schema.TaggedError<RequestHeaderInvalid>()("RequestHeaderInvalid", InvalidPartFields) {
  override get message(): string {
    return invalidPartMessage("request header", this)
  }
}

/**
 * The session header is malformed (J1–J13, J15, J16).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionHeaderInvalid extends Schema.TaggedError<SessionHeaderInvalid>()("SessionHeaderInvalid", {
  rule: Rule,
  field: Schema.String,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] invalid session header, field "${this.field}"${tail(this.detail)}`
  }
}

/**
 * A legacy form that no current reader accepts (K10).
 *
 * @since 0.1.0
 * @category errors
 */
export class LegacyFormRefused extends Schema.TaggedError<LegacyFormRefused>()("LegacyFormRefused", {
  rule: Rule,
  seq: OptSeq,
  form: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] legacy form "${this.form}"${at(this.seq)} is refused`
  }
}
