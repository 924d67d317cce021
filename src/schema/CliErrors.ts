/**
 * The refusals of the `session-log` commands (SPEC §12), never raised by the library: an output
 * that exists, an import stopped midway, a path that is not a session log file. Internal to the
 * catalogue: `Errors` re-exports every one.
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"
import { OptDetail, Rule, tail } from "./ErrorFields.js"

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
