/**
 * Reading commands never write (SPEC §12, L8; issue 18): every reading command of the binary on a
 * SQLite and a JSONL store (a) while another process holds a write transaction, (b) in a
 * read-only directory and (c) on a read-only file succeeds and leaves every file's bytes and
 * mtime as they were, with no new file (no -wal/-shm, lock or temporary file). A writing command
 * there fails with a tagged error (exit 2) and leaves nothing behind either. The tests run as
 * root in CI containers, where permission bits stop nothing: the binary then runs as `nobody`
 * (runuser), as the PostgreSQL helpers run the server.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFile, spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { matrix, share } from "../suites.js"
import { BIN, buildBundle, closedTurnLog, json, removeBundle, type Run, runCli } from "./helpers.js"

const SLOW = { timeout: 240_000 }
const asRoot = process.getuid?.() === 0

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-read-only-"))
  // the unprivileged user must reach the stores (and the bundle, under the repository)
  fs.chmodSync(dir, 0o755)
  bundle = await buildBundle("cli-read-only-test")
  fs.chmodSync(bundle, 0o644)
})
afterAll(() => {
  if (dir !== undefined) {
    for (const entry of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, entry), 0o755)
    fs.rmSync(dir, { recursive: true, force: true })
  }
  removeBundle(bundle)
})

/** Run the binary as this user. */
const cli = (args: ReadonlyArray<string>): Promise<Run> => runCli(bundle, args, dir)

/** Run the binary as a user the permission bits apply to (`nobody` when the tests run as root). */
const cliUnprivileged = (args: ReadonlyArray<string>): Promise<Run> => {
  if (!asRoot) return cli(args)
  return new Promise((resolve) => {
    execFile(
      "runuser",
      ["-u", "nobody", "--", "env", `SESSION_LOG_BUNDLE=${bundle}`, "NO_COLOR=1", process.execPath, BIN, ...args],
      { cwd: dir, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resolve({ code, stdout, stderr })
      }
    )
  })
}

/** Bytes and mtime (ns) of every file in `root`, by name. */
const snapshot = (root: string): Record<string, { readonly bytes: string; readonly mtime: bigint }> => {
  const out: Record<string, { bytes: string; mtime: bigint }> = {}
  for (const name of fs.readdirSync(root).sort()) {
    const p = path.join(root, name)
    const st = fs.statSync(p, { bigint: true })
    if (st.isFile()) out[name] = { bytes: fs.readFileSync(p).toString("base64"), mtime: st.mtimeNs }
  }
  return out
}

/** Two sessions in a fresh store of `kind` in the directory `name`; returns the directory and the --store value. */
const makeStore = async (name: string, kind: "sqlite" | "jsonl") => {
  const root = path.join(dir, name)
  fs.mkdirSync(root, { recursive: true })
  const logs = path.join(dir, `${name}-logs`)
  fs.mkdirSync(logs, { recursive: true })
  const files = ["r1", "r2"].map((id) => {
    const p = path.join(logs, `${id}.jsonl`)
    fs.writeFileSync(p, closedTurnLog(id, `hello from ${id}`))
    return p
  })
  const store = kind === "sqlite" ? path.join(root, "s.db") : `jsonl:${root}`
  const imported = await cli(["import", "--json", "--store", store, ...files])
  assert.strictEqual(imported.code, 0, imported.stderr)
  // permissions a reader other than the owner needs (the JSONL writer makes 0700/0600)
  fs.chmodSync(root, 0o755)
  for (const f of fs.readdirSync(root)) fs.chmodSync(path.join(root, f), 0o644)
  return { root, store }
}

/** Every reading command, with what its --json document must show. */
const readingCommands = (store: string, out: string): ReadonlyArray<{ readonly args: ReadonlyArray<string>; readonly check: (doc: any) => void }> => [
  { args: ["list", "--json", "--store", store], check: (d) => assert.deepStrictEqual(d.map((h: any) => [h.id, h.events]), [["r1", 3], ["r2", 3]]) },
  { args: ["verify", "--json", "--store", store], check: (d) => assert.deepStrictEqual(d.map((r: any) => [r.id, r.ok]), [["r1", true], ["r2", true]]) },
  { args: ["verify", "--json", "--store", store, "--session", "r1"], check: (d) => assert.deepStrictEqual([d.ok, d.events], [true, 3]) },
  { args: ["show", "--json", "--store", store, "--session", "r1"], check: (d) => assert.deepStrictEqual(d.map((e: any) => e.seq), [0, 1, 2]) },
  { args: ["messages", "--json", "--store", store, "--session", "r1"], check: (d) => assert.strictEqual(d[0].content[0].text, "hello from r1") },
  { args: ["transcript", "--json", "--store", store, "--session", "r2"], check: (d) => assert.strictEqual(d.length, 1) },
  { args: ["surface", "--json", "--store", store, "--session", "r2"], check: (d) => assert.deepStrictEqual(d.replacements, []) },
  { args: ["request", "--json", "--store", store, "--session", "r2"], check: (d) => assert.strictEqual(d.messages.length, 1) },
  { args: ["export", "--store", store, "--session", "r1"], check: () => undefined },
  { args: ["export", "--json", "--store", store, "--out", out], check: () => undefined }
]

