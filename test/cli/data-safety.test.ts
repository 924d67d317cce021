/**
 * Data safety of the `session-log` binary (issue #14): the demo only adds a session of its own,
 * `import` is all or nothing and a failed one leaves no store behind, `export --out` does not
 * overwrite without `--force`, `migrate` keeps file modes, and commands with nothing to do write
 * nothing. Observed as a user would: files, bytes, modes, exit codes and the `--json` document.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { buildBundle, closedTurnLog, json, removeBundle, type Run, runCli } from "./helpers.js"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { importItems, readImportFiles } from "../../src/programs/cli/ImportFiles.js"
import type { StoreSpec } from "../../src/programs/cli/Target.js"
import { StoreFailure } from "../../src/schema/Errors.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"

const FIXTURES = path.resolve(__dirname, "../fixtures/v0")


let dir: string
let bundle: string

const cli = (args: ReadonlyArray<string>, cwd: string = dir): Promise<Run> => runCli(bundle, args, cwd)

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-safety-"))
  // the current sources bundled once, so each subprocess starts fast (bin/session-log.js runs it)
  bundle = await buildBundle("cli-safety-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})


/** A valid, closed one-turn log. */
const validLog = (id: string) => closedTurnLog(id, `hello from ${id}`)

/** A fresh directory under the test root. */
const fresh = (name: string) => {
  const p = path.join(dir, name)
  fs.mkdirSync(p, { recursive: true })
  return p
}

const write = (at: string, name: string, text: string) => {
  const p = path.join(at, name)
  fs.writeFileSync(p, text)
  return p
}

/** Bytes, mode and mtime (ns) of every file under `root`, by relative path. */
const snapshot = (root: string): Record<string, { bytes: string; mode: number; mtime: bigint }> => {
  const out: Record<string, { bytes: string; mode: number; mtime: bigint }> = {}
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) walk(p)
      else {
        const st = fs.statSync(p, { bigint: true })
        out[path.relative(root, p)] = { bytes: fs.readFileSync(p).toString("base64"), mode: Number(st.mode & 0o7777n), mtime: st.mtimeNs }
      }
    }
  }
  walk(root)
  return out
}

/** `snapshot` restricted to files that existed in `before`: each must still be there, unchanged. */
const assertUntouched = (before: ReturnType<typeof snapshot>, root: string, label: string) => {
  const after = snapshot(root)
  for (const [name, was] of Object.entries(before)) {
    assert.deepStrictEqual(after[name], was, `${label}: ${name} unchanged`)
  }
}

/** The JSONL text of a stored session, as `export` prints it (the user-visible bytes of a session). */
const exported = async (store: string, id: string, cwd: string = dir) => {
  const r = await cli(["export", "--store", store, "--session", id], cwd)
  assert.strictEqual(r.code, 0, r.stderr)
  return r.stdout
}

const listIds = async (store: string, cwd: string = dir) => {
  const r = await cli(["list", "--json", "--store", store], cwd)
  assert.strictEqual(r.code, 0, r.stderr)
  return json(r).map((h: any) => h.id)
}

