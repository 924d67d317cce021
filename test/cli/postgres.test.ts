/**
 * The CLI on a PostgreSQL store (SPEC §12, DESIGN §6 `--store postgres://...`): every kind of
 * command against a real server, reading commands that find no store in a database without the
 * session-log schema (and write none into it), a foreign database refused, and sessions moved
 * between SQLite, PostgreSQL and JSONL with export/import, byte for byte.
 */
import { assert, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { createSchema, dropSchema, sharedServer, snapshot, withClient } from "../helpers/postgres.js"
import { describePg } from "../postgres/helpers.js"
import { buildBundle, closedTurnLog, json, removeBundle, type Run, runCli } from "./helpers.js"

let dir: string
let bundle: string
const schemas: Array<string> = []
let serverUrl = ""

const cli = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir)

/** A fresh, empty schema of the shared server: the URL that uses it (dropped after the file). */
const freshStore = async (): Promise<string> => {
  const { schema, url } = await createSchema(serverUrl)
  schemas.push(schema)
  return url
}

const write = (name: string, text: string) => {
  const p = path.join(dir, name)
  fs.writeFileSync(p, text)
  return p
}

describePg("session-log on a postgres:// store", () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-cli-pg-"))
    serverUrl = (await sharedServer()).url
    bundle = await buildBundle("cli-pg-test")
  })
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(serverUrl, schema)
    fs.rmSync(dir, { recursive: true, force: true })
    removeBundle(bundle)
  })

  it("§12 import -> list -> every reading command -> export round trip is byte-identical; reads never write", async () => {
    const store = await freshStore()
    const a = write("a.jsonl", closedTurnLog("a", "first"))
    const b = write("b.jsonl", closedTurnLog("b", "second"))
    const imp = await cli(["import", "--json", "--store", store, a, b])
    assert.strictEqual(imp.code, 0, imp.stderr)
    assert.deepStrictEqual(json(imp), { sessions: 2, events: 6 })
    const again = await cli(["import", "--json", "--store", store, a])
    assert.strictEqual(again.code, 2)
    assert.strictEqual(json(again).error._tag, "SessionExists")
    const list = json(await cli(["list", "--json", "--store", store]))
    assert.deepStrictEqual(list.map((s: { id: string }) => s.id), ["a", "b"])
    const before = await snapshot(store)
    for (const cmd of ["show", "messages", "transcript", "surface", "request", "verify"]) {
      const r = await cli([cmd, "--json", "--store", store, "--session", "a"])
      assert.strictEqual(r.code, 0, `${cmd}: ${r.stderr}`)
    }
    assert.deepStrictEqual(json(await cli(["verify", "--json", "--store", store])).map((r: { ok: boolean }) => r.ok), [true, true])
    assert.strictEqual(await snapshot(store), before, "reading commands leave the database unchanged")
    const out = path.join(dir, "export-a.jsonl")
    const exp = await cli(["export", "--json", "--store", store, "--session", "a", "--out", out])
    assert.strictEqual(exp.code, 0, exp.stderr)
    assert.strictEqual(fs.readFileSync(out, "utf8"), fs.readFileSync(a, "utf8"))
  })

  it("§12 writing commands: fork and repair on a postgres:// session", async () => {
    const store = await freshStore()
    const imp = await cli(["import", "--json", "--store", store, write("w.jsonl", closedTurnLog("w"))])
    assert.strictEqual(imp.code, 0, imp.stderr)
    const fork = await cli(["fork", "--json", "--store", store, "--session", "w", "--at", "2", "--child", "w-child"])
    assert.strictEqual(fork.code, 0, fork.stderr)
    assert.strictEqual(json(fork).id, "w-child")
    assert.deepStrictEqual(json(await cli(["list", "--json", "--store", store])).map((s: { id: string }) => s.id).sort(), [
      "w",
      "w-child"
    ])
    const repair = await cli(["repair", "--json", "--store", store, "--session", "w"])
    assert.strictEqual(repair.code, 0, repair.stderr)
    assert.deepStrictEqual(json(repair), [])
  })

  it("§12 a reading command on a database without the schema: no store (exit 2), nothing written, no password shown", async () => {
    const store = await freshStore()
    const withPassword = store.replace("postgres://session_log@", "postgres://session_log:s3cret@")
    for (const args of [["list"], ["verify"], ["show", "--session", "x"], ["export", "--session", "x"]]) {
      const r = await cli([...args, "--json", "--store", withPassword])
      assert.strictEqual(r.code, 2, `${args[0]}: ${r.stdout}${r.stderr}`)
      assert.notInclude(r.stdout + r.stderr, "s3cret")
    }
    const relations = await withClient(store, (c) =>
      c.query("SELECT count(*)::int AS n FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()")
    )
    assert.strictEqual(relations.rows[0].n, 0, "no schema was written by a read")
  })

  it("S10 a database of another application is refused (exit 2) and left as it was", async () => {
    const store = await freshStore()
    await withClient(store, async (c) => {
      await c.query("CREATE TABLE session_log_meta (application TEXT NOT NULL, schema_version INTEGER NOT NULL)")
      await c.query("INSERT INTO session_log_meta VALUES ('someone-else', 3)")
    })
    const before = await snapshot(store)
    const r = await cli(["import", "--json", "--store", store, write("f.jsonl", closedTurnLog("f"))])
    assert.strictEqual(r.code, 2)
    assert.strictEqual(json(r).error._tag, "StoreSchemaMismatch")
    assert.strictEqual(await snapshot(store), before)
  })

  it("§12 sessions move SQLite -> PostgreSQL -> JSONL -> SQLite with export/import, byte for byte", async () => {
    const pgStore = await freshStore()
    const original = [write("m1.jsonl", closedTurnLog("m1", "one")), write("m2.jsonl", closedTurnLog("m2", "two"))]
    const sqlite = path.join(dir, "move.db")
    const hops: Array<[string, string]> = [
      [sqlite, path.join(dir, "from-sqlite")],
      [pgStore, path.join(dir, "from-pg")],
      [`jsonl:${path.join(dir, "move-jsonl")}`, path.join(dir, "from-jsonl")],
      [path.join(dir, "back.db"), path.join(dir, "from-back")]
    ]
    let files = original
    for (const [store, out] of hops) {
      const imp = await cli(["import", "--json", "--store", store, ...files])
      assert.strictEqual(imp.code, 0, `${store}: ${imp.stderr}`)
      const exp = await cli(["export", "--json", "--store", store, "--out", out])
      assert.strictEqual(exp.code, 0, `${store}: ${exp.stderr}`)
      files = ["m1.jsonl", "m2.jsonl"].map((name) => path.join(out, name))
      for (let i = 0; i < files.length; i++) {
        assert.strictEqual(fs.readFileSync(files[i], "utf8"), fs.readFileSync(original[i], "utf8"), `${store}: ${files[i]}`)
      }
    }
  })
})
