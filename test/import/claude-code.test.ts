/**
 * `import --from claude-code` as a library (docs/import.md): every record kind of the fixture
 * (written from the documented shapes), branches, compaction as a replace, sidechains and
 * subagent files as child sessions, a malformed line, an unknown record type, a duplicated record,
 * re-import and `--force`, each imported session verified as `verify` does, on a real SQLite file.
 */
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { importClaudeCode } from "../../src/programs/import/ClaudeCode.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import type { Event } from "../../src/schema/Events.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import { eventsOf, fixtures, messagesAt, messagesOf, verified, withStore } from "./helpers.js"

const SESSION = "7f3c2a10-4b5e-4c1d-9a8e-2f6b1c0d9e11"
const MAIN = `claude-code:${SESSION}`
const SIDECHAIN = `${MAIN}/sidechain-sc1`
const AGENT = `${MAIN}/agent-a1b2c3d4`
const project = `${fixtures}/claude-code/project`
const file = `${project}/${SESSION}.jsonl`

const data = (e: Event) => e.data as any
const byType = (events: ReadonlyArray<Event>, type: string) => events.filter((e) => e.type === type)
const texts = (messages: ReadonlyArray<any>) =>
  messages.flatMap((m) => m.content.map((b: any) => b.type === "text" ? `${m.role}:${b.text}` : `${m.role}:${b.type}`))

const run = <A, E>(body: Effect.Effect<A, E, SessionStore | NodeContext.NodeContext>) =>
  withStore(() => body).pipe(Effect.provide(NodeContext.layer))

