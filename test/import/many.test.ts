/**
 * A Claude Code project folder of many transcripts imports in one command and every session
 * verifies (issue #33: "a thousand-session Claude Code project folder imports in one command").
 * A campaign (test/suites.ts): 1,000 transcripts in `npm run test:slow`, 25 in `npm test`.
 */
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { buildBundle, json, removeBundle, runCli } from "../cli/helpers.js"

/** How many transcripts are imported in one command. */
const MANY = process.env.TEST_SUITE === "slow" ? 1_000 : 25

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-import-many-"))
  bundle = await buildBundle("import-many-test")
})
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

const cli = (...args: Array<string>) => runCli(bundle, args, dir)

describe("session-log import --from claude-code <folder>", () => {
  it(`a project folder of ${MANY} transcripts imports in one command, and every session verifies`, async () => {
    const folder = path.join(dir, "projects", "-home-ada-many")
    fs.mkdirSync(folder, { recursive: true })
    for (let i = 0; i < MANY; i++) {
      const id = `00000000-0000-4000-8000-${String(i).padStart(12, "0")}`
      const at = (s: number) => new Date(Date.UTC(2025, 0, 1, 0, 0, s)).toISOString()
      const base = { isSidechain: false, userType: "external", cwd: "/home/ada/many", sessionId: id, version: "2.0.0" }
      const lines = [
        { ...base, parentUuid: null, type: "user", message: { role: "user", content: `question ${i}` }, uuid: `${id}-1`, timestamp: at(1) },
        {
          ...base,
          parentUuid: `${id}-1`,
          type: "assistant",
          message: { id: `msg_${i}`, role: "assistant", model: "claude-x", content: [{ type: "tool_use", id: `toolu_${i}`, name: "Bash", input: { command: "ls" } }] },
          uuid: `${id}-2`,
          timestamp: at(2)
        },
        {
          ...base,
          parentUuid: `${id}-2`,
          type: "user",
          message: { role: "user", content: [{ type: "tool_result", tool_use_id: `toolu_${i}`, content: "a.txt" }] },
          uuid: `${id}-3`,
          timestamp: at(3)
        },
        {
          ...base,
          parentUuid: `${id}-3`,
          type: "assistant",
          message: { id: `msg_${i}b`, role: "assistant", model: "claude-x", content: [{ type: "text", text: `answer ${i}` }] },
          uuid: `${id}-4`,
          timestamp: at(4)
        }
      ]
      fs.writeFileSync(path.join(folder, `${id}.jsonl`), lines.map((l) => JSON.stringify(l)).join("\n") + "\n")
    }
    const store = path.join(dir, "many.db")
    const r = await cli("import", "--from", "claude-code", "--store", store, "--json", path.join(dir, "projects"))
    assert.strictEqual(r.code, 0, r.stderr)
    const doc = json(r)
    assert.strictEqual(doc.files.length, MANY)
    assert.isTrue(doc.files.every((f: any) => f.sessions.length === 1 && f.sessions[0].status === "imported"))
    const verified = await cli("verify", "--store", store, "--json")
    assert.strictEqual(verified.code, 0)
    const all = json(verified)
    assert.strictEqual(all.length, MANY)
    assert.isTrue(all.every((v: any) => v.ok === true))
  })
})
