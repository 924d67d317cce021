/**
 * The viewer's slow checks through the binary (test:slow only: processes and a big session):
 * `view --open` runs the opener (SESSION_LOG_OPENER, here a script recording its argument) with
 * the URL it prints, and `export --format html|markdown` of a 300,000-event session (52 MiB of
 * JSONL) in a 96 MB V8 heap: the exports stream, they never hold the log.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { BIN, buildBundle, removeBundle } from "../cli/helpers.js"
import { writeSession } from "../helpers/bigSession.js"
import { DEMO_FILE, startViewer } from "./helpers.js"

let bundle: string
let dir: string

beforeAll(async () => {
  bundle = await buildBundle("view-slow")
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "view-slow-"))
})

afterAll(() => {
  removeBundle(bundle)
  fs.rmSync(dir, { recursive: true, force: true })
})

/** Run the binary with a V8 heap of `heapMb`. */
const runWithHeap = (heapMb: number, args: ReadonlyArray<string>) =>
  new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      [`--max-old-space-size=${heapMb}`, BIN, ...args],
      { cwd: dir, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: "1", SESSION_LOG_BUNDLE: bundle } },
      (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
    )
  )

describe("session-log view --open", () => {
  it("runs the opener with the URL it prints", async () => {
    const recorded = path.join(dir, "opened.txt")
    const recorder = path.join(dir, "opener.sh")
    fs.writeFileSync(recorder, `#!/bin/sh\nprintf '%s' "$1" > "${recorded}.tmp" && mv "${recorded}.tmp" "${recorded}"\n`, { mode: 0o755 })
    const store = path.join(dir, "open-store")
    fs.mkdirSync(store)
    fs.copyFileSync(DEMO_FILE, path.join(store, "demo-session.jsonl"))
    const viewer = await startViewer(bundle, ["--store", `jsonl:${store}`, "--session", "demo-session", "--open"], dir, {
      SESSION_LOG_OPENER: recorder
    })
    try {
      // a condition, not a time: the opener has written its argument
      while (!fs.existsSync(recorded)) await new Promise((r) => setTimeout(r, 50))
      assert.strictEqual(fs.readFileSync(recorded, "utf8"), viewer.url)
      assert.match(viewer.url, /\?token=[0-9a-f]{48}#session=demo-session$/)
    } finally {
      await viewer.stop()
    }
  }, 120_000)
})

describe("export of a big session", () => {
  it("html and markdown of 300,000 events in a 96 MB heap", async () => {
    const store = path.join(dir, "big-store")
    fs.mkdirSync(store)
    writeSession(path.join(store, "big.jsonl"), "big", 300_000)
    const lastQuestion = (file: string) => {
      const size = fs.statSync(file).size
      const fd = fs.openSync(file, "r")
      const tail = Buffer.alloc(Math.min(size, 1 << 20))
      fs.readSync(fd, tail, 0, tail.length, size - tail.length)
      fs.closeSync(fd)
      return Math.max(...[...tail.toString("utf8").matchAll(/question (\d+)/g)].map((m) => Number(m[1])))
    }
    const last = lastQuestion(path.join(store, "big.jsonl"))
    assert.isAbove(last, 1_000)
    for (const format of ["html", "markdown"]) {
      const out = path.join(dir, `big.${format}`)
      const r = await runWithHeap(96, ["export", "--store", `jsonl:${store}`, "--session", "big", "--format", format, "--out", out])
      assert.strictEqual(r.code, 0, r.stderr)
      // the HTML holds every event, the Markdown the messages (not the streamed chunks)
      assert.isAbove(fs.statSync(out).size, (format === "html" ? 40 : 4) * 2 ** 20, format)
      // the log's last user message is in the file: the export reached its end
      assert.strictEqual(lastQuestion(out), last, format)
    }
  }, 600_000)
})
