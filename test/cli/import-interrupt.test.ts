/**
 * An interrupted `import` into an existing store leaves no partial session (issue 27, item 2): a
 * real `session-log import` of a large log is signalled once its session has begun to be written
 * (the store polled from this process), then the store holds exactly what it held before (the
 * same files byte for byte, the same rows), `verify` passes and nothing temporary is left; exit
 * 130/143 and stderr says what was kept. Every backend: a JSONL directory, a compressed one, a
 * SQLite file and a PostgreSQL schema. Real subprocesses (test:slow).
 */
import { assert, describe, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { writeSession } from "../helpers/bigSession.js"
import { availability, createSchema, dropSchema, sharedServer, snapshot, withClient } from "../helpers/postgres.js"
import { BIN, buildBundle, json, removeBundle, runCli } from "./helpers.js"

/** Far above any honest shutdown; only a command that ignores the signal reaches it. */
const HUNG_MS = 120_000

let dir: string
let bundle: string
let big: string
let small: string
let bigEvents: number

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-import-interrupt-"))
  bundle = await buildBundle("import-interrupt-test")
  big = path.join(dir, "big.jsonl")
  bigEvents = writeSession(big, "big", 150_000)
  small = path.join(dir, "keep.jsonl")
  writeSession(small, "keep", 30)
})

