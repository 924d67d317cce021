/**
 * `session-log verify` (docs/cli.md, SPEC §12): validates a session, a `.jsonl` file or a whole
 * store. Failures are reported inside the documented shapes; the exit code is the worst report's
 * (0 valid, 1 invalid, 2 unreadable). People also get a one-line summary after a whole store.
 */
import * as Command from "@effect/cli/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SessionNotFound } from "../../schema/Errors.js"
import { encodeSessionId } from "../../schema/SessionIdEncoding.js"
import { SessionStore } from "../../services/SessionStore.js"
import { type TornTailReport, verifyEach, type VerifyReport, verifySession } from "../Verify.js"
import { failOn, file, json, resolve, resolveSpec, runCommand, session, store } from "./CommandSupport.js"
import { describeError, dim, errorDocument, exitCodeFor, green, printJson, progress, red, yellow } from "./Output.js"
import { sourceWithProgress } from "./Progress.js"
import { openStore, readSessionFile, readSessionFileEach, readSessionFileHeader, sourceReader, storeNotFound, type StoreSpec } from "./Target.js"

type StoreReport = VerifyReport & { readonly id: string }

/** People's line for one report. */
const reportLine = (report: VerifyReport, label: string): string =>
  report.ok
    ? `${green("valid")} ${label}: ${report.events} events, ${report.surface.length} surface nodes` +
      (report.tornTail === undefined ? "" : `\n  ${tornTailLine(report.tornTail)}`)
    : `${red("invalid")} ${label}\n  ${describeError(report.error as unknown as { _tag: string })}`

/** The errors inside reports (they decide the exit code). */
/** People's one line on a torn tail the count left out. */
const tornTailLine = (t: TornTailReport): string => {
  const what = t.completeLines === undefined
    ? ""
    : `: ${t.completeLines} complete line${t.completeLines === 1 ? "" : "s"}, ${t.bytes} bytes`
  const where = t.line === undefined ? `seq ${t.fromSeq}` : `line ${t.line} (seq ${t.fromSeq})`
  return yellow(`torn tail ignored from ${where}, ${t.reason}${what} (repair drops it)`)
}

const reportErrors = (reports: ReadonlyArray<VerifyReport>) => reports.flatMap((r) => (r.ok ? [] : [r.error]))

/** People's one-line summary of a store: "12 sessions: 11 valid, 1 invalid" (and how many unreadable). */
export const storeSummary = (reports: ReadonlyArray<VerifyReport>): string => {
  const errors = reportErrors(reports)
  const unreadable = errors.filter((e) => exitCodeFor(e) === 2).length
  const invalid = errors.length - unreadable
  const counts = [`${reports.length - errors.length} valid`, `${invalid} invalid`]
  if (unreadable > 0) counts.push(`${unreadable} unreadable`)
  return `${reports.length} session${reports.length === 1 ? "" : "s"}: ${counts.join(", ")}`
}

/** JSONL: the session files whose header cannot be read (`list` skips them), by file name. */
const unlistedFiles = (spec: StoreSpec, listed: ReadonlySet<string>) =>
  Effect.gen(function*() {
    if (spec.kind !== "jsonl") return []
    const names = yield* (yield* FileSystem.FileSystem).readDirectory(spec.root)
    return names.filter((name) => /\.jsonlz?$/.test(name) && !name.startsWith(".") && !listed.has(name)).sort()
  })

/**
 * A store's file that `list` could not read. One whose header names another session than its file
 * name encodes (a renamed file, a case-insensitive collision) is no session of the store: the
 * store refuses it by id (L6, `SessionNotFound`), and so does its verify, however valid the log.
 */
const verifyUnlisted = (file: string, name: string) =>
  Effect.gen(function*() {
    const header = yield* Effect.option(readSessionFileHeader(file))
    if (Option.isSome(header) && encodeSessionId(header.value.id) !== name.replace(/\.jsonlz?$/, "")) {
      const mismatch = new SessionNotFound({
        rule: "L6",
        sessionId: header.value.id,
        detail: `the header id "${header.value.id}" does not match the file name ${file}`
      })
      return { ok: false as const, error: errorDocument(mismatch).error }
    }
    return yield* verifyEach((sink) => readSessionFileEach(file, sink), readSessionFile(file))
  })

/** Verify every session of a store, then the JSONL files `list` could not read. */
const verifyStore = (storeOpt: string) =>
  Effect.gen(function*() {
    const spec = yield* resolveSpec(storeOpt)
    const { store: s } = yield* openStore(spec, { mustExist: true, readOnly: true })
    if (s === undefined) return yield* storeNotFound(storeOpt)
    const headers = yield* s.list()
    const unlisted = yield* unlistedFiles(spec, new Set(headers.flatMap((h) => [".jsonl", ".jsonlz"].map((s) => encodeSessionId(h.id) + s))))
    const path = yield* Path.Path
    const bar = progress("verify", headers.length + unlisted.length)
    const reports: Array<StoreReport> = []
    for (const h of headers) {
      reports.push({ id: h.id, ...(yield* verifySession(h.id).pipe(Effect.provideService(SessionStore, s))) })
      yield* bar.tick(reports.length)
    }
    for (const name of unlisted) {
      const file = path.join(spec.kind === "jsonl" ? spec.root : "", name)
      reports.push({ id: name, ...(yield* verifyUnlisted(file, name)) })
      yield* bar.tick(reports.length)
    }
    yield* bar.done
    return reports
  })

/** Verify one session or file; a failed read is a report too. */
const verifyOne = (fileArg: Option.Option<string>, sessionOpt: Option.Option<string>, storeOpt: string, jsonOut: boolean) =>
  Effect.gen(function*() {
    const src = yield* resolve(fileArg, sessionOpt, storeOpt)
    const opened = yield* sourceReader(src).pipe(Effect.either)
    if (opened._tag === "Left") return { ok: false as const, error: errorDocument(opened.left).error }
    // progress on a terminal (Progress.ts): events, bytes, rate and, for a file, the time left
    const reader = yield* sourceWithProgress(src, opened.right, "verify", jsonOut)
    return yield* verifyEach(reader.read, reader.reload)
  })

const renderStore = (jsonOut: boolean, reports: ReadonlyArray<StoreReport>) =>
  Effect.zipRight(
    jsonOut ? printJson(reports) : Console.log(
      reports.length === 0 ? dim("no sessions") : [...reports.map((r) => reportLine(r, r.id)), storeSummary(reports)].join("\n")
    ),
    failOn(reportErrors(reports))
  )

/** `verify`. */
export const verifyCommand = Command.make("verify", { json, store, session, file }, (o) =>
  Option.isNone(o.file) && Option.isNone(o.session)
    ? runCommand(o.json, verifyStore(o.store), (reports) => renderStore(o.json, reports))
    : runCommand(o.json, verifyOne(o.file, o.session, o.store, o.json), (report) =>
      Effect.zipRight(
        o.json ? printJson(report) : Console.log(reportLine(report, Option.getOrElse(o.file, () => Option.getOrElse(o.session, () => "")))),
        failOn(reportErrors([report]))
      ))).pipe(
    Command.withDescription(
      "validate a session, a .jsonl file, or a whole store without --session (exit 0 valid, 1 invalid, 2 unreadable)"
    )
  )
