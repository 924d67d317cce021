/**
 * Memory stays bounded by what a command must hold, not by the session's length (SPEC §12, issue
 * 18): `verify`, `show --json`, `export` and `import` of generated sessions of 100,000 and
 * 1,000,000 events (and `list` of the imported store) run in subprocesses whose peak RSS (read by
 * the process itself at exit) stays under one fixed bound for both lengths (a whole-log read of
 * the 1M session needs well over a gigabyte). The outputs are checked too: the counts, the
 * exported bytes, the imported session.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { writeSession } from "../helpers/bigSession.js"
import { BIN, buildBundle, removeBundle } from "./helpers.js"

/**
 * The peak RSS every streamed command stays under, whatever the session's length: the process
 * and its garbage (collection timing moves a peak by some 200 MB); a whole read of the 1M-event
 * session takes well over a gigabyte.
 */
const RSS_BOUND_MB = 512

let bundle: string
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "resources-"))
const probe = path.join(dir, "rss-probe.cjs")

beforeAll(async () => {
  bundle = await buildBundle("resources-test")
  // written at exit by the command's own process: its peak resident set in kilobytes
  fs.writeFileSync(
    probe,
    "process.on('exit', () => require('node:fs').writeFileSync(process.env.RSS_OUT, String(process.resourceUsage().maxRSS)))\n"
  )
}, 120_000)

afterAll(() => {
  removeBundle(bundle)
  fs.rmSync(dir, { recursive: true, force: true })
})

/** Run `session-log <args>` with stdout to a file; its exit code and peak RSS in MB. */
const run = (args: ReadonlyArray<string>, stdout: string): Promise<{ code: number | null; rssMb: number; stderr: string }> =>
  new Promise((resolve, reject) => {
    const rssOut = path.join(dir, `rss-${process.hrtime.bigint()}`)
    const out = fs.openSync(stdout, "w")
    const child = spawn(process.execPath, ["--require", probe, BIN, ...args], {
      cwd: dir,
      env: { ...process.env, NO_COLOR: "1", SESSION_LOG_BUNDLE: bundle, RSS_OUT: rssOut },
      stdio: ["ignore", out, "pipe"]
    })
    let stderr = ""
    child.stderr?.on("data", (d) => (stderr += String(d)))
    child.on("error", reject)
    child.on("close", (code) => {
      fs.closeSync(out)
      const kb = Number(fs.readFileSync(rssOut, "utf8"))
      resolve({ code, rssMb: Math.round(kb / 1024), stderr })
    })
  })

/** The peak RSS of verify, show --json, export and import of one generated session. */
const measure = async (events: number) => {
  const id = `big-${events}`
  const file = path.join(dir, `${id}.jsonl`)
  const count = writeSession(file, id, events)
  const rss: Record<string, number> = {}

  const verify = await run(["verify", "--json", file], path.join(dir, "verify.json"))
  assert.strictEqual(verify.code, 0, verify.stderr)
  const report = JSON.parse(fs.readFileSync(path.join(dir, "verify.json"), "utf8"))
  assert.strictEqual(report.ok, true)
  assert.strictEqual(report.events, count)
  rss.verify = verify.rssMb

  const shown = path.join(dir, "show.json")
  const show = await run(["show", "--json", file], shown)
  assert.strictEqual(show.code, 0, show.stderr)
  // the array is whole: its first and last elements are the log's first and last events
  const head = fs.readFileSync(shown, "utf8").slice(0, 40)
  assert.isTrue(head.startsWith("[{\"type\":\"turn/start\",\"seq\":0,"), head)
  assert.isTrue(fs.statSync(shown).size > fs.statSync(file).size * 0.9)
  rss.show = show.rssMb
  fs.rmSync(shown)

  const exported = path.join(dir, `${id}-export.jsonl`)
  const exp = await run(["export", "--json", file, "--out", exported], path.join(dir, "export.json"))
  assert.strictEqual(exp.code, 0, exp.stderr)
  assert.isTrue(fs.readFileSync(exported).equals(fs.readFileSync(file)), "export writes the log as it is stored")
  rss.export = exp.rssMb
  fs.rmSync(exported)

  const store = path.join(dir, `${id}.db`)
  const imp = await run(["import", "--json", "--store", store, file], path.join(dir, "import.json"))
  assert.strictEqual(imp.code, 0, imp.stderr)
  assert.deepStrictEqual(JSON.parse(fs.readFileSync(path.join(dir, "import.json"), "utf8")), { sessions: 1, events: count })
  rss.import = imp.rssMb
  const listed = await run(["list", "--json", "--store", store], path.join(dir, "list.json"))
  assert.strictEqual(listed.code, 0, listed.stderr)
  assert.strictEqual(JSON.parse(fs.readFileSync(path.join(dir, "list.json"), "utf8"))[0].events, count)
  rss.list = listed.rssMb
  fs.rmSync(store)
  fs.rmSync(file)
  return rss
}

describe("streamed commands: memory independent of the session's length", () => {
  it("verify, show --json, export, import and list of 100k and 1M events stay under one RSS bound", async () => {
    const small = await measure(100_000)
    const large = await measure(1_000_000)
    // the figures, for the README
    console.log(`peak RSS MB at 100k events: ${JSON.stringify(small)}; at 1M events: ${JSON.stringify(large)}`)
    for (const command of Object.keys(small)) {
      assert.isBelow(small[command], RSS_BOUND_MB, `${command} of 100k events: ${small[command]} MB`)
      assert.isBelow(large[command], RSS_BOUND_MB, `${command} of 1M events: ${large[command]} MB`)
    }
  }, 900_000)
})
