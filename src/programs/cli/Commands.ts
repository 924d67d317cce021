/**
 * The `session-log` command line (docs/cli.md, SPEC §12): the commands of each family assembled
 * under one root, the help, and `main`, whose result is the process exit code: 0 ok, 1 invalid
 * data, 2 usage, not found or I/O (`Output.exitCodeFor` of what a command reported).
 */
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { explainNumber, optionsIn, unknownOption } from "./ArgumentHints.js"
import { acpCommand } from "./AcpCommand.js"
import type { CommandFailed } from "./CommandSupport.js"
import { demoCommand, demoCrashCommand } from "./DemoCommands.js"
import { fleetCommand } from "./FleetCommand.js"
import { type AnyCommand, commandHelp, helpRequest, PROGRAM, printHelp, rootHelp } from "./Help.js"
import { listCommand } from "./ListCommand.js"
import { colourOn, describeError, errorDocument, exitCodeFor, printJson, stripAnsi } from "./Output.js"
import { messagesCommand, requestCommand, surfaceCommand, transcriptCommand } from "./ReadCommands.js"
import { showCommand } from "./ShowCommand.js"
import { UsageError } from "./Target.js"
import { exportCommand, importCommand } from "./TransferCommands.js"
import { verifyCommand } from "./VerifyCommand.js"
import { viewCommand } from "./ViewCommand.js"
import { compactCommand, forkCommand, migrateCommand, pruneCommand, repairCommand } from "./WriteCommands.js"

const VERSION = "0.1.0"
const DESCRIPTION = "inspect, verify and repair effect-session-log sessions"

/** The commands people use, in help order. */
const commands = [
  demoCommand,
  listCommand,
  showCommand,
  verifyCommand,
  messagesCommand,
  transcriptCommand,
  surfaceCommand,
  requestCommand,
  repairCommand,
  exportCommand,
  importCommand,
  migrateCommand,
  compactCommand,
  pruneCommand,
  forkCommand,
  viewCommand,
  acpCommand,
  fleetCommand
] as const

/** Commands the program runs itself (the demo's child process): they work, help does not list them. */
const internalCommands = [demoCrashCommand] as const

const nameOf = (command: AnyCommand): string => [...Command.getNames(command)][0]

const printRootHelp = Effect.suspend(() => printHelp(rootHelp({ version: VERSION, description: DESCRIPTION }, commands)))

/** The root command (`session-log` alone prints the help). */
export const root = Command.make(PROGRAM, {}, () => printRootHelp).pipe(
  Command.withDescription(DESCRIPTION),
  Command.withSubcommands(commands)
)

const internalRoot = Command.make(PROGRAM).pipe(Command.withSubcommands(internalCommands))

/** The CLI application. */
export const cli = Command.run(root, { name: PROGRAM, version: VERSION })

const internalCli = Command.run(internalRoot, { name: PROGRAM, version: VERSION })

/** Whether the command line asks for `--json` (before a `--` that ends the options). */
const wantsJson = (args: ReadonlyArray<string>): boolean => {
  const end = args.indexOf("--")
  return (end < 0 ? args : args.slice(0, end)).includes("--json")
}

const plain = (s: string): string => stripAnsi(s).replace(/\s+/g, " ").trim()

/** The exit code of a command that reported failures: the highest of theirs. */
const exitCodeOf = (failed: CommandFailed): number => Math.max(...failed.errors.map(exitCodeFor))

/**
 * Run the CLI on `argv`; the result is the exit code. An argument error @effect/cli rejects (a
 * mistyped option, a missing or bad value, an unknown command) is exit 2: with `--json` it is one
 * `UsageError` document on stdout and @effect/cli's own text is not printed; without `--json`
 * people get @effect/cli's explanation on stderr (without colour codes unless stderr is a terminal).
 */
export const main = (argv: ReadonlyArray<string>) => {
  const args = argv.slice(2)
  const help = helpRequest(args, [...commands, ...internalCommands].map(nameOf))
  if (help !== undefined) {
    const command = [...commands, ...internalCommands].find((c) => nameOf(c) === help.command)
    return Effect.as(command === undefined ? printRootHelp : printHelp(commandHelp(VERSION, command)), 0)
  }
  const jsonOut = wantsJson(args)
  // an option the command does not have: named, with the closest one it has (ArgumentHints.ts)
  const named = commands.find((c) => nameOf(c) === args[0])
  const unknown = named === undefined ? undefined : unknownOption(args.slice(1), optionsIn(commandHelp(VERSION, named)))
  if (unknown !== undefined) {
    return Effect.as(
      jsonOut
        ? printJson(errorDocument(new UsageError({ detail: unknown })))
        : Console.error(describeError(new UsageError({ detail: unknown }))),
      2
    )
  }
  const app = internalCommands.some((c) => nameOf(c) === args[0]) ? internalCli : cli
  // with --json only the commands' own output remains: @effect/cli prints its argument errors with
  // Console.error, which the commands never use in --json mode (logs go to the logger)
  const run = Effect.consoleWith((c) =>
    Console.withConsole(app(argv), {
      ...c,
      error: (...xs) =>
        jsonOut ? Effect.void : c.error(...xs.map((x) =>
          typeof x === "string" ? explainNumber(colourOn(process.stderr) ? x : stripAnsi(x), args) : x
        ))
    })
  )
  return run.pipe(
    Effect.as(0),
    Effect.catchTag("CommandFailed", (failed) => Effect.succeed(exitCodeOf(failed))),
    Effect.catchAll((e) =>
      Effect.as(
        jsonOut ? printJson(errorDocument(new UsageError({ detail: explainNumber(plain(HelpDoc.toAnsiText(e.error)), args) }))) : Effect.void,
        2
      )
    )
  )
}
