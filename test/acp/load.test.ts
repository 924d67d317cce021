/**
 * `session/load` and `session/resume` through the SDK's in-process connection (ACP.md §2.4, §2.5):
 * the whole transcript replayed before the answer, resume without replay, double load and cwd
 * mismatch rejected, crash repair visible as a failed tool update (SPEC §6), compaction not
 * duplicating history (SPEC §9), and the first request after a load writing a `resume` header.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import { layerSummarizerDeterministic } from "../../src/layers/model/SummarizerLive.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { projectTranscript, defaultPresenter } from "../../src/programs/acp/Acp.js"
import * as Compact from "../../src/programs/compaction/Compact.js"
import { REPAIR_TEXT_OUTCOME_UNKNOWN } from "../../src/services/Repair.js"
import { Session } from "../../src/services/Session.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { call, connect, CWD, environment, expectError, type Harness, headerReasons, say, storedEvents } from "./helpers.js"

const long = (word: string) => `${word} `.repeat(200).trim()

const prompt = (h: Harness, sessionId: string, text: string) =>
  h.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] })

const load = (h: Harness, sessionId: string, cwd = CWD) => h.request("session/load", { sessionId, cwd, mcpServers: [] })

/** The updates of `sessionId` that arrived before the `session/load` answer (and none after it). */
const replayOf = (h: Harness, sessionId: string) => {
  const answer = h.frames.findIndex((f) => f.kind === "response" && f.method === "session/load")
  assert.isAtLeast(answer, 0)
  assert.isFalse(h.frames.slice(answer).some((f) => f.kind === "update"), "no update after the load answer")
  return h.frames.slice(0, answer).flatMap((f) => f.kind === "update" && f.sessionId === sessionId ? [f.update] : [])
}