describe("demo only adds a session of its own", () => {
  it("demo --store <db> holding other sessions: adds a new session, the others keep every byte", async () => {
    const root = fresh("demo-db")
    const store = path.join(root, "precious.db")
    const imp = await cli(["import", "--json", "--store", store, write(root, "p1.jsonl", validLog("p1")), write(root, "p2.jsonl", validLog("p2"))])
    assert.strictEqual(imp.code, 0, imp.stderr)
    const before = { p1: await exported(store, "p1"), p2: await exported(store, "p2") }

    const demo = await cli(["demo", "--json", "--store", store])
    assert.strictEqual(demo.code, 0, demo.stderr)
    const r = json(demo)
    assert.strictEqual(r.sessionId, "demo-session")
    assert.deepStrictEqual(await listIds(store), ["p1", "p2", "demo-session"])
    assert.strictEqual(await exported(store, "p1"), before.p1)
    assert.strictEqual(await exported(store, "p2"), before.p2)
    const verify = json(await cli(["verify", "--json", "--store", store]))
    assert.deepStrictEqual(verify.map((v: any) => [v.id, v.ok]), [["p1", true], ["p2", true], ["demo-session", true]])
  })

  it("demo --store jsonl:<dir>: an unrelated file, another session and a foreign demo-session.jsonl stay byte-identical", async () => {
    const root = fresh("demo-jsonl")
    const store = `jsonl:${root}`
    const imp = await cli(["import", "--json", "--store", store, write(dir, "other.jsonl", validLog("other"))])
    assert.strictEqual(imp.code, 0, imp.stderr)
    write(root, "notes.txt", "my notes, not a session\n")
    write(root, "demo-session.jsonl", "not the demo's file\n")
    fs.chmodSync(path.join(root, "notes.txt"), 0o644)
    const before = snapshot(root)

    const demo = await cli(["demo", "--json", "--store", store])
    assert.strictEqual(demo.code, 0, demo.stderr)
    assert.strictEqual(json(demo).sessionId, "demo-session-2", "the taken id is skipped")
    assertUntouched(before, root, "demo on a JSONL directory")
    assert.isTrue(fs.existsSync(path.join(root, "demo-session-2.jsonl")))
  })

  it("demo on a file that is not a session store is refused with exit 2 and leaves it untouched", async () => {
    const root = fresh("demo-foreign")
    write(root, "notes.db", "these are my notes, not a database\n")
    const before = snapshot(root)
    const demo = await cli(["demo", "--json", "--store", path.join(root, "notes.db")])
    assert.strictEqual(demo.code, 2)
    assert.strictEqual(json(demo).error._tag, "StoreSchemaMismatch")
    assert.deepStrictEqual(snapshot(root), before)
  })

  it("npm start twice on the default store: the second run adds demo-session-2, the first run's session is kept", async () => {
    const cwd = fresh("demo-twice")
    const store = path.join(cwd, ".demo", "demo.db")
    const first = await cli(["demo", "--json"], cwd)
    assert.strictEqual(first.code, 0, first.stderr)
    assert.strictEqual(json(first).sessionId, "demo-session")
    const kept = await exported(store, "demo-session", cwd)
    const second = await cli(["demo"], cwd)
    assert.strictEqual(second.code, 0, second.stderr)
    assert.match(second.stdout, /--session demo-session-2/)
    // issue 27 item 8: it says what the project does first, and ends with the commands to try next
    assert.match(second.stdout.split("\n")[0]!, /^effect-session-log records everything an AI agent does/)
    const tail = second.stdout.trimEnd().split("\n").slice(-12).join("\n")
    assert.match(tail, /Next, try:/)
    assert.match(tail, /npm run session-log -- verify --store \S+ --session demo-session-2/)
    assert.strictEqual(await exported(store, "demo-session", cwd), kept)
    assert.deepStrictEqual(await listIds(store, cwd), ["demo-session", "demo-session-2"])
  })
})

