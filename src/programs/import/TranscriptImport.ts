/**
 * What the Claude Code and Codex importers share and what they report (docs/import.md): the
 * ignorable `import/origin`, `import/source` and `import/end` records, the options, the per-file
 * and per-session reports, and `importPath`, which imports every transcript under a path. The
 * line reader (`SourceLines`), the `LogBuilder` that maps records to turns, steps and surface
 * events, and the `SessionWriter` that checks each batch before the store are internal modules
 * beside it.
 *
 * @since 0.2.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { StoreFailure } from "../../schema/Errors.js"
import { SessionStore } from "../../services/SessionStore.js"
import { type ErrorReport, errorReport } from "../Verify.js"

/**
 * The ignorable event type of a source record: mapped (its envelope, the message left out) or
 * kept aside whole, with the reason (docs/import.md "Everything else is kept").
 *
 * @since 0.2.0
 * @category constants
 */
export const IMPORT_SOURCE = "import/source"

/**
 * The ignorable event type at seq 0 of every imported session: which tool, file and source
 * session it came from. `--force` replaces only a session that starts with it.
 *
 * @since 0.2.0
 * @category constants
 */
export const IMPORT_ORIGIN = "import/origin"

/**
 * The ignorable event type that ends every imported session: the import finished. A session that
 * starts with `import/origin` and lacks it was interrupted, and the next import replaces it.
 *
 * @since 0.2.0
 * @category constants
 */
export const IMPORT_END = "import/end"

/**
 * A transcript format.
 *
 * @since 0.2.0
 * @category models
 */
export type TranscriptFormat = "claude-code" | "codex"

/**
 * Options of an import.
 *
 * @since 0.2.0
 * @category models
 */
export interface ImportOptions {
  /** Replace a session an earlier import created (never one written otherwise). */
  readonly force?: boolean
  /** A line longer than this many bytes is refused (default 64 MiB). */
  readonly maxLineBytes?: number
}

/**
 * A line longer than this is refused (the event size cap of SPEC B10).
 *
 * @since 0.2.0
 * @category constants
 */
export const DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024

/**
 * What happened to one session of a transcript.
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionReport {
  readonly id: string
  readonly parentSession?: string
  /** `imported` (new), `replaced` (`--force`), `unchanged` (imported before), `refused`. */
  readonly status: "imported" | "replaced" | "unchanged" | "refused"
  readonly events: number
  readonly messages: number
  readonly toolCalls: number
  readonly toolResults: number
  readonly error?: ErrorReport
}

/**
 * One refused line: it could not be kept even as text (too long, not UTF-8).
 *
 * @since 0.2.0
 * @category models
 */
export interface RefusedLine {
  readonly line: number
  readonly reason: string
}

/**
 * The report of one transcript file (the CLI prints it for people and in `--json`).
 *
 * @since 0.2.0
 * @category models
 */
export interface FileReport {
  readonly file: string
  readonly format: TranscriptFormat
  readonly records: {
    readonly read: number
    readonly mapped: number
    readonly kept: number
    readonly refused: number
  }
  /** Records kept aside as `import/source`, counted by reason. */
  readonly keptReasons: Readonly<Record<string, number>>
  /** The first refused lines (at most 100). */
  readonly refused: ReadonlyArray<RefusedLine>
  readonly sessions: ReadonlyArray<SessionReport>
  /** Why no session could be written at all (e.g. no session id in the file). */
  readonly error?: ErrorReport
}

/**
 * The ids the store holds now (one listing per import).
 *
 * @since 0.2.0
 * @category utils
 */
export const storedIds = Effect.gen(function*() {
  const store = yield* SessionStore
  const headers = yield* store.list()
  return new Set(headers.map((h) => h.id))
})

/**
 * Counts of a file's records while it is mapped.
 *
 * @since 0.2.0
 * @category models
 */
export class RecordTally {
  /**
   * Records read.
   *
   * @since 0.2.0
   */
  read = 0
  /**
   * Records mapped.
   *
   * @since 0.2.0
   */
  mapped = 0
  /**
   * Records kept aside.
   *
   * @since 0.2.0
   */
  kept = 0
  /**
   * Lines refused.
   *
   * @since 0.2.0
   */
  refusedCount = 0
  /**
   * Records kept aside, by reason.
   *
   * @since 0.2.0
   */
  readonly keptReasons: Record<string, number> = {}
  /**
   * The first refused lines.
   *
   * @since 0.2.0
   */
  readonly refused: Array<RefusedLine> = []

  /**
   * Count a record kept aside.
   *
   * @since 0.2.0
   */
  keep(reason: string) {
    this.kept++
    this.keptReasons[reason] = (this.keptReasons[reason] ?? 0) + 1
  }

