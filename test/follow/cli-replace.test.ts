/**
 * `session-log show --follow` processes while the real `session-log compact` and
 * `session-log migrate` commands change what they follow (issue 31, docs/follow.md "The
 * guarantee"), on a JSONL and a SQLite store: compact appends its events, migrate rewrites a v0
 * session as v1 (JSONL: a new file renamed in; SQLite: the rows replaced in a transaction). Each
 * follower goes on and prints exactly the events the store holds at the end. And a follower of a
 * SQLite database that no process had open for writing when it started sees a later writer's
 * commits. test:slow only (processes: the demo, followers, compact, migrate).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type ChildProcess, spawn } from "node:child_process"
import { copyFileSync, existsSync, mkdirSync, readFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { BIN, runCli } from "../cli/helpers.js"
import { pluginEvents } from "../store-contract/contract.js"
import { storeAt, tempDir } from "./stores.js"

const V0 = "n1-identity"
const FIXTURE = fileURLToPath(new URL(`../fixtures/v0/${V0}.jsonl`, import.meta.url))
const bundle = () => process.env.SESSION_LOG_TEST_BUNDLE!

/** `session-log <args>` running, its stdout lines as they come. */
const follow = (args: ReadonlyArray<string>, cwd: string) => {
  const proc: ChildProcess = spawn(process.execPath, [BIN, ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: "1", SESSION_LOG_BUNDLE: bundle() },
    stdio: ["ignore", "pipe", "pipe"]
  })
  const lines: Array<string> = []
  const waiters: Array<() => void> = []
  let rest = ""
  let stderr = ""
  proc.stdout!.setEncoding("utf8").on("data", (text: string) => {
    const parts = (rest + text).split("\n")
    rest = parts.pop()!
    lines.push(...parts)
    waiters.splice(0).forEach((wake) => wake())
  })
  proc.stderr!.setEncoding("utf8").on("data", (text: string) => void (stderr += text))
  const exited = new Promise<void>((resolve) => proc.on("exit", () => (waiters.splice(0).forEach((wake) => wake()), resolve())))
  const until = (n: number) =>
    Effect.promise(() =>
      new Promise<void>((resolve, reject) => {
        const check = () =>
          lines.length >= n
            ? resolve()
            : proc.exitCode !== null || proc.signalCode !== null
            ? reject(new Error(`show --follow exited (${proc.exitCode}): ${stderr}`))
            : waiters.push(check)
        check()
      })
    )
  const stop = Effect.promise(() => (proc.kill("SIGINT"), exited))
  return { lines, until, stop }
}

// ---------------------------------------------------------------------------------------------
// A v0 session in a SQLite database, inserted by hand (as test/format/migrate.test.ts does)

interface RawDb {
  prepare(source: string): { run(...params: ReadonlyArray<unknown>): unknown }
  close(): void
}
const Database = createRequire(import.meta.url)("better-sqlite3") as new(filename: string) => RawDb

const insertV0 = (filename: string, text: string) => {
  const [head, ...rows] = text.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, any>)
  const db = new Database(filename)
  try {
    db.prepare(
      `INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, next_seq, revision)
       VALUES (?, 0, ?, ?, NULL, NULL, NULL, ?, NULL, ?, 1)`
    ).run(head.id, head.createdAt, head.cwd ?? null, head.delegationDepth ?? null, rows.length)
    const insert = db.prepare(
      `INSERT INTO event_rows (session_id, seq, members, type, time, data, source_event_seqs, surface_op, ignorable)
       VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?)`
    )
    for (const r of rows) {
      insert.run(
        head.id,
        r.seq,
        r.type,
        r.time,
        JSON.stringify(r.data),
        r.sourceEventSeqs === undefined ? null : Buffer.from("\u0001" + JSON.stringify(r.sourceEventSeqs), "utf8"),
        r.surfaceOp === undefined ? null : JSON.stringify(r.surfaceOp),
        r.ignorable === true ? 1 : null
      )
    }
  } finally {
    db.close()
  }
}

