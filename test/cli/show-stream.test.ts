/**
 * A session-level `show` prints as it reads (issue 27, item 6): one validated read whose lines
 * come out chunk by chunk, so a long log starts printing at once. Observed without timing: a log
 * whose last event the checks refuse prints every event before it (a show that validated the
 * whole log first would print nothing), and a valid log prints what a validated read prints.
 * Real subprocesses on the CLI bundle (test:slow).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { writeSession } from "../helpers/bigSession.js"
import { buildBundle, removeBundle, runCli } from "./helpers.js"

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-show-stream-"))
  bundle = await buildBundle("show-stream-test")
})

afterAll(() => {
  if (dir !== undefined) fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** A user message whose content is missing (H5) at `seq`: the seed checks refuse it. */
const badLine = (seq: number) =>
  JSON.stringify({
    type: "user/message",
    seq,
    time: 1,
    surfaceOp: "append",
    data: { id: "bad", role: "user", source: { kind: "user" } }
  })

/** A valid log of about `events` events, then (when `bad`) one refused event after them. */
const session = (name: string, events: number, bad: boolean): { readonly file: string; readonly count: number } => {
  const file = path.join(dir, `${name}.jsonl`)
  const count = writeSession(file, name, events)
  if (bad) fs.appendFileSync(file, badLine(count) + "\n")
  return { file, count }
}

/** The seqs of the table rows printed (the header line dropped). */
const seqs = (stdout: string): Array<number> =>
  stdout.trimEnd().split("\n").slice(1).map((l) => Number(l.split(/\s+/)[0]))

/** The cells of each line of a table (columns are two or more spaces apart). */
const cells = (stdout: string): Array<Array<string>> => stdout.trimEnd().split("\n").map((l) => l.split(/ {2,}/))

describe("show (no filter) streams", () => {
  it("a long log whose last event is refused: every event before it is printed, then the error", async () => {
    const { count, file } = session("late-bad", 20_000, true)
    const r = await runCli(bundle, ["show", file], dir)
    assert.notStrictEqual(r.code, 0)
    assert.match(r.stderr, /H5/)
    assert.deepStrictEqual(seqs(r.stdout), Array.from({ length: count }, (_, i) => i), "each event before the refused one, once, in order")
  })

  it("a short invalid log prints nothing but its error (it fits the sizing head)", async () => {
    const { file } = session("short-bad", 100, true)
    const r = await runCli(bundle, ["show", file], dir)
    assert.notStrictEqual(r.code, 0)
    assert.strictEqual(r.stdout, "")
    assert.match(r.stderr, /H5/)
  })

  it("--json validates first: an invalid log prints only its error document", async () => {
    const { file } = session("json-bad", 20_000, true)
    const r = await runCli(bundle, ["show", "--json", file], dir)
    assert.notStrictEqual(r.code, 0)
    assert.strictEqual(JSON.parse(r.stdout).error.rule, "H5")
  })

  it("a valid log: the streamed table is the validated one (show --from 0)", async () => {
    const { count, file } = session("valid", 20_000, false)
    const streamed = await runCli(bundle, ["show", file], dir)
    const validated = await runCli(bundle, ["show", "--from", "0", file], dir)
    assert.strictEqual(streamed.code, 0, streamed.stderr)
    assert.strictEqual(validated.code, 0, validated.stderr)
    assert.strictEqual(seqs(streamed.stdout).length, count)
    // the same rows, cell for cell (a streamed table widens its SEQ column at seq 10000)
    assert.deepStrictEqual(cells(streamed.stdout), cells(validated.stdout))
  })
})
