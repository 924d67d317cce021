/**
 * The fixed error catalogue (docs/guide.md "Errors"). Every rejection is one of these tagged errors and
 * carries the SPEC rule id that fired (`rule`) and, where one exists, the offending `seq`
 * (for a seed or a loaded log: the index). Errors carry data; `message` renders it for people.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

const Rule = Schema.String
const OptSeq = Schema.optional(Schema.Number)
const OptDetail = Schema.optional(Schema.String)

const at = (seq: number | undefined): string => (seq === undefined ? "" : ` at seq ${seq}`)
const tail = (detail: string | undefined): string => (detail === undefined ? "" : `: ${detail}`)

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
export class SurfaceMarkerInvalid extends Schema.TaggedError<SurfaceMarkerInvalid>()("SurfaceMarkerInvalid", {
  rule: Rule,
  seq: OptSeq,
  eventType: Schema.String,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] ${this.eventType}${at(this.seq)}${tail(this.detail)}`
  }
}

/**
 * `sourceEventSeqs` is malformed (E1–E6).
 *
 * @since 0.1.0
 * @category errors
 */
export class ProvenanceInvalid extends Schema.TaggedError<ProvenanceInvalid>()("ProvenanceInvalid", {
  rule: Rule,
  seq: OptSeq,
  detail: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] invalid sourceEventSeqs${at(this.seq)}: ${this.detail}`
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
  { rule: Rule, seq: OptSeq, detail: Schema.String }
) {
  override get message(): string {
    return `[${this.rule}] invalid tool/result rewrite${at(this.seq)}: ${this.detail}`
  }
}

/**
 * A message-producing event has the wrong shape (H1–H9, H11).
 *
 * @since 0.1.0
 * @category errors
 */
export class MessageShapeInvalid extends Schema.TaggedError<MessageShapeInvalid>()("MessageShapeInvalid", {
  rule: Rule,
  seq: OptSeq,
  eventType: Schema.String,
  detail: OptDetail
}) {
  override get message(): string {
    return `[${this.rule}] ${this.eventType}${at(this.seq)}${tail(this.detail)}`
  }
}

/**
 * A `request/header` event is malformed or a legacy form (I1–I9).
 *
 * @since 0.1.0
 * @category errors
 */
export class RequestHeaderInvalid extends Schema.TaggedError<RequestHeaderInvalid>()("RequestHeaderInvalid", {
  rule: Rule,
  seq: OptSeq,
  detail: Schema.String
}) {
  override get message(): string {
    return `[${this.rule}] invalid request header${at(this.seq)}: ${this.detail}`
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

// --- CLI (SPEC §12): refusals of the `session-log` commands, never raised by the library --------

/**
 * A command refused to overwrite existing files (`export --out` without `--force`).
 *
 * @since 0.1.0
 * @category errors
 */
export class OutputExists extends Schema.TaggedError<OutputExists>()("OutputExists", {
  paths: Schema.Array(Schema.String)
}) {
  override get message(): string {
    return `${this.paths.join(", ")} already exist${this.paths.length === 1 ? "s" : ""}: nothing was written (--force overwrites)`
  }
}

/**
 * A multi-file import stopped after writing some sessions to an existing store (a write failed
 * after every file had been validated and every id checked): `imported` lists the files written.
 *
 * @since 0.1.0
 * @category errors
 */
export class ImportIncomplete extends Schema.TaggedError<ImportIncomplete>()("ImportIncomplete", {
  imported: Schema.Array(Schema.String),
  failed: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    const done = this.imported.length === 0 ? "nothing" : this.imported.join(", ")
    return `import stopped at ${this.failed} (${cause}); already imported: ${done}`
  }
}

/**
 * A path given to a command as a session log file that is not one (SPEC §12): nothing there
 * (`missing`), a `directory`, something else that is not a regular file (`not-a-file`: a FIFO, a
 * device), an `empty` file (L5) or a file whose first line is not a `{"type":"session"}` JSON
 * record (`not-a-session-log`: L5, K5 for JSON that is not an object). A store reports the last
 * two as `StoreCorrupt`; the CLI, where the user named the file, reports this instead.
 *
 * @since 0.1.0
 * @category errors
 */
export class NotASessionFile extends Schema.TaggedError<NotASessionFile>()("NotASessionFile", {
  path: Schema.String,
  reason: Schema.Literal("missing", "directory", "not-a-file", "empty", "not-a-session-log"),
  rule: Schema.optional(Rule),
  detail: OptDetail
}) {
  override get message(): string {
    const rule = this.rule === undefined ? "" : `[${this.rule}] `
    switch (this.reason) {
      case "missing":
        return `${this.path}: no such file`
      case "directory":
        return `${this.path} is a directory, not a session log file (a JSONL store directory is --store jsonl:${this.path}, or jsonlz:${this.path} to write new sessions compressed)`
      case "not-a-file":
        return `${this.path} is not a regular file${tail(this.detail)}`
      case "empty":
        return `${rule}${this.path} is empty: a session log starts with its {"type":"session"} header line`
      case "not-a-session-log":
        return `${rule}${this.path} is not a session log${tail(this.detail)}`
    }
  }
}

/**
 * Errors a rule check on data can produce (validation of one event, a seed or a fold).
 *
 * @since 0.1.0
 * @category errors
 */
export type ValidationError =
  | NotLosslessJson
  | InvalidEnvelope
  | SeqNotContiguous
  | SurfaceMarkerInvalid
  | ProvenanceInvalid
  | ReplaceRangeInvalid
  | ToolResultRewriteInvalid
  | MessageShapeInvalid
  | RequestHeaderInvalid
  | LegacyFormRefused

/**
 * Every error of the catalogue, as one Schema (decode, encode, `Schema.is`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const SessionLogError = Schema.Union(
  NotLosslessJson,
  InvalidEnvelope,
  SeqNotContiguous,
  SurfaceMarkerInvalid,
  ProvenanceInvalid,
  ReplaceRangeInvalid,
  ToolResultRewriteInvalid,
  MessageShapeInvalid,
  RequestHeaderInvalid,
  LegacyFormRefused,
  SessionHeaderInvalid,
  FormatUnsupported,
  UnknownEventType,
  StoreCorrupt,
  SessionNotFound,
  SessionExists,
  AppendConflict,
  StoreSchemaMismatch,
  ForkRejected,
  InvariantViolation,
  CompactionRejected,
  StoreFailure,
  TornTailRefused
)

/**
 * Every error of the catalogue.
 *
 * @since 0.1.0
 * @category errors
 */
export type SessionLogError = typeof SessionLogError.Type

/**
 * Errors of the `session-log` commands only (SPEC §12), beside the library's catalogue.
 *
 * @since 0.1.0
 * @category errors
 */
export type CliError = OutputExists | ImportIncomplete | NotASessionFile
