/**
 * An interrupt ends a command and leaves nothing behind (issue 18): SIGTERM during `export --out`
 * of a large session stops it, the target is not created and its temporary file is removed; a
 * SIGINT during `verify` ends it too. Real subprocesses; a command still running long after the
 * signal is killed and fails the test (a hang detector, not a timing assertion).
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { writeSession } from "../helpers/bigSession.js"
import { BIN, buildBundle, removeBundle } from "./helpers.js"

/** Far above any honest shutdown; only a command that ignores the signal reaches it. */
const HUNG_MS = 120_000

let dir: string
let bundle: string
let big: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-interrupt-"))
  bundle = await buildBundle("interrupt-test")
  big = path.join(dir, "big.jsonl")
  writeSession(big, "big", 400_000)
})

afterAll(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/**
 * Start `session-log <args>`, send `signal` once `ready()` holds (polled), and wait for the exit.
 * `signalled` is false when the command ended before it could be signalled.
 */
const interrupt = (args: ReadonlyArray<string>, signal: NodeJS.Signals, ready: (pid: number) => boolean) =>
  new Promise<
    {
      readonly code: number | null
      readonly signalled: boolean
      readonly hung: boolean
      readonly stdout: string
      readonly stderr: string
    }
  >((resolve) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: dir,
      env: { ...process.env, SESSION_LOG_BUNDLE: bundle, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    let signalled = false
    let hung = false
    let timer: NodeJS.Timeout | undefined
    const poll = setInterval(() => {
      if (!signalled && child.pid !== undefined && ready(child.pid)) {
        signalled = true
        child.kill(signal)
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
      resolve({ code, signalled, hung, stdout, stderr })
    })
  })

/**
 * Whether process `pid` has `file` open (Linux: /proc/<pid>/fd), i.e. the command is running
 * (its signal handlers are installed before it starts) and reading the file: a signal then
 * reaches the command, not the default action that kills a process still starting up.
 */
const reading = (pid: number, file: string): boolean => {
  try {
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === file
      } catch {
        return false
      }
    })
  } catch {
    return false
  }
}

describe("an interrupt ends a command and leaves nothing behind", () => {
  it("SIGTERM during export --out: no target, no temporary file", async () => {
    const out = path.join(dir, "out.jsonl")
    // signalled once the export writes its temporary file (after the validating read)
    const writing = () => fs.readdirSync(dir).some((name) => name.startsWith(".out.jsonl.export-"))
    const r = await interrupt(["export", "--json", big, "--out", out], "SIGTERM", writing)
    console.log(`export: signalled while writing: ${r.signalled}, exit ${r.code}`)
    assert.isFalse(r.hung, "the command ended after the signal")
    if (r.signalled) {
      assert.notStrictEqual(r.code, 0)
      assert.isFalse(fs.existsSync(out), "the target was not published")
    } else {
      // it finished before it could be interrupted: then the target is whole
      assert.strictEqual(fs.statSync(out).size, fs.statSync(big).size)
    }
    assert.deepStrictEqual(fs.readdirSync(dir).filter((name) => name.includes(".export-")), [], "no temporary file is left")
  })

  it("SIGINT during verify of a large file ends it", async () => {
    const r = await interrupt(["verify", "--json", big], "SIGINT", (pid) => reading(pid, big))
    assert.isFalse(r.hung, "the command ended after the signal")
    // interrupted: 130 (128 + SIGINT), as a shell reports it; 0 only if it finished first
    assert.include([130, 0], r.code, r.stderr)
  })

  it("SIGTERM during verify exits 143", async () => {
    const r = await interrupt(["verify", "--json", big], "SIGTERM", (pid) => reading(pid, big))
    assert.isFalse(r.hung, "the command ended after the signal")
    assert.include([143, 0], r.code, r.stderr)
  })

  it("SIGINT during a fork's write: the fork lands, is reported and the child is whole", async () => {
    const child = path.join(dir, "kid.jsonl")
    // signalled once the child's temporary file exists (the write has begun, it is not yet published)
    const writing = () => fs.readdirSync(dir).some((name) => name.startsWith(".kid.") && name.endsWith(".tmp"))
    const r = await interrupt(["fork", "--json", big, "--child", "kid"], "SIGINT", writing)
    console.log(`fork: signalled while writing: ${r.signalled}, exit ${r.code}`)
    assert.isFalse(r.hung, "the command ended after the signal")
    assert.strictEqual(JSON.parse(r.stdout).id, "kid", "the fork is reported on stdout")
    if (r.signalled && r.code !== 0) {
      assert.strictEqual(r.code, 130)
      assert.match(r.stderr, /the write landed/, `stderr: ${r.stderr}`)
    }
    const lines = fs.readFileSync(child, "utf8").trimEnd().split("\n")
    assert.strictEqual(lines.length, 1 + fs.readFileSync(big, "utf8").trimEnd().split("\n").length, "the child holds its header and every inherited event")
    fs.rmSync(child)
  })
})
