/**
 * `import --from claude-code` on the record shapes of current Claude Code (2.1.x), copied from
 * real transcripts (test/import/fixtures/claude-code/current/README.md names them): parallel tool
 * calls whose results hang beside the chain, prompts queued while a turn ran, a background task's
 * notification, queue bookkeeping, and a resumed session's file that starts with the original's
 * records. On a real SQLite file; each session verified as `verify` does.
 */
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { importClaudeCode } from "../../src/programs/import/ClaudeCode.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { eventsOf, fixtures, messagesAt, messagesOf, verified, withStore } from "./helpers.js"

const ORIGINAL = "9a1f0c52-3b7d-4e2a-8c61-000000000010"
const RESUMED = "9a1f0c52-3b7d-4e2a-8c61-000000000011"
const dir = `${fixtures}/claude-code/current`
const data = (e: Event) => e.data as any
const byType = (events: ReadonlyArray<Event>, type: string) => events.filter((e) => e.type === type)
const texts = (messages: ReadonlyArray<any>) =>
  messages.flatMap((m) =>
    m.content.map((b: any) =>
      b.type === "text" ? `${m.role}:${b.text}` : b.type === "tool-call" ? `${m.role}:call ${b.id}` : b.type === "tool-result" ? `${m.role}:result ${b.toolCallId}` : `${m.role}:${b.type}`
    )
  )

const run = <A, E>(body: Effect.Effect<A, E, SessionStore | NodeContext.NodeContext>) =>
  withStore(() => body).pipe(Effect.provide(NodeContext.layer))

const ORIGINAL_MESSAGES = [
  "user:Check the build and the tests",
  "assistant:\n\n",
  "assistant:reasoning",
  "assistant:call toolu_B",
  "assistant:call toolu_T",
  "user:result toolu_B",
  "user:result toolu_T",
  "assistant:call toolu_D",
  "user:result toolu_D",
  "user:also update the docs",
  "assistant:Build and tests pass; README updated.",
  "user:<task-notification>\n<task-id>b7</task-id>\n<status>completed</status>\n</task-notification>",
  "assistant:The background task finished.",
  "user:Another Claude session sent a message:\n<agent-message from=\"a61\">Lint is clean.</agent-message>",
  "assistant:Noted."
]