describe("ACP session/load and session/resume", () => {
  it.scoped("load replays the whole transcript before answering with the folded mode; the next request writes resume", () =>
    Effect.gen(function*() {
      const first = yield* connect()
      const { sessionId } = yield* first.request("session/new", { cwd: CWD, mcpServers: [] })
      yield* prompt(first, sessionId, "read a")
      yield* first.request("session/set_mode", { sessionId, modeId: "plan" })
      yield* prompt(first, sessionId, "thanks")
      yield* first.close

      const second = yield* connect()
      const answer = yield* load(second, sessionId)
      assert.strictEqual(answer.modes.currentModeId, "plan")
      const replay = replayOf(second, sessionId)
      // a tool call replays as one tool_call in its settled state (its live updates folded in)
      assert.deepStrictEqual(replay.map((u: any) => [u.sessionUpdate, u.status]), [
        ["user_message_chunk", undefined],
        ["tool_call", "completed"],
        ["agent_message_chunk", undefined],
        ["user_message_chunk", undefined],
        ["agent_message_chunk", undefined]
      ])
      assert.deepStrictEqual((replay[0] as any).content, { type: "text", text: "read a" })
      assert.strictEqual((replay[1] as any).toolCallId, "c1")
      assert.deepStrictEqual((replay[4] as any).content, { type: "text", text: "you are welcome" })
      yield* prompt(second, sessionId, "again")
      assert.deepStrictEqual(headerReasons(yield* storedEvents(sessionId)), ["initial", "change", "resume"])
    }).pipe(Effect.provide(environment([call("c1", "read_file", { path: "a" }), say("a read"), say("you are welcome"), say("x")]).layer)))

  it.scoped("resume restores without replay; double load and a cwd mismatch are rejected", () =>
    Effect.gen(function*() {
      const first = yield* connect()
      const { sessionId } = yield* first.request("session/new", { cwd: CWD, mcpServers: [] })
      yield* prompt(first, sessionId, "hi")
      yield* first.close

      const second = yield* connect()
      yield* expectError(load(second, sessionId, "/other/dir"), -32602)
      yield* expectError(load(second, sessionId, "relative"), -32602)
      yield* expectError(load(second, "missing"), -32002)
      const resumed = yield* second.request("session/resume", { sessionId, cwd: CWD })
      assert.strictEqual(resumed.modes.currentModeId, "code")
      assert.deepStrictEqual(second.updates(sessionId), [])
      yield* expectError(load(second, sessionId), -32602) // already active on this connection
      const answer = yield* prompt(second, sessionId, "more")
      assert.strictEqual(answer.stopReason, "end_turn")
    }).pipe(Effect.provide(environment([say("hello"), say("more")]).layer)))

  it.scoped("two concurrent loads of one id: exactly one succeeds", () =>
    Effect.gen(function*() {
      const first = yield* connect()
      const { sessionId } = yield* first.request("session/new", { cwd: CWD, mcpServers: [] })
      yield* prompt(first, sessionId, "hi")
      yield* first.close
      const second = yield* connect()
      const both = yield* Effect.all([Effect.exit(load(second, sessionId)), Effect.exit(load(second, sessionId))], {
        concurrency: 2
      })
      assert.strictEqual(both.filter(Exit.isSuccess).length, 1)
    }).pipe(Effect.provide(environment([say("hello")]).layer)))

  it.scoped("crash mid-tool, then load: repair first, visible as a failed tool update (SPEC §6)", () =>
    Effect.gen(function*() {
      // a process died after recording the tool call: no result, no step/end, no turn/end
      const scope = yield* Scope.make()
      const crashed = yield* SessionLive.create({ id: "crashed", header: { cwd: CWD } }).pipe(Scope.extend(scope))
      const args = JSON.stringify({ path: "a" })
      yield* crashed.append("turn/start", { turn: 1 })
      yield* crashed.append("step/start", { turn: 1, step: 1 })
      yield* crashed.append("user/message", { id: "u1", role: "user", content: [{ type: "text", text: "read a" }], source: { kind: "user" } }, { surfaceOp: "append" })
      yield* crashed.append("assistant/message", {
        turn: 1,
        step: 1,
        message: {
          id: "a1",
          role: "assistant",
          content: [{ type: "text", text: "Reading." }, { type: "tool-call", id: "c1", name: "read_file", arguments: args }],
          source: { kind: "model", provider: "scripted", model: "test-model" }
        }
      }, { surfaceOp: "append", sourceEventSeqs: [] })
      yield* crashed.append("tool/call", { turn: 1, step: 1, callId: "c1", name: "read_file", arguments: args })
      yield* Scope.close(scope, Exit.void)

      const h = yield* connect()
      yield* load(h, "crashed")
      const replay = replayOf(h, "crashed")
      assert.deepStrictEqual(replay.map((u: any) => [u.sessionUpdate, u.status]), [
        ["user_message_chunk", undefined],
        ["agent_message_chunk", undefined],
        ["tool_call", "failed"]
      ])
      assert.deepStrictEqual((replay[2] as any).content, [{ type: "content", content: { type: "text", text: REPAIR_TEXT_OUTCOME_UNKNOWN } }])
      const events = yield* storedEvents("crashed")
      assert.deepStrictEqual(events.slice(5).map((e) => e.type), ["tool/result", "step/end", "turn/end", "session/end-seed"])
      // a later connection finds nothing left to repair: the replay is the same
      yield* h.close
      const again = yield* connect()
      yield* load(again, "crashed")
      assert.deepStrictEqual(replayOf(again, "crashed"), replay)
      assert.strictEqual((yield* storedEvents("crashed")).length, events.length)
    }).pipe(Effect.provide(environment([]).layer)))

  it.scoped("a load from another cwd is refused before the session is opened: a crashed turn is not repaired", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const crashed = yield* SessionLive.create({ id: "elsewhere", header: { cwd: CWD } }).pipe(Scope.extend(scope))
      yield* crashed.append("turn/start", { turn: 1 })
      yield* crashed.append("user/message", { id: "u1", role: "user", content: [{ type: "text", text: "hi" }], source: { kind: "user" } }, { surfaceOp: "append" })
      yield* Scope.close(scope, Exit.void)
      const store = yield* SessionStore
      const stored = Effect.map(store.load("elsewhere"), (l) => ({ events: l.events.length, revision: l.revision }))
      const before = yield* stored

      const h = yield* connect()
      const refused = yield* expectError(load(h, "elsewhere", "/some/other/project"), -32602)
      assert.include(JSON.stringify(refused), `belongs to ${CWD}`)
      // open would have appended closers (turn/end, session/end-seed): nothing was written
      assert.deepStrictEqual(yield* stored, before)
      assert.isFalse(h.frames.some((f) => f.kind === "update"), "nothing was replayed")
      // from the right cwd it opens and repairs
      yield* load(h, "elsewhere")
      assert.isAbove((yield* stored).events, before.events)
    }).pipe(Effect.provide(environment([]).layer)))

  it.scoped("compaction then load: pre-compaction history shown once, the compaction only to clients that advertised it", () =>
    Effect.gen(function*() {
      const first = yield* connect()
      const { sessionId } = yield* first.request("session/new", { cwd: CWD, mcpServers: [] })
      for (const text of ["one", "two", "three"]) yield* prompt(first, sessionId, `${text} ${"please ".repeat(100)}`)
      yield* first.close
      const before = projectTranscript(yield* storedEvents(sessionId), { compaction: true, presenter: defaultPresenter })

      const scope = yield* Scope.make()
      const handle = yield* SessionLive.open(sessionId).pipe(Scope.extend(scope))
      const result = yield* Compact.compact({ mode: "manual", retainTokens: 0 }).pipe(
        Effect.provideService(Session, handle),
        Effect.provide(layerSummarizerDeterministic)
      )
      yield* Scope.close(scope, Exit.void)

      const plain = yield* connect({ compaction: false })
      yield* load(plain, sessionId)
      assert.deepStrictEqual(replayOf(plain, sessionId), before)

      const aware = yield* connect()
      yield* load(aware, sessionId)
      const replay = replayOf(aware, sessionId)
      assert.deepStrictEqual(replay.slice(0, before.length), before)
      assert.deepStrictEqual(replay.slice(before.length).map((u: any) => [u.sessionUpdate, u.compactionId, u.status]), [
        ["compaction_update", result.compactionId, "completed"]
      ])
    }).pipe(Effect.provide(environment([say(long("a")), say(long("b")), say(long("c"))]).layer)))

  it.scoped("a long session is replayed uncapped (more than 500 transcript entries)", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const s = yield* SessionLive.create({ id: "long", header: { cwd: CWD } }).pipe(Scope.extend(scope))
      for (let turn = 1; turn <= 300; turn++) {
        yield* s.append("turn/start", { turn })
        yield* s.append("user/message", { id: `u${turn}`, role: "user", content: [{ type: "text", text: `q${turn}` }], source: { kind: "user" } }, { surfaceOp: "append" })
        yield* s.append("assistant/message", {
          turn,
          step: 1,
          message: { id: `a${turn}`, role: "assistant", content: [{ type: "text", text: `a${turn}` }], source: { kind: "model", provider: "p", model: "m" } }
        }, { surfaceOp: "append", sourceEventSeqs: [] })
        yield* s.append("turn/end", { turn, reason: { kind: "completed" } })
      }
      yield* Scope.close(scope, Exit.void)
      const h = yield* connect()
      yield* load(h, "long")
      const replay = replayOf(h, "long")
      assert.strictEqual(replay.length, 600)
      assert.deepStrictEqual((replay[599] as any).content, { type: "text", text: "a300" })
    }).pipe(Effect.provide(environment([]).layer)))
})
