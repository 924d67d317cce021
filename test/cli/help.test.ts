/**
 * The help of the `session-log` binary (issue 14): no colour codes when stdout is not a terminal
 * or NO_COLOR is set, usage lines that read `session-log <command> …`, a description for every
 * argument and option, and internal commands (the demo's child `demo-crash`) left out of help
 * while they still run.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { EXAMPLES } from "../../src/programs/cli/Help.js"
import { BIN, buildBundle, removeBundle, type Run, runCli } from "./helpers.js"

// generous limits: many processes on a possibly loaded machine; nothing is timed
const SLOW = { timeout: 600_000 }

const COMMANDS = [
  "demo",
  "list",
  "show",
  "verify",
  "messages",
  "transcript",
  "surface",
  "request",
  "repair",
  "export",
  "import",
  "migrate",
  "compact",
  "prune",
  "fork",
  "view",
  "acp",
  "fleet"
]

const ANSI = /\u001b\[/

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-help-"))
  bundle = await buildBundle("help-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** Run with stdout a pipe (not a terminal) and NO_COLOR unset. */
const piped = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir, { NO_COLOR: undefined })

/** `<command> --help`, piped: run once per command and shared by the tests that read it (the same bytes each time). */
const helps = new Map<string, Promise<Run>>()
const helpOf = (command: string): Promise<Run> => {
  const known = helps.get(command)
  if (known !== undefined) return known
  const run = piped([command, "--help"])
  helps.set(command, run)
  return run
}

/** Lines of @effect/cli that say what kind of value an entry takes, not what it is. */
const GENERIC = /^(A true or false value\.|A user-defined piece of text\.|An integer\.|One of the following: .*|This setting is optional\..*|This option (may|must) be repeated .*)$/

/** The entries of a help section (`ARGUMENTS`, `OPTIONS`): each head line with its indented text. */
const entries = (help: string, title: string): ReadonlyArray<{ readonly head: string; readonly text: ReadonlyArray<string> }> => {
  const lines = help.split("\n")
  const start = lines.indexOf(title)
  if (start < 0) return []
  const out: Array<{ head: string; text: Array<string> }> = []
  for (const line of lines.slice(start + 1)) {
    if (/^[A-Z]+$/.test(line) || line.startsWith("Run `")) break
    if (line.trim() === "") continue
    if (line.startsWith(" ")) out[out.length - 1]?.text.push(line.trim())
    else out.push({ head: line, text: [] })
  }
  return out
}

/** The rows of the root help's COMMANDS section. */
const commandRows = (help: string): ReadonlyArray<string> => {
  const lines = help.split("\n")
  const rows: Array<string> = []
  for (const line of lines.slice(lines.indexOf("COMMANDS") + 1)) {
    if (/^[A-Z]+$/.test(line)) break
    if (/^ {2}\S/.test(line)) rows.push(line)
  }
  return rows
}

describe("help", () => {
  it("session-log --help: usage lines read `session-log <command>`, every command with its description, no colour codes", SLOW, async () => {
    for (const args of [["--help"], ["-h"], []]) {
      const r = await piped(args)
      assert.strictEqual(r.code, 0, `${args.join(" ")}: ${r.stderr}`)
      assert.notMatch(r.stdout, ANSI, "no colour codes when stdout is not a terminal")
      const usage = r.stdout.split("\n").filter((l) => l.startsWith("$ "))
      assert.isAbove(usage.length, 0)
      for (const line of usage) assert.match(line, /^\$ session-log <command>/)
      const commands = commandRows(r.stdout)
      assert.deepStrictEqual(commands.map((l) => l.trim().split(/\s+/)[0]), COMMANDS)
      for (const l of commands) assert.match(l, /^ {2}\S+\s{2,}\S/, `a description for ${l.trim()}`)
      // the global options keep their descriptions, not @effect/cli's type boilerplate (issue 27)
      assert.notMatch(r.stdout, /This setting is optional|A true or false value|One of the following/, args.join(" "))
      assert.match(r.stdout, /Show the help documentation for a command\./)
    }
  })

  it("session-log <command> --help: the usage line, and a description for every argument and option", SLOW, async () => {
    for (const command of COMMANDS) {
      const r = await helpOf(command)
      assert.strictEqual(r.code, 0, `${command}: ${r.stderr}`)
      assert.notMatch(r.stdout, ANSI, command)
      const usage = r.stdout.split("\n").filter((l) => l.startsWith("$ "))
      assert.isAbove(usage.length, 0, command)
      for (const line of usage) assert.match(line, new RegExp(`^\\$ session-log ${command}( |$)`), command)
      const documented = [...entries(r.stdout, "ARGUMENTS"), ...entries(r.stdout, "OPTIONS")]
      assert.isAbove(documented.length, 1, `${command} documents its options`)
      for (const entry of documented) {
        const said = entry.text.filter((t) => !GENERIC.test(t))
        assert.isAbove(said.length, 0, `${command} ${entry.head}: a description saying what it is`)
      }
    }
  })

  it("the help of show names its filters with what each takes", SLOW, async () => {
    const r = await helpOf("show")
    const heads = entries(r.stdout, "OPTIONS").map((e) => e.head)
    for (const option of ["--type <type>...", "--turn <turn>", "--from <seq>", "--to <seq>", "--tail <n>", "--store <store>", "--session <id>"]) {
      assert.include(heads, option)
    }
    assert.deepStrictEqual(entries(r.stdout, "ARGUMENTS").map((e) => e.head), ["<file.jsonl>"])
  })

  it("NO_COLOR: no colour codes in help, and none in @effect/cli's argument errors on stderr", SLOW, async () => {
    const help = await runCli(bundle, ["verify", "--help"], dir, { NO_COLOR: "1" })
    assert.strictEqual(help.code, 0)
    assert.notMatch(help.stdout, ANSI)
    const bad = await piped(["request", "--at", "x", "s.jsonl"])
    assert.strictEqual(bad.code, 2)
    assert.match(bad.stderr, /--at takes a whole number/)
    assert.notMatch(bad.stderr, ANSI)
  })

  // a terminal through util-linux `script` (Linux): colour on a TTY, none once NO_COLOR is set
  const script = ["/usr/bin/script", "/bin/script"].find((p) => fs.existsSync(p))
  it.skipIf(process.platform !== "linux" || script === undefined)("on a terminal help is coloured unless NO_COLOR is set", SLOW, async () => {
    const onTty = (env: Record<string, string>) =>
      new Promise<string>((resolve, reject) => {
        const cmd = `${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} show --help`
        const vars: NodeJS.ProcessEnv = { ...process.env, SESSION_LOG_BUNDLE: bundle }
        delete vars.NO_COLOR
        execFile(script!, ["-qec", cmd, "/dev/null"], { cwd: dir, encoding: "utf8", env: { ...vars, ...env } }, (e, stdout) =>
          e === null ? resolve(stdout) : reject(e))
      })
    const coloured = await onTty({})
    assert.match(coloured, /\$ session-log show /)
    assert.match(coloured, ANSI, "a terminal gets colour")
    const plain = await onTty({ NO_COLOR: "1" })
    assert.match(plain, /\$ session-log show /)
    assert.notMatch(plain, ANSI, "NO_COLOR turns it off")
  })
})