describe("import is all or nothing", () => {
  it("a failed import into a new store leaves no .db file and no store directory", async () => {
    const root = fresh("import-new")
    const good = write(root, "good.jsonl", validLog("good"))
    const bad = write(root, "bad.jsonl", "not a session log\n")
    for (const files of [[bad], [good, bad]]) {
      const db = path.join(root, "new.db")
      const r = await cli(["import", "--json", "--store", db, ...files])
      assert.strictEqual(r.code, 1)
      assert.strictEqual(json(r).error._tag, "NotASessionFile")
      for (const suffix of ["", "-wal", "-shm", "-journal"]) assert.isFalse(fs.existsSync(db + suffix), `no ${db}${suffix}`)
      const j = await cli(["import", "--json", "--store", `jsonl:${path.join(root, "new-dir", "sessions")}`, ...files])
      assert.strictEqual(j.code, 1)
      assert.isFalse(fs.existsSync(path.join(root, "new-dir")), "no store directory (nor its parent)")
    }
    assert.deepStrictEqual(fs.readdirSync(root).sort(), ["bad.jsonl", "good.jsonl"])
  })

  for (const kind of ["sqlite", "jsonl"] as const) {
    it(`a multi-file import into an existing ${kind} store that fails half way imports none of the files`, async () => {
      const root = fresh(`import-half-${kind}`)
      const store = kind === "sqlite" ? path.join(root, "s.db") : `jsonl:${path.join(root, "s")}`
      const first = await cli(["import", "--json", "--store", store, write(root, "kept.jsonl", validLog("kept"))])
      assert.strictEqual(first.code, 0, first.stderr)
      const kept = await exported(store, "kept")
      const a = write(root, "a.jsonl", validLog("a"))
      const b = write(root, "b.jsonl", validLog("b"))
      const invalid = write(root, "invalid.jsonl", validLog("c").replace(`,"surfaceOp":"append"`, ""))
      const again = write(root, "kept-again.jsonl", validLog("kept"))
      const twice = write(root, "a-twice.jsonl", validLog("a"))
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string, number]> = [
        [[a, b, invalid], "SurfaceMarkerInvalid", 1], // the third file is invalid
        [[a, b, again], "SessionExists", 2], // the third file's id is stored already
        [[a, twice, b], "SessionExists", 2] // two files with one id
      ]
      for (const [files, tag, code] of cases) {
        const r = await cli(["import", "--json", "--store", store, ...files])
        assert.strictEqual(r.code, code, r.stderr)
        assert.strictEqual(json(r).error._tag, tag)
        assert.deepStrictEqual(await listIds(store), ["kept"], `${tag}: nothing of the batch was imported`)
      }
      assert.strictEqual(await exported(store, "kept"), kept)
      const people = await cli(["import", "--store", store, a, invalid])
      assert.strictEqual(people.code, 1)
      assert.match(people.stderr, /rejected .*invalid\.jsonl: nothing was imported/)
      const all = await cli(["import", "--json", "--store", store, a, b])
      assert.deepStrictEqual(json(all), { sessions: 2, events: 6 })
    })
  }

  it.scoped("a write failing after others: ImportIncomplete names the files imported; a new store is removed again", () =>
    Effect.gen(function*() {
      const root = fresh("import-partial")
      const files = ["one", "two", "three"].map((id) => write(root, `${id}.jsonl`, validLog(id)))
      const items = yield* readImportFiles(files)
      // a real SQLite store whose second append fails like a full disk would
      const failingSecond = (spec: StoreSpec) =>
        Effect.map(makeSqliteStore({ filename: spec.kind === "sqlite" ? spec.filename : "" }), (store): SessionStoreShape => {
          let appends = 0
          return {
            ...store,
            append: (id, events, options) =>
              ++appends === 2 ? Effect.fail(new StoreFailure({ method: "append", cause: "disk full" })) : store.append(id, events, options)
          }
        })

      const existing = path.join(root, "existing.db")
      yield* Effect.scoped(makeSqliteStore({ filename: existing }))
      const partial = yield* Effect.flip(importItems({ kind: "sqlite", filename: existing }, items, failingSecond))
      assert.strictEqual(partial._tag, "ImportIncomplete")
      if (partial._tag === "ImportIncomplete") {
        assert.deepStrictEqual(partial.imported, [files[0]])
        assert.strictEqual(partial.failed, files[1])
        assert.match(partial.message, /import stopped at .*two\.jsonl \(.*disk full\); already imported: .*one\.jsonl/)
      }
      const listed = yield* Effect.scoped(Effect.flatMap(makeSqliteStore({ filename: existing }), (s) => s.list()))
      assert.deepStrictEqual(listed.map((h) => h.id), ["one"])

      const created = path.join(root, "created.db")
      const failed = yield* Effect.flip(importItems({ kind: "sqlite", filename: created }, items, failingSecond))
      assert.strictEqual(failed._tag, "StoreFailure", "nothing is left, so the cause is the error")
      for (const suffix of ["", "-wal", "-shm"]) assert.isFalse(fs.existsSync(created + suffix))
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("export --out does not overwrite without --force", () => {
  it("an existing file is refused (exit 2, OutputExists) and left untouched; --force overwrites", async () => {
    const root = fresh("export")
    const store = `jsonl:${path.join(root, "s")}`
    const imp = await cli(["import", "--json", "--store", store, write(root, "src.jsonl", validLog("x"))])
    assert.strictEqual(imp.code, 0, imp.stderr)
    const target = write(root, "out.jsonl", "precious\n")
    const before = snapshot(root)
    const refused = await cli(["export", "--json", "--store", store, "--session", "x", "--out", target])
    assert.strictEqual(refused.code, 2)
    assert.deepStrictEqual(json(refused), {
      ok: false,
      error: { _tag: "OutputExists", rule: null, seq: null, message: `${target} already exists: nothing was written (--force overwrites)` }
    })
    const people = await cli(["export", "--store", store, "--session", "x", "--out", target])
    assert.strictEqual(people.code, 2)
    assert.match(people.stderr, /OutputExists: .*out\.jsonl already exists/)
    assert.strictEqual(people.stdout, "")
    assertUntouched(before, root, "refused export")

    fs.chmodSync(target, 0o600)
    const forced = await cli(["export", "--json", "--force", "--store", store, "--session", "x", "--out", target])
    assert.strictEqual(forced.code, 0, forced.stderr)
    assert.deepStrictEqual(json(forced), { sessions: 1, events: 3 })
    assert.strictEqual(fs.readFileSync(target, "utf8"), validLog("x"))
    // the overwritten file keeps its permission bits; nothing else is left in the directory
    assert.strictEqual(fs.statSync(target).mode & 0o777, 0o600)
    assert.isFalse(fs.readdirSync(root).some((name) => name.includes(".export-")), "no temporary file is left")
  })

  it("a whole-store export into a directory holding one of the files writes none of them", async () => {
    const root = fresh("export-dir")
    const store = path.join(root, "s.db")
    const imp = await cli(["import", "--json", "--store", store, write(root, "a.jsonl", validLog("a")), write(root, "b.jsonl", validLog("b"))])
    assert.strictEqual(imp.code, 0, imp.stderr)
    const out = fresh("export-dir/out")
    write(out, "b.jsonl", "mine\n")
    const before = snapshot(out)
    const refused = await cli(["export", "--json", "--store", store, "--out", out])
    assert.strictEqual(refused.code, 2)
    assert.strictEqual(json(refused).error._tag, "OutputExists")
    assert.deepStrictEqual(snapshot(out), before, "a.jsonl is not written either")
    const forced = await cli(["export", "--json", "--force", "--store", store, "--out", out])
    assert.deepStrictEqual(json(forced), { sessions: 2, events: 6 })
    assert.deepStrictEqual(fs.readdirSync(out).sort(), ["a.jsonl", "b.jsonl"])
    assert.strictEqual(fs.readFileSync(path.join(out, "b.jsonl"), "utf8"), validLog("b"))
  })
})

describe("migrate keeps permission modes", () => {
  it("an upgraded v0 file keeps its mode (0644 and 0640), from a store and from a file path", async () => {
    const root = fresh("migrate-modes")
    const copy = (name: string, mode: number) => {
      const p = path.join(root, `${name}.jsonl`)
      fs.copyFileSync(path.join(FIXTURES, `${name}.jsonl`), p)
      fs.chmodSync(p, mode)
      return p
    }
    const a = copy("n1-identity", 0o644)
    const b = copy("n4-turn-end", 0o640)
    const r = await cli(["migrate", "--json", "--store", `jsonl:${root}`])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(json(r).map((x: any) => x.status), ["upgraded", "upgraded"])
    assert.strictEqual(fs.statSync(a).mode & 0o777, 0o644)
    assert.strictEqual(fs.statSync(b).mode & 0o777, 0o640)
    assert.strictEqual(JSON.parse(fs.readFileSync(a, "utf8").split("\n")[0]).version, 1)

    const single = fresh("migrate-modes/one")
    const c = path.join(single, "n2-turn-start-trigger.jsonl")
    fs.copyFileSync(path.join(FIXTURES, "n2-turn-start-trigger.jsonl"), c)
    fs.chmodSync(c, 0o644)
    const one = await cli(["migrate", "--json", c])
    assert.deepStrictEqual(json(one).map((x: any) => x.status), ["upgraded"])
    assert.strictEqual(fs.statSync(c).mode & 0o777, 0o644)
  })
})

describe("commands with nothing to do write nothing", () => {
  for (const kind of ["sqlite", "jsonl"] as const) {
    it(`prune, repair, compact and migrate on a ${kind} store leave bytes and mtimes unchanged`, async () => {
      const root = fresh(`noop-${kind}`)
      const storeRoot = fresh(`noop-${kind}/store`)
      const store = kind === "sqlite" ? path.join(storeRoot, "s.db") : `jsonl:${storeRoot}`
      const imp = await cli(["import", "--json", "--store", store, write(root, "idle.jsonl", validLog("idle"))])
      assert.strictEqual(imp.code, 0, imp.stderr)
      const before = snapshot(storeRoot)
      // not even a file created and removed again (a SQLite -wal/-shm pair): the directory's mtime stays
      const dirMtime = fs.statSync(storeRoot, { bigint: true }).mtimeNs
      const unchanged = (label: string) => {
        assert.deepStrictEqual(snapshot(storeRoot), before, label)
        assert.strictEqual(fs.statSync(storeRoot, { bigint: true }).mtimeNs, dirMtime, `${label}: the directory was written`)
      }
      const session = ["--store", store, "--session", "idle"]

      const prune = await cli(["prune", "--json", ...session])
      assert.strictEqual(prune.code, 0, prune.stderr)
      assert.deepStrictEqual(json(prune), [])
      unchanged("prune with nothing to prune")
      const prunePeople = await cli(["prune", ...session])
      assert.match(prunePeople.stdout, /nothing to prune/)

      const repair = await cli(["repair", "--json", ...session])
      assert.strictEqual(repair.code, 0, repair.stderr)
      assert.deepStrictEqual(json(repair), [])
      unchanged("repair with nothing to repair")

      const compact = await cli(["compact", "--json", ...session])
      assert.strictEqual(compact.code, 1)
      assert.strictEqual(json(compact).error._tag, "CompactionRejected")
      unchanged("compact with nothing to compact")

      const migrate = await cli(["migrate", "--json", "--store", store])
      assert.deepStrictEqual(json(migrate), [{ id: "idle", status: "current" }])
      assertUntouched(before, storeRoot, "migrate of a current store")
      if (kind === "jsonl") {
        const file = path.join(storeRoot, "idle.jsonl")
        assert.deepStrictEqual(json(await cli(["prune", "--json", file])), [])
        assert.deepStrictEqual(json(await cli(["repair", "--json", file])), [])
        assertUntouched(before, storeRoot, "prune and repair of a .jsonl path")
      }
      assert.strictEqual(json(await cli(["verify", "--json", ...session])).events, 3, "no end-seed marker was appended")
    })
  }
})
