/**
 * Shared helpers of the CLI tests: run the `session-log` binary on a given CLI bundle as a
 * subprocess (asynchronously: a blocking spawn would stall the test worker) and read its one
 * `--json` document.
 */
import { assert } from "@effect/vitest"
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

export const BIN = path.resolve(__dirname, "../../bin/session-log.js")

/** What a run of the binary printed and how it exited. */
export interface Run {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/**
 * Run `session-log <args>` in `cwd` with the bundle `bundle`; `env` is added to the environment
 * (an `undefined` value removes a variable), by default `NO_COLOR=1` (no colours).
 */
export const runCli = (
  bundle: string,
  args: ReadonlyArray<string>,
  cwd: string,
  env: Readonly<Record<string, string | undefined>> = { NO_COLOR: "1" }
): Promise<Run> =>
  new Promise((resolve) => {
    const merged = Object.entries({ ...process.env, ...env, SESSION_LOG_BUNDLE: bundle })
      .filter((entry): entry is [string, string] => entry[1] !== undefined)
    execFile(
      process.execPath,
      [BIN, ...args],
      { cwd, encoding: "utf8", maxBuffer: 64 * 1024 * 1024, env: Object.fromEntries(merged) },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resolve({ code, stdout, stderr })
      }
    )
  })

/** The one JSON document on stdout. */
export const json = (r: Run): any => {
  const trimmed = r.stdout.trim()
  assert.strictEqual(trimmed.split("\n").length, 1, `exactly one JSON document on stdout, got: ${r.stdout}\n${r.stderr}`)
  return JSON.parse(trimmed)
}

/**
 * The CLI bundle of this run: the one the global set-up built (test/cli.setup.ts), else (a file
 * run outside the vitest configs) the current sources bundled into dist/<name>-<pid>/session-log.mjs (inside
 * the repository, so the bundle resolves the native addons from node_modules), removed by
 * `removeBundle` after the file's tests.
 */
export const buildBundle = (name: string): Promise<string> => {
  const shared = process.env.SESSION_LOG_TEST_BUNDLE
  if (shared !== undefined) return Promise.resolve(shared)
  const dir = path.resolve(__dirname, `../../dist/${name}-${process.pid}`)
  return new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [path.resolve(__dirname, "../../scripts/build-cli.mjs"), dir], (e) =>
      e ? reject(e) : resolve(path.join(dir, "session-log.mjs")))
  )
}

/** Remove a bundle made by `buildBundle` (the run's shared bundle stays until the run ends). */
export const removeBundle = (bundle: string | undefined): void => {
  // the bundle's directory (its entry and chunks)
  if (bundle !== undefined && bundle !== process.env.SESSION_LOG_TEST_BUNDLE) fs.rmSync(path.dirname(bundle), { recursive: true, force: true })
}

/** One JSON record as a JSONL line (without the newline). */
export const line = (v: unknown): string => JSON.stringify(v)

/** The log line of an event at `seq` (time 100 + seq). */
export const eventLine = (seq: number, type: string, data: unknown, extra: Record<string, unknown> = {}): string =>
  line({ type, seq, time: 100 + seq, data, ...extra })

/** The log line of a user message (surfaceOp append). */
export const userLine = (seq: number, id: string, text: string): string =>
  eventLine(seq, "user/message", { id, role: "user", content: [{ type: "text", text }], source: { kind: "user" } }, {
    surfaceOp: "append"
  })

/** The log line of an assistant message of step 1 of `turn` (surfaceOp append). */
export const assistantLine = (seq: number, turn: number, id: string, content: ReadonlyArray<unknown>): string =>
  eventLine(seq, "assistant/message", {
    turn,
    step: 1,
    message: { id, role: "assistant", content, source: { kind: "model", provider: "p", model: "m" } }
  }, { sourceEventSeqs: [], surfaceOp: "append" })

/** A valid, closed one-turn log of session `id` whose user message says `text`. */
export const closedTurnLog = (id: string, text = "hi"): string =>
  [
    line({ type: "session", version: 1, id, createdAt: 1 }),
    line({ type: "turn/start", seq: 0, time: 10, data: { turn: 1 } }),
    line({
      type: "user/message",
      seq: 1,
      time: 11,
      data: { id: "u1", role: "user", content: [{ type: "text", text }], source: { kind: "user" } },
      surfaceOp: "append"
    }),
    line({ type: "turn/end", seq: 2, time: 12, data: { turn: 1, reason: { kind: "completed" } } })
  ].join("\n") + "\n"
