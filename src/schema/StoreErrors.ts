/**
 * The errors of reading and writing stored logs (docs/guide.md "Errors"): format versions, the
 * vocabulary, damaged data, unknown or existing sessions, append conflicts, a foreign schema, a
 * store's failures and a refused torn-tail rewrite. Internal to the catalogue: `Errors`
 * re-exports every one.
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"
import { at, OptDetail, OptSeq, Rule, tail } from "./ErrorFields.js"

/**
 * A stored format version cannot be read by this build (K1, K2, K4, K6).
 *
 * @since 0.1.0
 * @category errors
 */
export class FormatUnsupported extends Schema.TaggedError<FormatUnsupported>()("FormatUnsupported", {
  rule: Rule,
  found: Schema.Unknown,
  supported: Schema.Number,
  direction: Schema.Literal("newer", "older"),
  sessionId: Schema.optional(Schema.String),
  location: Schema.optional(Schema.String)
}) {
  override get message(): string {
    const session = this.sessionId === undefined ? "" : ` of session "${this.sessionId}"`
    const where = this.location === undefined ? "" : ` (${this.location})`
    return this.direction === "newer"
      ? `[${this.rule}] session format version ${String(this.found)}${session} was written by a newer build; this build reads version ${this.supported}: upgrade to read it${where}`
      : `[${this.rule}] session format version ${String(this.found)}${session} is older than supported (${this.supported}) and has no upgrade path${where}`
  }
}

/**
 * An event type outside the known vocabulary without `ignorable: true` (K7).
 *
 * @since 0.1.0
 * @category errors
 */
export class UnknownEventType extends Schema.TaggedError<UnknownEventType>()("UnknownEventType", {
  rule: Rule,
  seq: OptSeq,
  eventType: Schema.String,
  /** Why the type is refused when not for lack of `ignorable: true` (a reserved packed-row tag). */
  detail: OptDetail
}) {
  override get message(): string {
    const why = this.detail === undefined ? "not marked ignorable" : this.detail
    return `[${this.rule}] unknown event type "${this.eventType}"${at(this.seq)} (${why})`
  }
}

/**
 * Stored data is damaged (K5, K11, L2, L5, L7, L9).
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreCorrupt extends Schema.TaggedError<StoreCorrupt>()("StoreCorrupt", {
  rule: Rule,
  seq: OptSeq,
  location: Schema.optional(Schema.String),
  line: Schema.optional(Schema.Number),
  detail: Schema.String,
  cause: Schema.optional(Schema.Defect)
}) {
  override get message(): string {
    const where = this.location === undefined ? "" : ` in ${this.location}`
    const line = this.line === undefined ? "" : ` line ${this.line}`
    return `[${this.rule}] store corrupt${where}${line}${at(this.seq)}: ${this.detail}`
  }
}

/**
 * No such session (J14/L6/L11, N10).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", {
  rule: Rule,
  sessionId: Schema.String,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] session "${this.sessionId}" not found${tail(this.detail)}`
  }
}

/**
 * The session already exists (J14).
 *
 * @since 0.1.0
 * @category errors
 */
export class SessionExists extends Schema.TaggedError<SessionExists>()("SessionExists", {
  rule: Rule,
  sessionId: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] session "${this.sessionId}" already exists (open it instead)`
  }
}

/**
 * A writer's view of the stored log is stale (C5–C7, L1, L8, N11).
 *
 * @since 0.1.0
 * @category errors
 */
export class AppendConflict extends Schema.TaggedError<AppendConflict>()("AppendConflict", {
  rule: Rule,
  sessionId: Schema.optional(Schema.String),
  expectedSeq: Schema.Number,
  storedSeq: Schema.Number,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] append conflict: expected next seq ${this.expectedSeq}, store has ${this.storedSeq}${
      tail(this.detail)
    }`
  }
}

/**
 * A database written by another build or application (S1–S3, S10).
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreSchemaMismatch extends Schema.TaggedError<StoreSchemaMismatch>()("StoreSchemaMismatch", {
  rule: Rule,
  found: Schema.String,
  expected: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] store schema mismatch: found ${this.found}, expected ${this.expected} (the file was not modified)`
  }
}

/**
 * An I/O or driver failure; never a rejection of data.
 *
 * @since 0.1.0
 * @category errors
 */
export class StoreFailure extends Schema.TaggedError<StoreFailure>()("StoreFailure", {
  rule: Schema.optional(Rule),
  method: Schema.String,
  cause: Schema.Defect,
  detail: OptDetail
}) {
  override get message(): string {
    const rule = this.rule === undefined ? "" : `[${this.rule}] `
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `${rule}store failure in ${this.method}${tail(this.detail)}: ${cause}`
  }
}

/**
 * A rewrite (`migrate` of a v0 log) that would drop the complete lines of a torn tail (L3: a
 * defective line with no later `turn/end` makes everything from it on the torn tail). Nothing is
 * changed; the caller may accept the loss explicitly (`migrate --drop-torn-tail`).
 *
 * @since 0.1.0
 * @category errors
 */
export class TornTailRefused extends Schema.TaggedError<TornTailRefused>()("TornTailRefused", {
  rule: Rule,
  sessionId: Schema.String,
  /** The seq the torn tail starts at. */
  seq: Schema.Number,
  reason: Schema.String,
  /** The 1-based line number of its first line. */
  line: Schema.Number,
  completeLines: Schema.Number,
  bytes: Schema.Number
}) {
  override get message(): string {
    const lines = this.completeLines === 1 ? "1 complete line" : `${this.completeLines} complete lines`
    return `[${this.rule}] session ${this.sessionId}: the rewrite would drop the torn tail from line ${this.line} ` +
      `(seq ${this.seq}, ${this.reason}): ${lines}, ${this.bytes} bytes; nothing was changed ` +
      `(--drop-torn-tail accepts the loss; the original is kept as a backup)`
  }
}
