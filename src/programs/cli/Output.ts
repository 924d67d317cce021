/**
 * CLI output: exactly one JSON document on stdout with `--json`; otherwise aligned tables and
 * plain explanations for people, coloured only on a TTY. Also the exit-code policy of SPEC §12.
 */
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { encodeJson, type Json } from "../../schema/Json.js"
import { errorReport } from "../Verify.js"
import { clipTo, displayWidth } from "./DisplayWidth.js"

/** Tags that mean "the data was rejected by a rule" (exit 1); everything else failing is exit 2. */
const INVALID_DATA: ReadonlySet<string> = new Set([
  "NotLosslessJson",
  "InvalidEnvelope",
  "SeqNotContiguous",
  "SurfaceMarkerInvalid",
  "ProvenanceInvalid",
  "ReplaceRangeInvalid",
  "ToolResultRewriteInvalid",
  "MessageShapeInvalid",
  "RequestHeaderInvalid",
  "SessionHeaderInvalid",
  "StoreCorrupt",
  "ForkRejected",
  "CompactionRejected",
  "InvariantViolation",
  "TornTailRefused"
])

/** Fork refusals that say the input names nothing there (exit 2), not that the data is invalid. */
const FORK_NOT_THERE: ReadonlySet<string> = new Set(["SESSION_NOT_FOUND", "SESSION_ALREADY_EXISTS"])

/**
 * Exit code of a failure (SPEC §12): 1 the data is invalid, 2 usage, not found or I/O. Not found
 * includes a seq outside the log (L10), a fork source that is not there or a child id that is
 * taken, and a fork boundary outside the log (M4, M5). A `NotASessionFile` with a rule (an empty
 * file, a file that is not a session log) is invalid data; without one (missing, a directory) usage.
 */
export const exitCodeFor = (error: { readonly _tag: string; readonly rule?: unknown; readonly code?: unknown }): 1 | 2 => {
  if (error._tag === "SeqNotContiguous" && error.rule === "L10") return 2
  // a named file a rule rejects (empty or not a session log: L5, K5) is invalid data; no file to
  // read at all (missing, a directory, a FIFO) is a usage problem
  if (error._tag === "NotASessionFile") return typeof error.rule === "string" ? 1 : 2
  if (error._tag === "ForkRejected") {
    if (typeof error.code === "string" && FORK_NOT_THERE.has(error.code)) return 2
    if (error.rule === "M4" || error.rule === "M5") return 2
  }
  return INVALID_DATA.has(error._tag) ? 1 : 2
}

/** Whether output to `stream` may be coloured: a terminal, and `NO_COLOR` not set. */
export const colourOn = (stream: { readonly isTTY?: boolean } = process.stdout): boolean =>
  stream.isTTY === true && process.env.NO_COLOR === undefined

const useColour = (): boolean => colourOn(process.stdout)

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g

/** A text without its ANSI colour codes. */
export const stripAnsi = (s: string): string => s.replace(ANSI, "")

const paint = (code: number) => (s: string): string => useColour() ? `\u001b[${code}m${s}\u001b[0m` : s
export const red = paint(31)
export const green = paint(32)
export const yellow = paint(33)
export const dim = paint(2)
export const bold = paint(1)

/** Print one JSON document (the iterative encoder: deep values never overflow). */
export const printJson = (value: unknown): Effect.Effect<void> => Console.log(encodeJson(value as Json))

/** Render rows as an aligned table under a header row. */
export const table = (headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = columnWidths(headers)
  for (const r of rows) widen(widths, r)
  const out = [tableHeader(widths, headers)]
  for (const r of rows) out.push(tableLine(widths, r))
  return out.join("\n")
}

/** The column widths of a table so far: its headers' (a table printed in pieces widens them row by row). */
export const columnWidths = (headers: ReadonlyArray<string>): Array<number> => headers.map(visibleLength)

/** Widen the columns to fit a row. */
export const widen = (widths: Array<number>, cells: ReadonlyArray<string>): void => {
  for (let i = 0; i < widths.length; i++) widths[i] = Math.max(widths[i], visibleLength(cells[i] ?? ""))
}

/** One table row padded to the widths. */
export const tableLine = (widths: ReadonlyArray<number>, cells: ReadonlyArray<string>): string =>
  cells.map((c, i) => (i === cells.length - 1 ? c : c + " ".repeat(widths[i] - visibleLength(c)))).join("  ").trimEnd()

/** The header row of a table. */
export const tableHeader = (widths: ReadonlyArray<number>, headers: ReadonlyArray<string>): string =>
  bold(tableLine(widths, headers))

/** The terminal columns of a cell (escape sequences take none; wide characters two: DisplayWidth.ts). */
const visibleLength = (s: string): number => displayWidth(stripAnsi(s))

/** Shorten a text for one table cell to `max` terminal columns, never cutting a character. */
export const clip = (s: string, max = 60): string => clipTo(s, max)

/** The widest an id is shown in a table (the full id is in `--json`). */
export const ID_COLUMNS = 40

/** An id for a table cell: clipped with "…" past `ID_COLUMNS` columns. */
export const clipId = (id: string): string => clipTo(id, ID_COLUMNS)

/** A failure for people: rule id, tag and explanation. */
export const describeError = (error: { readonly _tag: string }): string => {
  const r = errorReport(error as Parameters<typeof errorReport>[0])
  const where = r.seq === null ? "" : ` at seq ${r.seq}`
  const rule = r.rule === null ? "" : ` ${r.rule}`
  // the rule id once per line: the error's own message may start with it too ("[L11] …")
  const message = r.rule === null ? r.message : r.message.replace(`[${r.rule}] `, "")
  return `${red("error")}${rule} ${r._tag}${where}: ${message}`
}

/** The `--json` failure document. */
export const errorDocument = (error: { readonly _tag: string }) => ({
  ok: false,
  error: errorReport(error as Parameters<typeof errorReport>[0])
})

/** A progress bar on stderr for long work (only on a TTY). */
export const progress = (label: string, total: number) => {
  const on = process.stderr.isTTY === true && total > 1
  let last = -1
  return {
    tick: (done: number): Effect.Effect<void> =>
      Effect.sync(() => {
        if (!on) return
        const pct = Math.floor((done / total) * 100)
        if (pct === last) return
        last = pct
        const width = 30
        const filled = Math.round((done / total) * width)
        process.stderr.write(`\r${label} [${"#".repeat(filled)}${" ".repeat(width - filled)}] ${done}/${total}`)
      }),
    done: Effect.sync(() => {
      if (on) process.stderr.write("\n")
    })
  }
}

/** A log time for people: ISO-8601 UTC, or the raw number when it is not a valid date. */
export const formatTime = (ms: number): string => {
  const d = new Date(ms)
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString()
}
