/**
 * The `session-log acp` command through a real stdio subprocess with the SDK's own client
 * (ACP.md §1.5, §2.6): a session created, prompted (a plain answer, a gated tool allowed by the
 * client), the process closed by ending stdin, then a second process loads the session and
 * replays it. Every line the process wrote on stdout is a JSON-RPC frame.
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

const start = (): Agent => {
  const child = spawn(process.execPath, [BIN, "acp", "--store", `jsonl:${path.join(dir, "store")}`], {
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
        "tool_call_update",
        "tool_call_update",
        "agent_message_chunk"
      ]
    )
    assert.strictEqual(await stop(second), 0)
    assertOnlyFrames(second)
  }, SLOW)
})
