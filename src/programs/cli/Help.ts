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
import type * as Span from "@effect/cli/HelpDoc/Span"
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

/**
 * The sentences @effect/cli adds to every option and argument about its type and optionality
 * ("A user-defined piece of text.", "This setting is optional.", "One of the following: …"): each option has a description of
 * its own, and its usage line shows what it takes and whether it is optional.
 */
const BOILERPLATE = /^(A user-defined piece of text|This setting is optional|A true or false value|An integer|A floating point number|A date without a time-zone in the ISO-8601 format|A user-defined piece of text that is confidential|This setting is a repeated argument|This setting is a property argument|One of the following: .*)\.?$/

const plain = (doc: HelpDoc.HelpDoc): string => stripAnsi(HelpDoc.toAnsiText(doc)).trim()

/** `doc` without the boilerplate paragraphs. */
const withoutBoilerplate = (doc: HelpDoc.HelpDoc): HelpDoc.HelpDoc => {
  switch (doc._tag) {
    case "Paragraph":
      return BOILERPLATE.test(plain(doc)) ? HelpDoc.empty : doc
    case "Sequence": {
      const left = withoutBoilerplate(doc.left)
      const right = withoutBoilerplate(doc.right)
      return HelpDoc.isEmpty(left) ? right : HelpDoc.isEmpty(right) ? left : HelpDoc.sequence(left, right)
    }
    case "DescriptionList": {
      const [first, ...rest] = doc.definitions.map(([span, inner]): [Span.Span, HelpDoc.HelpDoc] => [span, withoutBoilerplate(inner)])
      return HelpDoc.descriptionList([first!, ...rest])
    }
    case "Enumeration": {
      const [first, ...rest] = doc.elements.map(withoutBoilerplate)
      return HelpDoc.enumeration([first!, ...rest])
    }
    default:
      return doc
  }
}

/**
 * One example per command, on the store and session `npm start` (the demo) leaves behind, so that
 * each runs as printed after the demo; in the order a newcomer would try them.
 */
export const EXAMPLES: ReadonlyArray<{ readonly command: string; readonly args: string; readonly does: string }> = [
  { command: "demo", args: "demo", does: "run the scripted agent demo; it writes the session demo-session to .demo/demo.db" },
  { command: "list", args: "list --store .demo/demo.db", does: "the sessions in the demo's SQLite store" },
  { command: "show", args: "show --store .demo/demo.db --session demo-session --type tool/call --tail 5", does: "the last 5 tool calls of the session" },
  { command: "verify", args: "verify --store .demo/demo.db --session demo-session", does: "check every rule on the session; exit 0 when valid" },
  { command: "messages", args: "messages --store .demo/demo.db --session demo-session", does: "the messages the surface derives now" },
  { command: "transcript", args: "transcript --store .demo/demo.db --session demo-session", does: "what was said, replacements not applied" },
  { command: "surface", args: "surface --store .demo/demo.db --session demo-session", does: "the surface and what each replacement shadowed" },
  { command: "request", args: "request --store .demo/demo.db --session demo-session --at 10", does: "the exact request (header and messages) in force at seq 10" },
  { command: "repair", args: "repair --dry-run --store .demo/demo.db --session demo-session", does: "the closers a crashed turn would get; nothing is written" },
  { command: "export", args: "export --store .demo/demo.db --out exported", does: "every session as exported/<id>.jsonl" },
  { command: "import", args: "import --store jsonl:sessions exported/demo-session.jsonl", does: "a session file into a JSONL store (all or nothing)" },
  { command: "migrate", args: "migrate --store jsonl:sessions", does: "upgrade every version-0 log in a store to version 1, keeping the originals" },
  { command: "prune", args: "prune --store .demo/demo.db --session demo-session --threshold 100 --head 20 --tail 20", does: "trim tool results over 100 characters to their first and last 20" },
  { command: "compact", args: "compact --store .demo/demo.db --session demo-session", does: "summarise the older turns into one recorded replacement" },
  { command: "fork", args: "fork --store .demo/demo.db --session demo-session --child retry", does: "a new session retry holding all of demo-session" },
  { command: "view", args: "view --store .demo/demo.db --session demo-session", does: "the web viewer on http://127.0.0.1:8737 (the URL with its token is printed)" },
  { command: "acp", args: "acp --store .demo/demo.db", does: "an ACP agent on stdio for Zed and other editors" },
  {
    command: "fleet",
    args: "fleet prompt --store postgres://agent@db.internal/sessions build-4711 hello",
    does: "a prompt to the fleet runner that owns session build-4711 (docs/fleet.md)"
  }
]

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
    render(withoutBoilerplate(globals)).trimEnd(),
    "",
    `Run \`${PROGRAM} <command> --help\` for the arguments and options of a command.`
  ].join("\n")
}

/** The help of one command: its usage lines, description, arguments and options. */
export const commandHelp = (version: string, command: AnyCommand): string =>
  [
    `${bold(PROGRAM)} ${version}\n`,
    section("USAGE", usageLines(command)),
    render(withoutBoilerplate(Command.getHelp(command, COMMAND_CONFIG))).trimEnd(),
    "",
    bold("(-h, --help)"),
    "",
    "  Show this help.",
    "",
    ...exampleOf(command)
  ].join("\n")

const exampleOf = (command: AnyCommand): ReadonlyArray<string> => {
  const name = [...Command.getNames(command)][0]
  const example = EXAMPLES.find((e) => e.command === name)
  return example === undefined ? [] : [section("EXAMPLE", [`$ ${PROGRAM} ${example.args}`, `  ${example.does}`])]
}

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
