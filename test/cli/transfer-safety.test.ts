/**
 * Data safety of `export` and `import` when a run is interrupted or fails part-way, and of
 * `export --out --force` on targets that are not plain files: nothing of an undone run remains,
 * nothing that was there before is touched. Real subprocesses, signalled at points the test
 * observes on disk (a file appearing or growing); a command still running long after the signal
 * is killed and fails the test (a hang detector, not a timing assertion).
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { writeSession } from "../helpers/bigSession.js"
import { BIN, buildBundle, closedTurnLog, json, removeBundle, type Run, runCli } from "./helpers.js"

/** Far above any honest shutdown; only a command that ignores the signal reaches it. */
const HUNG_MS = 120_000
/** Events of each large session: long enough to be caught mid-write when polled every 5 ms. */
const BIG_EVENTS = 200_000

let dir: string
let bundle: string
let big1: string
let big2: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-transfer-"))
  bundle = await buildBundle("transfer-safety-test")
  big1 = path.join(dir, "big1.jsonl")
  big2 = path.join(dir, "big2.jsonl")
  writeSession(big1, "big1", BIG_EVENTS)
  writeSession(big2, "big2", BIG_EVENTS)
})

afterAll(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

const cli = (args: ReadonlyArray<string>, cwd: string = dir): Promise<Run> => runCli(bundle, args, cwd)

/** A fresh directory under the test root. */
const fresh = (name: string) => {
  const p = path.join(dir, name)
  fs.mkdirSync(p, { recursive: true })
  return p
}

/** Type, size, link count and (for files) bytes of everything under `root`, by relative path (links not followed). */
const snapshot = (root: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name)
      const st = fs.lstatSync(p)
      const rel = path.relative(root, p)
      if (entry.isDirectory()) {
        out[rel] = "dir"
        walk(p)
      } else if (entry.isSymbolicLink()) out[rel] = `link -> ${fs.readlinkSync(p)}`
      else if (entry.isFile()) out[rel] = `file nlink=${st.nlink} ${fs.readFileSync(p).toString("base64")}`
      else out[rel] = `special mode=${st.mode}`
    }
  }
  walk(root)
  return out
}

/** The size of a file, 0 when it is not there. */
const sizeOf = (p: string) => (fs.existsSync(p) ? fs.statSync(p).size : 0)

/**
 * Start `session-log <args>`, send SIGINT once `ready()` holds (polled; `beforeSignal` runs just before), and wait for the exit.
 * `signalled` is false when the command ended before it could be signalled.
 */
const interrupt = (
  args: ReadonlyArray<string>,
  ready: () => boolean,
  options: { readonly cwd?: string; readonly beforeSignal?: () => void } = {}
) =>
  new Promise<{ readonly code: number | null; readonly signalled: boolean; readonly hung: boolean; readonly stderr: string }>(
    (resolve) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        cwd: options.cwd ?? dir,
        env: { ...process.env, SESSION_LOG_BUNDLE: bundle, NO_COLOR: "1" },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let stderr = ""
      child.stderr.on("data", (d) => (stderr += d))
      let signalled = false
      let hung = false
      let timer: NodeJS.Timeout | undefined
      const poll = setInterval(() => {
        if (!signalled && ready()) {
          signalled = true
          options.beforeSignal?.()
          child.kill("SIGINT")
          // hung: still running HUNG_MS after the signal (a slow machine only delays the signal)
          timer = setTimeout(() => {
            hung = true
            child.kill("SIGKILL")
          }, HUNG_MS)
        }
      }, 5)
      child.once("close", (code) => {
        clearInterval(poll)
        clearTimeout(timer)
        resolve({ code, signalled, hung, stderr })
      })
    }
  )

