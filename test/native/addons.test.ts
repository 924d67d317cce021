/**
 * No native code until it is needed (issue 26): importing the package root loads no `.node` file;
 * with both native addons unloadable (test/native/block-addons.cjs) a memory-store session runs,
 * and a JSONL append and a SQLite open each fail with a StoreFailure naming the addon and what to
 * do, leaving nothing behind. The same program with the addons available loads each of them only
 * when its store first needs it (this also shows the recorder of loaded addons works).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { execFile } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"

const repo = resolve(import.meta.dirname, "../..")

interface Outcome {
  readonly ok: boolean
  readonly tag?: string
  readonly message?: string
}

interface Report {
  readonly afterImport: ReadonlyArray<string>
  readonly memory: ReadonlyArray<unknown>
  readonly jsonl: Outcome
  readonly sqlite: Outcome
  readonly dlopened: ReadonlyArray<string>
}

const runProgram = (blocked: boolean) =>
  Effect.async<{ readonly report: Report; readonly dir: string }, Error>((resume) => {
    const dir = mkdtempSync(join(tmpdir(), "addons-"))
    const preload = blocked ? ["--require", join(repo, "test/native/block-addons.cjs")] : ["--require", join(repo, "test/native/record-addons.cjs")]
    execFile(
      process.execPath,
      [...preload, "--import", "tsx", join(repo, "test/native/program.ts"), dir],
      { cwd: repo },
      (error, stdout, stderr) => {
        if (error) return resume(Effect.fail(new Error(`${error.message}\n${stderr}`)))
        resume(Effect.succeed({ report: JSON.parse(stdout.trim().split("\n").at(-1)!) as Report, dir }))
      }
    )
  })

const cleanup = (dir: string) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))

describe("native addons are loaded on first use only (issue 26)", () => {
  it.live("with both addons unloadable: the root imports, a memory session runs, JSONL and SQLite fail with a StoreFailure naming the addon", () =>
    Effect.acquireUseRelease(runProgram(true), ({ dir, report }) =>
      Effect.sync(() => {
        assert.deepStrictEqual(report.afterImport, [])
        assert.deepStrictEqual(report.dlopened, [])
        assert.deepStrictEqual(report.memory, [{ id: "u1", role: "user", content: [{ type: "text", text: "Hello" }], source: { kind: "user" } }])
        assert.strictEqual(report.jsonl.tag, "StoreFailure")
        assert.include(report.jsonl.message, "fs-native-extensions")
        assert.include(report.jsonl.message, "npm ci")
        assert.strictEqual(report.sqlite.tag, "StoreFailure")
        assert.include(report.sqlite.message, "better-sqlite3")
        assert.include(report.sqlite.message, "npm install better-sqlite3")
        // the failed append left no session, lock or temporary file; the failed open no database
        assert.deepStrictEqual(readdirSync(join(dir, "jsonl")), [])
        assert.deepStrictEqual(readdirSync(dir), ["jsonl"])
      }), ({ dir }) => cleanup(dir)), 120_000)

  it.live("with the addons available: none at import, each loaded by its store's first use", () =>
    Effect.acquireUseRelease(runProgram(false), ({ report }) =>
      Effect.sync(() => {
        assert.deepStrictEqual(report.afterImport, [])
        assert.isTrue(report.jsonl.ok && report.sqlite.ok)
        const names = report.dlopened.map((file) => file.split(/[\\/]/).at(-1)).sort()
        assert.deepStrictEqual(names, ["better_sqlite3.node", "fs-native-extensions.node"])
      }), ({ dir }) => cleanup(dir)), 120_000)
})
