/**
 * Following across processes (issue 31) on every durable backend: a writer process appending in
 * random batches while follower processes (from 0 and from the middle) print what they receive;
 * and a writer killed with SIGKILL mid-run, after which a follower has printed exactly the log the
 * reopened store holds. The property of docs/follow.md "The guarantee": what a follower received
 * is the committed log from its fromSeq.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SessionStore } from "../../src/services/SessionStore.js"
import { bundleScript, childEnv } from "../helpers/processes.js"
import { describePg } from "../postgres/helpers.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"
import { type Kind, location, storeAt } from "./stores.js"

const script = bundleScript("test/follow/child.ts", join(mkdtempSync(join(tmpdir(), "follow-child-")), "child.cjs"))

/** A child process and its stdout lines as they come. */
interface Child {
  readonly proc: ChildProcess
  readonly lines: Array<string>
  /** Resolves once `predicate` holds of the lines printed so far. */
  readonly until: (predicate: (lines: ReadonlyArray<string>) => boolean) => Promise<void>
  readonly exited: Promise<number | null>
}

const start = (args: ReadonlyArray<string>): Child => {
  const proc = spawn(process.execPath, [script, ...args], { env: childEnv(), stdio: ["ignore", "pipe", "pipe"] })
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
  const exited = new Promise<number | null>((resolve) =>
    proc.on("exit", (code) => {
      if (code !== 0 && code !== null) process.stderr.write(`child ${args.join(" ")} exited ${code}: ${stderr}\n`)
      waiters.splice(0).forEach((wake) => wake())
      resolve(code)
    }))
  const until = (predicate: (lines: ReadonlyArray<string>) => boolean) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (predicate(lines)) resolve()
        else if (proc.exitCode !== null || proc.signalCode !== null) reject(new Error(`child exited early: ${stderr}`))
        else waiters.push(check)
      }
      check()
    })
  return { proc, lines, until, exited }
}

/** A store of `kind` over `at`, open for the scope. */
const open = (kind: Kind, at: string) => Effect.map(Layer.build(storeAt(kind, at)), (ctx) => Context.get(ctx, SessionStore))

const stop = (child: Child) => Effect.promise(() => (child.proc.kill("SIGKILL"), child.exited))

const describeProcesses = (kind: Kind) =>
  describe(`follow across processes: ${kind}`, () => {
    it.scopedLive("a writer process in random batches; followers in other processes from 0 and from the middle receive the committed log", () =>
      Effect.gen(function*() {
        const at = yield* location(kind)
        const id = `cross-${process.pid}`
        const store = yield* open(kind, at)
        yield* store.create(headerFor(id))
        yield* store.append(id, pluginEvents(0, 5), { expectedSeq: 0 })
        const total = 5 + 60
        const followers = [start(["follow", kind, at, id, "0", String(total)]), start(["follow", kind, at, id, "3", String(total - 3)])]
        const writer = start(["write", kind, at, id, "60", "7"])
        assert.strictEqual(yield* Effect.promise(() => writer.exited), 0)
        for (const f of followers) assert.strictEqual(yield* Effect.promise(() => f.exited), 0)
        const committed = (yield* store.readFrom(id, 0)).map((e) => JSON.stringify(e))
        assert.strictEqual(committed.length, total)
        assert.deepStrictEqual(followers[0].lines, committed)
        assert.deepStrictEqual(followers[1].lines, committed.slice(3))
      }))

    it.scopedLive("a writer killed with SIGKILL mid-run: the follower has exactly what the reopened store holds, then what follows", () =>
      Effect.gen(function*() {
        const at = yield* location(kind)
        const id = `killed-${process.pid}`
        const first = yield* open(kind, at)
        yield* first.create(headerFor(id))
        yield* first.append(id, pluginEvents(0, 1), { expectedSeq: 0 })
        const follower = start(["follow", kind, at, id, "0", "-1"])
        const writer = start(["write", kind, at, id, "-1", "11"])
        yield* Effect.promise(() => writer.until((lines) => lines.length >= 15))
        yield* stop(writer)
        // a reopened store: repair as Session.open would (drop a torn tail), then one more event
        const store = yield* open(kind, at)
        const loaded = yield* store.load(id)
        if (loaded.tornTail !== undefined) yield* store.truncateTornTail(id, loaded.tornTail, { revision: loaded.revision })
        const n = (yield* store.load(id)).events.length
        yield* store.append(id, pluginEvents(n, 1, "after"), { expectedSeq: n })
        yield* Effect.promise(() => follower.until((lines) => lines.length >= n + 1))
        const committed = (yield* store.readFrom(id, 0)).map((e) => JSON.stringify(e))
        yield* stop(follower)
        assert.deepStrictEqual(follower.lines, committed)
      }))
  })

// a campaign (test/suites.ts): `npm test` crosses processes on one backend, `test:slow` on all
const slow = process.env.TEST_SUITE === "slow"

/** A write-behind (batched) handle in a writer process, followed by another to its last event (test:slow only). */
const describeWriteBehind = (kind: Kind) =>
  it.scopedLive(`${kind}: a write-behind writer process is followed to its last event by another process`, () =>
    Effect.gen(function*() {
      const at = yield* location(kind)
      const id = `behind-${process.pid}`
      const first = yield* open(kind, at)
      yield* first.create(headerFor(id))
      yield* first.append(id, pluginEvents(0, 1), { expectedSeq: 0 })
      // the writer's handle appends 40 user messages after what open adds (a closer, an end-of-seed
      // marker: whatever it is, the followers must end with the store's last event)
      const count = 40
      const fromZero = start(["follow", kind, at, id, "0", "-1"])
      const late = start(["follow", kind, at, id, "1", "-1"])
      const writer = start(["write-behind", kind, at, id, String(count)])
      assert.strictEqual(yield* Effect.promise(() => writer.exited), 0)
      const store = yield* open(kind, at)
      const total = (yield* store.readFrom(id, 0)).length
      assert.isAtLeast(total, 1 + count)
      for (const f of [fromZero, late]) yield* Effect.promise(() => f.until((lines) => lines.length >= total - (f === late ? 1 : 0)))
      for (const f of [fromZero, late]) yield* stop(f)
      const committed = (yield* store.readFrom(id, 0)).map((e) => JSON.stringify(e))
      assert.deepStrictEqual(fromZero.lines, committed)
      assert.deepStrictEqual(late.lines, committed.slice(1))
    }))
for (const kind of slow ? ["jsonl-plain", "jsonl-packed", "jsonl-compressed", "sqlite"] as const : ["jsonl-packed"] as const) {
  describeProcesses(kind)
}
if (slow) describePg("PostgreSQL", () => describeProcesses("postgres"))
if (slow) {
  describe("follow a write-behind writer across processes", () => {
    for (const kind of ["jsonl-plain", "jsonl-compressed", "sqlite"] as const) describeWriteBehind(kind)
  })
}
