/**
 * The publication of a new JSONL session file across OS processes (SPEC §7.4.3, §7.4.5, J14):
 * creators in both layouts (plain `.jsonl`, compressed `.jsonlz`) materialise one session id at
 * the same moment. Exactly one wins; every other gets SessionExists (J14); the store holds the
 * session under one name only, whole; no publication lock or temporary file is left behind.
 *
 * More rounds (the default is 3 in `npm test`, 50 in `npm run test:slow`): PUBLISH_ROUNDS=1000 npx vitest run test/jsonl/publish.test.ts
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { spawn } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { bundleScript, childEnv } from "../helpers/processes.js"

/** 3 rounds in `npm test`, 50 in `npm run test:slow` (TEST_SUITE=slow). */
const ROUNDS = Number(process.env.PUBLISH_ROUNDS ?? (process.env.TEST_SUITE === "slow" ? "50" : "3"))
const CREATORS = ["plain", "compressed", "plain", "compressed"] as const

const work = mkdtempSync(join(tmpdir(), "publish-"))
afterAll(() => rmSync(work, { recursive: true, force: true }))

let bundle: string | undefined
const creatorBundle = (): string => (bundle ??= bundleScript("test/jsonl/publish-child.ts", join(work, "publish-child.cjs")))

interface Creator {
  readonly ready: Promise<void>
  readonly go: () => void
  readonly outcome: Promise<string>
}

const startCreator = (root: string, id: string, layout: string): Creator => {
  const child = spawn(process.execPath, [creatorBundle(), root, id, layout], {
    env: childEnv(),
    stdio: ["pipe", "pipe", "pipe"]
  })
  let out = ""
  let stderr = ""
  let onReady: () => void = () => {}
  const ready = new Promise<void>((r) => (onReady = r))
  child.stdout!.setEncoding("utf8").on("data", (text: string) => {
    out += text
    if (out.includes("ready\n")) onReady()
  })
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (stderr += text))
  const outcome = new Promise<string>((resolve) =>
    child.once("exit", (code) => {
      onReady()
      const last = out.trim().split("\n").at(-1) ?? ""
      resolve(code === 0 ? last : `exit ${code}: ${stderr}`)
    })
  )
  return { ready, go: () => child.stdin!.write("go\n"), outcome }
}

describe("JSONL: creators in both layouts publish one session at once (§7.4.3, J14)", () => {
  it.scopedLive(`${ROUNDS} rounds of ${CREATORS.length} creators: one wins, the others get J14, one name, nothing left behind`, () =>
    Effect.gen(function*() {
      for (let round = 0; round < ROUNDS; round++) {
        const root = join(work, `r${round}`)
        mkdirSync(root)
        const creators = CREATORS.map((layout) => startCreator(root, "s", layout))
        yield* Effect.promise(() => Promise.all(creators.map((c) => c.ready)))
        for (const c of creators) c.go()
        const outcomes = yield* Effect.promise(() => Promise.all(creators.map((c) => c.outcome)))
        const won = outcomes.filter((o) => o === "won")
        assert.strictEqual(won.length, 1, `round ${round}: ${outcomes.join(" | ")}`)
        for (const o of outcomes) if (o !== "won") assert.strictEqual(o, "lost SessionExists J14", `round ${round}`)
        const names = readdirSync(root)
        assert.strictEqual(names.length, 1, `round ${round}: ${names.join(", ")}`)
        assert.match(names[0]!, /^s\.jsonlz?$/)
        const loaded = yield* Effect.scoped(Effect.flatMap(makeJsonlStore({ root }), (store) => store.load("s")))
        assert.strictEqual(loaded.events.length, 3)
        assert.isUndefined(loaded.tornTail)
      }
    }).pipe(Effect.provide(NodeContext.layer)), 600_000)
})
