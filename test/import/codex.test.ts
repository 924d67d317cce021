/**
 * `import --from codex` as a library (docs/import.md): every record kind of the fixture (written
 * from the documented rollout shapes), on a real SQLite file; each session verified as `verify` does.
 */
import { FileSystem } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { importCodex } from "../../src/programs/import/Codex.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { eventsOf, fixtures, messagesAt, messagesOf, tempDir, verified, withStore } from "./helpers.js"

const SESSION = "019a4b2c-7d8e-7f00-a1b2-c3d4e5f60718"
const ID = `codex:${SESSION}`
const tree = `${fixtures}/codex/sessions`
const file = `${tree}/2025/11/03/rollout-2025-11-03T09-00-00-${SESSION}.jsonl`

const data = (e: Event) => e.data as any
const byType = (events: ReadonlyArray<Event>, type: string) => events.filter((e) => e.type === type)
const texts = (messages: ReadonlyArray<any>) =>
  messages.flatMap((m) => m.content.map((b: any) => b.type === "text" ? `${m.role}:${b.text}` : `${m.role}:${b.type}`))

const run = <A, E>(body: Effect.Effect<A, E, SessionStore | NodeContext.NodeContext | Scope.Scope>) =>
  withStore(() => body).pipe(Effect.provide(NodeContext.layer))

