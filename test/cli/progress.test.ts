/**
 * Progress on long work (issue 27): `verify`, `show`, `export`, `import`, `repair` and `migrate` of a session show the events and
 * bytes read, the rate and (for a file) the time left on stderr for people at a terminal; nothing
 * when stderr is piped or with `--json`. Terminal mode is forced with the documented
 * `SESSION_LOG_PROGRESS=1` (a terminal draws only after half a second, which a test cannot rely on).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { writeSession } from "../helpers/bigSession.js"
import { buildBundle, json, removeBundle, runCli } from "./helpers.js"

const SLOW = { timeout: 600_000 }

let dir: string
let bundle: string
let file: string
let events: number

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-progress-"))
  bundle = await buildBundle("progress-test")
  file = path.join(dir, "big.jsonl")
  events = writeSession(file, "big", 20_000)
}, 600_000)
afterAll(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

const forced = { NO_COLOR: "1", SESSION_LOG_PROGRESS: "1" }
const progressLine = (label: string) =>
  new RegExp(`${label}: [\\d,]+ events, [\\d.]+ MB of [\\d.]+ MB, [\\d.]+ MB/s, \\d+(m\\d+)?s left`)

describe("progress on stderr", () => {
  it("verify, show and export of a file: events, bytes, rate and time left; the output is unchanged", SLOW, async () => {
    const total = events.toLocaleString("en-US")
    const verify = await runCli(bundle, ["verify", file], dir, forced)
    assert.strictEqual(verify.code, 0, verify.stderr)
    assert.match(verify.stderr, progressLine("verify"))
    assert.include(verify.stderr, `verify: ${total} events`, "the final line counts every event")
    assert.match(verify.stdout, /^valid /)

    const show = await runCli(bundle, ["show", "--tail", "2", file], dir, forced)
    assert.strictEqual(show.code, 0, show.stderr)
    assert.match(show.stderr, progressLine("show"))
    assert.strictEqual(show.stdout.trim().split("\n").length, 3, "the header and two events")

    const exported = await runCli(bundle, ["export", file], dir, forced)
    assert.strictEqual(exported.code, 0, exported.stderr)
    assert.match(exported.stderr, progressLine("export"))
    assert.strictEqual(exported.stdout, fs.readFileSync(file, "utf8"), "stdout is the log, untouched by progress")

    const store = `jsonl:${path.join(dir, "imported")}`
    const imported = await runCli(bundle, ["import", "--store", store, file], dir, forced)
    assert.strictEqual(imported.code, 0, imported.stderr)
    assert.match(imported.stderr, progressLine(`import ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`))
    assert.include(imported.stderr, `import ${file}: ${total} events`, "the validating read counts every event")
    assert.match(imported.stdout, /imported 1 session\(s\), [\d]+ events/)
  })

  it("repair and migrate: the read of the session shows events, bytes and rate; the result is unchanged", SLOW, async () => {
    const total = events.toLocaleString("en-US")
    const copy = path.join(dir, "copy.jsonl")
    fs.copyFileSync(file, copy)
    const storeLine = (label: string) => new RegExp(`${label}: [\\d,]+ events, [\\d.]+ MB, [\\d.]+ MB/s`)

    const repaired = await runCli(bundle, ["repair", copy], dir, forced)
    assert.strictEqual(repaired.code, 0, repaired.stderr)
    assert.match(repaired.stderr, storeLine("repair"))
    assert.include(repaired.stderr, `repair: ${total} events`, "the final line counts every event")
    const quiet = await runCli(bundle, ["repair", "--json", copy], dir, forced)
    assert.strictEqual(quiet.stderr, "", "repair --json: no progress")
    assert.deepStrictEqual(json(quiet), json(await runCli(bundle, ["repair", "--json", copy], dir, { SESSION_LOG_PROGRESS: "0" })))

    const migrated = await runCli(bundle, ["migrate", copy], dir, forced)
    assert.strictEqual(migrated.code, 0, migrated.stderr)
    assert.match(migrated.stderr, storeLine("migrate"))
    assert.include(migrated.stderr, `migrate: ${total} events`)
    assert.match(migrated.stdout, /current/)
  })

  it("nothing with --json, nor when stderr is not a terminal", SLOW, async () => {
    const quietStore = `jsonl:${path.join(dir, "imported-json")}`
    for (const args of [["verify", "--json", file], ["show", "--json", "--tail", "1", file], ["import", "--json", "--store", quietStore, file]]) {
      const r = await runCli(bundle, args, dir, forced)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.stderr, "", `${args[0]} --json: no progress`)
      json(r)
    }
    for (const args of [["verify", file], ["show", "--tail", "1", file]]) {
      // piped stderr (the test's), no override
      const r = await runCli(bundle, args, dir, { NO_COLOR: "1", SESSION_LOG_PROGRESS: undefined })
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.stderr, "", `${args[0]} piped: no progress`)
    }
  })
})
