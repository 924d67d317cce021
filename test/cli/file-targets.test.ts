/**
 * `.jsonl` paths given to the `session-log` commands (SPEC §12, issue 14): a path that is no
 * session log file (missing, a directory, empty, not a session log) is `NotASessionFile` from
 * every command, with its own exit code and nothing written; `--store` and `--out` paths of the
 * wrong kind are usage errors; a writing command given a path acts on exactly that file, whatever
 * its name, also beside another file holding the same id.
 * Observed as a user would: exit codes, the `--json` document, bytes, modes and names on disk.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { matrix } from "../suites.js"
import { buildBundle, closedTurnLog, json, line, removeBundle, type Run, runCli } from "./helpers.js"

// generous limits: these tests spawn many processes on a possibly loaded machine; nothing is timed
const SLOW = { timeout: 600_000 }
const FIXTURES = path.resolve(__dirname, "../fixtures/v0")

let dir: string
let bundle: string

const cli = (args: ReadonlyArray<string>, cwd: string = dir): Promise<Run> => runCli(bundle, args, cwd)

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-file-targets-"))
  bundle = await buildBundle("file-targets-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** A fresh directory under the test root. */
const fresh = (name: string) => {
  const p = path.join(dir, name)
  fs.mkdirSync(p, { recursive: true })
  return p
}

/** Every entry under `root` (directories too): bytes and mode of files, by relative path. */
const snapshot = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name)
      const rel = path.relative(root, p)
      if (entry.isDirectory()) {
        out[rel] = "directory"
        walk(p)
      } else {
        out[rel] = `${(fs.statSync(p).mode & 0o777).toString(8)} ${fs.readFileSync(p).toString("base64")}`
      }
    }
  }
  walk(root)
  return out
}

const names = (d: string) => fs.readdirSync(d).sort()

/** A closed turn whose user message, assistant text and tool result are long: prune and compact have work. */
const longLog = (id: string, word: string): string => {
  const long = (w: string) => Array.from({ length: 150 }, (_, i) => `${w}${i}`).join(" ")
  return [
    line({ type: "session", version: 1, id, createdAt: 1 }),
    line({ type: "turn/start", seq: 0, time: 10, data: { turn: 1 } }),
    line({ type: "step/start", seq: 1, time: 11, data: { turn: 1, step: 1 } }),
    line({
      type: "user/message",
      seq: 2,
      time: 12,
      data: { id: "u1", role: "user", content: [{ type: "text", text: `${word} ${long("question")}` }], source: { kind: "user" } },
      surfaceOp: "append"
    }),
    line({
      type: "assistant/message",
      seq: 3,
      time: 13,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: "a1",
          role: "assistant",
          content: [{ type: "text", text: long("answer") }, { type: "tool-call", id: "c1", name: "ls", arguments: "{}" }],
          source: { kind: "model", provider: "p", model: "m" }
        }
      },
      surfaceOp: "append"
    }),
    line({ type: "tool/call", seq: 4, time: 14, data: { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{}" } }),
    line({
      type: "tool/result",
      seq: 5,
      time: 15,
      data: {
        turn: 1,
        step: 1,
        message: {
          id: "r1",
          role: "user",
          content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: long("file") }] }],
          source: { kind: "tool", callId: "c1" }
        }
      },
      sourceEventSeqs: [4],
      surfaceOp: "append"
    }),
    line({ type: "step/end", seq: 6, time: 16, data: { turn: 1, step: 1 } }),
    line({ type: "turn/end", seq: 7, time: 17, data: { turn: 1, reason: { kind: "completed" } } })
  ].join("\n") + "\n"
}

/** An open second turn cut inside a line: `repair` removes the fragment and closes the turn. */
const tornOpenTurn = line({ type: "turn/start", seq: 8, time: 18, data: { turn: 2 } }) + "\n" + `{"type":"user/mess`

/** The `--json` failure of a run: its exit code and error report (inside migrate's report array). */
const failureOf = (r: Run, command: string) => {
  const doc = json(r)
  if (command === "migrate") {
    assert.isArray(doc, "migrate prints its report array")
    assert.strictEqual(doc.length, 1)
    assert.strictEqual(doc[0].status, "failed")
    return doc[0].error
  }
  assert.strictEqual(doc.ok, false)
  assert.deepStrictEqual(Object.keys(doc.error), ["_tag", "rule", "seq", "message"])
  return doc.error
}

