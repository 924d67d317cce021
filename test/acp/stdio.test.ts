/**
 * The `session-log acp` command through a real stdio subprocess with the SDK's own client
 * (ACP.md §1.5, §2.6): a session created, prompted (a plain answer, a gated tool allowed by the
 * client), the process closed by ending stdin, then a second process loads and replays it and
 * runs tools whose call ids the replay does not have. Every line the process wrote on stdout is a
 * JSON-RPC frame.
 */
import * as acp from "@agentclientprotocol/sdk"
import { assert, describe, it } from "@effect/vitest"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Readable, Writable } from "node:stream"
import { afterAll, beforeAll } from "vitest"
import { BIN, buildBundle, removeBundle } from "../cli/helpers.js"

// generous limits: a subprocess on a possibly loaded machine; nothing is timed
const SLOW = 600_000

let dir: string
let bundle: string

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "esl-acp-"))
  bundle = await buildBundle("acp-test")
}, 600_000)
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true })
  removeBundle(bundle)
})

interface Agent {
  readonly child: ChildProcess
  readonly stdout: Array<string>
  readonly updates: Array<acp.SessionNotification>
  readonly connection: acp.ClientConnection
  readonly exited: Promise<number | null>
}

const start = (extra: ReadonlyArray<string> = [], store = `jsonl:${path.join(dir, "store")}`): Agent => {
  const child = spawn(process.execPath, [BIN, "acp", "--store", store, ...extra], {
    cwd: dir,
    env: { ...process.env, SESSION_LOG_BUNDLE: bundle, NO_COLOR: "1" },
    stdio: ["pipe", "pipe", "pipe"]
  })
  const stdout: Array<string> = []
  child.stdout!.on("data", (chunk: Buffer) => stdout.push(chunk.toString("utf8")))
  child.stderr!.on("data", () => undefined)
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)))
  const updates: Array<acp.SessionNotification> = []
  const client = acp.client({ name: "stdio-test" })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      updates.push(params)
    })
    .onRequest(acp.methods.client.session.requestPermission, () =>
      Promise.resolve({ outcome: { outcome: "selected", optionId: "allow-once" } }))
  const stream = acp.ndJsonStream(
    Writable.toWeb(child.stdin!) as WritableStream<Uint8Array>,
    Readable.toWeb(child.stdout!) as unknown as ReadableStream<Uint8Array>
  )
  const connection = client.connect(stream)
  connection.closed.catch(() => undefined)
  return { child, stdout, updates, connection, exited }
}

const stop = async (agent: Agent): Promise<number | null> => {
  agent.child.stdin!.end()
  return agent.exited
}

/** Every stdout line is one JSON-RPC 2.0 frame. */
const assertOnlyFrames = (agent: Agent) => {
  const text = agent.stdout.join("")
  assert.isTrue(text.endsWith("\n"))
  for (const line of text.split("\n").slice(0, -1)) {
    const frame = JSON.parse(line)
    assert.strictEqual(frame.jsonrpc, "2.0", line)
  }
}

const texts = (updates: ReadonlyArray<acp.SessionNotification>, kind: string) =>
  updates.flatMap((n) => {
    const content = n.update.sessionUpdate === kind ? (n.update as { content?: unknown }).content : undefined
    const block = content as { type?: unknown; text?: unknown } | undefined
    return block?.type === "text" && typeof block.text === "string" ? [block.text] : []
  })