describe("SIGINT during import leaves nothing of the run", () => {
  it("into a new SQLite file: the file (and its -wal/-shm) is removed again", async () => {
    const root = fresh("imp-sqlite")
    const db = path.join(root, "new.db")
    // signalled once a batch of the first session is being written (the file and its WAL grow)
    const writing = () => sizeOf(db) + sizeOf(`${db}-wal`) > 1 << 20
    const r = await interrupt(["import", "--json", "--store", db, big1, big2], writing)
    assert.isFalse(r.hung, "the command ended after the signal")
    if (!r.signalled) return assert.strictEqual(r.code, 0, "it finished before it could be interrupted")
    assert.notStrictEqual(r.code, 0)
    assert.deepStrictEqual(fs.readdirSync(root), [], `nothing is left: ${r.stderr}`)
  })

  it("into a new JSONL directory (with a missing parent): the directories it created are removed again", async () => {
    const root = fresh("imp-jsonl")
    const store = path.join(root, "a", "sessions")
    const writing = () => sizeOf(path.join(store, "big1.jsonl")) > 1 << 20
    const r = await interrupt(["import", "--json", "--store", `jsonl:${store}`, big1, big2], writing)
    assert.isFalse(r.hung, "the command ended after the signal")
    if (!r.signalled) return assert.strictEqual(r.code, 0, "it finished before it could be interrupted")
    assert.notStrictEqual(r.code, 0)
    assert.deepStrictEqual(fs.readdirSync(root), [], `nothing is left: ${r.stderr}`)
  })

  it("into an existing store: its sessions are untouched and the partly written session is removed (named on stderr)", async () => {
    const root = fresh("imp-existing")
    const store = path.join(root, "store")
    const keep = path.join(root, "keep.jsonl")
    fs.writeFileSync(keep, closedTurnLog("keep"))
    assert.strictEqual((await cli(["import", "--json", "--store", `jsonl:${store}`, keep])).code, 0)
    const before = snapshot(store)
    const writing = () => sizeOf(path.join(store, "big1.jsonl")) > 1 << 20
    const r = await interrupt(["import", "--json", "--store", `jsonl:${store}`, big1, big2], writing)
    assert.isFalse(r.hung, "the command ended after the signal")
    if (!r.signalled) return assert.strictEqual(r.code, 0, "it finished before it could be interrupted")
    assert.notStrictEqual(r.code, 0)
    assert.strictEqual(snapshot(store)["keep.jsonl"], before["keep.jsonl"], "the stored session keeps every byte")
    // no partial session is left (issue 27): a file finished before the signal is kept whole
    const after = snapshot(store)
    if (/imported .*big1\.jsonl \(kept\)/.test(r.stderr)) {
      assert.match(r.stderr, /big2\.jsonl was not imported/)
      assert.isDefined(after["big1.jsonl"])
      delete after["big1.jsonl"]
    } else {
      assert.match(r.stderr, /import interrupted: no file was imported; .*big1\.jsonl was not imported/)
    }
    assert.deepStrictEqual(after, before)
  })
})

/** Run `file args` in `cwd` with the CLI environment of `runCli` (for a `sh -c "ulimit ..."` around it). */
const runWith = (file: string, args: ReadonlyArray<string>, cwd: string) =>
  new Promise<Run>((resolve) => {
    const child = spawn(file, args, { cwd, env: { ...process.env, SESSION_LOG_BUNDLE: bundle, NO_COLOR: "1" } })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    child.once("close", (code) => resolve({ code, stdout, stderr }))
  })

/** A JSONL store holding a small session and the two large ones (hard links: the ids match the names). */
const bigStore = (name: string) => {
  const store = fresh(name)
  fs.writeFileSync(path.join(store, "a.jsonl"), closedTurnLog("a"))
  fs.linkSync(big1, path.join(store, "big1.jsonl"))
  fs.linkSync(big2, path.join(store, "big2.jsonl"))
  return store
}

/** A temporary export file in `d`. */
const exportTemp = (d: string) => fs.existsSync(d) && fs.readdirSync(d).some((n) => n.includes(".export-"))

describe("a whole-store export --out <dir> that is interrupted or fails removes exactly what it created", () => {
  it("SIGINT after the first file is published: the files and every directory it created are removed", async () => {
    const store = bigStore("exp-int-store")
    const root = fresh("exp-int")
    const out = path.join(root, "out", "a", "b")
    // a.jsonl is published first; signalled while big1.jsonl is being written
    const writing = () => fs.existsSync(path.join(out, "a.jsonl")) && exportTemp(out)
    const r = await interrupt(["export", "--json", "--store", `jsonl:${store}`, "--out", out], writing)
    assert.isFalse(r.hung, "the command ended after the signal")
    if (!r.signalled) return assert.strictEqual(r.code, 0, "it finished before it could be interrupted")
    assert.notStrictEqual(r.code, 0)
    assert.deepStrictEqual(fs.readdirSync(root), [], `nothing is left: ${r.stderr}`)
  })

  it("a write that fails (file size limit): its files and directories go, a directory that was there stays as it was", async () => {
    const store = bigStore("exp-fail-store")
    const root = fresh("exp-fail")
    fs.mkdirSync(path.join(root, "pre"))
    fs.writeFileSync(path.join(root, "pre", "mine.txt"), "mine\n")
    const before = snapshot(root)
    // RLIMIT_FSIZE of 4 MiB: a.jsonl is written, big1.jsonl fails with EFBIG
    const r = await runWith(
      "sh",
      ["-c", `ulimit -f 4096 && exec "$0" "$@"`, process.execPath, BIN, "export", "--json", "--store", `jsonl:${store}`, "--out", "pre/x/y"],
      root
    )
    assert.strictEqual(r.code, 2, r.stderr)
    assert.strictEqual(json(r).error._tag, "StoreFailure")
    assert.deepStrictEqual(snapshot(root), before)
  })

  it("a directory it created that now holds a file it did not write is left, with that file, and named", async () => {
    const store = bigStore("exp-foreign-store")
    const root = fresh("exp-foreign")
    const out = path.join(root, "x", "y")
    const foreign = path.join(root, "x", "theirs.txt")
    const writing = () => exportTemp(out)
    const r = await interrupt(["export", "--json", "--store", `jsonl:${store}`, "--out", out], writing, {
      beforeSignal: () => fs.writeFileSync(foreign, "theirs\n")
    })
    assert.isFalse(r.hung, "the command ended after the signal")
    if (!r.signalled) return assert.strictEqual(r.code, 0, "it finished before it could be interrupted")
    assert.deepStrictEqual(snapshot(root), { x: "dir", "x/theirs.txt": `file nlink=1 ${Buffer.from("theirs\n").toString("base64")}` })
    assert.include(r.stderr, `left ${path.join(root, "x")}`)
  })
})

