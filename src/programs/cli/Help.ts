/**
 * The help of `session-log` (`--help`, `-h`, or no command at all): the commands people use with
 * their descriptions, and for `session-log <command> --help` its usage line, arguments and
 * options as @effect/cli documents them. Usage lines read `session-log <command> …`; internal
 * commands are not listed; there are no colour codes unless stdout is a terminal and NO_COLOR is
 * unset.
 */
import * as CliConfig from "@effect/cli/CliConfig"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Usage from "@effect/cli/Usage"
import * as Console from "effect/Console"
import type * as Effect from "effect/Effect"
import { bold, colourOn, stripAnsi } from "./Output.js"

/** The name of the program in usage lines. */
export const PROGRAM = "session-log"

/** A command as help sees it (any command of the CLI). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyCommand = Command.Command<any, any, any, any>

/** A command's help: its own options and arguments only (the built-in ones are in the root help). */
const COMMAND_CONFIG = CliConfig.make({ showBuiltIns: false })

/** @effect/cli's rendering of a help document, without colour codes unless stdout takes them. */
const render = (doc: HelpDoc.HelpDoc): string => {
  const text = HelpDoc.toAnsiText(doc)
  return colourOn() ? text : stripAnsi(text)
}

/** The first paragraph of a command's help: its description. */
const descriptionOf = (command: AnyCommand): string => {
  const first = (doc: HelpDoc.HelpDoc): HelpDoc.HelpDoc | undefined =>
    doc._tag === "Paragraph" ? doc : doc._tag === "Sequence" ? first(doc.left) ?? first(doc.right) : undefined
  const paragraph = first(Command.getHelp(command, COMMAND_CONFIG))
  return paragraph === undefined ? "" : stripAnsi(HelpDoc.toAnsiText(paragraph)).trim()
}

/** A command's usage lines: `session-log <name> [options] [arguments]`. */
const usageLines = (command: AnyCommand): ReadonlyArray<string> =>
  Usage.enumerate(Command.getUsage(command), CliConfig.defaultConfig).map((span) =>
    `$ ${PROGRAM} ${stripAnsi(HelpDoc.toAnsiText(HelpDoc.p(span))).trim()}`
  )

const section = (title: string, lines: ReadonlyArray<string>): string => [bold(title), "", ...lines, ""].join("\n")

/** The help of the root: usage, the commands (internal ones left out) and the global options. */
export const rootHelp = (
  info: { readonly version: string; readonly description: string },
  commands: ReadonlyArray<AnyCommand>
): string => {
  const names = commands.map((c) => [...Command.getNames(c)][0])
  const width = Math.max(...names.map((n) => n.length))
  // the built-in options of @effect/cli (--help, --version, --log-level, …) under OPTIONS
  const globals = Command.getHelp(Command.make(PROGRAM), CliConfig.defaultConfig)
  return [
    `${bold(PROGRAM)} ${info.version}: ${info.description}\n`,
    section("USAGE", [`$ ${PROGRAM} <command> [options] [arguments]`, `$ ${PROGRAM} <command> --help`]),
    section("COMMANDS", names.map((n, i) => `  ${n.padEnd(width)}  ${descriptionOf(commands[i])}`)),
    render(globals).trimEnd(),
    "",
    `Run \`${PROGRAM} <command> --help\` for the arguments and options of a command.`
  ].join("\n")
}

/** The help of one command: its usage lines, description, arguments and options. */
export const commandHelp = (version: string, command: AnyCommand): string =>
  [
    `${bold(PROGRAM)} ${version}\n`,
    section("USAGE", usageLines(command)),
    render(Command.getHelp(command, COMMAND_CONFIG)).trimEnd(),
    "",
    bold("(-h, --help)"),
    "",
    "  Show this help.",
    ""
  ].join("\n")

const HELP_FLAGS: ReadonlySet<string> = new Set(["--help", "-h"])

/**
 * The help a command line asks for (`--help` or `-h` before a `--` that ends the options): the
 * first of `names` on it names the command (`command`), none the root; `undefined` for no help.
 */
export const helpRequest = (
  args: ReadonlyArray<string>,
  names: ReadonlyArray<string>
): { readonly command: string | undefined } | undefined => {
  const end = args.indexOf("--")
  const options = end < 0 ? args : args.slice(0, end)
  if (!options.some((a) => HELP_FLAGS.has(a))) return undefined
  return { command: options.find((a) => names.includes(a)) }
}

/** Print a help text. */
export const printHelp = (text: string): Effect.Effect<void> => Console.log(text)