  /**
   * Count a refused line.
   *
   * @since 0.2.0
   */
  refuse(line: number, reason: string) {
    this.refusedCount++
    if (this.refused.length < 100) this.refused.push({ line, reason })
  }

  /**
   * The report of the file.
   *
   * @since 0.2.0
   */
  report(file: string, format: TranscriptFormat, sessions: ReadonlyArray<SessionReport>, error?: ErrorReport): FileReport {
    return {
      file,
      format,
      records: { read: this.read, mapped: this.mapped, kept: this.kept, refused: this.refusedCount },
      keptReasons: this.keptReasons,
      refused: this.refused,
      sessions,
      ...(error === undefined ? {} : { error })
    }
  }
}

/**
 * A failure to read a transcript, as a report error.
 *
 * @since 0.2.0
 * @category utils
 */
export const readFailure = (file: string, cause: unknown): ErrorReport =>
  errorReport(new StoreFailure({ method: "import", cause, detail: `cannot read ${file}` }))

/**
 * The transcripts at `path`: the file itself, or every `.jsonl` file under a directory (Claude
 * Code's project folders with their `subagents/` files, Codex's date tree), sorted, so a
 * session's file comes before its subagents'. A directory's compressed `.jsonl.zst` files are
 * listed too, so that the import reports them instead of passing over them.
 *
 * @since 0.2.0
 * @category utils
 */
export const transcriptFiles = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(path)
    if (info.type !== "Directory") return [path]
    const names = yield* fs.readDirectory(path, { recursive: true })
    const files: Array<string> = []
    for (const name of names) {
      if (!name.endsWith(".jsonl") && !name.endsWith(COMPRESSED)) continue
      const full = `${path.replace(/\/+$/, "")}/${name}`
      const st = yield* Effect.either(fs.stat(full))
      if (st._tag === "Right" && st.right.type === "File") files.push(full)
    }
    return files.sort()
  })

/** Codex compresses a rollout idle for 7 days (`rollout-*.jsonl.zst`, 0.137.0 and later). */
const COMPRESSED = ".jsonl.zst"

/**
 * The report of a compressed transcript: not read (Node 20 has no zstd), named so that nothing
 * is passed over in silence.
 *
 * @since 0.2.0
 * @category utils
 */
export const compressedReport = (file: string, format: TranscriptFormat): FileReport =>
  new RecordTally().report(
    file,
    format,
    [],
    errorReport(
      new StoreFailure({
        method: "import",
        cause: "compressed",
        detail: `${file} is compressed (zstd): decompress it (zstd -d) and import the .jsonl file`
      })
    )
  )

/**
 * The session ids an import run knows (those stored before it and those it writes), and the
 * writers of the new sessions it began: an interrupted run undoes what those wrote (`undoBegun`; the writers are `SessionWriter`s).
 *
 * @since 0.2.0
 * @category models
 */
export class KnownIds extends Set<string> {
  /**
   * The writers of new sessions, in the order they were opened.
   *
   * @since 0.2.0
   */
  readonly begun: Array<{ readonly undo: () => Effect.Effect<void> }> = []
}

/**
 * Remove the new sessions an interrupted import run began and did not close: each one whose log
 * holds no more events than the run appended is discarded (`SessionStore.discard`, at the revision
 * read); one another writer appended to stays. Each outcome is logged (stderr for the CLI).
 *
 * @since 0.2.0
 * @category utils
 */
export const undoBegun = (known: KnownIds): Effect.Effect<void> =>
  Effect.forEach(known.begun, (writer) => writer.undo(), { discard: true })

/**
 * Import every transcript at `path` with `importFile`, one report per file (a file that cannot be
 * read is reported, and the others go on; a compressed one is reported as not read).
 *
 * @since 0.2.0
 * @category utils
 */
export const importPath = <R>(
  path: string,
  format: TranscriptFormat,
  importFile: (file: string, existing: Set<string>) => Effect.Effect<FileReport, never, R>
) =>
  Effect.gen(function*() {
    const files = yield* Effect.mapError(transcriptFiles(path), (cause) => new StoreFailure({ method: "import", cause, detail: `cannot read ${path}` }))
    // an interrupt (SIGINT) undoes the new sessions begun and not finished (SessionWriter.undoBegun)
    const existing = new KnownIds(yield* storedIds)
    const reports: Array<FileReport> = []
    yield* Effect.onInterrupt(
      Effect.suspend(() =>
        Effect.forEach(files, (file) =>
          file.endsWith(COMPRESSED)
            ? Effect.sync(() => void reports.push(compressedReport(file, format)))
            : Effect.map(importFile(file, existing), (report) => void reports.push(report)), { discard: true })
      ),
      () => undoBegun(existing)
    )
    return reports
  })