describe("internal commands", () => {
  it("demo-crash is in no help and no list of commands, and still runs", SLOW, async () => {
    const root = await piped(["--help"])
    assert.notInclude(root.stdout, "demo-crash")
    const unknown = await piped(["no-such-command"])
    assert.strictEqual(unknown.code, 2)
    assert.match(unknown.stderr, /Invalid subcommand/)
    assert.notInclude(unknown.stderr, "demo-crash", "the list of commands in an argument error leaves it out")
    // it runs (a usage error of its own, not an unknown command) and has its own help
    const run = await piped(["demo-crash", "--store", path.join(dir, "none.db")])
    assert.strictEqual(run.code, 2)
    assert.match(run.stderr, /run the demo first/)
    const help = await piped(["demo-crash", "--help"])
    assert.strictEqual(help.code, 0)
    assert.match(help.stdout, /^\$ session-log demo-crash /m)
  })
})

describe("help that teaches (issue 27)", () => {
  it("no command's help carries @effect/cli's type boilerplate; each shows one example", SLOW, async () => {
    const BOILERPLATE = /A user-defined piece of text\.|This setting is optional\.|A true or false value\.|^\s*An integer\.$/m
    for (const command of COMMANDS) {
      const help = await helpOf(command)
      assert.strictEqual(help.code, 0, help.stderr)
      assert.notMatch(help.stdout, BOILERPLATE, command)
      const example = help.stdout.split("\n").slice(help.stdout.split("\n").indexOf("EXAMPLE") + 1).join("\n")
      assert.include(help.stdout, "\nEXAMPLE\n", command)
      assert.match(example, new RegExp(`^\\s*\\$ session-log ${command}( |$)`, "m"), command)
    }
  })

  it("every example runs as printed, in order, after the demo (acp and view aside: they serve until stopped)", SLOW, async () => {
    const cwd = fs.mkdtempSync(path.join(dir, "examples-"))
    const seen: Array<string> = []
    for (const command of COMMANDS) {
      const help = await helpOf(command)
      const lines = help.stdout.split("\n")
      const line = lines.slice(lines.indexOf("EXAMPLE")).find((l) => l.startsWith(`$ session-log ${command}`))!
      seen.push(command)
      // acp serves stdio and view serves HTTP until interrupted (test/view/cli.test.ts runs it)
      // fleet needs a PostgreSQL database and runners (test/fleet/ runs it)
      if (command === "acp" || command === "view" || command === "fleet") continue
      const ran = await runCli(bundle, line.slice("$ session-log ".length).split(" "), cwd)
      assert.strictEqual(ran.code, 0, `${line}\n${ran.stderr}`)
    }
    assert.deepStrictEqual(seen, COMMANDS)
  })

  it("the README's CLI lines run as printed after the demo, and docs/cli.md lists every command's example", SLOW, async () => {
    const repo = path.resolve(import.meta.dirname, "../..")
    const readme = fs.readFileSync(path.join(repo, "README.md"), "utf8")
    const block = readme.slice(readme.indexOf("## The CLI")).match(/```sh\n([\s\S]*?)```/)?.[1] ?? ""
    const lines = block.split("\n").filter((l) => l.startsWith("npx session-log "))
    assert.isAtLeast(lines.length, 3)
    const cwd = fs.mkdtempSync(path.join(dir, "readme-"))
    assert.strictEqual((await runCli(bundle, ["demo"], cwd)).code, 0)
    for (const line of lines) {
      const ran = await runCli(bundle, line.slice("npx session-log ".length).split(" "), cwd)
      assert.strictEqual(ran.code, 0, `${line}\n${ran.stderr}`)
      assert.isAbove(ran.stdout.length, 0, line)
    }
    const reference = fs.readFileSync(path.join(repo, "docs/cli.md"), "utf8")
    for (const { args } of EXAMPLES) assert.include(reference, `session-log ${args}`)
  })
})