/** Run every reading command through `run`; each succeeds and the store directory is untouched. */
const assertReadsWriteNothing = async (
  root: string,
  store: string,
  run: (args: ReadonlyArray<string>) => Promise<Run>,
  label: string,
  part: readonly [k: number, n: number],
  ignoreBytesOf: ReadonlyArray<string> = []
) => {
  const before = snapshot(root)
  // the whole-store export writes outside the store, where the reader may write
  const out = fs.mkdtempSync(path.join(dir, "out-"))
  fs.chmodSync(out, 0o777)
  // npm test: the tests of a backend share the commands out between them; test:slow: each runs all
  for (const { args, check } of share(readingCommands(store, path.join(out, "export")), ...part)) {
    const r = await run(args)
    assert.strictEqual(r.code, 0, `${label}: ${args.join(" ")}: ${r.stdout}${r.stderr}`)
    if (args[0] === "export" && !args.includes("--out")) assert.strictEqual(r.stdout, closedTurnLog("r1", "hello from r1"))
    else check(args.includes("--out") ? undefined : json(r))
    const after = snapshot(root)
    assert.deepStrictEqual(Object.keys(after), Object.keys(before), `${label}: ${args[0]} created or removed no file`)
    for (const [name, was] of Object.entries(before)) {
      if (ignoreBytesOf.includes(name)) continue
      assert.deepStrictEqual(after[name], was, `${label}: ${args.join(" ")}: ${name} bytes and mtime unchanged`)
    }
  }
}

/** Writing commands on a store that cannot be written: a tagged refusal, exit 2, nothing left behind. */
const assertWritesRefused = async (root: string, store: string, label: string) => {
  const before = snapshot(root)
  const sources = path.join(dir, `${path.basename(root)}-new.jsonl`)
  fs.writeFileSync(sources, closedTurnLog("r3"))
  fs.chmodSync(sources, 0o644)
  for (const args of [
    ["import", "--json", "--store", store, sources],
    ["fork", "--json", "--store", store, "--session", "r1", "--at", "2"]
  ]) {
    const r = await cliUnprivileged(args)
    assert.strictEqual(r.code, 2, `${label}: ${args[0]}: ${r.stdout}${r.stderr}`)
    const doc = json(r)
    const error = Array.isArray(doc) ? doc.find((x: any) => x.ok === false)?.error : (doc.error ?? doc)
    assert.strictEqual(error?._tag, "StoreFailure", `${label}: ${args[0]}: ${r.stdout}`)
    assert.deepStrictEqual(snapshot(root), before, `${label}: ${args[0]} left nothing behind`)
  }
}

// ---------------------------------------------------------------------------------------------

const betterSqlite3 = createRequire(import.meta.url).resolve("better-sqlite3")

// Another process takes the write lock of the SQLite store, writes a row it never commits, prints
// "locked" and waits to be killed.
const holder = `
const Database = require(process.argv[1])
const db = new Database(process.argv[2])
db.exec("BEGIN IMMEDIATE")
db.prepare("UPDATE sessions SET revision = revision + 1 WHERE id = 'r1'").run()
process.stdout.write("locked\\n")
setInterval(() => {}, 1000)
`

const holdWriteLock = (file: string) =>
  new Promise<{ readonly kill: () => Promise<void> }>((resolve, reject) => {
    const child = spawn(process.execPath, ["-e", holder, betterSqlite3, file], { stdio: ["ignore", "pipe", "inherit"] })
    const ended = new Promise<void>((done) => child.once("exit", () => done()))
    child.once("error", reject)
    child.stdout.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("locked")) resolve({ kill: () => (child.kill("SIGKILL"), ended) })
    })
  })

