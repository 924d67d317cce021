/**
 * `session-log fleet` refusals that need no database (docs/fleet.md): a fleet needs a PostgreSQL
 * `--store` (one database every runner reaches), a runner needs `--listen host:port`, a prompt
 * needs its session and text. Each is a usage error (exit 2, `UsageError` with `--json`), and
 * nothing is created.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { buildBundle, json, removeBundle, runCli } from "../cli/helpers.js"

let bundle: string
let dir: string
beforeAll(async () => {
  bundle = await buildBundle("fleet-cli")
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "fleet-cli-"))
})
afterAll(() => {
  removeBundle(bundle)
  fs.rmSync(dir, { recursive: true, force: true })
})

describe("session-log fleet: usage errors", () => {
  it("refuses a store that is not PostgreSQL, a runner without --listen, a prompt without its text", { timeout: 60_000 }, async () => {
    const cases: ReadonlyArray<[ReadonlyArray<string>, RegExp]> = [
      [["fleet", "prompt", "--json", "--store", "sessions.db", "s1", "hello"], /needs --store postgres:\/\//],
      [["fleet", "runner", "--json", "--store", "postgres://agent@127.0.0.1:1/x"], /needs --listen/],
      [["fleet", "runner", "--json", "--store", "postgres://agent@127.0.0.1:1/x", "--listen", "nowhere"], /host:port/],
      [["fleet", "prompt", "--json", "--store", "postgres://agent@127.0.0.1:1/x", "s1"], /needs <session> <text>/]
    ]
    for (const [args, message] of cases) {
      const r = await runCli(bundle, args, dir)
      assert.strictEqual(r.code, 2, `${args.join(" ")}: ${r.stdout}${r.stderr}`)
      const doc = json(r)
      assert.strictEqual(doc.error._tag, "UsageError")
      assert.match(doc.error.message, message)
    }
    assert.deepStrictEqual(fs.readdirSync(dir), [])
  })
})
