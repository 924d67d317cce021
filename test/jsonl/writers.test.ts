/**
 * Several OS processes appending to one JSONL session (SPEC §7.1 optimistic concurrency, §7.4.5,
 * issue 11): 2 and 4 writers (test/jsonl/writer-child.ts) race with the expected-seq check while
 * the parent makes trouble —
 *   dead-holder:    another process holds the file's lock while the writers start and is SIGKILLed
 *                   at a random moment (plus a lock file of an older build naming a dead pid);
 *   paused-holder:  one writer stops itself (SIGSTOP) inside its locked write, after its expected-seq
 *                   check, for PAUSE_MS; nobody may write meanwhile; then it is continued;
 *   killed-writers: writers are SIGKILLed at random moments, possibly mid-write.
 * After every round the file is reopened by a fresh store: every acknowledged event is present,
 * once, with its writer's content; no seq was acknowledged twice; a torn tail only ever holds
 * unacknowledged bytes; no lock or temporary file is left behind.
 *
 * More rounds (the default is 3 per scenario and writer count in `npm test`, 20 in `npm run test:slow`):
 *   WRITERS_ROUNDS=1000 npx vitest run test/jsonl/writers.test.ts
 * Other knobs: WRITERS_SEED, WRITERS_PAUSE_MS (default 250), WRITERS_COUNT (appends per writer, 12).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { hostname, tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { header, turnStart } from "./helpers.js"
import { bundleScript, childEnv, prng } from "../helpers/processes.js"
import { spawnHolder } from "./holder.js"

/** 3 rounds in `npm test`, 20 in `npm run test:slow` (TEST_SUITE=slow). */
const ROUNDS = Number(process.env.WRITERS_ROUNDS ?? (process.env.TEST_SUITE === "slow" ? "20" : "3"))
const SEED = Number(process.env.WRITERS_SEED ?? "20261201")
const PAUSE_MS = Number(process.env.WRITERS_PAUSE_MS ?? "250")
const COUNT = Number(process.env.WRITERS_COUNT ?? "12")

const work = mkdtempSync(join(tmpdir(), "writers-"))
afterAll(() => rmSync(work, { recursive: true, force: true }))

/** The writer, bundled once. */
let bundle: string | undefined
const writerBundle = (): string => (bundle ??= bundleScript("test/jsonl/writer-child.ts", join(work, "writer-child.cjs")))

interface Writer {
  readonly child: ChildProcess
  readonly acks: Array<readonly [number, string]>
  /** Resolved with the seq of its paused write once it stops itself. */
  readonly paused: Promise<number>
  readonly exited: Promise<{ readonly code: number | null; readonly signal: string | null; readonly done: boolean }>
  stderr: string
}