describe("export --out --force writes a regular file only, never replacing another kind of entry", () => {
  const setup = (name: string) => {
    const root = fresh(name)
    const source = path.join(root, "s.jsonl")
    fs.writeFileSync(source, closedTurnLog("s"))
    return { root, source }
  }

  it("a symbolic link is followed: the file it points to is written, the link stays", async () => {
    const { root, source } = setup("force-link")
    fs.writeFileSync(path.join(root, "target.txt"), "precious\n")
    fs.symlinkSync("target.txt", path.join(root, "link.jsonl"))
    const r = await cli(["export", "--json", source, "--out", "link.jsonl", "--force"], root)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.isTrue(fs.lstatSync(path.join(root, "link.jsonl")).isSymbolicLink(), "the link stays a link")
    assert.strictEqual(fs.readFileSync(path.join(root, "target.txt"), "utf8"), closedTurnLog("s"))
  })

  it("a FIFO or a socket is refused even with --force (exit 2, nothing changed)", async () => {
    const { root, source } = setup("force-special")
    execFileSync("mkfifo", [path.join(root, "fifo.jsonl")])
    const server = net.createServer()
    await new Promise<void>((resolve) => server.listen(path.join(root, "sock.jsonl"), resolve))
    try {
      const before = snapshot(root)
      for (const out of ["fifo.jsonl", "sock.jsonl"]) {
        const r = await cli(["export", "--json", source, "--out", out, "--force"], root)
        assert.strictEqual(r.code, 2, r.stderr)
        assert.strictEqual(json(r).error._tag, "UsageError")
        assert.match(json(r).error.message, /not a regular file/)
      }
      assert.deepStrictEqual(snapshot(root), before)
    } finally {
      server.close()
    }
  })

  it("a file with other hard links is refused even with --force (the links are not split)", async () => {
    const { root, source } = setup("force-hardlink")
    fs.writeFileSync(path.join(root, "hard.txt"), "precious\n")
    fs.linkSync(path.join(root, "hard.txt"), path.join(root, "hard.jsonl"))
    const before = snapshot(root)
    const r = await cli(["export", "--json", source, "--out", "hard.jsonl", "--force"], root)
    assert.strictEqual(r.code, 2, r.stderr)
    assert.match(json(r).error.message, /2 hard links/)
    assert.deepStrictEqual(snapshot(root), before)
  })
})

describe("a whole-store export into a store's directory never stores a session under two names", () => {
  it("jsonlz:z --out z: <id>.jsonlz counts as an existing target; --force is refused too", async () => {
    const root = fresh("two-names")
    fs.writeFileSync(path.join(root, "s.jsonl"), closedTurnLog("s"))
    assert.strictEqual((await cli(["import", "--json", "--store", "jsonlz:z", "s.jsonl"], root)).code, 0)
    const before = snapshot(path.join(root, "z"))
    const plain = await cli(["export", "--json", "--store", "jsonlz:z", "--out", "z"], root)
    assert.strictEqual(plain.code, 2, plain.stderr)
    assert.strictEqual(json(plain).error._tag, "OutputExists")
    assert.include(json(plain).error.message, path.join("z", "s.jsonlz"))
    const forced = await cli(["export", "--json", "--store", "jsonlz:z", "--out", "z", "--force"], root)
    assert.strictEqual(forced.code, 2, forced.stderr)
    assert.strictEqual(json(forced).error._tag, "UsageError")
    assert.match(json(forced).error.message, /two names/)
    assert.deepStrictEqual(snapshot(path.join(root, "z")), before)
    assert.strictEqual((await cli(["list", "--json", "--store", "jsonlz:z"], root)).code, 0)
  })
})

describe("import of a session without events", () => {
  it("§7.1: a header-only file is not stored (a store keeps a session from its first event); the count says so and stderr names it", async () => {
    const root = fresh("import-empty")
    fs.writeFileSync(path.join(root, "s.jsonl"), closedTurnLog("s"))
    fs.writeFileSync(path.join(root, "e.jsonl"), JSON.stringify({ type: "session", version: 1, id: "e", createdAt: 1 }) + "\n")
    const r = await cli(["import", "--json", "--store", "jsonl:st", "s.jsonl", "e.jsonl"], root)
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(json(r), { sessions: 1, events: 3 })
    assert.match(r.stderr, /e\.jsonl holds session "e" without events; a session is stored from its first event, so it was not stored/)
    assert.deepStrictEqual(json(await cli(["list", "--json", "--store", "jsonl:st"], root)).map((s: { id: string }) => s.id), ["s"])
  })
})