describe("import --from claude-code", () => {
  it.scoped("a transcript becomes a session that verifies, with a report of every record", () =>
    run(Effect.gen(function*() {
      const [report] = yield* importClaudeCode(file)
      assert.strictEqual(report.format, "claude-code")
      assert.deepStrictEqual(report.records, { read: 28, mapped: 19, kept: 9, refused: 0 })
      assert.deepStrictEqual(
        report.sessions.map((s) => [s.id, s.status, s.messages, s.toolCalls, s.toolResults]),
        [[MAIN, "imported", 13, 3, 3], [SIDECHAIN, "imported", 2, 0, 0]]
      )
      assert.strictEqual(yield* verified(MAIN), "ok")
      assert.strictEqual(yield* verified(SIDECHAIN), "ok")
      // nothing lost: one import/source per record read, in the session that mapped it or the main one
      const sources = [...yield* eventsOf(MAIN), ...yield* eventsOf(SIDECHAIN)].filter((e) => e.type === "import/source")
      assert.strictEqual(sources.length, report.records.read)
      assert.deepStrictEqual(sources.map((e) => data(e).line).sort((a, b) => a - b), Array.from({ length: 28 }, (_, i) => i + 1))
    })))

  it.scoped("kept-aside records are named by reason, data unchanged", () =>
    run(Effect.gen(function*() {
      const [report] = yield* importClaudeCode(file)
      assert.deepStrictEqual(report.keptReasons, {
        "file-history-snapshot": 1,
        duplicate: 1,
        "system:turn_duration": 1,
        "not-json": 1,
        "agent-telemetry": 1,
        "off-branch": 2,
        "result-without-call": 1,
        summary: 1
      })
      const events = yield* eventsOf(MAIN)
      const kept = byType(events, "import/source").filter((e) => data(e).kept !== undefined)
      for (const e of kept) assert.strictEqual(e.ignorable, true)
      // a malformed line is kept as its text
      const broken = kept.find((e) => data(e).kept === "not-json")!
      assert.strictEqual(data(broken).text, "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"trunc")
      // a record type of a newer version is kept whole
      const unknown = kept.find((e) => data(e).kept === "agent-telemetry")!
      assert.deepStrictEqual(data(unknown).record.payload, { x: 1 })
      // the duplicated tool result is mapped once
      assert.strictEqual(byType(events, "tool/result").filter((e) => data(e).message.content[0].toolCallId === "toolu_02").length, 1)
    })))

  it.scoped("prompts, thinking, tool calls, results, images and meta records map to this log's events", () =>
    run(Effect.gen(function*() {
      yield* importClaudeCode(file)
      const events = yield* eventsOf(MAIN)
      assert.strictEqual(events[0].type, "import/origin")
      assert.strictEqual(data(events[0]).sourceSessionId, SESSION)
      // one model message from the four records sharing msg_01A, in order, with the last usage
      const first = byType(events, "assistant/message")[0]
      assert.strictEqual(data(first).message.id, "msg_01A")
      assert.deepStrictEqual(data(first).message.content.map((b: any) => b.type), ["reasoning", "text", "tool-call", "tool-call"])
      assert.strictEqual(data(first).message.content[0].signature, "EqQBCkYIBxgCKkB")
      assert.deepStrictEqual(data(first).message.source, { kind: "model", provider: "anthropic", model: "claude-sonnet-4-5-20250929" })
      assert.deepStrictEqual(data(first).usage, { inputTokens: 10, outputTokens: 120, cacheReadTokens: 3000, cacheWriteTokens: 200 })
      // tool calls: raw JSON arguments; results cite their call
      const calls = byType(events, "tool/call")
      assert.deepStrictEqual(calls.map((c) => [data(c).callId, data(c).name]), [["toolu_01", "Bash"], ["toolu_02", "Read"], ["toolu_03", "Task"]])
      assert.deepStrictEqual(JSON.parse(data(calls[0]).arguments), { command: "ls", description: "List files" })
      const results = byType(events, "tool/result")
      assert.deepStrictEqual(results.map((r) => r.sourceEventSeqs), calls.map((c) => [c.seq]))
      assert.deepStrictEqual(data(results[0]).message.content[0].content, [{ type: "text", text: "README.md\nsrc" }])
      // toolUseResult stays in the record's import/source
      const source = byType(events, "import/source").find((e) => data(e).record?.uuid === "r1")!
      assert.deepStrictEqual(data(source).record.toolUseResult.stdout, "README.md\nsrc")
      assert.strictEqual(data(source).mapped, true)
      // timestamps come from the source
      assert.strictEqual(results[0].time, Date.parse("2025-11-02T10:00:07.000Z"))
      // an isMeta record is context, never the person's prompt
      const context = byType(events, "context/message")
      assert.deepStrictEqual(context.map((e) => data(e).id), ["m0"])
      assert.notStrictEqual(data(context[0]).source.kind, "user")
      // the image is kept with its source
      const prompt = byType(events, "user/message").find((e) => data(e).id === "u2")!
      assert.deepStrictEqual(data(prompt).content[1], {
        type: "image",
        attachment: { source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } }
      })
      // turns: one per prompt, each closed
      assert.deepStrictEqual(byType(events, "turn/start").map((e) => data(e).turn), [1, 2, 3])
      assert.deepStrictEqual(byType(events, "turn/end").map((e) => data(e).turn), [1, 2, 3])
    })))

  it.scoped("the branch the session ended on is imported; an abandoned edit is kept aside", () =>
    run(Effect.gen(function*() {
      yield* importClaudeCode(file)
      const events = yield* eventsOf(MAIN)
      const ids = byType(events, "user/message").map((e) => data(e).id)
      assert.isTrue(ids.includes("u2"))
      assert.isFalse(ids.includes("u2x"))
      const offBranch = byType(events, "import/source").filter((e) => data(e).kept === "off-branch")
      assert.deepStrictEqual(offBranch.map((e) => data(e).record.uuid), ["u2x", "a6x"])
    })))

  it.scoped("a compaction replaces what it summarised; the request before it still shows the history", () =>
    run(Effect.gen(function*() {
      yield* importClaudeCode(file)
      const events = yield* eventsOf(MAIN)
      const summary = byType(events, "user/message").find((e) => data(e).id === "cs1")!
      assert.deepStrictEqual(data(summary).source, { kind: "plugin", plugin: "compact", compactionId: "cb1" })
      assert.strictEqual(typeof summary.surfaceOp, "object")
      const before = yield* messagesAt(MAIN, summary.seq - 1)
      assert.deepStrictEqual(texts(before).slice(0, 3), [
        "user:<command-message>init</command-message>",
        "user:List the files and read README.md",
        "assistant:reasoning"
      ])
      const after = yield* messagesOf(MAIN)
      assert.deepStrictEqual(texts(after), [
        "user:This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:\nThe user asked about files.",
        "user:Thanks. Now summarise src/.",
        "assistant:tool-call",
        "user:tool-result",
        "assistant:src holds one file, main.ts."
      ])
    })))

  it.scoped("request --at shows the model the transcript names (a request header per model change)", () =>
    run(Effect.gen(function*() {
      yield* importClaudeCode(file)
      const events = yield* eventsOf(MAIN)
      const headers = byType(events, "request/header")
      assert.deepStrictEqual(headers.map((h) => [data(h).reason, data(h).header]), [
        ["initial", { config: { provider: "anthropic", model: "claude-sonnet-4-5-20250929" } }]
      ])
      // written in the model's step, before its answer
      const answer = byType(events, "assistant/message")[0]
      assert.strictEqual(events[answer.seq - 1].type, "request/header")
      const request = requestAtLog(events, events.length - 1)
      assert.isFalse("_tag" in request)
      if (!("_tag" in request)) assert.strictEqual(request.header?.config.model, "claude-sonnet-4-5-20250929")
      assert.strictEqual(events.at(-1)?.type, "import/end")
    })))

  it.scoped("sidechains and subagent files become child sessions linked to their parent", () =>
    run(Effect.gen(function*() {
      const reports = yield* importClaudeCode(project)
      assert.deepStrictEqual(reports.map((r) => r.file.slice(project.length)), [
        `/${SESSION}.jsonl`,
        `/${SESSION}/subagents/agent-a1b2c3d4.jsonl`
      ])
      const store = yield* SessionStore
      const headers = yield* store.list()
      const byId = new Map(headers.map((h) => [h.id, h]))
      for (const id of [SIDECHAIN, AGENT]) {
        assert.strictEqual(byId.get(id)?.parentSession, MAIN)
        assert.strictEqual(byId.get(id)?.origin, "subagent")
        assert.strictEqual(byId.get(id)?.delegationDepth, 1)
        assert.strictEqual(yield* verified(id), "ok")
      }
      assert.deepStrictEqual(texts(yield* messagesOf(AGENT)), [
        "user:Find TODOs",
        "assistant:tool-call",
        "user:tool-result",
        "assistant:One TODO in src/main.ts."
      ])
      assert.strictEqual(byId.get(SIDECHAIN)?.createdAt, Date.parse("2025-11-02T10:00:21.000Z"))
      assert.strictEqual(byId.get(AGENT)?.createdAt, Date.parse("2025-11-02T10:00:30.000Z"))
      assert.strictEqual(byId.get(MAIN)?.cwd, "/home/ada/project")
      assert.strictEqual(byId.get(MAIN)?.createdAt, Date.parse("2025-11-02T10:00:01.000Z"))
    })))

  it.scoped("records of newer versions: progress in the chain, an attachment, a sidechain hook, a repeated message snapshot", () =>
    run(Effect.gen(function*() {
      const newer = "5d0e7a3b-1c2f-4e8d-b9a6-000000000002"
      const [report] = yield* importClaudeCode(`${fixtures}/claude-code/newer/${newer}.jsonl`)
      // no child session for a hook's progress record marked as a sidechain
      assert.deepStrictEqual(report.sessions.map((s) => s.id), [`claude-code:${newer}`])
      assert.deepStrictEqual(report.keptReasons, { "type:progress": 3, "attachment:task_reminder": 1 })
      const id = `claude-code:${newer}`
      assert.strictEqual(yield* verified(id), "ok")
      // the blocks of msg_N once each, whatever came between its records
      assert.deepStrictEqual(texts(yield* messagesOf(id)), [
        "user:Run the tests",
        "assistant:reasoning",
        "assistant:Running the tests.",
        "assistant:tool-call",
        "user:tool-result",
        "assistant:All 12 tests pass."
      ])
      const events = yield* eventsOf(id)
      assert.deepStrictEqual(data(byType(events, "assistant/message")[0]).usage, { inputTokens: 3, outputTokens: 40 })
    })))

  it.scoped("importing twice makes no second session and changes nothing", () =>
    run(Effect.gen(function*() {
      yield* importClaudeCode(project)
      const before = yield* eventsOf(MAIN)
      const again = yield* importClaudeCode(project)
      assert.deepStrictEqual(again.flatMap((r) => r.sessions.map((s) => s.status)), ["unchanged", "unchanged", "unchanged"])
      const store = yield* SessionStore
      assert.strictEqual((yield* store.list()).length, 3)
      assert.deepStrictEqual(yield* eventsOf(MAIN), before)
    })))

  it.scoped("--force replaces a session an import created, never one written otherwise", () =>
    run(Effect.gen(function*() {
      yield* importClaudeCode(file)
      const before = yield* eventsOf(MAIN)
      const [forced] = yield* importClaudeCode(file, { force: true })
      assert.deepStrictEqual(forced.sessions.map((s) => s.status), ["replaced", "replaced"])
      assert.deepStrictEqual(yield* eventsOf(MAIN), before)
      assert.strictEqual(yield* verified(MAIN), "ok")
      // a session of the same id that no import wrote is refused, even with --force, and untouched
      const store = yield* SessionStore
      const agentHeader = { version: 1, id: AGENT, createdAt: 5 }
      yield* store.create(agentHeader)
      const own: Event = { type: "todo/write", seq: 0, time: 5, data: { todos: [] } }
      yield* store.append(AGENT, [own], { expectedSeq: 0 })
      const [refused] = yield* importClaudeCode(`${project}/${SESSION}/subagents/agent-a1b2c3d4.jsonl`, { force: true })
      assert.strictEqual(refused.sessions[0].status, "refused")
      assert.strictEqual(refused.sessions[0].error?._tag, "SessionExists")
      assert.deepStrictEqual(yield* eventsOf(AGENT), [own])
    })))
})
