/**
 * `session-log import --from claude-code|codex <file|dir>...` (docs/import.md): Claude Code and
 * Codex transcripts into a store, one session per transcript, with a report per file for people
 * and in `--json`. Unlike the import of session logs this is not all or nothing: each transcript
 * is its own session, importing one twice writes nothing new, and `--force` replaces only a
 * session an import created.
 */
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { importClaudeCode } from "../import/ClaudeCode.js"
import { importCodex } from "../import/Codex.js"
import type { FileReport, TranscriptFormat } from "../import/TranscriptImport.js"
import { SessionStore } from "../../services/SessionStore.js"
import { failOn, type ReportedError, resolveSpec, runCommand } from "./CommandSupport.js"
import { clipTo } from "./DisplayWidth.js"
import { dim, green, printJson, red, yellow } from "./Output.js"
import { openStore, UsageError } from "./Target.js"

/** `--from`: the transcript format. */
export const from = Options.choice("from", ["claude-code", "codex"]).pipe(
  Options.optional,
  Options.withDescription(
    "import transcripts of another tool: claude-code (~/.claude/projects/...) or codex (~/.codex/sessions/...); files or directories"
  )
)

/** `--force` of a transcript import. */
export const replace = Options.boolean("force").pipe(
  Options.withDescription("with --from: replace a session an earlier import created (never one written otherwise)")
)

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? "" : "s"}`

/** Text from a transcript (ids, record types) as a terminal shows it: control characters as U+FFFD. */
const shown = (text: string) => clipTo(text, 4_096)

/** The people's lines of one file's report. */
const describe = (r: FileReport): string => {
  const lines: Array<string> = []
  const { read, mapped, kept, refused } = r.records
  const head = r.error !== undefined || r.sessions.some((s) => s.status === "refused") ? red("failed") : green("read")
  lines.push(`${head} ${shown(r.file)}: ${plural(read, "record")}, ${mapped} mapped, ${kept} kept as source records, ${refused} refused`)
  const reasons = Object.entries(r.keptReasons).map(([k, n]) => `${shown(k)} ${n}`).join(", ")
  if (reasons.length > 0) lines.push(dim(`  kept aside: ${reasons}`))
  for (const f of r.refused) lines.push(yellow(`  refused line ${f.line}: ${f.reason}`))
  if (r.error !== undefined) lines.push(red(`  ${shown(r.error.message)}`))
  for (const s of r.sessions) {
    const what = `${plural(s.messages, "message")}, ${plural(s.toolCalls, "tool call")}, ${plural(s.toolResults, "result")}`
    const status = s.status === "imported"
      ? green("imported")
      : s.status === "replaced"
      ? green("replaced")
      : s.status === "unchanged"
      ? dim("already imported")
      : red("refused")
    lines.push(`  ${status} ${shown(s.id)} (${plural(s.events, "event")}: ${what})`)
    if (s.error !== undefined) lines.push(red(`    ${shown(s.error.message)}`))
  }
  return lines.join("\n")
}

/** The failures a set of reports holds (they decide the exit code). */
const failures = (reports: ReadonlyArray<FileReport>): Array<ReportedError> => {
  const out: Array<ReportedError> = []
  for (const r of reports) {
    if (r.error !== undefined) out.push(r.error)
    for (const s of r.sessions) if (s.error !== undefined) out.push(s.error)
  }
  return out
}

/** `import --from <format>`: every path, one report per transcript file. */
export const importTranscripts = (o: {
  readonly json: boolean
  readonly store: string
  readonly files: ReadonlyArray<string>
  readonly format: TranscriptFormat
  readonly force: boolean
}) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      if (o.files.length === 0) return yield* new UsageError({ detail: `give the ${o.format} transcripts to import (files or directories)` })
      const spec = yield* resolveSpec(o.store)
      const { store } = yield* openStore(spec, { mustExist: false })
      if (store === undefined) return yield* new UsageError({ detail: `cannot open ${o.store}` })
      const reports: Array<FileReport> = []
      for (const path of o.files) {
        const run = o.format === "claude-code" ? importClaudeCode(path, { force: o.force }) : importCodex(path, { force: o.force })
        reports.push(...yield* Effect.provideService(run, SessionStore, store))
      }
      return reports
    }),
    (reports) =>
      Effect.zipRight(
        o.json
          ? printJson({ files: reports })
          : Effect.zipRight(
            Effect.forEach(reports, (r) => Console.log(describe(r)), { discard: true }),
            Console.log(
              `${green("done")} ${plural(reports.length, "file")}, ${
                plural(reports.reduce((n, r) => n + r.sessions.filter((s) => s.status === "imported" || s.status === "replaced").length, 0), "session")
              } written`
            )
          ),
        failOn(failures(reports))
      )
  )