describe("import --from codex", () => {
  it.scoped("a rollout becomes a session that verifies, with a report of every record", () =>
    run(Effect.gen(function*() {
      const reports = yield* importCodex(tree)
      assert.strictEqual(reports.length, 1)
      const [report] = reports
      assert.deepStrictEqual(report.records, { read: 23, mapped: 14, kept: 9, refused: 0 })
      assert.deepStrictEqual(report.keptReasons, {
        "event_msg:user_message": 1,
        "event_msg:agent_reasoning": 1,
        "event_msg:token_count": 1,
        "event_msg:agent_message": 1,
        "not-json": 1,
        "type:ghost_snapshot": 1,
        "result-without-call": 1,
        "response_item:web_search_call": 1,
        "event_msg:task_complete": 1
      })
      assert.deepStrictEqual(
        report.sessions.map((s) => [s.id, s.status, s.toolCalls, s.toolResults]),
        [[ID, "imported", 2, 2]]
      )
      assert.strictEqual(yield* verified(ID), "ok")
      // nothing lost: one import/source per record read
      const sources = (yield* eventsOf(ID)).filter((e) => e.type === "import/source")
      assert.deepStrictEqual(sources.map((e) => data(e).line), Array.from({ length: 23 }, (_, i) => i + 1))
    })))

  it.scoped("session_meta is the header, turn_context a request header, messages and tools map", () =>
    run(Effect.gen(function*() {
      yield* importCodex(file)
      const events = yield* eventsOf(ID)
      assert.deepStrictEqual(data(events[0]), { tool: "codex", file, sourceSessionId: SESSION })
      const headers = byType(events, "request/header")
      assert.deepStrictEqual(headers.map((h) => [data(h).reason, data(h).header.config]), [
        ["initial", { provider: "openai", model: "gpt-5-codex", reasoningEffort: "medium" }],
        ["change", { provider: "openai", model: "gpt-5-codex", reasoningEffort: "high" }]
      ])
      // the environment context is context, the prompt is the person's
      assert.strictEqual(byType(events, "context/message").length, 1)
      assert.deepStrictEqual(byType(events, "user/message").filter((e) => data(e).source.kind === "user").map((e) => data(e).content[0].text), [
        "Fix the typo in README.md",
        "Now search the web for the latest release"
      ])
      // reasoning: the summary is its text, the encrypted content is kept beside it, never as text
      const first = byType(events, "assistant/message")[0]
      const reasoning = data(first).message.content[0]
      assert.deepStrictEqual(reasoning, { type: "reasoning", text: "**Looking at README**", encryptedContent: "gAAAAABpAbCdEf==" })
      assert.deepStrictEqual(data(first).message.source, { kind: "model", provider: "openai", model: "gpt-5-codex" })
      // function and custom tool calls, their arguments as written, and results citing them
      const calls = byType(events, "tool/call")
      assert.deepStrictEqual(calls.map((c) => [data(c).callId, data(c).name]), [["call_A1", "shell"], ["call_A2", "apply_patch"]])
      assert.strictEqual(data(calls[0]).arguments, "{\"command\":[\"bash\",\"-lc\",\"cat README.md\"],\"workdir\":\"/home/ada/project\"}")
      assert.isTrue(JSON.parse(data(calls[1]).arguments).startsWith("*** Begin Patch"))
      const results = byType(events, "tool/result")
      assert.deepStrictEqual(results.map((r) => r.sourceEventSeqs), calls.map((c) => [c.seq]))
      assert.strictEqual(results[0].time, Date.parse("2025-11-03T09:00:06.000Z"))
    })))

  it.scoped("a compaction replaces the history; the request before it still shows it", () =>
    run(Effect.gen(function*() {
      yield* importCodex(file)
      const events = yield* eventsOf(ID)
      const summary = byType(events, "user/message").find((e) => data(e).source.plugin === "compact")!
      assert.strictEqual(typeof summary.surfaceOp, "object")
      const before = texts(yield* messagesAt(ID, summary.seq - 1))
      assert.isTrue(before.includes("user:Fix the typo in README.md"))
      assert.isTrue(before.includes("assistant:Fixed: the heading now reads \"Project\"."))
      assert.deepStrictEqual(texts(yield* messagesOf(ID)), [
        "user:The user asked to fix a README typo; it was fixed with apply_patch.",
        "user:Now search the web for the latest release",
        "assistant:Version 2.0 is the latest."
      ])
    })))

  it.scoped("importing twice makes no second session; --force replaces the imported one", () =>
    run(Effect.gen(function*() {
      yield* importCodex(tree)
      const before = yield* eventsOf(ID)
      const [again] = yield* importCodex(tree)
      assert.strictEqual(again.sessions[0].status, "unchanged")
      const [forced] = yield* importCodex(tree, { force: true })
      assert.strictEqual(forced.sessions[0].status, "replaced")
      assert.deepStrictEqual(yield* eventsOf(ID), before)
    })))
  it.scoped("compacted with replacement_history (current versions): the next request starts from exactly those items", () =>
    run(Effect.gen(function*() {
      const current = "019d24c3-5a1e-7b20-9f00-3c4d5e6f7a80"
      const id = `codex:${current}`
      const [report] = yield* importCodex(`${fixtures}/codex/current/rollout-2026-03-25T11-31-00-${current}.jsonl`)
      assert.deepStrictEqual(report.sessions.map((s) => [s.id, s.status, s.toolCalls, s.toolResults]), [[id, "imported", 1, 1]])
      assert.strictEqual(yield* verified(id), "ok")
      assert.deepStrictEqual(report.keptReasons, {
        "event_msg:user_message": 1,
        "event_msg:agent_message": 1,
        "event_msg:task_complete": 1,
        "event_msg:context_compacted": 1,
        "event_msg:item_completed": 1,
        "type:world_state": 1
      })
      const events = yield* eventsOf(id)
      const compact = byType(events, "user/message").filter((e) => data(e).source.plugin === "compact")
      // local compaction: three items, the first replacing the surface; remote: four
      assert.deepStrictEqual(compact.map((e) => [data(e).source.compactionId, data(e).source.item, typeof e.surfaceOp === "object"]), [
        [`${current}:13`, "message", true],
        [`${current}:13`, "message", false],
        [`${current}:13`, "message", false],
        [`${current}:18`, "message", true],
        [`${current}:18`, "reasoning", false],
        [`${current}:18`, "compaction", false],
        [`${current}:18`, "compaction_summary", false]
      ])
      // what the request after the second compaction held: the kept prompt, the encrypted items
      // (never shown as text), then the new prompt and answer
      const after = yield* messagesOf(id)
      assert.deepStrictEqual(texts(after), [
        "user:Now make the header blue",
        "user:reasoning",
        "user:codex:compaction",
        "user:codex:compaction_summary",
        "user:And the footer?",
        "assistant:The footer is blue too."
      ])
      assert.deepStrictEqual(after[1].content[0], { type: "reasoning", text: "brief", encryptedContent: "gAAAAABp-two==" })
      assert.deepStrictEqual(after[2].content[0], { type: "codex:compaction", encrypted_content: "gAAAAABp-three==" })
      // between the two: the local compaction's items, the image kept inline
      const middle = yield* messagesAt(id, compact[3].seq - 1)
      assert.isTrue(texts(middle)[0].startsWith("user:<environment_context>"))
      assert.deepStrictEqual(middle[1].content[1], { type: "image", attachment: { imageUrl: "data:image/png;base64,iVBORw0KGgo=" } })
      assert.isTrue(texts([middle[2]])[0].startsWith("user:Another language model started"))
      assert.deepStrictEqual(texts(middle.slice(3)), ["user:Now make the header blue", "assistant:Done: the header is blue."])
      // the record's envelope keeps its message, not the replacement history (stored once, as events)
      const envelope = byType(events, "import/source").find((e) => data(e).line === 13)!
      assert.strictEqual(data(envelope).record.payload.message.slice(0, 15), "Another languag")
      assert.isUndefined(data(envelope).record.payload.replacement_history)
    })))
  it.scoped("a compressed rollout (.jsonl.zst, Codex 0.137+) is reported as not read, never passed over", () =>
    run(Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* tempDir
      yield* fs.makeDirectory(`${dir}/2026/08/01`, { recursive: true })
      yield* fs.copyFile(file, `${dir}/2026/08/01/rollout-a.jsonl`)
      // zstd's magic number, then bytes: what an idle rollout becomes
      yield* fs.writeFile(`${dir}/2026/08/01/rollout-b.jsonl.zst`, new Uint8Array([0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3]))
      const reports = yield* importCodex(dir)
      assert.deepStrictEqual(reports.map((r) => [r.file.slice(dir.length), r.sessions.length, r.error?._tag]), [
        ["/2026/08/01/rollout-a.jsonl", 1, undefined],
        ["/2026/08/01/rollout-b.jsonl.zst", 0, "StoreFailure"]
      ])
      assert.include(reports[1].error?.message, "decompress it (zstd -d)")
      // a compressed file named on its own is reported the same way
      const [named] = yield* importCodex(`${dir}/2026/08/01/rollout-b.jsonl.zst`)
      assert.strictEqual(named.error?._tag, "StoreFailure")
      assert.deepStrictEqual(named.records, { read: 0, mapped: 0, kept: 0, refused: 0 })
    })))
  it.scoped("a subagent's rollout is a child session of its spawner, a fork names the session it came from", () =>
    run(Effect.gen(function*() {
      const parent = "019e5b00-0000-7000-8000-000000000001"
      const child = "019e5c04-1e99-7000-8000-000000000002"
      const fork = "019e5c04-6425-7000-8000-000000000003"
      const dir = `${fixtures}/codex/current`
      const [c] = yield* importCodex(`${dir}/rollout-2026-05-24T21-00-03-${child}.jsonl`)
      const [f] = yield* importCodex(`${dir}/rollout-2026-05-24T21-00-06-${fork}.jsonl`)
      // the parent's session_meta replayed inside does not change whose rollout it is
      assert.deepStrictEqual([...c.sessions, ...f.sessions].map((s) => [s.id, s.parentSession, s.status]), [
        [`codex:${child}`, `codex:${parent}`, "imported"],
        [`codex:${fork}`, `codex:${parent}`, "imported"]
      ])
      const store = yield* SessionStore
      const headers = new Map((yield* store.list()).map((h) => [h.id, h]))
      assert.strictEqual(headers.get(`codex:${child}`)?.origin, "subagent")
      assert.strictEqual(headers.get(`codex:${child}`)?.delegationDepth, 1)
      assert.isUndefined(headers.get(`codex:${fork}`)?.origin)
      assert.strictEqual(data((yield* eventsOf(`codex:${child}`))[0]).spawnedBy, parent)
      assert.strictEqual(data((yield* eventsOf(`codex:${fork}`))[0]).forkedFrom, parent)
      for (const id of [child, fork]) assert.strictEqual(yield* verified(`codex:${id}`), "ok")
      // the copied history is part of the child's log, then its own turn
      assert.deepStrictEqual(texts(yield* messagesOf(`codex:${child}`)), [
        "user:Review the parser",
        "assistant:Spawning a reviewer.",
        "user:Check parse.rs for panics",
        "assistant:No panics found."
      ])
    })))
})
