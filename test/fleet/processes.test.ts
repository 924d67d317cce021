/**
 * A fleet against real processes (issue 34, docs/fleet.md), in `npm run test:slow`: PostgreSQL (a
 * database of the shared test server), three runner processes of the CLI bundle (`session-log
 * fleet runner`), clients in other processes (test/fleet/client.ts, and `session-log fleet
 * prompt`). Fifty sessions prompted concurrently: every session's turns are run by one runner at
 * a time (no turn inside another, every log verifies), each prompt is answered once (sent again
 * with its id it is not run again). A runner killed with SIGKILL mid-turn: the session moves, is
 * repaired, every event stored before the kill is kept, the cut prompt is run again once (both
 * attempts in the log) and its client's stream goes on across the failover; every session of the
 * killed runner answers its next prompt. With no runner alive, `fleet prompt` fails after
 * `--timeout` with `FleetUnavailable`. A runner paused with SIGSTOP then resumed, and a runner added while
 * prompts flow: every prompt answered once, every event stored before is kept, every log verifies. Sessions are read through
 * `session-log` while the fleet runs.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { afterAll, beforeAll } from "vitest"
import { buildBundle, removeBundle } from "../cli/helpers.js"
import { describePg } from "../postgres/helpers.js"
import { cli, eventsOf, freshDatabase, type Plan, prompt, type Runner, runClient, startRunner, stopRunner } from "./helpers.js"
import { completedPrompts, keptEvents, storedEvents, storedTurns, verifyStored } from "./verify.js"

const RUNNERS = 3
const SESSIONS = 50
const LOCK_MS = 3_000

let bundle: string
let url: string
const runners: Array<Runner> = []

beforeAll(async () => {
  bundle = await buildBundle("fleet")
  url = await freshDatabase()
  for (let i = 0; i < RUNNERS; i++) runners.push(await startRunner(bundle, url, LOCK_MS))
  await Promise.all(runners.map((r) => r.ready))
  for (const r of runners) assert.strictEqual(r.child.exitCode, null, `runner ${r.address} exited: ${r.stderr}`)
}, 120_000)

afterAll(async () => {
  await Promise.all(runners.map(stopRunner))
  removeBundle(bundle)
})

/** Two client processes, half the plan each; the answers of both. */
const clients = (plan: Plan) =>
  Effect.promise(async () => {
    const half = Math.ceil(plan.length / 2)
    const [a, b] = await Promise.all([runClient(url, plan.slice(0, half)), runClient(url, plan.slice(half))])
    return new Map([...a, ...b])
  })

const only = (answers: Map<string, Array<any>>, key: string) => {
  const got = answers.get(key)
  assert.isDefined(got, key)
  for (const a of got!) assert.isUndefined(a.error, `${key}: ${a.error}`)
  return got!
}