describe("show --follow of a SQLite database nobody writes when it starts", () => {
  it.scopedLive("the follower prints the commits of a writer that opens the database later", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const db = join(dir, "sessions.db")
      const id = "quiet"
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.create({ version: 1, id, createdAt: 1 })
        yield* store.append(id, pluginEvents(0, 2), { expectedSeq: 0 })
      }).pipe(Effect.provide(storeAt("sqlite", db)))
      // the writer closed: no -wal file, so show opens the database read-only and reads it alone
      assert.isFalse(existsSync(`${db}-wal`))
      const follower = follow(["show", "--store", db, "--session", id, "--follow", "--json"], dir)
      yield* follower.until(2)
      const now = yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.append(id, pluginEvents(2, 3, "later"), { expectedSeq: 2 })
        return (yield* store.readFrom(id, 0)).map((e) => encodeEvent(e as Event))
      }).pipe(Effect.provide(storeAt("sqlite", db)))
      yield* follower.until(5)
      yield* follower.stop
      assert.deepStrictEqual(follower.lines, now)
    }))
})

describe("show --follow while compact and migrate run", () => {
  for (const kind of ["jsonl", "sqlite"] as const) {
    it.scopedLive(`${kind}: the followers go on through compact (appended) and migrate (a v0 log rewritten as v1)`, () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const root = join(dir, "sessions")
        const spec = kind === "jsonl" ? `jsonl:${root}` : join(dir, "sessions.db")
        const demo = yield* Effect.promise(() => runCli(bundle(), ["demo", "--json", "--store", spec], dir))
        assert.strictEqual(demo.code, 0, demo.stderr)
        if (kind === "jsonl") {
          mkdirSync(root, { recursive: true })
          copyFileSync(FIXTURE, join(root, `${V0}.jsonl`))
        } else {
          insertV0(spec, readFileSync(FIXTURE, "utf8"))
        }
        const store = Context.get(yield* Layer.build(storeAt(kind === "jsonl" ? "jsonl-plain" : "sqlite", kind === "jsonl" ? root : spec)), SessionStore)
        const countOf = (id: string) => Effect.map(store.readFrom(id, 0), (events) => events.length)
        const demoCount = yield* countOf("demo-session")
        const v0Count = yield* countOf(V0)
        assert.strictEqual((yield* store.load(V0)).storedVersion, 0)

        const demoFollower = follow(["show", "--store", spec, "--session", "demo-session", "--follow", "--json"], dir)
        const v0Follower = follow(["show", "--store", spec, "--session", V0, "--follow", "--json"], dir)
        yield* demoFollower.until(demoCount)
        yield* v0Follower.until(v0Count)

        const compacted = yield* Effect.promise(() => runCli(bundle(), ["compact", "--json", "--store", spec, "--session", "demo-session"], dir))
        assert.strictEqual(compacted.code, 0, compacted.stderr)
        const migrated = yield* Effect.promise(() => runCli(bundle(), ["migrate", "--json", "--store", spec], dir))
        assert.strictEqual(migrated.code, 0, migrated.stderr)
        const statuses = JSON.parse(migrated.stdout) as Array<{ id: string; status: string }>
        assert.deepStrictEqual(statuses.find((s) => s.id === V0)?.status, "upgraded")
        assert.strictEqual((yield* store.load(V0)).storedVersion, 1)
        // after the rewrite, new events on the migrated session reach its follower too
        const upgraded = yield* countOf(V0)
        yield* store.append(V0, pluginEvents(upgraded, 2, "after-migrate"), { expectedSeq: upgraded })

        const demoNow = (yield* store.readFrom("demo-session", 0)).map((e) => encodeEvent(e as Event))
        const v0Now = (yield* store.readFrom(V0, 0)).map((e) => encodeEvent(e as Event))
        // compact's events (and whatever its open added before them) came after the followed ones
        const appended = (JSON.parse(compacted.stdout) as Array<{ readonly type: string }>).map((e) => e.type)
        assert.includeMembers(appended, ["compaction/start", "compaction/end"])
        assert.isAtLeast(demoNow.length, demoCount + appended.length)
        yield* demoFollower.until(demoNow.length)
        yield* v0Follower.until(v0Now.length)
        yield* demoFollower.stop
        yield* v0Follower.stop
        assert.deepStrictEqual(demoFollower.lines, demoNow)
        assert.deepStrictEqual(v0Follower.lines, v0Now)
      }))
  }
})