describe("a path that is no session log file is NotASessionFile, from every command", () => {
  /** Each command that takes a file path, with the arguments it needs besides the path. */
  const commands = (work: string): ReadonlyArray<ReadonlyArray<string>> => [
    ["show"],
    ["verify"],
    ["messages"],
    ["transcript"],
    ["surface"],
    ["request"],
    ["repair"],
    ["repair", "--dry-run"],
    ["compact"],
    ["prune"],
    ["fork", "--child", "kid"],
    ["migrate"],
    ["export", "--out", path.join(work, "out.jsonl")],
    ["import", "--store", path.join(work, "new.db")]
  ]

  it("missing or a directory: exit 2; empty or not a session log: exit 1 with rule L5; nothing is written", SLOW, async () => {
    const work = fresh("refused")
    const targets = {
      missing: { path: path.join(work, "absent.jsonl"), code: 2, rule: null, message: /absent\.jsonl: no such file/ },
      directory: { path: fresh("refused/a-dir.jsonl"), code: 2, rule: null, message: /a-dir\.jsonl is a directory, not a session log file/ },
      empty: { path: path.join(work, "empty.jsonl"), code: 1, rule: "L5", message: /\[L5\] .*empty\.jsonl is empty/ },
      "not-a-session-log": {
        path: path.join(work, "notes.jsonl"),
        code: 1,
        rule: "L5",
        message: /\[L5\] .*notes\.jsonl is not a session log: header line is not valid JSON/
      }
    } as const
    fs.writeFileSync(targets.empty.path, "")
    fs.writeFileSync(targets["not-a-session-log"].path, "# shopping list\n- milk\n")
    const before = snapshot(work)
    // npm test: each command on one kind of path and each kind under several commands; test:slow: all
    for (const [command, [kind, target]] of matrix(commands(work), Object.entries(targets))) {
      const what = `${command.join(" ")} on ${kind}`
      const r = await cli([...command, "--json", target.path])
      assert.strictEqual(r.code, target.code, `${what}: exit code\n${r.stdout}${r.stderr}`)
      const error = failureOf(r, command[0])
      assert.strictEqual(error._tag, "NotASessionFile", `${what}: ${error.message}`)
      assert.strictEqual(error.rule, target.rule, what)
      assert.match(error.message, target.message, what)
      assert.notMatch(error.message, /EISDIR|ENOENT/, what)
      assert.deepStrictEqual(snapshot(work), before, `${what}: nothing written, nothing left behind`)
    }
  })

  it("the header refusals: a JSON array (K5) or a record that is not a session header (L5); a header cut before its newline stays StoreCorrupt L5", SLOW, async () => {
    const work = fresh("headers")
    const cases = [
      { name: "array.jsonl", text: "[1,2,3]\n", tag: "NotASessionFile", rule: "K5", message: /is not a session log: header line is not a JSON object/ },
      {
        name: "record.jsonl",
        text: line({ type: "user/message", seq: 0 }) + "\n",
        tag: "NotASessionFile",
        rule: "L5",
        message: /is not a session log: first line is not a \{"type":"session"\} record/
      },
      {
        name: "cut.jsonl",
        text: line({ type: "session", version: 1, id: "cut", createdAt: 1 }),
        tag: "StoreCorrupt",
        rule: "L5",
        message: /header line without a newline/
      }
    ]
    for (const c of cases) fs.writeFileSync(path.join(work, c.name), c.text)
    const before = snapshot(work)
    // npm test: each header under one command, each command on one header; test:slow: every pair
    for (const [c, command] of matrix(cases, ["show", "prune", "migrate"])) {
      const r = await cli([command, "--json", path.join(work, c.name)])
      assert.strictEqual(r.code, 1, `${command} ${c.name}: ${r.stdout}${r.stderr}`)
      const error = failureOf(r, command)
      assert.strictEqual(error._tag, c.tag, `${command} ${c.name}`)
      assert.strictEqual(error.rule, c.rule, `${command} ${c.name}`)
      assert.match(error.message, c.message, `${command} ${c.name}`)
    }
    assert.deepStrictEqual(snapshot(work), before)
  })

  it("people get the explanation on stderr (never a raw EISDIR), nothing on stdout", SLOW, async () => {
    const work = fresh("people")
    const directory = fresh("people/sessions")
    fs.writeFileSync(path.join(work, "empty.jsonl"), "")
    const shown = await cli(["show", directory])
    assert.strictEqual(shown.code, 2)
    assert.strictEqual(shown.stdout, "")
    assert.match(shown.stderr, /NotASessionFile: .*sessions is a directory, not a session log file \(a JSONL store directory is --store jsonl:/)
    assert.notMatch(shown.stderr, /EISDIR/)
    const repaired = await cli(["repair", path.join(work, "empty.jsonl")])
    assert.strictEqual(repaired.code, 1)
    assert.match(repaired.stderr, /L5 NotASessionFile: .*empty\.jsonl is empty/)
  })

  it("import of several files: one that is no session log imports none of them and creates no store", SLOW, async () => {
    const work = fresh("import")
    const good = path.join(work, "good.jsonl")
    fs.writeFileSync(good, closedTurnLog("good"))
    const r = await cli(["import", "--json", "--store", path.join(work, "s.db"), good, fresh("import/dir")])
    assert.strictEqual(r.code, 2)
    assert.strictEqual(failureOf(r, "import")._tag, "NotASessionFile")
    assert.deepStrictEqual(names(work), ["dir", "good.jsonl"])
  })
})

describe("--store and --out paths of the wrong kind are usage errors (exit 2), nothing written", () => {
  it("a directory named as a SQLite store, a file named as a JSONL root, an empty .db for a command that creates no store", SLOW, async () => {
    const work = fresh("wrong-store")
    const log = path.join(work, "s.jsonl")
    fs.writeFileSync(log, closedTurnLog("s"))
    fresh("wrong-store/dir.db")
    fs.writeFileSync(path.join(work, "empty.db"), "")
    const cases: ReadonlyArray<readonly [string, RegExp]> = [
      [path.join(work, "dir.db"), /dir\.db is a directory, not a SQLite file/],
      [`jsonl:${log}`, /s\.jsonl is not a directory \(a \.jsonl file is given without --store\)/],
      [path.join(work, "empty.db"), /empty\.db is an empty file, not a SQLite store \(nothing was written\)/]
    ]
    const before = snapshot(work)
    // (import first: in npm test it meets the directory, not the empty .db it may use)
    const commands = [["import", log], ["list"], ["verify"], ["show", "--session", "s"], ["prune", "--session", "s"], ["fork", "--session", "s"]]
    for (const [command, [store, message]] of matrix(commands, cases)) {
      // import creates a store: into an empty .db it may (that file then holds the store)
      if (command[0] === "import" && store.endsWith("empty.db")) continue
      const r = await cli([...command, "--json", "--store", store])
      assert.strictEqual(r.code, 2, `${command[0]} --store ${store}: ${r.stdout}${r.stderr}`)
      const error = failureOf(r, command[0])
      assert.strictEqual(error._tag, "UsageError", `${command[0]} --store ${store}`)
      assert.match(error.message, message, `${command[0]} --store ${store}`)
      assert.notMatch(error.message, /EISDIR|ENOTDIR/)
    }
    assert.deepStrictEqual(snapshot(work), before)
  })

  it("export --out: a directory for one session's file (even with --force), a file for a whole store's directory", SLOW, async () => {
    const work = fresh("wrong-out")
    const log = path.join(work, "s.jsonl")
    fs.writeFileSync(log, closedTurnLog("s"))
    const storeDir = fresh("wrong-out/store")
    assert.strictEqual((await cli(["import", "--json", "--store", `jsonl:${storeDir}`, log])).code, 0)
    fresh("wrong-out/out-dir")
    fs.writeFileSync(path.join(work, "out-file"), "keep me\n")
    const before = snapshot(work)
    for (const force of [[], ["--force"]]) {
      const one = await cli(["export", "--json", ...force, "--out", path.join(work, "out-dir"), log])
      assert.strictEqual(one.code, 2, one.stdout + one.stderr)
      const oneError = failureOf(one, "export")
      assert.strictEqual(oneError._tag, "UsageError")
      assert.match(oneError.message, /out-dir is a directory: give the file to write/)
      const all = await cli(["export", "--json", ...force, "--store", `jsonl:${storeDir}`, "--out", path.join(work, "out-file")])
      assert.strictEqual(all.code, 2, all.stdout + all.stderr)
      assert.match(failureOf(all, "export").message, /out-file is not a directory: a whole store is exported into a directory/)
    }
    assert.deepStrictEqual(snapshot(work), before)
  })
})

describe("writing commands act on exactly the named file, whatever its name", () => {
  it("after export --out any-name.jsonl: prune, compact, repair, fork and migrate work on that file", SLOW, async () => {
    const storeDir = fresh("exported/store")
    const work = fresh("exported/work")
    const source = path.join(dir, "exported", "source.jsonl")
    fs.writeFileSync(source, longLog("s", "alpha"))
    assert.strictEqual((await cli(["import", "--json", "--store", `jsonl:${storeDir}`, source])).code, 0)
    const file = path.join(work, "any-name.jsonl")
    const exported = await cli(["export", "--json", "--store", `jsonl:${storeDir}`, "--session", "s", "--out", file])
    assert.strictEqual(exported.code, 0, exported.stderr)
    const storeBefore = snapshot(storeDir)

    const pruned = await cli(["prune", "--json", file, "--threshold", "100", "--head", "10", "--tail", "10"])
    assert.strictEqual(pruned.code, 0, pruned.stdout + pruned.stderr)
    assert.deepStrictEqual(json(pruned).map((e: any) => e.type), ["compaction/prune", "tool/result"])

    const compacted = await cli(["compact", "--json", file])
    assert.strictEqual(compacted.code, 0, compacted.stdout + compacted.stderr)
    assert.include(json(compacted).map((e: any) => e.type), "compaction/summary")

    fs.appendFileSync(file, line({ type: "turn/start", seq: countEvents(file), time: 99, data: { turn: 2 } }) + "\n{\"type\":\"user/mess")
    const repaired = await cli(["repair", "--json", file])
    assert.strictEqual(repaired.code, 0, repaired.stdout + repaired.stderr)
    assert.deepStrictEqual(json(repaired).map((e: any) => e.type), ["turn/end"])
    assert.isTrue(fs.readFileSync(file, "utf8").endsWith("\n"), "the torn fragment is gone")

    const migrated = await cli(["migrate", "--json", file])
    assert.deepStrictEqual(json(migrated), [{ id: "s", status: "current" }])

    const before = fs.readFileSync(file)
    const forked = await cli(["fork", "--json", file, "--child", "kid"])
    assert.strictEqual(forked.code, 0, forked.stdout + forked.stderr)
    assert.strictEqual(json(forked).parentSession, "s")
    assert.deepStrictEqual(fs.readFileSync(file), before, "fork leaves its source unchanged")

    const verified = await cli(["verify", "--json", file])
    assert.strictEqual(verified.code, 0, verified.stdout)
    // everything happened in that file (and the child beside it): no <id>.jsonl, no temporary file
    assert.deepStrictEqual(names(work), ["any-name.jsonl", "kid.jsonl"])
    assert.deepStrictEqual(snapshot(storeDir), storeBefore, "the store exported from is untouched")
  })

  it("two files sharing an id in one folder: each writing command changes the named file only", SLOW, async () => {
    const work = fresh("shared-id")
    const a = path.join(work, "a.jsonl")
    const s = path.join(work, "s.jsonl")
    fs.writeFileSync(a, longLog("s", "alpha"))
    fs.writeFileSync(s, longLog("s", "sigma") + tornOpenTurn)
    const sBefore = snapshot(work)["s.jsonl"]

    for (const args of [["prune", "--threshold", "100", "--head", "10", "--tail", "10"], ["compact"]]) {
      const aBefore = fs.readFileSync(a, "utf8")
      const r = await cli([...args, "--json", a])
      assert.strictEqual(r.code, 0, `${args[0]}: ${r.stdout}${r.stderr}`)
      assert.isAbove(json(r).length, 0, args[0])
      assert.isTrue(fs.readFileSync(a, "utf8").startsWith(aBefore), `${args[0]} appended to a.jsonl`)
      assert.strictEqual(snapshot(work)["s.jsonl"], sBefore, `${args[0]} left s.jsonl alone`)
    }

    // a fork reads the named file: the child inherits alpha, not sigma
    const forked = await cli(["fork", "--json", a, "--child", "kid"])
    assert.strictEqual(forked.code, 0, forked.stdout + forked.stderr)
    const kid = await cli(["messages", "--json", path.join(work, "kid.jsonl")])
    assert.match(kid.stdout, /alpha question0/)
    assert.notMatch(kid.stdout, /sigma/)

    // repair of the torn s.jsonl leaves a.jsonl alone
    const aBefore = snapshot(work)["a.jsonl"]
    const repaired = await cli(["repair", "--json", s])
    assert.strictEqual(repaired.code, 0, repaired.stdout + repaired.stderr)
    assert.deepStrictEqual(json(repaired).map((e: any) => e.type), ["turn/end"])
    assert.strictEqual(snapshot(work)["a.jsonl"], aBefore)
    assert.deepStrictEqual(names(work), ["a.jsonl", "kid.jsonl", "s.jsonl"])
  })

  it("migrate session.jsonl beside <id>.jsonl upgrades session.jsonl (backup beside it, mode kept) and leaves the other file alone", SLOW, async () => {
    const work = fresh("migrate-shared-id")
    const fixture = fs.readFileSync(path.join(FIXTURES, "n1-identity.jsonl"))
    const named = path.join(work, "session.jsonl")
    const other = path.join(work, "n1-identity.jsonl")
    fs.writeFileSync(named, fixture)
    fs.writeFileSync(other, fixture)
    fs.chmodSync(named, 0o644)
    fs.chmodSync(other, 0o640)
    const otherBefore = snapshot(work)["n1-identity.jsonl"]

    const r = await cli(["migrate", "--json", named])
    assert.strictEqual(r.code, 0, r.stdout + r.stderr)
    assert.deepStrictEqual(json(r), [{ id: "n1-identity", status: "upgraded" }])
    const headerOf = (p: string) => JSON.parse(fs.readFileSync(p, "utf8").split("\n")[0])
    assert.strictEqual(headerOf(named).version, 1, "the named file is upgraded")
    assert.strictEqual(fs.statSync(named).mode & 0o777, 0o644, "its mode is kept")
    assert.deepStrictEqual(fs.readFileSync(`${named}.v0.bak`), fixture, "the original is kept beside it")
    assert.strictEqual(snapshot(work)["n1-identity.jsonl"], otherBefore, "the other file is untouched")
    assert.strictEqual(headerOf(other).version, 0)
    assert.deepStrictEqual(names(work), ["n1-identity.jsonl", "session.jsonl", "session.jsonl.v0.bak"])

    const again = await cli(["migrate", "--json", named])
    assert.deepStrictEqual(json(again), [{ id: "n1-identity", status: "current" }])
  })

  it("through a symbolic link: the file it points to is upgraded (backup beside it), the link stays a link", SLOW, async () => {
    const work = fresh("symlink")
    const real = path.join(fresh("symlink/data"), "log.jsonl")
    fs.copyFileSync(path.join(FIXTURES, "n4-turn-end.jsonl"), real)
    const link = path.join(work, "link.jsonl")
    fs.symlinkSync(real, link)
    const r = await cli(["migrate", "--json", link])
    assert.deepStrictEqual(json(r), [{ id: "n4-turn-end", status: "upgraded" }])
    assert.isTrue(fs.lstatSync(link).isSymbolicLink())
    assert.strictEqual(JSON.parse(fs.readFileSync(real, "utf8").split("\n")[0]).version, 1)
    assert.deepStrictEqual(names(path.dirname(real)), ["log.jsonl", "log.jsonl.v0.bak"])
    assert.deepStrictEqual(names(work), ["data", "link.jsonl"])
  })

  it("messages prints the surface's derived messages, without the request header's messagePrefix (v0 and migrated); request keeps it", SLOW, async () => {
    const work = fresh("message-prefix")
    const file = path.join(work, "n-message-prefix.jsonl")
    fs.copyFileSync(path.join(FIXTURES, "n-message-prefix.jsonl"), file)
    const texts = (doc: any) => doc.map((m: any) => m.content[0].text)
    const surface = ["hi", "hello", "again", "once more"]

    for (const stage of ["v0", "migrated"]) {
      const messages = await cli(["messages", "--json", file])
      assert.strictEqual(messages.code, 0, messages.stdout + messages.stderr)
      assert.deepStrictEqual(texts(json(messages)), surface, stage)
      const people = await cli(["messages", file])
      assert.notMatch(people.stdout, /You are in \/repo/, stage)
      // the request in force after the last event: the prefix of the header then the surface
      const request = await cli(["request", "--json", file])
      assert.deepStrictEqual(texts(json(request).messages), ["You are in /repo.", ...surface], stage)
      if (stage === "v0") {
        const migrated = await cli(["migrate", "--json", file])
        assert.deepStrictEqual(json(migrated), [{ id: "n-message-prefix", status: "upgraded" }])
      }
    }
  })
})

/** The number of events in a log file without a torn tail (lines after the header). */
const countEvents = (file: string): number => fs.readFileSync(file, "utf8").split("\n").filter((l) => l.length > 0).length - 1