describe("import --from claude-code, current record shapes", () => {
  it.scoped("parallel tool calls: every result is mapped, none is taken for an abandoned branch", () =>
    run(Effect.gen(function*() {
      const [report] = yield* importClaudeCode(`${dir}/${ORIGINAL}.jsonl`)
      const id = `claude-code:${ORIGINAL}`
      assert.deepStrictEqual(report.sessions.map((s) => [s.id, s.status, s.toolCalls, s.toolResults]), [[id, "imported", 3, 3]])
      assert.strictEqual(yield* verified(id), "ok")
      assert.isUndefined(report.keptReasons["off-branch"])
      assert.isUndefined(report.keptReasons["result-without-call"])
      assert.deepStrictEqual(texts(yield* messagesOf(id)), ORIGINAL_MESSAGES)
      // the two calls of msg_P1 are one model message, answered by results citing their calls
      const events = yield* eventsOf(id)
      const calls = byType(events, "tool/call")
      const results = byType(events, "tool/result")
      assert.deepStrictEqual(results.map((r) => r.sourceEventSeqs), calls.map((c) => [c.seq]))
      assert.deepStrictEqual(data(byType(events, "assistant/message")[0]).message.id, "msg_P1")
    })))

  it.scoped("a prompt queued while the turn ran joins that turn where the model received it; a notification is context", () =>
    run(Effect.gen(function*() {
      const [report] = yield* importClaudeCode(`${dir}/${ORIGINAL}.jsonl`)
      const events = yield* eventsOf(`claude-code:${ORIGINAL}`)
      const queued = byType(events, "user/message").find((e) => data(e).id === "q1")!
      assert.deepStrictEqual(data(queued).source, { kind: "user" })
      assert.deepStrictEqual(data(queued).content, [{ type: "text", text: "also update the docs" }])
      // a user entry whose origin is no person is context too
      const peer = byType(events, "context/message").find((e) => data(e).id === "n1")!
      assert.deepStrictEqual(data(peer).source, { kind: "import", tool: "claude-code", form: "origin", origin: "peer" })
      // in the running turn (one prompt, one turn), after the result it followed
      assert.deepStrictEqual(byType(events, "turn/start").length, 1)
      const resultSeq = byType(events, "tool/result").find((e) => data(e).message.content[0].toolCallId === "toolu_D")!.seq
      assert.isTrue(queued.seq > resultSeq)
      const notification = byType(events, "context/message").find((e) => data(e).id === "q2")!
      assert.deepStrictEqual(data(notification).source, {
        kind: "import",
        tool: "claude-code",
        form: "queued_command",
        commandMode: "task-notification"
      })
      // the attachment's other keys stay in its import/source; queue bookkeeping is kept aside whole
      const envelope = byType(events, "import/source").find((e) => data(e).record?.uuid === "q1")!
      assert.deepStrictEqual(data(envelope).attachment, {
        type: "queued_command",
        source_uuid: "src-q1",
        commandMode: "prompt",
        origin: { kind: "human" },
        timestamp: "2026-02-12T16:02:14.000Z"
      })
      // the wrapper the model received (2.1.280 writes it as `rendered`) stays with the record
      assert.include(data(envelope).record.rendered[0].content, "also update the docs")
      assert.strictEqual(report.keptReasons["queue-operation"], 4)
      const kept = byType(events, "import/source").filter((e) => data(e).kept === "queue-operation")
      assert.deepStrictEqual(kept.map((e) => data(e).record.operation), ["enqueue", "remove", "enqueue", "remove"])
    })))

  it.scoped("a resumed session's file is a fork of the original: its own id, the original as parent, both imported", () =>
    run(Effect.gen(function*() {
      const reports = yield* importClaudeCode(dir)
      const original = `claude-code:${ORIGINAL}`
      const resumed = `claude-code:${RESUMED}`
      assert.deepStrictEqual(reports.flatMap((r) => r.sessions.map((s) => [s.id, s.status])), [
        [original, "imported"],
        [`${original}/agent-acompact-5e1f2a`, "imported"],
        [resumed, "imported"]
      ])
      const store = yield* SessionStore
      const headers = new Map((yield* store.list()).map((h) => [h.id, h]))
      assert.strictEqual(headers.get(resumed)?.parentSession, original)
      assert.isUndefined(headers.get(resumed)?.origin)
      assert.isUndefined(headers.get(original)?.parentSession)
      assert.strictEqual(yield* verified(resumed), "ok")
      const events = yield* eventsOf(resumed)
      assert.deepStrictEqual(data(events[0]).sourceSessionId, RESUMED)
      assert.deepStrictEqual(data(events[0]).resumedFrom, ORIGINAL)
      // the inherited conversation, then its own
      assert.deepStrictEqual(texts(yield* messagesOf(resumed)), [
        ...ORIGINAL_MESSAGES,
        "user:Now deploy it",
        "assistant:Deploying needs your credentials; I stopped here."
      ])
      // importing again changes neither
      const again = yield* importClaudeCode(dir)
      assert.deepStrictEqual(again.flatMap((r) => r.sessions.map((s) => s.status)), ["unchanged", "unchanged", "unchanged"])
    })))
  it.scoped("a compaction's own file: the chain it ended on; records whose parent is in the main file are kept aside as such", () =>
    run(Effect.gen(function*() {
      const [report] = yield* importClaudeCode(`${dir}/${ORIGINAL}/subagents/agent-acompact-5e1f2a.jsonl`)
      const id = `claude-code:${ORIGINAL}/agent-acompact-5e1f2a`
      assert.deepStrictEqual(report.sessions.map((s) => [s.id, s.parentSession, s.status]), [[id, `claude-code:${ORIGINAL}`, "imported"]])
      assert.deepStrictEqual(report.keptReasons, { "parent-elsewhere": 1 })
      assert.strictEqual(yield* verified(id), "ok")
      assert.deepStrictEqual(texts(yield* messagesOf(id)), [
        "user:<system-reminder>\nPostToolUse:Edit hook additional context: formatted\n</system-reminder>",
        "user:Your task is to create a detailed summary of the conversation so far.",
        "assistant:<summary>Build and tests checked.</summary>"
      ])
    })))
  it.scoped("a compaction that preserved a segment: the summary replaces what came before it, the segment stays after the summary", () =>
    run(Effect.gen(function*() {
      const session = "6b2e4f10-7c3d-4a5b-9e8f-000000000020"
      const id = `claude-code:${session}`
      const [report] = yield* importClaudeCode(`${fixtures}/claude-code/preserved/${session}.jsonl`)
      assert.deepStrictEqual(report.keptReasons, { "last-prompt": 1 })
      assert.strictEqual(yield* verified(id), "ok")
      const events = yield* eventsOf(id)
      const summary = byType(events, "user/message").find((e) => data(e).id === "s1")!
      assert.deepStrictEqual(data(summary).source, { kind: "plugin", plugin: "compact", compactionId: "b1" })
      // before it, the whole history; after it, the summary, the preserved segment, what followed
      assert.deepStrictEqual(texts(yield* messagesAt(id, summary.seq - 1)), [
        "user:Refactor the parser",
        "assistant:The parser is refactored.",
        "user:Now the lexer",
        "assistant:The lexer is done."
      ])
      assert.deepStrictEqual(texts(yield* messagesOf(id)), [
        "user:This session is being continued from a previous conversation. Summary: the parser was refactored.",
        "user:Now the lexer",
        "assistant:The lexer is done.",
        "user:And the tests?",
        "assistant:The tests pass."
      ])
    })))
})