describePg("fleet (issue 34): real processes", () => {
  it.live("fifty sessions prompted concurrently from two client processes: each prompt answered once, by one runner, every log verifies", () =>
    Effect.gen(function*() {
      const sessions = Array.from({ length: SESSIONS }, (_, i) => `s-${i}`)
      const plan: Plan = sessions.map((s) => ({
        session: s,
        prompts: [
          { promptId: `${s}-p1`, text: `hello ${s}` },
          { promptId: `${s}-p2`, text: `more ${s}` },
          // the first prompt again, with its id
          { promptId: `${s}-p1`, text: `hello ${s}` }
        ]
      }))
      const answers = yield* clients(plan)
      // a session read through session-log while the fleet runs
      const read = yield* Effect.promise(() => cli(bundle, ["transcript", "--json", "--store", url, "--session", "s-0"]))
      assert.strictEqual(read.code, 0, read.stderr)
      assert.include(read.stdout, "You said: hello s-0")
      const owners = new Set<string>()
      for (const s of sessions) {
        const [first, again] = only(answers, `${s}/${s}-p1`)
        const [second] = only(answers, `${s}/${s}-p2`)
        assert.deepStrictEqual([first.reason, first.text], ["completed", `You said: hello ${s}`])
        assert.deepStrictEqual([second.reason, second.text], ["completed", `You said: more ${s}`])
        assert.isAbove(second.turn, first.turn)
        assert.deepStrictEqual(again, first)
        assert.ok(runners.some((r) => r.address === second.runner))
        owners.add(second.runner)
        // one completed turn per prompt; a turn the runners' start-up rebalancing moved ends
        // `aborted` (its runner stopped it within the termination timeout) or `interrupted` (cut
        // before that, closed by the new owner's repair), and its prompt is run again (attempt 2)
        const turns = yield* storedTurns(url, s)
        assert.deepStrictEqual(turns.filter(([, end]) => end === "completed").map(([p]) => p.replace(/#\d+$/, "")), [`${s}-p1`, `${s}-p2`])
        for (const [, end] of turns) assert.oneOf(end, ["completed", "aborted", "interrupted"])
      }
      // the sessions are spread over the runners
      assert.strictEqual(owners.size, RUNNERS)
    }), { timeout: 300_000 })

  it.live("a runner killed with SIGKILL mid-turn: the session moves, is repaired, and the cut prompt is run again once", () =>
    Effect.gen(function*() {
      const s = "killed-mid-turn"
      const warm = yield* Effect.promise(() => prompt(bundle, url, s, "first", "k-1"))
      assert.strictEqual(warm.code, 0, warm.stderr)
      const owner = runners.find((r) => r.address === warm.answer.runner)!
      const cut = yield* Effect.fork(Effect.promise(() => prompt(bundle, url, s, "sleep 5000 cut me", "k-2")))
      // wait until the turn is in flight: its user message is stored (the agent's checkpoint)
      let before: Array<{ seq: number; type: string; data: any }> = []
      while (!before.some((e) => e.type === "user/message" && e.data.id === "k-2")) before = yield* Effect.promise(() => eventsOf(bundle, url, s))
      owner.child.kill("SIGKILL")
      yield* Effect.promise(() => owner.exited)
      runners.splice(runners.indexOf(owner), 1)
      const answer = yield* Fiber.join(cut)
      assert.strictEqual(answer.code, 0, `${JSON.stringify(answer.answer)} ${answer.stderr}`)
      assert.notStrictEqual(answer.answer.runner, owner.address)
      assert.deepStrictEqual([answer.answer.attempt, answer.answer.text], [2, "You said: sleep 5000 cut me"])
      // the stream went on across the failover: the cut attempt, its end by the new owner's
      // repair, then the second attempt's deltas and end, and the answer
      const turnOf = (n: number) => answer.updates.find((u) => u._tag === "TurnStarted" && u.attempt === n)?.turn
      const cutTurn = turnOf(1)
      const newTurn = turnOf(2)
      assert.deepStrictEqual(
        answer.updates.filter((u) => u._tag !== "TextDelta").map((u) => [u._tag, u.turn ?? u.answer.turn, u.attempt ?? u.answer.attempt, u.reason ?? ""]),
        [
          ["TurnStarted", cutTurn, 1, ""],
          ["TurnEnded", cutTurn, 1, "interrupted"],
          ["TurnStarted", newTurn, 2, ""],
          ["TurnEnded", newTurn, 2, "completed"],
          ["Answered", newTurn, 2, ""]
        ]
      )
      const deltas = answer.updates.filter((u) => u._tag === "TextDelta")
      assert.ok(deltas.every((u) => u.turn === newTurn))
      assert.strictEqual(deltas.map((u) => u.text).join(""), "You said: sleep 5000 cut me")
      // each update is a committed event, delivered once, in the log's order
      const seqs = answer.updates.flatMap((u) => (u.seq === undefined ? [] : [u.seq]))
      assert.deepStrictEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b))
      // every event stored before the kill is still there, unchanged
      const events = yield* Effect.promise(() => eventsOf(bundle, url, s))
      assert.deepStrictEqual(events.slice(0, before.length), before)
      // the next prompt is answered by the new owner; without --json its text is printed as it streams
      const next = yield* Effect.promise(() => prompt(bundle, url, s, "after", "k-3"))
      assert.strictEqual(next.code, 0, next.stderr)
      assert.strictEqual(next.answer.runner, answer.answer.runner)
      const human = yield* Effect.promise(() => cli(bundle, ["fleet", "prompt", "--store", url, "--prompt-id", "k-3", s, "after"]))
      assert.deepStrictEqual([human.code, human.stdout], [0, "You said: after\n"], human.stderr)
      yield* verifyStored(url, s, [["k-1", "completed"], ["k-2", "interrupted"], ["k-2#2", "completed"], ["k-3", "completed"]])
      // a new prompt without --json: its text as it streams, then a newline
      const fresh = yield* Effect.promise(() => cli(bundle, ["fleet", "prompt", "--store", url, "--prompt-id", "k-4", s, "fresh"]))
      assert.deepStrictEqual([fresh.code, fresh.stdout], [0, "You said: fresh\n"], fresh.stderr)
      // every session of the first test, the killed runner's among them, answers its next prompt
      // from a live runner, and its log verifies
      const fifty = Array.from({ length: SESSIONS }, (_, i) => `s-${i}`)
      const after = yield* clients(fifty.map((f) => ({ session: f, prompts: [{ promptId: `${f}-after-kill`, text: "after the kill" }] })))
      for (const f of fifty) {
        const [a] = only(after, `${f}/${f}-after-kill`)
        assert.deepStrictEqual([a.reason, a.text], ["completed", "You said: after the kill"])
        assert.notStrictEqual(a.runner, owner.address)
        assert.deepStrictEqual(yield* completedPrompts(url, f), [`${f}-p1`, `${f}-p2`, `${f}-after-kill`])
      }
    }), { timeout: 120_000 })

  it.live("fleet prompt with no runner alive fails with FleetUnavailable after --timeout (exit 2), not waiting forever", () =>
    Effect.gen(function*() {
      const lonely = yield* Effect.promise(freshDatabase)
      const r = yield* Effect.promise(() => prompt(bundle, lonely, "lonely", "anyone?", "n-1", ["--timeout", "1000"]))
      assert.strictEqual(r.code, 2, `${JSON.stringify(r.answer)} ${r.stderr}`)
      assert.deepStrictEqual([r.answer.error._tag, r.updates], ["FleetUnavailable", []])
      assert.match(r.answer.error.message, /no runner of the fleet started prompt n-1 of session lonely within 1000 ms/)
      const human = yield* Effect.promise(() => cli(bundle, ["fleet", "prompt", "--store", lonely, "--timeout", "1000", "lonely", "anyone?"]))
      assert.strictEqual(human.code, 2)
      assert.match(human.stderr, /no runner of the fleet started prompt/)
      const usage = yield* Effect.promise(() => prompt(bundle, lonely, "lonely", "anyone?", "n-2", ["--timeout", "0"]))
      assert.deepStrictEqual([usage.code, usage.answer.error._tag], [2, "UsageError"])
    }), { timeout: 120_000 })

  it.live("a runner paused with SIGSTOP loses its sessions; after SIGCONT no prompt is answered twice", () =>
    Effect.gen(function*() {
      const sessions = Array.from({ length: 8 }, (_, i) => `paused-${i}`)
      const round = (n: number, text: string) => clients(sessions.map((s) => ({ session: s, prompts: [{ promptId: `${s}-${n}`, text }] })))
      const warm = yield* round(1, "warm")
      const count = (r: Runner) => sessions.filter((s) => only(warm, `${s}/${s}-1`)[0].runner === r.address).length
      const paused = [...runners].sort((a, b) => count(b) - count(a))[0]
      const before = yield* Effect.forEach(sessions, (s) => storedEvents(url, s))
      paused.child.kill("SIGSTOP")
      const during = yield* round(2, "while paused")
      paused.child.kill("SIGCONT")
      const after = yield* round(3, "after")
      for (const s of sessions) {
        assert.notStrictEqual(only(during, `${s}/${s}-2`)[0].runner, paused.address)
        only(after, `${s}/${s}-3`)
        assert.deepStrictEqual(yield* completedPrompts(url, s), [`${s}-1`, `${s}-2`, `${s}-3`])
      }
      // every event stored before the pause is kept
      yield* Effect.forEach(sessions, (s, i) => keptEvents(url, s, before[i]))
    }), { timeout: 180_000 })

  it.live("a runner added while prompts flow takes shards over; every prompt is answered once", () =>
    Effect.gen(function*() {
      const sessions = Array.from({ length: 12 }, (_, i) => `rebalance-${i}`)
      const rounds = 4
      const plan: Plan = sessions.map((s) => ({
        session: s,
        prompts: Array.from({ length: rounds }, (_, n) => ({ promptId: `${s}-${n + 1}`, text: `sleep 300 round ${n + 1}` }))
      }))
      const flowing = yield* Effect.fork(clients(plan))
      // what is stored when the runner is added: kept whatever moves
      const before = yield* Effect.forEach(sessions, (s) => storedEvents(url, s))
      const added = yield* Effect.promise(() => startRunner(bundle, url, LOCK_MS))
      runners.push(added)
      yield* Effect.promise(() => added.ready)
      const answers = yield* Fiber.join(flowing)
      const late = yield* clients(sessions.map((s) => ({ session: s, prompts: [{ promptId: `${s}-late`, text: "late" }] })))
      for (const s of sessions) {
        for (let n = 1; n <= rounds; n++) only(answers, `${s}/${s}-${n}`)
        only(late, `${s}/${s}-late`)
        assert.deepStrictEqual(yield* completedPrompts(url, s), [...Array.from({ length: rounds }, (_, n) => `${s}-${n + 1}`), `${s}-late`])
      }
      yield* Effect.forEach(sessions, (s, i) => keptEvents(url, s, before[i]))
      // the new runner serves some of the sessions once the shards moved
      assert.ok(sessions.some((s) => only(late, `${s}/${s}-late`)[0].runner === added.address))
    }), { timeout: 180_000 })
})
