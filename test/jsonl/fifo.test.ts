/**
 * A FIFO named `*.jsonl` in a JSONL store directory (issue 18): opening it for reading would block
 * until a writer appears, so the store never opens what is not a regular file. `list` skips it,
 * `show` of its session is a tagged refusal (exit 2), `verify` of the store reports it unreadable,
 * and each command ends on its own. Real FIFOs (mkfifo) and the binary as a subprocess; a command
 * that hangs is killed after a generous bound and fails the test.
 */
import { assert, describe, it } from "@effect/vitest"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { BIN, buildBundle, closedTurnLog, removeBundle } from "../cli/helpers.js"

const SLOW = { timeout: 120_000 }
/** Far above any honest run of a command; only a blocked one reaches it. */
const HUNG_MS = 120_000

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-fifo-"))
  bundle = await buildBundle("jsonl-fifo-test")
})
afterAll(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** Run the binary; a run still going after HUNG_MS is killed and reported as hung. */
const run = (args: ReadonlyArray<string>) =>
  new Promise<{ readonly code: number | null; readonly stdout: string; readonly hung: boolean }>((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: { ...process.env, SESSION_LOG_BUNDLE: bundle, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let hung = false
    child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
    child.stderr.resume()
    const timer = setTimeout(() => {
      hung = true
      child.kill("SIGKILL")
    }, HUNG_MS)
    child.once("exit", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, hung })
    })
  })

/** A JSONL store with one valid session and a FIFO named like a session file. */
const storeWithFifo = async (name: string) => {
  const root = path.join(dir, name)
  fs.mkdirSync(root)
  fs.writeFileSync(path.join(dir, `${name}-ok.jsonl`), closedTurnLog("ok"))
  const imported = await run(["import", "--json", "--store", `jsonl:${root}`, path.join(dir, `${name}-ok.jsonl`)])
  assert.strictEqual(imported.code, 0, imported.stdout)
  execFileSync("mkfifo", [path.join(root, "evil.jsonl")])
  return `jsonl:${root}`
}

describe("a FIFO named *.jsonl in a JSONL store never blocks a command", () => {
  it("list skips the FIFO and lists the other sessions", SLOW, async () => {
    const store = await storeWithFifo("list")
    const r = await run(["list", "--json", "--store", store])
    assert.isFalse(r.hung, "list ended")
    assert.strictEqual(r.code, 0)
    assert.deepStrictEqual(JSON.parse(r.stdout).map((h: any) => h.id), ["ok"])
  })

  it("show of the FIFO's session: StoreFailure (exit 2), never a read of the FIFO", SLOW, async () => {
    const store = await storeWithFifo("show")
    const r = await run(["show", "--json", "--store", store, "--session", "evil"])
    assert.isFalse(r.hung, "show ended")
    assert.strictEqual(r.code, 2)
    const doc = JSON.parse(r.stdout)
    assert.strictEqual(doc.error._tag, "StoreFailure")
    assert.match(doc.error.message, /not a regular file/)
  })

  it("verify of the store reports the FIFO as unreadable with a tag and checks the other sessions", SLOW, async () => {
    const store = await storeWithFifo("verify")
    const r = await run(["verify", "--json", "--store", store])
    assert.isFalse(r.hung, "verify ended")
    assert.strictEqual(r.code, 2)
    const reports = JSON.parse(r.stdout)
    assert.deepStrictEqual(reports.find((x: any) => x.id === "ok")?.ok, true)
    const evil = reports.find((x: any) => x.id !== "ok")
    assert.strictEqual(evil?.ok, false)
    assert.isString(evil?.error?._tag)
  })
})
