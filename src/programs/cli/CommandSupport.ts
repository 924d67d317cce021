/**
 * What every `session-log` command shares (docs/cli.md, SPEC §12): the common options, turning
 * `[file]` / `--session` / `--store` into a session source, and `runCommand`, which prints a
 * command's output or its failure and hands the outcome back as the command's result: a failure
 * already printed is `CommandFailed`, which `main` maps to the exit code (`Output.exitCodeFor`).
 */
import * as Args from "@effect/cli/Args"
import * as Options from "@effect/cli/Options"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as HashSet from "effect/HashSet"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Event } from "../../schema/Events.js"
import { type InspectResult, inspectLoaded } from "../../services/Resume.js"
import { describeError, errorDocument, type exitCodeFor, printJson } from "./Output.js"
import { loadSource, parseStoreSpec, type SessionSource, sessionSource, UsageError } from "./Target.js"

/** The platform services the commands run on. */
export type Platform = FileSystem.FileSystem | Path.Path | CommandExecutor.CommandExecutor

/** An error a command reported (as an error document or inside its report). */
export type ReportedError = Parameters<typeof exitCodeFor>[0]

/**
 * A command that failed after printing what went wrong (its error document, or a report holding
 * failures): `errors` decide the exit code (`Output.exitCodeFor`, the highest wins).
 */
export class CommandFailed extends Data.TaggedError("CommandFailed")<{ readonly errors: ReadonlyArray<ReportedError> }> {}

/** Succeed when a printed report holds no failure, otherwise fail with its errors. */
export const failOn = (errors: ReadonlyArray<ReportedError>): Effect.Effect<void, CommandFailed> =>
  errors.length === 0 ? Effect.void : Effect.fail(new CommandFailed({ errors }))

/**
 * Run a command body in a scope and print its result with `render`; a failure of the body is
 * printed (the `--json` error document on stdout, or an explanation on stderr) and becomes
 * `CommandFailed`.
 */
export const runCommand = <A, E extends { readonly _tag: string }>(
  json: boolean,
  body: Effect.Effect<A, E, Platform | Scope.Scope>,
  render: (a: A) => Effect.Effect<void, CommandFailed>
): Effect.Effect<void, CommandFailed, Platform> =>
  Effect.scoped(body).pipe(
    Effect.matchEffect({
      onSuccess: render,
      onFailure: (e) =>
        Effect.zipRight(json ? printJson(errorDocument(e)) : Console.error(describeError(e)), failOn([e]))
    })
  )

/**
 * `runCommand` for a command whose write must not be cut in half: `body` runs uninterruptibly
 * except the parts it wraps in `interruptible` (the reads before the write). A SIGINT that
 * arrives during the write lets it finish, its result is printed as usual, stderr says that the
 * write landed, and the command then ends interrupted (exit 130, see `main.ts`).
 */
export const runWritingCommand = <A, E extends { readonly _tag: string }>(
  json: boolean,
  body: (
    interruptible: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
  ) => Effect.Effect<A, E, Platform | Scope.Scope>,
  render: (a: A) => Effect.Effect<void, CommandFailed>
): Effect.Effect<void, CommandFailed, Platform> =>
  Effect.uninterruptibleMask((restore) =>
    runCommand(json, body(restore), (a) =>
      Effect.zipRight(
        render(a),
        Effect.descriptorWith((d) =>
          HashSet.size(d.interruptors) > 0
            ? Effect.logWarning("interrupted after the write began: the write landed (the output is what was written)")
            : Effect.void
        )
      ))
  )

// --- shared options -------------------------------------------------------------------------

/** An optional integer option `--<name> <pseudo>` described for the help. */
export const optionalInteger = (name: string, pseudo: string, description: string) =>
  Options.integer(name).pipe(Options.optional, Options.withPseudoName(pseudo), Options.withDescription(description))

/** `--json`: one JSON document on stdout. */
export const json = Options.boolean("json").pipe(
  Options.withDescription("print one JSON document on stdout (for scripts) instead of text for people")
)

/** `--store`: the store a command reads or writes. */
export const store = Options.text("store").pipe(
  Options.withDefault("./sessions.db"),
  Options.withPseudoName("<store>"),
  Options.withDescription(
    "the session store: a SQLite file (*.db, *.sqlite), jsonl:<dir>, jsonlz:<dir> (JSONL, new sessions compressed as <id>.jsonlz) " +
      "or postgres://user@host:port/database (default ./sessions.db)"
  )
)

/** `--session`: a session of `--store`. */
export const session = Options.text("session").pipe(
  Options.optional,
  Options.withPseudoName("<id>"),
  Options.withDescription("the id of a session in --store (instead of a .jsonl file)")
)

/** The optional `.jsonl` path a command reads instead of `--session`. */
export const file = Args.text({ name: "file.jsonl" }).pipe(
  Args.withDescription("a session log file (.jsonl) to use directly instead of --session; the session id is its header's"),
  Args.optional
)

// --- sources --------------------------------------------------------------------------------

/** Resolve `[file]` / `--session` / `--store` into a session source (a usage error otherwise). */
export const resolve = (fileArg: Option.Option<string>, sessionOpt: Option.Option<string>, storeOpt: string) => {
  const src = sessionSource(fileArg, sessionOpt, storeOpt)
  return src instanceof UsageError ? Effect.fail(src) : Effect.succeed(src)
}

/** Parse `--store` (a usage error for an unknown scheme). */
export const resolveSpec = (storeOpt: string) => {
  const spec = parseStoreSpec(storeOpt)
  return spec instanceof UsageError ? Effect.fail(spec) : Effect.succeed(spec)
}

/** Cold read + read pipeline + validation + repair view (nothing written). */
export const inspectSource = (src: SessionSource) => Effect.flatMap(loadSource(src), inspectLoaded)

/** The stored events of an inspection (closers excluded). */
export const storedEvents = (r: InspectResult): ReadonlyArray<Event> => r.events.slice(0, r.events.length - r.closers.length)

/** The stored events of the session a command names (nothing written). */
export const readStoredEvents = (fileArg: Option.Option<string>, sessionOpt: Option.Option<string>, storeOpt: string) =>
  Effect.map(Effect.flatMap(resolve(fileArg, sessionOpt, storeOpt), inspectSource), storedEvents)
