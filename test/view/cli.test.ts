/**
 * `session-log view` through the binary (docs/viewer.md): the URL with its token on stdout,
 * the API refusing a request without it, the store opened read-only (a SQLite file is left byte
 * for byte as it was, no WAL created), a warning for a host other than this machine, and a
 * missing store refused with nothing created.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildBundle, json, removeBundle, runCli } from "../cli/helpers.js"
import { DEMO_FILE, startViewer } from "./helpers.js"

let bundle: string
let dir: string
let db: string

beforeAll(async () => {
  bundle = await buildBundle("view-cli")
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "view-cli-"))
  db = path.join(dir, "s.db")
  const imported = await runCli(bundle, ["import", "--store", db, DEMO_FILE], dir)
  assert.strictEqual(imported.code, 0, imported.stderr)
})

afterAll(() => {
  removeBundle(bundle)
  fs.rmSync(dir, { recursive: true, force: true })
})

const listing = (d: string) => fs.readdirSync(d).sort()
const digest = (f: string) => execFileSync("sha256sum", [f], { encoding: "utf8" }).split(" ")[0]

describe("session-log view", () => {
  it("prints a URL on 127.0.0.1 with a token; the API needs it; the SQLite store is untouched", async () => {
    const before = { files: listing(dir), sum: digest(db) }
    const viewer = await startViewer(bundle, ["--store", db, "--session", "demo-session"], dir)
    try {
      assert.match(viewer.url, /^http:\/\/127\.0\.0\.1:\d+\/\?token=[0-9a-f]{48}#session=demo-session$/)
      const refused = await fetch(`${viewer.origin}/api/sessions`)
      assert.strictEqual(refused.status, 401)
      const ok = await fetch(`${viewer.origin}/api/sessions?token=${viewer.token}`)
      assert.strictEqual(ok.status, 200)
      const { sessions } = await ok.json() as { sessions: Array<{ id: string; events: number }> }
      assert.deepStrictEqual(sessions.map((s) => [s.id, s.events]), [["demo-session", 191]])
      // time travel answers what `session-log request --at` prints, before and after the compaction at 133
      for (const seq of [131, 133]) {
        const at = await (await fetch(`${viewer.origin}/api/sessions/demo-session/at/${seq}?token=${viewer.token}`)).json() as any
        const cli = json(await runCli(bundle, ["request", "--json", "--store", db, "--session", "demo-session", "--at", String(seq)], dir))
        assert.deepStrictEqual(at.at.request, cli)
      }
      const page = await fetch(`${viewer.origin}/`)
      assert.include(await page.text(), `<script src="/app.js"></script>`)
      const app = await fetch(`${viewer.origin}/app.js`)
      assert.strictEqual(app.status, 200)
      assert.isAbove((await app.text()).length, 10_000)
    } finally {
      await viewer.stop()
    }
    assert.deepStrictEqual(listing(dir), before.files)
    assert.strictEqual(digest(db), before.sum)
  })

  it("--host other than this machine warns on stderr", async () => {
    const viewer = await startViewer(bundle, ["--store", db, "--host", "0.0.0.0"], dir)
    try {
      // the warning is logged before the URL is printed; stderr's pipe may deliver it later
      for (let i = 0; i < 200 && !/reachable from other machines/.test(viewer.stderr()); i++) {
        await new Promise((r) => setTimeout(r, 25))
      }
      assert.match(viewer.stderr(), /reachable from other machines/)
    } finally {
      await viewer.stop()
    }
  })

  it("a store that does not exist: exit 2, nothing created", async () => {
    const missing = path.join(dir, "none.db")
    const r = await runCli(bundle, ["view", "--store", missing, "--port", "0"], dir)
    assert.strictEqual(r.code, 2)
    assert.match(r.stderr, /not found/)
    assert.isFalse(fs.existsSync(missing))
  })
})
