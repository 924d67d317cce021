/**
 * The exit code is the result of `main` (SPEC §12: 0 ok, 1 invalid data, 2 usage / not found /
 * I/O), not state left behind by an earlier run: consecutive runs in one process each get the
 * code of their own outcome, and `--json` prints the same one document either way.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { main } from "../../src/programs/cli/Commands.js"
import { closedTurnLog } from "./helpers.js"

/** Run `session-log <args>` in this process: its exit code and what it printed on stdout. */
const run = (args: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    const code = yield* Effect.consoleWith((c) =>
      Effect.withConsole(main(["node", "session-log", ...args]), {
        ...c,
        log: (...xs: ReadonlyArray<unknown>) => Effect.sync(() => void out.push(xs.join(" "))),
        error: () => Effect.void
      })
    )
    return { code, stdout: out.join("\n") }
  }).pipe(Effect.provide(NodeContext.layer))

/** A temporary directory, removed with the scope. */
const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "esl-exit-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

describe("the exit code is main's result", () => {
  it.scopedLive("valid, invalid, valid, unreadable, usage: each run gets its own code", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const valid = path.join(dir, "valid.jsonl")
      const invalid = path.join(dir, "invalid.jsonl")
      fs.writeFileSync(valid, closedTurnLog("v"))
      fs.writeFileSync(invalid, closedTurnLog("i").replace(`,"surfaceOp":"append"`, ""))
      const first = yield* run(["verify", "--json", valid])
      assert.deepStrictEqual(first, { code: 0, stdout: `{"ok":true,"events":3,"surface":[1]}` })
      const bad = yield* run(["verify", "--json", invalid])
      assert.strictEqual(bad.code, 1)
      assert.strictEqual(JSON.parse(bad.stdout).error.rule, "D3")
      // an earlier failure does not leak into a later run
      assert.deepStrictEqual(yield* run(["verify", "--json", valid]), first)
      const missing = yield* run(["show", "--json", path.join(dir, "missing.jsonl")])
      assert.strictEqual(missing.code, 2)
      assert.strictEqual(JSON.parse(missing.stdout).ok, false)
      const usage = yield* run(["show", "--json", "--tail", "x", valid])
      assert.strictEqual(usage.code, 2)
      assert.strictEqual(JSON.parse(usage.stdout).error._tag, "UsageError")
      assert.strictEqual((yield* run(["show", "--json", "--tail", "1", valid])).code, 0)
      assert.strictEqual((yield* run(["--help"])).code, 0)
    }))
})