describe("session-log acp over stdio", () => {
  it("serves a session, and a second process loads and replays it", async () => {
    const first = start()
    const init = await first.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    assert.strictEqual(init.agentCapabilities?.loadSession, true)
    const { sessionId } = await first.connection.agent.request("session/new", { cwd: dir, mcpServers: [] })
    const a = await first.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] })
    assert.strictEqual(a.stopReason, "end_turn")
    assert.match(texts(first.updates, "agent_message_chunk").join(""), /You said: hello/)
    const b = await first.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "echo hi there" }] })
    assert.strictEqual(b.stopReason, "end_turn")
    const statuses = first.updates.flatMap((n) => n.update.sessionUpdate === "tool_call_update" ? [n.update.status] : [])
    assert.deepStrictEqual(statuses, ["in_progress", "completed"])
    assert.strictEqual(await stop(first), 0)
    assertOnlyFrames(first)

    const second = start()
    await second.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    const listed = await second.connection.agent.request("session/list", {})
    assert.deepStrictEqual(listed.sessions.map((s) => s.sessionId), [sessionId])
    await second.connection.agent.request("session/load", { sessionId, cwd: dir, mcpServers: [] })
    assert.deepStrictEqual(texts(second.updates, "user_message_chunk"), ["hello", "echo hi there"])
    assert.deepStrictEqual(
      second.updates.map((n) => n.update.sessionUpdate),
      [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "user_message_chunk",
        "tool_call",
        "agent_message_chunk"
      ]
    )
    // live tool calls of the second process get ids the replay does not have: an editor adds cards
    const toolIds = (updates: ReadonlyArray<acp.SessionNotification>) =>
      updates.flatMap((n) => n.update.sessionUpdate === "tool_call" ? [n.update.toolCallId] : [])
    const replayed = toolIds(second.updates)
    assert.strictEqual(replayed.length, 1)
    const replayCount = second.updates.length
    for (const text of ["list", "echo once more"]) {
      const answer = await second.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] })
      assert.strictEqual(answer.stopReason, "end_turn")
    }
    const live = toolIds(second.updates.slice(replayCount))
    assert.strictEqual(live.length, 2)
    assert.strictEqual(new Set([...replayed, ...live]).size, 3, JSON.stringify([replayed, live]))
    assert.strictEqual(await stop(second), 0)
    assertOnlyFrames(second)
  }, SLOW)

  it("list_files lists the session's cwd, not the agent process's; session/list titles a session by its first prompt", async () => {
    const project = path.join(dir, "project")
    fs.mkdirSync(project, { recursive: true })
    fs.writeFileSync(path.join(project, "alpha.txt"), "a")
    fs.writeFileSync(path.join(project, "beta.md"), "b")
    const agent = start([], `jsonl:${path.join(dir, "cwd-store")}`)
    await agent.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    const { sessionId } = await agent.connection.agent.request("session/new", { cwd: project, mcpServers: [] })
    const long = `list ${"the files of this project ".repeat(6)}`
    const answer = await agent.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: long }] })
    assert.strictEqual(answer.stopReason, "end_turn")
    const results = agent.updates.flatMap((n) =>
      n.update.sessionUpdate === "tool_call_update" && n.update.status === "completed" ? [JSON.stringify(n.update)] : []
    )
    assert.strictEqual(results.length, 1)
    assert.include(results[0], "alpha.txt")
    assert.include(results[0], "beta.md")
    assert.notInclude(results[0], "cwd-store", "not the process's working directory")
    const listed = await agent.connection.agent.request("session/list", {})
    const title = listed.sessions[0]?.title ?? ""
    assert.isTrue(title.startsWith("list the files of this project"), title)
    assert.isTrue(title.endsWith("…") && [...title].length === 80, title)
    assert.strictEqual(await stop(agent), 0)
    // a second process titles the stored session the same way
    const second = start([], `jsonl:${path.join(dir, "cwd-store")}`)
    await second.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    const again = await second.connection.agent.request("session/list", {})
    assert.strictEqual(again.sessions[0]?.title, title)
    assert.strictEqual(await stop(second), 0)
  }, SLOW)

  it("acp --store x.db creates no database before a session is written, and an agent that only lists writes nothing", async () => {
    const root = path.join(dir, "on-demand")
    fs.mkdirSync(root)
    const db = path.join(root, "x.db")
    const files = () =>
      Object.fromEntries(fs.readdirSync(root).sort().map((name) => {
        const st = fs.statSync(path.join(root, name), { bigint: true })
        return [name, `${st.mtimeNs} ${fs.readFileSync(path.join(root, name)).toString("base64")}`]
      }))

    const idle = start([], db)
    await idle.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    assert.deepStrictEqual((await idle.connection.agent.request("session/list", {})).sessions, [])
    await idle.connection.agent.request("session/new", { cwd: dir, mcpServers: [] })
    assert.strictEqual(await stop(idle), 0)
    assert.deepStrictEqual(fs.readdirSync(root), [], "no database (nor -wal, -shm) before a session is written")

    const writer = start([], db)
    await writer.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    const { sessionId } = await writer.connection.agent.request("session/new", { cwd: dir, mcpServers: [] })
    const answer = await writer.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] })
    assert.strictEqual(answer.stopReason, "end_turn")
    assert.strictEqual(await stop(writer), 0)
    assert.deepStrictEqual(fs.readdirSync(root), ["x.db"])

    const before = files()
    const reader = start([], db)
    await reader.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    const listed = await reader.connection.agent.request("session/list", {})
    assert.deepStrictEqual(listed.sessions.map((s) => s.sessionId), [sessionId])
    await reader.connection.agent.request("session/new", { cwd: dir, mcpServers: [] })
    assert.strictEqual(await stop(reader), 0)
    assert.deepStrictEqual(files(), before, "the database's bytes and mtime are unchanged, no -wal/-shm left")

    // a loaded session read through the read-only open is written on its next prompt
    const resumed = start([], db)
    await resumed.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    await resumed.connection.agent.request("session/load", { sessionId, cwd: dir, mcpServers: [] })
    const again = await resumed.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "more" }] })
    assert.strictEqual(again.stopReason, "end_turn")
    assert.strictEqual(await stop(resumed), 0)
    const check = start([], db)
    await check.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    await check.connection.agent.request("session/load", { sessionId, cwd: dir, mcpServers: [] })
    assert.deepStrictEqual(texts(check.updates, "user_message_chunk"), ["hello", "more"])
    assert.strictEqual(await stop(check), 0)
  }, SLOW)

  it("--model <module> serves the LanguageModel layer a module exports, recorded under its route", async () => {
    const module = path.resolve(__dirname, "fixtures/model-module.mjs")
    const root = path.join(dir, "model-store")
    const agent = start(["--model", module], `jsonl:${root}`)
    await agent.connection.agent.request("initialize", { protocolVersion: acp.PROTOCOL_VERSION })
    const { sessionId } = await agent.connection.agent.request("session/new", { cwd: dir, mcpServers: [] })
    const answer = await agent.connection.agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text: "hello" }] })
    assert.strictEqual(answer.stopReason, "end_turn")
    assert.deepStrictEqual(texts(agent.updates, "agent_message_chunk"), ["an answer from the model module"])
    assert.strictEqual(await stop(agent), 0)
    assertOnlyFrames(agent)
    const [file] = fs.readdirSync(root)
    const header = fs.readFileSync(path.join(root, file), "utf8").split("\n").map((l) => l === "" ? undefined : JSON.parse(l))
      .find((r) => r?.type === "request/header")
    assert.deepStrictEqual(header.data.header.config, { provider: "fixture", model: "module-model-1" })
  }, SLOW)

  it("--model of a module without a `layer` export is a usage error (exit 2), nothing served or created", async () => {
    const module = path.join(dir, "no-layer.mjs")
    fs.writeFileSync(module, "export const route = { provider: 'x', model: 'y' }\n")
    const root = path.join(dir, "never")
    const agent = start(["--model", module], `jsonl:${root}`)
    let stderr = ""
    agent.child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString("utf8")))
    assert.strictEqual(await agent.exited, 2)
    assert.include(stderr, "has no `layer` export")
    assert.isFalse(fs.existsSync(root))
  }, SLOW)
})