afterAll(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** Run `session-log import <store> big.jsonl`, send `signal` once `ready()` holds (polled), and wait. */
const interruptImport = (
  store: string,
  signal: NodeJS.Signals,
  ready: () => boolean | Promise<boolean>,
  source: ReadonlyArray<string> = [big]
) =>
  new Promise<{ readonly code: number | null; readonly signalled: boolean; readonly hung: boolean; readonly stderr: string }>(
    (resolve) => {
      const child = spawn(process.execPath, [BIN, "import", "--store", store, ...source], {
        cwd: dir,
        env: { ...process.env, SESSION_LOG_BUNDLE: bundle, NO_COLOR: "1" },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let stderr = ""
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
      let signalled = false
      let hung = false
      let done = false
      let timer: NodeJS.Timeout | undefined
      const poll = async () => {
        while (!done && !signalled) {
          if (await ready()) {
            signalled = true
            child.kill(signal)
            timer = setTimeout(() => {
              hung = true
              child.kill("SIGKILL")
            }, HUNG_MS)
            return
          }
          await new Promise((r) => setTimeout(r, 5))
        }
      }
      void poll()
      child.once("close", (code) => {
        done = true
        clearTimeout(timer)
        resolve({ code, signalled, hung, stderr })
      })
    }
  )

/** The files of a directory with their bytes (every name, hidden ones too). */
const files = (root: string): Record<string, string> =>
  Object.fromEntries(fs.readdirSync(root).sort().map((n) => [n, fs.readFileSync(path.join(root, n)).toString("base64")]))

/** Every row of the session tables of a SQLite store (read-only). */
const sqliteRows = (file: string): string => {
  const db = new Database(file, { readonly: true })
  try {
    return JSON.stringify(["sessions", "event_rows", "session_backups"].map((t) =>
      db.prepare(`SELECT * FROM ${t} ORDER BY 1, 2`).raw().all()
    ), (_k, v) => typeof v === "bigint" ? String(v) : Buffer.isBuffer(v) ? v.toString("base64") : v)
  } finally {
    db.close()
  }
}

/** Whether a SQLite store has committed rows of session `id`. */
const sqliteBigRows = (file: string, id = "big"): boolean => {
  try {
    const db = new Database(file, { readonly: true, fileMustExist: true })
    try {
      return (db.prepare("SELECT count(*) AS n FROM event_rows WHERE session_id = ?").get(id) as { n: number }).n > 0
    } finally {
      db.close()
    }
  } catch {
    return false
  }
}

/** What every backend must show after the interrupted import. */
const checkAfter = async (
  store: string,
  r: Awaited<ReturnType<typeof interruptImport>>,
  signal: NodeJS.Signals
) => {
  assert.isFalse(r.hung, "the import ended after the signal")
  const ids = json(await runCli(bundle, ["list", "--json", "--store", store], dir)).map((s: { id: string }) => s.id)
  const verify = await runCli(bundle, ["verify", "--json", "--store", store], dir)
  assert.strictEqual(verify.code, 0, verify.stdout + verify.stderr)
  if (r.code === 0 || /imported .*big\.jsonl \(kept\)/.test(r.stderr)) {
    // it finished before the signal reached it (or its session did): then the session is whole
    assert.deepStrictEqual(ids, ["keep", "big"])
    const shown = json(await runCli(bundle, ["show", "--json", "--store", store, "--session", "big", "--tail", "1"], dir))
    assert.strictEqual(shown[0].seq, bigEvents - 1)
    return false
  }
  assert.isTrue(r.signalled)
  assert.strictEqual(r.code, signal === "SIGINT" ? 130 : 143, r.stderr)
  assert.match(r.stderr, /import interrupted: no file was imported; .*big\.jsonl was not imported/, r.stderr)
  assert.deepStrictEqual(ids, ["keep"], "exactly the sessions the store held before")
  return true
}

describe("an interrupted import into an existing store leaves no partial session", () => {
  for (const layout of ["jsonl", "jsonlz"] as const) {
    it(`${layout} directory: the files are those of before, byte for byte; no temporary or lock file`, async () => {
      const root = path.join(dir, `store-${layout}`)
      const store = `${layout}:${root}`
      const first = await runCli(bundle, ["import", "--store", store, small], dir)
      assert.strictEqual(first.code, 0, first.stderr)
      const before = files(root)
      const name = layout === "jsonl" ? "big.jsonl" : "big.jsonlz"
      const r = await interruptImport(store, "SIGINT", () => fs.existsSync(path.join(root, name)))
      console.log(`${layout}: signalled ${r.signalled}, exit ${r.code}`)
      if (await checkAfter(store, r, "SIGINT")) assert.deepStrictEqual(files(root), before)
    })
  }

  it("SQLite file: the rows are those of before; SIGTERM exits 143", async () => {
    const db = path.join(dir, "store.db")
    const first = await runCli(bundle, ["import", "--store", db, small], dir)
    assert.strictEqual(first.code, 0, first.stderr)
    const before = sqliteRows(db)
    const r = await interruptImport(db, "SIGTERM", () => sqliteBigRows(db))
    console.log(`sqlite: signalled ${r.signalled}, exit ${r.code}`)
    if (await checkAfter(db, r, "SIGTERM")) {
      assert.strictEqual(sqliteRows(db), before)
      assert.deepStrictEqual(fs.readdirSync(dir).filter((n) => n.startsWith("store.db")).filter((n) => !/^store\.db(-wal|-shm)?$/.test(n)), [])
    }
  })

  it.skipIf(!availability().ok)("PostgreSQL schema: everything it holds is what it held before", async () => {
    const server = (await sharedServer()).url
    const { schema, url } = await createSchema(server)
    try {
      const first = await runCli(bundle, ["import", "--store", url, small], dir)
      assert.strictEqual(first.code, 0, first.stderr)
      const before = await snapshot(url)
      const r = await interruptImport(url, "SIGINT", () =>
        withClient(url, async (c) => (await c.query("SELECT count(*)::int AS n FROM event_rows WHERE session_id = 'big'")).rows[0].n > 0))
      console.log(`postgres: signalled ${r.signalled}, exit ${r.code}`)
      if (await checkAfter(url, r, "SIGINT")) assert.strictEqual(await snapshot(url), before)
    } finally {
      await dropSchema(server, schema)
    }
  })

  it("import --from claude-code into a SQLite store: the transcript's partial session is removed (SessionWriter.undoBegun)", async () => {
    const db = path.join(dir, "transcripts.db")
    const first = await runCli(bundle, ["import", "--store", db, small], dir)
    assert.strictEqual(first.code, 0, first.stderr)
    const before = sqliteRows(db)
    const transcript = path.join(dir, "chat.jsonl")
    writeTranscript(transcript, 20_000)
    const r = await interruptImport(db, "SIGINT", () => sqliteBigRows(db, "claude-code:chat-session"), ["--from", "claude-code", transcript])
    console.log(`transcript: signalled ${r.signalled}, exit ${r.code}`)
    assert.isFalse(r.hung, "the import ended after the signal")
    const ids = json(await runCli(bundle, ["list", "--json", "--store", db], dir)).map((s: { id: string }) => s.id)
    const verify = await runCli(bundle, ["verify", "--json", "--store", db], dir)
    assert.strictEqual(verify.code, 0, verify.stdout + verify.stderr)
    if (r.code === 0) return assert.deepStrictEqual(ids, ["keep", "claude-code:chat-session"], "it finished before the signal: the session is whole")
    assert.strictEqual(r.code, 130, r.stderr)
    assert.match(r.stderr, /the partial session "claude-code:chat-session" was removed/)
    assert.deepStrictEqual(ids, ["keep"], "exactly the sessions the store held before")
    assert.strictEqual(sqliteRows(db), before)
  })
})

/** A Claude Code transcript of `turns` turns (a prompt, a call, a 1 KiB result, an answer each). */
const writeTranscript = (file: string, turns: number) => {
  const base = { isSidechain: false, userType: "external", cwd: "/home/ada/chat", sessionId: "chat-session", version: "2.1.39" }
  const payload = "y".repeat(1024)
  const lines: Array<string> = []
  let parent: string | null = null
  const rec = (fields: Record<string, unknown>) => {
    const uuid = `u${lines.length + 1}`
    lines.push(JSON.stringify({ ...base, parentUuid: parent, uuid, timestamp: new Date(Date.UTC(2026, 0, 1) + lines.length * 1000).toISOString(), ...fields }))
    parent = uuid
  }
  for (let i = 0; i < turns; i++) {
    rec({ type: "user", message: { role: "user", content: `prompt ${i}` } })
    rec({ type: "assistant", message: { id: `msg_${i}`, role: "assistant", model: "claude-x", content: [{ type: "tool_use", id: `toolu_${i}`, name: "Read", input: { file_path: `/f${i}` } }] } })
    rec({ type: "user", message: { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${i}`, content: payload }] } })
    rec({ type: "assistant", message: { id: `msg_${i}b`, role: "assistant", model: "claude-x", content: [{ type: "text", text: `done ${i}` }] } })
  }
  fs.writeFileSync(file, lines.join("\n") + "\n")
}
