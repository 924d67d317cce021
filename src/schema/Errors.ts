/**
 * The fixed error catalogue (docs/guide.md "Errors"). Every rejection is one of these tagged errors and
 * carries the SPEC rule id that fired (`rule`) and, where one exists, the offending `seq`
 * (for a seed or a loaded log: the index). Errors carry data; `message` renders it for people.
 * The classes live by concern in DataErrors, StoreErrors, OperationErrors and CliErrors; this
 * module is the catalogue: it re-exports every one and defines the unions.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import {
  ImportIncomplete,
  NotASessionFile,
  OutputExists
} from "./CliErrors.js"
import {
  InvalidEnvelope,
  LegacyFormRefused,
  MessageShapeInvalid,
  NotLosslessJson,
  ProvenanceInvalid,
  ReplaceRangeInvalid,
  RequestHeaderInvalid,
  SeqNotContiguous,
  SessionHeaderInvalid,
  SurfaceMarkerInvalid,
  ToolResultRewriteInvalid
} from "./DataErrors.js"
import {
  CompactionRejected,
  ForkRejected,
  InvariantViolation
} from "./OperationErrors.js"
import {
  AppendConflict,
  FormatUnsupported,
  SessionExists,
  SessionNotFound,
  StoreCorrupt,
  StoreFailure,
  StoreSchemaMismatch,
  TornTailRefused,
  UnknownEventType
} from "./StoreErrors.js"

export {
  /**
   * A value is not lossless JSON (A1–A9, B8).
   *
   * @since 0.1.0
   * @category errors
   */
  NotLosslessJson,
  /**
   * The event envelope is malformed (B1–B6, B10).
   *
   * @since 0.1.0
   * @category errors
   */
  InvalidEnvelope,
  /**
   * A seq is not where contiguity requires it (C1–C3, L10).
   *
   * @since 0.1.0
   * @category errors
   */
  SeqNotContiguous,
  /**
   * A surface marker is missing, forbidden or malformed (D1–D6).
   *
   * @since 0.1.0
   * @category errors
   */
  SurfaceMarkerInvalid,
  /**
   * `sourceEventSeqs` is malformed (E1–E6).
   *
   * @since 0.1.0
   * @category errors
   */
  ProvenanceInvalid,
  /**
   * A replace range does not name a valid span of the current surface (F1–F4).
   *
   * @since 0.1.0
   * @category errors
   */
  ReplaceRangeInvalid,
  /**
   * A `tool/result` replacement changes more than the result content (G1–G3).
   *
   * @since 0.1.0
   * @category errors
   */
  ToolResultRewriteInvalid,
  /**
   * A message-producing event has the wrong shape (H1–H9, H11).
   *
   * @since 0.1.0
   * @category errors
   */
  MessageShapeInvalid,
  /**
   * A `request/header` event is malformed or a legacy form (I1–I9).
   *
   * @since 0.1.0
   * @category errors
   */
  RequestHeaderInvalid,
  /**
   * The session header is malformed (J1–J13, J15, J16).
   *
   * @since 0.1.0
   * @category errors
   */
  SessionHeaderInvalid,
  /**
   * A legacy form that no current reader accepts (K10).
   *
   * @since 0.1.0
   * @category errors
   */
  LegacyFormRefused
} from "./DataErrors.js"

export {
  /**
   * A stored format version cannot be read by this build (K1, K2, K4, K6).
   *
   * @since 0.1.0
   * @category errors
   */
  FormatUnsupported,
  /**
   * An event type outside the known vocabulary without `ignorable: true` (K7).
   *
   * @since 0.1.0
   * @category errors
   */
  UnknownEventType,
  /**
   * Stored data is damaged (K5, K11, L2, L5, L7, L9).
   *
   * @since 0.1.0
   * @category errors
   */
  StoreCorrupt,
  /**
   * No such session (J14/L6/L11, N10).
   *
   * @since 0.1.0
   * @category errors
   */
  SessionNotFound,
  /**
   * The session already exists (J14).
   *
   * @since 0.1.0
   * @category errors
   */
  SessionExists,
  /**
   * A writer's view of the stored log is stale (C5–C7, L1, L8, N11).
   *
   * @since 0.1.0
   * @category errors
   */
  AppendConflict,
  /**
   * A database written by another build or application (S1–S3, S10).
   *
   * @since 0.1.0
   * @category errors
   */
  StoreSchemaMismatch,
  /**
   * An I/O or driver failure; never a rejection of data.
   *
   * @since 0.1.0
   * @category errors
   */
  StoreFailure,
  /**
   * A rewrite (`migrate` of a v0 log) that would drop the complete lines of a torn tail (L3: a
   * defective line with no later `turn/end` makes everything from it on the torn tail). Nothing is
   * changed; the caller may accept the loss explicitly (`migrate --drop-torn-tail`).
   *
   * @since 0.1.0
   * @category errors
   */
  TornTailRefused
} from "./StoreErrors.js"

export {
  /**
   * The reason codes of a fork rejection (M1–M7).
   *
   * @since 0.1.0
   * @category schemas
   */
  ForkRejectionCode,
  /**
   * A fork request cannot be honoured (M1–M7, C8).
   *
   * @since 0.1.0
   * @category errors
   */
  ForkRejected,
  /**
   * An optional invariant (SPEC §11.4, V-rules) vetoed an event.
   *
   * @since 0.1.0
   * @category errors
   */
  InvariantViolation,
  /**
   * A compaction or prune could not run (P1–P13).
   *
   * @since 0.1.0
   * @category errors
   */
  CompactionRejected
} from "./OperationErrors.js"

export {
  /**
   * A command refused to overwrite existing files (`export --out` without `--force`).
   *
   * @since 0.1.0
   * @category errors
   */
  OutputExists,
  /**
   * A multi-file import stopped after writing some sessions to an existing store (a write failed
   * after every file had been validated and every id checked): `imported` lists the files written.
   *
   * @since 0.1.0
   * @category errors
   */
  ImportIncomplete,
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
  NotASessionFile
} from "./CliErrors.js"

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