describe("reading commands never write (SPEC §12, L8)", () => {
  it("L8 SQLite: every reading command succeeds while another process holds a write transaction, and writes nothing", SLOW, async () => {
    const { root, store } = await makeStore("held", "sqlite")
    const held = await holdWriteLock(path.join(root, "s.db"))
    try {
      assert.includeMembers(fs.readdirSync(root), ["s.db-wal", "s.db-shm"], "the writer's WAL pair exists")
      // readers register in the WAL index (the -shm, SQLite's shared memory): its bytes are not compared
      await assertReadsWriteNothing(root, store, cli, "held", [0, 4], ["s.db-shm"])
    } finally {
      await held.kill()
    }
  })

  for (const kind of ["sqlite", "jsonl"] as const) {
    it(`L8 ${kind}: every reading command succeeds in a read-only directory and writes nothing`, SLOW, async () => {
      const { root, store } = await makeStore(`rodir-${kind}`, kind)
      fs.chmodSync(root, 0o555)
      try {
        await assertReadsWriteNothing(root, store, cliUnprivileged, `read-only directory (${kind})`, kind === "sqlite" ? [1, 4] : [0, 2])
        await assertWritesRefused(root, store, `read-only directory (${kind})`)
      } finally {
        fs.chmodSync(root, 0o755)
      }
    })

    it(`L8 ${kind}: every reading command succeeds on read-only files in a writable directory and writes nothing`, SLOW, async () => {
      const { root, store } = await makeStore(`rofile-${kind}`, kind)
      fs.chmodSync(root, 0o777)
      for (const f of fs.readdirSync(root)) fs.chmodSync(path.join(root, f), 0o444)
      try {
        await assertReadsWriteNothing(root, store, cliUnprivileged, `read-only file (${kind})`, kind === "sqlite" ? [2, 4] : [1, 2])
        if (kind === "sqlite") await assertWritesRefused(root, store, "read-only file (sqlite)")
      } finally {
        fs.chmodSync(root, 0o755)
      }
    })
  }

  it("L8 SQLite: a migrate with nothing to do and a refused fork write nothing (they work in a read-only directory)", SLOW, async () => {
    const { root, store } = await makeStore("nothing-to-write", "sqlite")
    fs.chmodSync(root, 0o555)
    try {
      const before = snapshot(root)
      for (const args of [["migrate", "--json", "--store", store], ["migrate", "--json", "--store", store, "--session", "r1"]]) {
        const r = await cliUnprivileged(args)
        assert.strictEqual(r.code, 0, `${args.join(" ")}: ${r.stdout}${r.stderr}`)
        assert.deepStrictEqual(json(r).map((m: any) => m.status), args.includes("--session") ? ["current"] : ["current", "current"])
        assert.deepStrictEqual(snapshot(root), before, `${args.join(" ")} wrote nothing`)
      }
      // inside the turn (M7) and onto an existing id (M1): the fork's own refusal, not a StoreFailure
      for (const [args, rule] of [[["--at", "1"], "M7"], [["--child", "r2"], "M1"]] as const) {
        const r = await cliUnprivileged(["fork", "--json", "--store", store, "--session", "r1", ...args])
        const doc = json(r)
        assert.deepStrictEqual([r.code === 0, doc.error?._tag, doc.error?.rule], [false, "ForkRejected", rule], `${r.stdout}${r.stderr}`)
        assert.deepStrictEqual(snapshot(root), before, `fork ${args.join(" ")} wrote nothing`)
      }
    } finally {
      fs.chmodSync(root, 0o755)
    }
  })

  it("L8 SQLite: reads as the owner of a writable store leave no -wal/-shm pair behind", SLOW, async () => {
    const { root, store } = await makeStore("owner", "sqlite")
    await assertReadsWriteNothing(root, store, cli, "owner", [3, 4])
  })

  it("S4 verify and list of a zero-byte .db: not a store (exit 2), and no schema is written into it", SLOW, async () => {
    const file = path.join(dir, "zero.db")
    fs.writeFileSync(file, "")
    for (const args of [["verify", "--json", "--store", file], ["list", "--json", "--store", file], ["show", "--json", "--store", file, "--session", "x"]]) {
      const r = await cli(args)
      assert.strictEqual(r.code, 2, `${args[0]}: ${r.stdout}${r.stderr}`)
      assert.strictEqual(fs.statSync(file).size, 0, `${args[0]}: the file stays empty`)
      assert.isFalse(fs.existsSync(`${file}-wal`) || fs.existsSync(`${file}-shm`), `${args[0]}: no WAL pair`)
    }
  })

  it("L7 a truncated or malformed .db: StoreCorrupt with rule L7 (exit 1) from every reading command; the file is unchanged", SLOW, async () => {
    const { root } = await makeStore("truncated-src", "sqlite")
    const full = fs.readFileSync(path.join(root, "s.db"))
    const commands = [["verify", "--json", "--store"], ["list", "--json", "--store"], ["show", "--json", "--session", "r1", "--store"]]
    // npm test: each size under one command and each command on one size; test:slow: every pair
    for (const [size, command] of matrix([100, 4096, full.length - 4096], commands)) {
      const file = path.join(dir, `truncated-${size}-${command[0]}.db`)
      fs.writeFileSync(file, full.subarray(0, size))
      const before = fs.readFileSync(file)
      const args = [...command, file]
      const r = await cli(args)
      const doc = json(r)
      const error = doc.error ?? doc
      assert.deepStrictEqual([r.code, error._tag, error.rule], [1, "StoreCorrupt", "L7"], `${size} ${args[0]}: ${r.stdout}`)
      assert.deepStrictEqual(fs.readFileSync(file), before, `${size} ${args[0]}: file unchanged`)
      assert.isFalse(fs.existsSync(`${file}-wal`), `${size} ${args[0]}: no WAL file`)
    }
  })
})
