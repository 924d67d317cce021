/**
 * The CLI contract (SPEC §12, issue 14): `--json` holds for argument errors too, one exit-code
 * policy for every command (0 ok, 1 invalid data, 2 usage / not found / I/O), a missing store is
 * not found and is never created, and `migrate --json` always prints its report array.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { share } from "../suites.js"
import { buildBundle, closedTurnLog, json, removeBundle, type Run, runCli } from "./helpers.js"

// generous limits: these tests spawn many processes on a possibly loaded machine; nothing is timed
const SLOW = { timeout: 600_000 }

const cli = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir)

const validLog = (id: string) => closedTurnLog(id)

let dir: string
let bundle: string
let sqlite: string
let jsonlRoot: string
let file: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-contract-"))
  bundle = await buildBundle("contract-test")
  file = path.join(dir, "s.jsonl")
  fs.writeFileSync(file, validLog("s"))
  sqlite = path.join(dir, "store.db")
  jsonlRoot = path.join(dir, "root")
  for (const store of [sqlite, `jsonl:${jsonlRoot}`]) {
    const r = await cli(["import", "--json", "--store", store, file])
    assert.strictEqual(r.code, 0, r.stderr)
  }
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** The one `--json` failure document of a run: exit `code`, tag `tag`. */
const failure = (r: Run, code: number, tag: string, what: string) => {
  assert.strictEqual(r.code, code, `${what}: exit code\n${r.stdout}\n${r.stderr}`)
  const doc = json(r)
  assert.strictEqual(doc.ok, false, what)
  assert.strictEqual(doc.error._tag, tag, `${what}: ${doc.error.message}`)
  assert.deepStrictEqual(Object.keys(doc.error), ["_tag", "rule", "seq", "message"], what)
  return doc.error
}

/** The commands that take a session, with the arguments each needs besides the session. */
/** The tag a missing session gives: `fork` reports its catalogue error (ForkRejected, SESSION_NOT_FOUND). */
const notFoundTag = (command: ReadonlyArray<string>) => (command[0] === "fork" ? "ForkRejected" : "SessionNotFound")

const sessionCommands: ReadonlyArray<ReadonlyArray<string>> = [
  ["show"],
  ["verify"],
  ["messages"],
  ["transcript"],
  ["surface"],
  ["request"],
  ["repair"],
  ["repair", "--dry-run"],
  ["export"],
  ["compact"],
  ["prune"],
  ["fork"]
]

describe("--json holds for argument errors", () => {
  it("a mistyped option, a bad value or an unknown command with --json: one UsageError document, exit 2", SLOW, async () => {
    const cases: ReadonlyArray<[ReadonlyArray<string>, RegExp]> = [
      [["list", "--json", "--stor", "x.db"], /--stor/],
      [["show", "--json", "--store", "x.db", "--sesion", "s"], /unknown option --sesion; did you mean --session\?/],
      [["bogus", "--json"], /bogus|subcommand/i],
      [["--json"], /subcommand/i],
      [["request", "--json", "--at", "abc", "s.jsonl"], /abc/],
      [["list", "--json", "--store"], /--store/]
    ]
    for (const [args, message] of cases) {
      const r = await cli(args)
      const error = failure(r, 2, "UsageError", args.join(" "))
      assert.strictEqual(error.rule, null)
      assert.match(error.message, message)
      assert.notMatch(r.stderr, /unknown argument|Invalid subcommand|is not a integer/, "@effect/cli's text is not printed")
    }
  })

  it("without --json people get an explanation on stderr, nothing on stdout, exit 2", SLOW, async () => {
    for (const args of [["list", "--stor", "x.db"], ["bogus"]]) {
      const r = await cli(args)
      assert.strictEqual(r.code, 2, args.join(" "))
      assert.strictEqual(r.stdout, "")
      assert.match(r.stderr, /unknown option --stor; did you mean --store\?|Invalid subcommand/)
    }
    assert.isFalse(fs.existsSync(path.join(dir, "x.db")))
  })
})

