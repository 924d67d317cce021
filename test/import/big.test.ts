/**
 * A 500 MB Claude Code transcript imports with bounded memory (issue #33 "Bounded and safe"):
 * the CLI runs with a 96 MB V8 heap (`--max-old-space-size=96`) and still imports every record,
 * so nothing grows with the transcript but the ids of its record tree. Slow-only
 * (test/suites.ts): writing and reading half a gigabyte takes a minute.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { BIN, buildBundle, removeBundle } from "../cli/helpers.js"

const MB = 500
let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-import-big-"))
  bundle = await buildBundle("import-big-test")
}, 120_000)
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

/** Write a transcript of `mb` megabytes: turns of a prompt, a call, a 16 KiB result, an answer. */
const writeTranscript = (file: string, mb: number) => {
  const fd = fs.openSync(file, "w")
  const base = { isSidechain: false, userType: "external", cwd: "/home/ada/big", sessionId: "big-session", version: "2.0.0" }
  const payload = "x".repeat(16 * 1024)
  let n = 0
  let bytes = 0
  let parent: string | null = null
  let turns = 0
  const rec = (fields: Record<string, unknown>) => {
    const uuid = `u${++n}`
    const line = JSON.stringify({ ...base, parentUuid: parent, uuid, timestamp: new Date(Date.UTC(2025, 0, 1) + n * 1000).toISOString(), ...fields }) + "\n"
    parent = uuid
    bytes += Buffer.byteLength(line)
    fs.writeSync(fd, line)
  }
  for (let i = 0; bytes < mb * 1024 * 1024; i++, turns++) {
    rec({ type: "user", message: { role: "user", content: `prompt ${i}` } })
    rec({ type: "assistant", message: { id: `msg_${i}`, role: "assistant", model: "claude-x", content: [{ type: "tool_use", id: `toolu_${i}`, name: "Read", input: { file_path: `/f${i}` } }] } })
    rec({
      type: "user",
      message: { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${i}`, content: payload }] },
      toolUseResult: { file: { content: payload } }
    })
    rec({ type: "assistant", message: { id: `msg_${i}b`, role: "assistant", model: "claude-x", content: [{ type: "text", text: `done ${i}` }] } })
  }
  fs.closeSync(fd)
  return { records: n, turns }
}

describe("import --from claude-code: a 500 MB transcript", () => {
  it("imports in a 96 MB heap, every record mapped", async () => {
    const file = path.join(dir, "big.jsonl")
    const { records, turns } = writeTranscript(file, MB)
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ["--max-old-space-size=96", BIN, "import", "--from", "claude-code", "--store", path.join(dir, "big.db"), "--json", file],
        { cwd: dir, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, NO_COLOR: "1", SESSION_LOG_BUNDLE: bundle } },
        (error, stdout, stderr) => resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
      )
    )
    assert.strictEqual(out.code, 0, out.stderr)
    const [report] = JSON.parse(out.stdout).files
    assert.deepStrictEqual(report.records, { read: records, mapped: records, kept: 0, refused: 0 })
    assert.deepStrictEqual(
      [report.sessions[0].status, report.sessions[0].toolCalls, report.sessions[0].toolResults],
      ["imported", turns, turns]
    )
  }, 600_000)
})
