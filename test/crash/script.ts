/**
 * A scripted, keyless agent for the repair and crash tests (the former demo script): canonical
 * turns (SPEC §1.6) with streamed chunks, tool calls and results written through the `Session`
 * service, and a turn that dies inside a recorded tool call.
 */
import * as Effect from "effect/Effect"
import { type AppendError, Session } from "../../src/services/Session.js"
import { textContent as text } from "../helpers/events.js"

/** One tool call of a scripted step. */
export interface ScriptedCall {
  readonly name: string
  readonly args: Record<string, unknown>
  readonly result: string
}

/** One model call of a scripted turn: streamed text, then tool calls. */
export interface ScriptedStep {
  readonly text: string
  readonly calls?: ReadonlyArray<ScriptedCall>
}

const PROVIDER = "scripted"
const MODEL = "demo-model"

/** The request header every scripted call uses. */
export const demoHeader = {
  config: { provider: PROVIDER, model: MODEL, maxTokens: 1024 },
  system: "You are a careful coding agent. Use tools to inspect the workspace before answering.",
  tools: [
    { name: "list_files", description: "List files in a directory", parameters: { type: "object", properties: { dir: { type: "string" } } } },
    { name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } } } }
  ]
}


/** Stream one model call as chunks and finalise its assistant message citing them. */
const modelCall = (turn: number, step: number, scripted: ScriptedStep) =>
  Effect.gen(function*() {
    const session = yield* Session
    const chunkSeqs: Array<number> = []
    const words = scripted.text.split(/(?<= )/)
    const chunk = (c: Record<string, unknown>) =>
      session.append("assistant/chunk", { turn, step, chunk: c as never }).pipe(Effect.map((e) => chunkSeqs.push(e.seq)))
    yield* chunk({ type: "block-start", index: 0, blockType: "text" })
    for (const w of words) yield* chunk({ type: "text-delta", index: 0, text: w })
    yield* chunk({ type: "block-end", index: 0, block: { type: "text", text: scripted.text } })
    const calls = scripted.calls ?? []
    const callBlocks = calls.map((c, i) => ({
      type: "tool-call",
      id: `call-${turn}-${step}-${i + 1}`,
      name: c.name,
      arguments: JSON.stringify(c.args)
    }))
    for (const [i, b] of callBlocks.entries()) {
      yield* chunk({ type: "tool-call-delta", index: i + 1, id: b.id, name: b.name, argumentsDelta: b.arguments })
    }
    yield* chunk({ type: "usage", usage: { inputTokens: 100 * step, outputTokens: words.length } })
    yield* chunk({ type: "finish", reason: { kind: calls.length > 0 ? "tool-calls" : "stop" } })
    yield* session.append("assistant/message", {
      turn,
      step,
      message: {
        id: `msg-${turn}-${step}`,
        role: "assistant",
        content: [...text(scripted.text), ...callBlocks] as never,
        source: { kind: "model", provider: PROVIDER, model: MODEL }
      },
      usage: { inputTokens: 100 * step, outputTokens: words.length }
    }, { surfaceOp: "append", sourceEventSeqs: chunkSeqs })
    return callBlocks
  })

/** Run one tool call: `tool/call`, then its `tool/result` citing it. */
const runTool = (turn: number, step: number, block: { id: string; name: string; arguments: string }, result: string) =>
  Effect.gen(function*() {
    const session = yield* Session
    const call = yield* session.append("tool/call", { turn, step, callId: block.id, name: block.name, arguments: block.arguments })
    yield* session.append("tool/result", {
      turn,
      step,
      message: {
        id: `result-${block.id}`,
        role: "user",
        content: [{ type: "tool-result", toolCallId: block.id, content: text(result) as never }],
        source: { kind: "tool", callId: block.id }
      }
    }, { surfaceOp: "append", sourceEventSeqs: [call.seq] })
  })

/** One complete scripted turn. */
export const scriptedTurn = (turn: number, prompt: string, steps: ReadonlyArray<ScriptedStep>, firstRequest: "initial" | "resume" | undefined) =>
  Effect.gen(function*() {
    const session = yield* Session
    yield* session.append("turn/start", { turn })
    for (const [i, scripted] of steps.entries()) {
      const step = i + 1
      yield* session.append("step/start", { turn, step })
      if (step === 1) {
        yield* session.append("user/message", { id: `prompt-${turn}`, role: "user", content: text(prompt) as never, source: { kind: "user" } }, {
          surfaceOp: "append"
        })
      }
      if (step === 1 && firstRequest !== undefined) {
        yield* session.append("request/header", { header: demoHeader, reason: firstRequest })
        yield* session.append("request/context", { provider: PROVIDER, model: MODEL, contextWindow: 8192 })
      }
      const blocks = yield* modelCall(turn, step, scripted)
      for (const [k, b] of blocks.entries()) yield* runTool(turn, step, b, scripted.calls![k].result)
      yield* session.append("step/end", { turn, step })
    }
    yield* session.append("turn/end", { turn, reason: { kind: "completed" } })
  })

/**
 * The turn that crashes: the model asks for a tool, the call is recorded as started, and the
 * process dies inside the tool body (`die` is called there). Nothing after it is written.
 */
export const crashingTurn = (turn: number, die: Effect.Effect<never>): Effect.Effect<never, AppendError, Session> =>
  Effect.gen(function*() {
    const session = yield* Session
    yield* session.append("turn/start", { turn })
    yield* session.append("step/start", { turn, step: 1 })
    yield* session.append("user/message", {
      id: `prompt-${turn}`,
      role: "user",
      content: text("Run the migration script and report back.") as never,
      source: { kind: "user" }
    }, { surfaceOp: "append" })
    const blocks = yield* modelCall(turn, 1, {
      text: "I will run the migration now.",
      calls: [{ name: "run_migration", args: { script: "migrate.sql" }, result: "" }, {
        name: "read_file",
        args: { path: "migration.log" },
        result: ""
      }]
    })
    yield* session.append("tool/call", { turn, step: 1, callId: blocks[0].id, name: blocks[0].name, arguments: blocks[0].arguments })
    return yield* die
  })