const startWriter = (root: string, id: string, pauseAt: number): Writer => {
  const child = spawn(process.execPath, [writerBundle(), root, id, String(COUNT)], {
    env: childEnv({ WRITER_PAUSE_AT: String(pauseAt) }),
    stdio: ["ignore", "pipe", "pipe"]
  })
  const acks: Array<readonly [number, string]> = []
  let done = false
  let onPaused: (seq: number) => void = () => {}
  const paused = new Promise<number>((r) => (onPaused = r))
  let pending = ""
  child.stdout!.setEncoding("utf8").on("data", (text: string) => {
    pending += text
    const lines = pending.split("\n")
    pending = lines.pop()!
    for (const line of lines) {
      const [word, seq, tag] = line.split(" ")
      if (word === "ack") acks.push([Number(seq), tag])
      else if (word === "paused") onPaused(Number(seq))
      else if (word === "done") done = true
    }
  })
  const writer: Writer = {
    child,
    acks,
    paused,
    stderr: "",
    exited: new Promise((r) => child.once("exit", (code, signal) => setImmediate(() => r({ code, signal, done }))))
  }
  child.stderr!.setEncoding("utf8").on("data", (text: string) => (writer.stderr += text))
  return writer
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

type Scenario = "dead-holder" | "paused-holder" | "killed-writers"

interface Totals {
  rounds: number
  acks: number
  kills: number
  tornTails: number
  pausedWrites: number
}

/** A fresh store's view of the session: the kept events and the torn tail, if any. */
const reopen = (root: string, id: string) =>
  Effect.scoped(Effect.flatMap(makeJsonlStore({ root }), (store) => store.load(id))).pipe(
    Effect.provide(NodeContext.layer)
  )

const round = (scenario: Scenario, writers: number, r: number, rand: (n: number) => number, totals: Totals) =>
  Effect.gen(function*() {
    const root = join(work, `${scenario}-${writers}-${r}`)
    const id = "s"
    const file = join(root, "s.jsonl")
    yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* makeJsonlStore({ root })
      yield* store.create(header(id))
      yield* store.append(id, [turnStart(0)], { expectedSeq: 0 })
    })).pipe(Effect.provide(NodeContext.layer))
    const legacyLock = `${file}.lock`
    const legacyContent = JSON.stringify({ pid: 999_999_999, host: hostname(), at: 0 })
    const context = `${scenario}, ${writers} writers, round ${r} (WRITERS_SEED=${SEED})`

    const killed = new Set<number>()
    const started: Array<Writer> = []
    if (scenario === "dead-holder") {
      writeFileSync(legacyLock, legacyContent)
      yield* Effect.scoped(Effect.gen(function*() {
        const holder = yield* spawnHolder(file)
        for (let w = 0; w < writers; w++) started.push(startWriter(root, id, 0))
        // most often while the writers already wait for it
        yield* Effect.sleep(50 + rand(200))
        yield* holder.signal("SIGKILL")
      }))
    } else if (scenario === "paused-holder") {
      const pausing = rand(writers)
      for (let w = 0; w < writers; w++) started.push(startWriter(root, id, w === pausing ? 1 + rand(COUNT) : 0))
      const stopped = started[pausing]
      const outcome = yield* Effect.promise(() =>
        Promise.race([stopped.paused.then(() => "paused" as const), stopped.exited.then(() => "exited" as const)])
      )
      assert.strictEqual(outcome, "paused", `${context}: the pausing writer never paused: ${stopped.stderr}`)
      // it holds the lock and passed its expected-seq check: nobody may write while it is stopped
      const before = readFileSync(file)
      yield* Effect.sleep(PAUSE_MS)
      assert.deepStrictEqual(readFileSync(file), before, `${context}: the file changed while its lock holder was stopped`)
      totals.pausedWrites++
      stopped.child.kill("SIGCONT")
    } else {
      for (let w = 0; w < writers; w++) started.push(startWriter(root, id, 0))
      const kills = 1 + rand(writers - 1)
      for (let k = 0; k < kills; k++) {
        const victim = rand(writers)
        if (killed.has(victim)) continue
        // kill it in the middle of its work: after a random number of its own acknowledgements
        const after = rand(COUNT)
        const w = started[victim]
        while (w.acks.length < after && w.child.exitCode === null) yield* Effect.sleep(1)
        yield* Effect.sleep(rand(3))
        w.child.kill("SIGKILL")
        killed.add(victim)
      }
      totals.kills += killed.size
    }

    const exits = yield* Effect.promise(() => Promise.all(started.map((w) => w.exited)))
    exits.forEach((exit, w) => {
      if (killed.has(w) && exit.signal === "SIGKILL") return
      assert.isTrue(exit.done && exit.code === 0, `${context}: writer ${w} failed (${exit.code}, ${exit.signal}): ${started[w].stderr}`)
      assert.strictEqual(started[w].acks.length, COUNT, `${context}: writer ${w} acks`)
    })

    const loaded = yield* reopen(root, id)
    const acked = new Map<number, string>()
    for (const w of started) {
      for (const [seq, tag] of w.acks) {
        assert.isFalse(acked.has(seq), `${context}: seq ${seq} acknowledged to two writers (${acked.get(seq)}, ${tag})`)
        acked.set(seq, tag)
      }
    }
    for (const [seq, tag] of acked) {
      const event = loaded.events[seq] as { readonly data?: { readonly writer?: string; readonly n?: number } } | undefined
      assert.isDefined(event, `${context}: acknowledged seq ${seq} lost (${loaded.events.length} events kept)`)
      assert.strictEqual(`${event!.data?.writer}:${event!.data?.n}`, tag, `${context}: seq ${seq} holds another write`)
    }
    if (loaded.tornTail !== undefined) {
      assert.strictEqual(scenario, "killed-writers", `${context}: a torn tail without a kill`)
      assert.isAbove(loaded.tornTail.fromSeq, Math.max(...acked.keys()), `${context}: an acknowledged event in the torn tail`)
      totals.tornTails++
    }
    // no lock, template or temporary file; an older build's lock file is left as it was
    const names = readdirSync(root).sort()
    if (scenario === "dead-holder") {
      assert.deepStrictEqual(names, ["s.jsonl", "s.jsonl.lock"], context)
      assert.strictEqual(readFileSync(legacyLock, "utf8"), legacyContent)
    } else {
      assert.deepStrictEqual(names, ["s.jsonl"], context)
    }
    totals.rounds++
    totals.acks += acked.size
    rmSync(root, { recursive: true, force: true })
  })

describe("JSONL: several OS processes append to one session (issue 11)", () => {
  for (const scenario of ["dead-holder", "paused-holder", "killed-writers"] as const) {
    for (const writers of [2, 4]) {
      it.live(
        `${scenario}, ${writers} writers: every acknowledged event present once, no seq acknowledged twice`,
        () =>
          Effect.gen(function*() {
            const rand = prng(SEED + writers * 7919 + scenario.length * 104_729)
            const totals: Totals = { rounds: 0, acks: 0, kills: 0, tornTails: 0, pausedWrites: 0 }
            const started = Date.now()
            for (let r = 0; r < ROUNDS; r++) yield* round(scenario, writers, r, rand, totals)
            assert.isFalse(existsSync(join(work, `${scenario}-${writers}-0`)))
            console.log(
              `writers ${scenario} x${writers}: ${totals.rounds} rounds in ${((Date.now() - started) / 1000).toFixed(1)} s, ` +
                `${totals.acks} acknowledged events checked, ${totals.kills} writers killed, ${totals.tornTails} torn tails, ` +
                `${totals.pausedWrites} paused lock holders; 0 violations`
            )
          }),
        30 * 60_000
      )
    }
  }
})
