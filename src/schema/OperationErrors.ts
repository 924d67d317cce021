/**
 * The errors of the operations on a session beyond its append (docs/guide.md "Errors"): a refused
 * fork, a broken invariant, a refused compaction. Internal to the catalogue: `Errors` re-exports
 * every one.
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"
import { at, OptSeq, Rule } from "./ErrorFields.js"

/**
 * The reason codes of a fork rejection (M1–M7).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ForkRejectionCode = Schema.Literal(
  "SESSION_ALREADY_EXISTS",
  "SESSION_NOT_FOUND",
  "SESSION_NOT_LIVE",
  "INVALID_BOUNDARY",
  "OPEN_TURN"
)

/**
 * A fork request cannot be honoured (M1–M7, C8).
 *
 * @since 0.1.0
 * @category errors
 */
export class ForkRejected extends Schema.TaggedError<ForkRejected>()("ForkRejected", {
  rule: Rule,
  code: ForkRejectionCode,
  detail: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] fork rejected (${this.code}): ${this.detail}`
  }
}

/**
 * An optional invariant (SPEC §11.4, V-rules) vetoed an event.
 *
 * @since 0.1.0
 * @category errors
 */
export class InvariantViolation extends Schema.TaggedError<InvariantViolation>()("InvariantViolation", {
  rule: Rule,
  seq: OptSeq,
  detail: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] invariant violated${at(this.seq)}: ${this.detail}`
  }
}

/**
 * A compaction or prune could not run (P1–P13).
 *
 * @since 0.1.0
 * @category errors
 */
export class CompactionRejected extends Schema.TaggedError<CompactionRejected>()("CompactionRejected", {
  rule: Rule,
  reason: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] compaction rejected (${this.reason}): ${this.detail}`
  }
}
