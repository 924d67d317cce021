/**
 * The ACP agent through the SDK's in-process connection (ACP.md §2.6): truthful capabilities,
 * session/new and its cwd rule, prompts and their ordered output, stop reasons, one prompt in
 * flight, load (whole transcript before the answer), resume (no replay), list, modes and their
 * header changes, set_config_option's rejections, permissions (fail closed, allow always, a tool the
 * mode does not offer), a store failure as an internal error, multi-session demux.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as AiError from "@effect/ai/AiError"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import * as TestClock from "effect/TestClock"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { MODE_EVENT } from "../../src/programs/acp/Acp.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import {
  call,
  connect,
  CWD,
  environment,
  expectError,
  type Harness,
  headerReasons,
  say,
  storedEvents,
  waitFor
} from "./helpers.js"

/** The `data` of a JSON-RPC error: the rejection's message, and the library error's tag. */
const dataOf = (e: acp.RequestError) => e.data as { readonly _tag?: string; readonly message?: string }

const newSession = (h: { request: (m: string, p: unknown) => Effect.Effect<any, acp.RequestError> }) =>
  Effect.map(h.request("session/new", { cwd: CWD, mcpServers: [] }), (r) => r.sessionId as string)

describe("ACP agent (in-process)", () => {
  it.scoped("initialize advertises only what is true (ACP.md §2.4)", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const init = h.frames.find((f) => f.kind === "response" && f.method === "initialize")
      assert.deepStrictEqual((init as any).result.agentCapabilities, {
        loadSession: true,
        promptCapabilities: { image: false, audio: false, embeddedContext: false },
        mcpCapabilities: { http: false, sse: false },
        sessionCapabilities: { list: {}, resume: {} }
      })
      assert.strictEqual((init as any).result.protocolVersion, acp.PROTOCOL_VERSION)
    }).pipe(Effect.provide(environment([]).layer)))

  it.scoped("session/new requires an absolute cwd and no MCP servers; returns modes and config options", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      yield* expectError(h.request("session/new", { cwd: "relative/dir", mcpServers: [] }), -32602)
      yield* expectError(
        h.request("session/new", { cwd: CWD, mcpServers: [{ name: "x", command: "x", args: [], env: [] }] }),
        -32602
      )
      const created = yield* h.request("session/new", { cwd: CWD, mcpServers: [] })
      assert.strictEqual(created.modes.currentModeId, "code")
      assert.deepStrictEqual(created.modes.availableModes.map((m: any) => m.id), ["code", "plan"])
      assert.strictEqual(created.configOptions[0].id, "mode")
    }).pipe(Effect.provide(environment([]).layer)))

  it.scoped("a prompt streams its output before the answer end_turn; user text is not echoed live", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      const answer = yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "hi" }] })
      assert.deepStrictEqual(answer, { stopReason: "end_turn" })
      const last = h.frames[h.frames.length - 1]!
      assert.strictEqual(last.kind, "response")
      const text = h.updates(id).map((u) => u.sessionUpdate === "agent_message_chunk" && u.content.type === "text" ? u.content.text : "").join("")
      assert.strictEqual(text, "hello there friend")
      assert.isFalse(h.updates(id).some((u) => u.sessionUpdate === "user_message_chunk"))
    }).pipe(Effect.provide(environment([say("hello there friend")]).layer)))

  it.scoped("text blocks and resource links become one user message; unsupported blocks are rejected", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      yield* expectError(
        h.request("session/prompt", { sessionId: id, prompt: [{ type: "image", data: "AA==", mimeType: "image/png" }] }),
        -32602
      )
      yield* h.request("session/prompt", {
        sessionId: id,
        prompt: [{ type: "text", text: "look at" }, { type: "resource_link", name: "a.ts", uri: "file:///work/project/a.ts" }]
      })
      const events = yield* storedEvents(id)
      const users = events.filter((e) => e.type === "user/message").map((e) => (e.data as any).content)
      assert.deepStrictEqual(users, [[{ type: "text", text: "look at\n[@a.ts](file:///work/project/a.ts)" }]])
    }).pipe(Effect.provide(environment([say("ok")]).layer)))

  it.scoped("unknown sessions are rejected with -32002; unknown cancels are ignored", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      yield* expectError(h.request("session/prompt", { sessionId: "nope", prompt: [{ type: "text", text: "x" }] }), -32002)
      yield* h.notify("session/cancel", { sessionId: "nope" })
      yield* expectError(h.request("session/set_mode", { sessionId: "nope", modeId: "plan" }), -32002)
    }).pipe(Effect.provide(environment([]).layer)))

  it.scoped("tool round: tool_call pending, in_progress, completed, in log order, all before the answer", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      const answer = yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "read a" }] })
      assert.strictEqual(answer.stopReason, "end_turn")
      const tools = h.updates(id).filter((u) => u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update")
      assert.deepStrictEqual(tools.map((u: any) => [u.sessionUpdate, u.status]), [
        ["tool_call", "pending"],
        ["tool_call_update", "in_progress"],
        ["tool_call_update", "completed"]
      ])
      assert.strictEqual((tools[0] as any).title, "read_file a.txt")
      assert.strictEqual((tools[0] as any).kind, "read")
      assert.deepStrictEqual((tools[2] as any).content, [{ type: "content", content: { type: "text", text: "contents of a.txt" } }])
    }).pipe(Effect.provide(environment([call("c1", "read_file", { path: "a.txt" }), say("done")]).layer)))

  it.scoped("§7.3 sessions are batched by default: the store is written at the checkpoints, not once per streamed chunk", () =>
    Effect.gen(function*() {
      const writes: Array<number> = []
      const inner = yield* makeMemoryStore()
      const counting: SessionStoreShape = {
        ...inner,
        append: (id, events, options) => Effect.zipRight(Effect.sync(() => void writes.push(events.length)), inner.append(id, events, options))
      }
      yield* Effect.gen(function*() {
        const h = yield* connect()
        const id = yield* newSession(h)
        const answer = yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "read a" }] })
        assert.strictEqual(answer.stopReason, "end_turn")
        const stored = (yield* inner.load(id)).events.length
        // every event of the turn is stored when the prompt answers (checkpoint at the turn's end)
        assert.strictEqual(writes.reduce((a, b) => a + b, 0), stored)
        // written at the checkpoints: pre-step, before the model, before the tool body, pre-step 2,
        // before the model again, the turn's end; far fewer writes than events (the chunks ride along)
        assert.isAtMost(writes.length, 6)
        assert.isAbove(stored, 2 * writes.length)
      }).pipe(Effect.provide(
        environment([call("c1", "read_file", { path: "a.txt" }), say("done, the file says hello")], {
          store: Layer.succeed(SessionStore, counting)
        }).layer
      ))
    }))

  it.scoped("stop reasons: max_tokens, max_turn_requests, refusal; a failed turn is a JSON-RPC error after its output", () =>
    Effect.gen(function*() {
      const h = yield* connect({ agent: { maxTurnRequests: 1 } })
      const id = yield* newSession(h)
      const prompt = (text: string) => h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text }] })
      assert.strictEqual((yield* prompt("long")).stopReason, "max_tokens")
      assert.strictEqual((yield* prompt("loop")).stopReason, "max_turn_requests")
      assert.strictEqual((yield* prompt("bad")).stopReason, "refusal")
      const before = h.frames.length
      const error = yield* expectError(prompt("fail"), -32603)
      assert.match(JSON.stringify(error.data), /turnEnd/)
      // the partial output of the failed turn arrived before the error
      assert.isTrue(h.frames.slice(before).some((f) => f.kind === "update"))
    }).pipe(Effect.provide(environment([
      [{ type: "text", text: "cut" }, { type: "finish", reason: "length" }],
      call("c1", "read_file", { path: "a" }),
      [{ type: "text", text: "no" }, { type: "finish", reason: "content-filter" }],
      [{ type: "text", text: "partial" }, { type: "fail", error: new AiError.UnknownError({ module: "Model", method: "stream", description: "boom" }) }]
    ]).layer)))

  it.scoped("one prompt in flight per session; a second one is rejected, another session is independent", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const a = yield* newSession(h)
      const b = yield* newSession(h)
      const first = yield* Effect.fork(h.request("session/prompt", { sessionId: a, prompt: [{ type: "text", text: "wait" }] }))
      yield* waitFor(() => h.updates(a).length > 0)
      yield* expectError(h.request("session/prompt", { sessionId: a, prompt: [{ type: "text", text: "again" }] }), -32602)
      const other = yield* h.request("session/prompt", { sessionId: b, prompt: [{ type: "text", text: "b" }] })
      assert.strictEqual(other.stopReason, "end_turn")
      assert.isFalse(h.updates(a).some((u) => u.sessionUpdate === "agent_message_chunk" && (u.content as any).text.includes("from b")))
      yield* h.notify("session/cancel", { sessionId: a })
      const answer = yield* first.await.pipe(Effect.flatten)
      assert.strictEqual(answer.stopReason, "cancelled")
    }).pipe(Effect.provide(environment([
      [{ type: "text", text: "thinking " }, { type: "hang" }],
      say("from b")
    ]).layer)))

  it.scoped("set_mode is a durable log-only event: exactly one change header at the next request, plan offers read_file only", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "one" }] })
      yield* h.request("session/set_mode", { sessionId: id, modeId: "plan" })
      const modeUpdate = h.frames.findIndex((f) => f.kind === "update" && f.update.sessionUpdate === "current_mode_update")
      const setModeAnswer = h.frames.findIndex((f) => f.kind === "response" && f.method === "session/set_mode")
      assert.isTrue(modeUpdate >= 0 && modeUpdate < setModeAnswer, "current_mode_update before the answer")
      // clients that follow config options (not session modes) see the switch too
      const optionUpdate = h.frames.findIndex((f) => f.kind === "update" && f.update.sessionUpdate === "config_option_update")
      assert.isTrue(optionUpdate >= 0 && optionUpdate < setModeAnswer, "config_option_update before the answer")
      const options = (h.frames[optionUpdate] as any).update.configOptions
      assert.deepStrictEqual(options.map((o: any) => [o.id, o.currentValue, o.options.map((v: any) => v.value)]), [["mode", "plan", ["code", "plan"]]])
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "two" }] })
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "three" }] })
      const events = yield* storedEvents(id)
      assert.deepStrictEqual(headerReasons(events), ["initial", "change"])
      const modeEvents = events.filter((e) => e.type === MODE_EVENT)
      assert.deepStrictEqual(modeEvents.map((e) => [e.data, e.ignorable]), [[{ modeId: "plan" }, true]])
      const change = events.find((e) => e.type === "request/header" && (e.data as any).reason === "change")!
      assert.deepStrictEqual((change.data as any).header.tools.map((t: any) => t.name), ["read_file"])
      assert.match((change.data as any).header.system, /plan mode/)
    }).pipe(Effect.provide(environment([say("a"), say("b"), say("c")]).layer)))

  it.scoped("switching mode and back while idle writes no change header (both events stay in the log)", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "one" }] })
      yield* h.request("session/set_mode", { sessionId: id, modeId: "plan" })
      const answer = yield* h.request("session/set_config_option", { sessionId: id, configId: "mode", value: "code" })
      assert.strictEqual(answer.configOptions[0].currentValue, "code")
      yield* expectError(h.request("session/set_mode", { sessionId: id, modeId: "nope" }), -32602)
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "two" }] })
      const events = yield* storedEvents(id)
      assert.deepStrictEqual(headerReasons(events), ["initial"])
      assert.strictEqual(events.filter((e) => e.type === MODE_EVENT).length, 2)
    }).pipe(Effect.provide(environment([say("a"), say("b")]).layer)))

  it.scoped("a switch during a running step takes effect at the following step of the same turn", () =>
    Effect.gen(function*() {
      let release: () => void = () => undefined
      const released = new Promise<void>((resolve) => (release = resolve))
      const h = yield* connect({
        permission: () => released.then(() => ({ outcome: { outcome: "selected", optionId: "allow-once" } }))
      })
      const id = yield* newSession(h)
      const prompt = yield* Effect.fork(h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "go" }] }))
      // the first step asks for permission: switch mode while it waits
      yield* waitFor(() => h.frames.some((f) => f.kind === "permission"))
      yield* h.request("session/set_mode", { sessionId: id, modeId: "plan" })
      release()
      yield* prompt.await.pipe(Effect.flatten)
      const events = yield* storedEvents(id)
      assert.deepStrictEqual(headerReasons(events), ["initial", "change"])
      const change = events.findIndex((e) => e.type === "request/header" && (e.data as any).reason === "change")
      const steps = events.slice(0, change).filter((e) => e.type === "step/start").length
      assert.strictEqual(steps, 2, "the change is written in step 2")
      assert.strictEqual(events.filter((e) => e.type === "turn/start").length, 1)
    }).pipe(Effect.provide(environment([call("w1", "write_file", { path: "x", text: "y" }), say("ok")]).layer)))

  it.scoped("gated tool: allowed once runs; denied, cancelled and failed requests never run it (fail closed)", () =>
    Effect.gen(function*() {
      const answers: Array<acp.RequestPermissionResponse | "throw"> = [
        { outcome: { outcome: "selected", optionId: "allow-once" } },
        { outcome: { outcome: "selected", optionId: "reject-once" } },
        { outcome: { outcome: "cancelled" } },
        { outcome: { outcome: "selected", optionId: "made-up" } },
        "throw"
      ]
      const env = environment([
        call("w1", "write_file", { path: "1", text: "" }),
        say("a"),
        call("w2", "write_file", { path: "2", text: "" }),
        say("b"),
        call("w3", "write_file", { path: "3", text: "" }),
        say("c"),
        call("w4", "write_file", { path: "4", text: "" }),
        say("d"),
        call("w5", "write_file", { path: "5", text: "" }),
        say("e")
      ])
      return yield* Effect.gen(function*() {
        const h = yield* connect({
          permission: async () => {
            const next = answers.shift()!
            if (next === "throw") throw acp.RequestError.internalError()
            return next
          }
        })
        const id = yield* newSession(h)
        for (const n of [1, 2, 3, 4, 5]) {
          const answer = yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: `write ${n}` }] })
          assert.strictEqual(answer.stopReason, "end_turn")
        }
        assert.deepStrictEqual(env.written, ["1"])
        // each permission request refers to a tool call already announced
        const order = h.frames.flatMap((f) =>
          f.kind === "permission" ? [`ask ${f.request.toolCall.toolCallId}`] :
          f.kind === "update" && f.update.sessionUpdate === "tool_call" ? [`show ${f.update.toolCallId}`] : []
        )
        assert.deepStrictEqual(order, ["show w1", "ask w1", "show w2", "ask w2", "show w3", "ask w3", "show w4", "ask w4", "show w5", "ask w5"])
        const statuses = h.updates(id).filter((u) => u.sessionUpdate === "tool_call_update" && u.status !== "in_progress")
          .map((u: any) => u.status)
        assert.deepStrictEqual(statuses, ["completed", "failed", "failed", "failed", "failed"])
        const codes = (yield* storedEvents(id)).filter((e) => e.type === "tool/result").map((e) => (e.data as any).error?.code)
        assert.deepStrictEqual(codes, [undefined, "PERMISSION_DENIED", "PERMISSION_CANCELLED", "PERMISSION_DENIED", "PERMISSION_UNAVAILABLE"])
      }).pipe(Effect.provide(env.layer))
    }))

  it.scoped("gated tool allowed always: the session's later calls of that tool are not asked again; another session is", () =>
    Effect.gen(function*() {
      const env = environment([
        call("w1", "write_file", { path: "1", text: "" }),
        say("a"),
        call("w2", "write_file", { path: "2", text: "" }),
        say("b"),
        call("w3", "write_file", { path: "3", text: "" }),
        say("c")
      ])
      return yield* Effect.gen(function*() {
        const answers: Array<string> = ["allow-always", "reject-once"]
        const h = yield* connect({ permission: async () => ({ outcome: { outcome: "selected", optionId: answers.shift()! } }) })
        const id = yield* newSession(h)
        for (const n of [1, 2]) {
          const answer = yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: `write ${n}` }] })
          assert.strictEqual(answer.stopReason, "end_turn")
        }
        const other = yield* newSession(h)
        yield* h.request("session/prompt", { sessionId: other, prompt: [{ type: "text", text: "write 3" }] })
        const asked = h.frames.flatMap((f) => f.kind === "permission" ? [f.request.toolCall.toolCallId] : [])
        assert.deepStrictEqual(asked, ["w1", "w3"])
        assert.deepStrictEqual(env.written, ["1", "2"])
        const statuses = h.updates(id).filter((u) => u.sessionUpdate === "tool_call_update" && u.status !== "in_progress")
          .map((u: any) => [u.toolCallId, u.status])
        assert.deepStrictEqual(statuses, [["w1", "completed"], ["w2", "completed"]])
      }).pipe(Effect.provide(env.layer))
    }))

  it.scoped("a tool the mode no longer offers is denied without asking: the client sees it failed, its body never runs", () =>
    Effect.gen(function*() {
      // one step calls write_file twice; while the first call is being asked about, the user
      // switches to plan mode (read_file only): the second call is denied before any question
      const env = environment([
        [
          { type: "tool-call", id: "w1", name: "write_file", params: { path: "1", text: "" } },
          { type: "tool-call", id: "w2", name: "write_file", params: { path: "2", text: "" } },
          { type: "finish", reason: "tool-calls" }
        ],
        say("ok")
      ])
      return yield* Effect.gen(function*() {
        let h: Harness | undefined
        h = yield* connect({
          permission: async (request) => {
            await h!.connection.agent.request("session/set_mode", { sessionId: request.sessionId, modeId: "plan" })
            return { outcome: { outcome: "selected", optionId: "allow-once" } }
          }
        })
        const id = yield* newSession(h)
        const answer = yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "write" }] })
        assert.strictEqual(answer.stopReason, "end_turn")
        const asked = h.frames.flatMap((f) => f.kind === "permission" ? [f.request.toolCall.toolCallId] : [])
        assert.deepStrictEqual(asked, ["w1"])
        assert.deepStrictEqual(env.written, ["1"])
        const settled = h.updates(id).filter((u) => u.sessionUpdate === "tool_call_update" && u.status !== "in_progress") as Array<any>
        assert.deepStrictEqual(settled.map((u) => [u.toolCallId, u.status]), [["w1", "completed"], ["w2", "failed"]])
        assert.match(settled[1].content[0].content.text, /not available in plan mode/)
        const codes = (yield* storedEvents(id)).filter((e) => e.type === "tool/result").map((e) => (e.data as any).error?.code)
        assert.deepStrictEqual(codes, [undefined, "TOOL_NOT_OFFERED"])
      }).pipe(Effect.provide(env.layer))
    }))

  it.scoped("set_config_option: an unknown option id and a non-string value are invalid params naming the problem; nothing is logged", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      const unknown = yield* expectError(
        h.request("session/set_config_option", { sessionId: id, configId: "colour", value: "blue" }),
        -32602
      )
      assert.strictEqual(dataOf(unknown).message, `session ${id}: unknown config option "colour"`)
      const boolean = yield* expectError(
        h.request("session/set_config_option", { sessionId: id, configId: "mode", type: "boolean", value: true }),
        -32602
      )
      assert.strictEqual(dataOf(boolean).message, `session ${id}: the mode option takes a mode id`)
      const mode = yield* expectError(
        h.request("session/set_config_option", { sessionId: id, configId: "mode", value: "nope" }),
        -32602
      )
      assert.strictEqual(dataOf(mode).message, `session ${id}: unknown mode "nope"`)
      yield* expectError(h.request("session/set_config_option", { sessionId: "nope", configId: "mode", value: "plan" }), -32002)
      assert.isFalse(h.frames.some((f) => f.kind === "update"), "no mode update")
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "x" }] })
      const events = yield* storedEvents(id)
      assert.strictEqual(events.filter((e) => e.type === MODE_EVENT).length, 0)
    }).pipe(Effect.provide(environment([say("a")]).layer)))

  it.scoped("a store failure is a JSON-RPC internal error (-32603) carrying its tag (a JSONL store whose directory is gone)", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* fs.makeTempDirectoryScoped()
      const env = environment([], { store: layerJsonlStore({ root }).pipe(Layer.provide(NodeContext.layer)) })
      yield* Effect.gen(function*() {
        const h = yield* connect()
        const id = yield* newSession(h)
        // a file now stands where the store's directory was: every read and write of it fails
        yield* fs.remove(root, { recursive: true })
        yield* fs.writeFileString(root, "not a directory")
        const failed = yield* expectError(h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "x" }] }), -32603)
        assert.strictEqual(dataOf(failed)._tag, "StoreFailure", JSON.stringify(failed))
        const listed = yield* expectError(h.request("session/list", {}), -32603)
        assert.strictEqual(dataOf(listed)._tag, "StoreFailure", JSON.stringify(listed))
        assert.match(String(dataOf(listed).message), /store failure in list/)
      }).pipe(Effect.provide(env.layer))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("session/list shows stored sessions with their cwd, dated by their last event", () =>
    Effect.gen(function*() {
      const h = yield* connect()
      const id = yield* newSession(h)
      yield* TestClock.adjust("1 minute")
      yield* h.request("session/prompt", { sessionId: id, prompt: [{ type: "text", text: "x" }] })
      const listed = yield* h.request("session/list", {})
      assert.deepStrictEqual(listed.sessions.map((s: any) => [s.sessionId, s.cwd, s.updatedAt]), [[id, CWD, "1970-01-01T00:01:00.000Z"]])
      const other = yield* h.request("session/list", { cwd: "/elsewhere" })
      assert.deepStrictEqual(other.sessions, [])
      // from another connection (the session not open there) the log says the same
      yield* TestClock.adjust("1 minute")
      const second = yield* connect()
      const again = yield* second.request("session/list", { cwd: CWD })
      assert.deepStrictEqual(again.sessions.map((s: any) => s.updatedAt), ["1970-01-01T00:01:00.000Z"])
    }).pipe(Effect.provide(environment([say("a")]).layer)))
})