describe("one exit-code policy", () => {
  it("0 ok, 1 invalid data, 2 not found / usage: the same class gives the same code everywhere", SLOW, async () => {
    assert.strictEqual((await cli(["verify", "--json", file])).code, 0)
    const broken = path.join(dir, "broken.jsonl")
    fs.writeFileSync(broken, validLog("b").replace(`,"surfaceOp":"append"`, ""))
    failure(await cli(["verify", "--json", broken]), 1, "SurfaceMarkerInvalid", "invalid data")
    failure(await cli(["list", "--json", "--store", "ftp://x"]), 2, "UsageError", "unknown scheme")
    failure(await cli(["show", "--json", path.join(dir, "absent.jsonl")]), 2, "NotASessionFile", "missing file")
  })

  for (const kind of ["sqlite", "jsonl"] as const) {
    it(`a missing session is SessionNotFound with exit 2 from every command (${kind})`, SLOW, async () => {
      const store = kind === "sqlite" ? sqlite : `jsonl:${jsonlRoot}`
      // npm test: the two backends share the commands out (every command on one); test:slow: all on both
      for (const command of share(sessionCommands, kind === "sqlite" ? 0 : 1, 2)) {
        failure(
          await cli([...command, "--json", "--store", store, "--session", "nobody"]),
          2,
          notFoundTag(command),
          `${command.join(" ")} (${kind})`
        )
      }
      const migrate = await cli(["migrate", "--json", "--store", store, "--session", "nobody"])
      assert.strictEqual(migrate.code, 2)
      const [report] = json(migrate)
      assert.strictEqual(report.status, "failed")
      assert.strictEqual(report.error._tag, "SessionNotFound")
    })

    it(`a store that does not exist is not found (exit 2) from every command and is not created (${kind})`, SLOW, async () => {
      const missing = kind === "sqlite" ? path.join(dir, "typo.db") : path.join(dir, "typo-dir")
      const store = kind === "sqlite" ? missing : `jsonl:${missing}`
      // store-wide commands: a usage error naming the store
      for (const command of [["list"], ["verify"], ["export", "--out", path.join(dir, "out")]]) {
        const error = failure(await cli([...command, "--json", "--store", store]), 2, "UsageError", `${command[0]} (${kind})`)
        assert.match(error.message, /no store at .*not found/)
      }
      // session commands: the session is not found (shared out between the backends in npm test)
      for (const command of share(sessionCommands, kind === "sqlite" ? 1 : 0, 2)) {
        failure(
          await cli([...command, "--json", "--store", store, "--session", "s"]),
          2,
          "SessionNotFound",
          `${command.join(" ")} (${kind})`
        )
      }
      for (const args of [["migrate", "--json", "--store", store], ["migrate", "--json", "--store", store, "--session", "s"]]) {
        const r = await cli(args)
        assert.strictEqual(r.code, 2, args.join(" "))
        const reports = json(r)
        assert.strictEqual(reports.length, 1)
        assert.strictEqual(reports[0].status, "failed")
      }
      assert.isFalse(fs.existsSync(missing), "nothing was created")
      assert.isFalse(fs.existsSync(path.join(dir, "out")), "nothing was exported")
    })
  }

  it("list --store typo.db: people get a not-found explanation on stderr, exit 2, no file", SLOW, async () => {
    const r = await cli(["list", "--store", "typo.db"])
    assert.strictEqual(r.code, 2)
    assert.notMatch(r.stdout, /no sessions/)
    assert.match(r.stderr, /UsageError: no store at typo\.db: not found/)
    assert.isFalse(fs.existsSync(path.join(dir, "typo.db")))
  })

  it("a seq outside the log is not found (exit 2): request --at (L10), fork --at (M5)", SLOW, async () => {
    const request = failure(await cli(["request", "--json", file, "--at", "5000"]), 2, "SeqNotContiguous", "request --at 5000")
    assert.strictEqual(request.rule, "L10")
    assert.match(request.message, /5000/)
    const fromStore = await cli(["request", "--json", "--store", sqlite, "--session", "s", "--at", "5000"])
    assert.strictEqual(fromStore.code, 2)
    const fork = failure(await cli(["fork", "--json", "--store", sqlite, "--session", "s", "--at", "5000"]), 2, "ForkRejected", "fork --at 5000")
    assert.strictEqual(fork.rule, "M5")
    // inside the log it still works, and the success shapes are unchanged
    const ok = await cli(["request", "--json", file, "--at", "2"])
    assert.strictEqual(ok.code, 0)
    assert.deepStrictEqual(Object.keys(json(ok)), ["header", "messages"])
  })

  it("fork: an existing child id is ForkRejected M1 with exit 2 (the id is taken, like import's SessionExists)", SLOW, async () => {
    const error = failure(
      await cli(["fork", "--json", "--store", sqlite, "--session", "s", "--child", "s"]),
      2,
      "ForkRejected",
      "fork --child <existing>"
    )
    assert.strictEqual(error.rule, "M1")
  })
})

describe("migrate --json prints its report array in every case", () => {
  it("a file refused at read time is one failed entry naming the file, with the exit code of its failure", SLOW, async () => {
    const newer = path.join(dir, "newer.jsonl")
    fs.writeFileSync(newer, validLog("n").replace(`"version":1`, `"version":99`))
    const refused = await cli(["migrate", "--json", newer])
    assert.strictEqual(refused.code, 2)
    const reports = json(refused)
    assert.isArray(reports)
    assert.strictEqual(reports.length, 1)
    assert.strictEqual(reports[0].id, newer)
    assert.strictEqual(reports[0].status, "failed")
    assert.strictEqual(reports[0].error._tag, "FormatUnsupported")
    assert.deepStrictEqual(Object.keys(reports[0].error), ["_tag", "rule", "seq", "message"])

    const absent = await cli(["migrate", "--json", path.join(dir, "absent.jsonl")])
    assert.strictEqual(absent.code, 2)
    assert.strictEqual(json(absent)[0].status, "failed")

    const current = await cli(["migrate", "--json", file])
    assert.strictEqual(current.code, 0)
    assert.deepStrictEqual(json(current), [{ id: "s", status: "current" }])
  })
})
