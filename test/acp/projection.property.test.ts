/**
 * The one projection (ACP.md §2.5, §2.6): for any scripted session driven through the adapter, the
 * live `session/update` sequence, coalesced, equals the `session/load` replay of the resulting log
 * (without the user chunks, which only replay shows, and which are the prompts in order); every
 * replayed update precedes the load answer; nothing is capped.
 */
import type * as acp from "@agentclientprotocol/sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import type { CallScript, ScriptPart } from "../../src/layers/ScriptedLanguageModel.js"
import { coalesce } from "../../src/programs/acp/Acp.js"
import { connect, CWD, environment } from "./helpers.js"

const word = fc.stringMatching(/^[a-z]{1,6} ?$/)
const deltas = fc.array(word, { minLength: 1, maxLength: 5 })
const textPart = (type: "text" | "reasoning") =>
  deltas.map((d): ScriptPart => ({ type, text: d.join(""), deltas: d }))

/** One model call: optional reasoning, optional text, then tool calls (if it continues the turn) or a stop. */
const callScript = (continues: boolean, n: { next: number }) =>
  fc.tuple(
    fc.option(textPart("reasoning"), { nil: undefined }),
    fc.option(textPart("text"), { nil: undefined }),
    fc.array(fc.stringMatching(/^[a-z]{1,4}$/), { minLength: 1, maxLength: 2 })
  ).map(([reasoning, text, paths]): CallScript => [
    ...(reasoning === undefined ? [] : [reasoning]),
    ...(text === undefined ? [] : [text]),
    ...(continues
      ? paths.map((path): ScriptPart => ({ type: "tool-call", id: `call-${n.next++}`, name: "read_file", params: { path } }))
      : []),
    { type: "finish", reason: continues ? "tool-calls" : "stop" }
  ])

/** A session: turns of 1–3 model calls each (tool rounds, then an answer). */
const session = fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 4 }).chain((turns) => {
  const n = { next: 1 }
  return fc.tuple(...turns.map((calls) =>
    fc.tuple(...Array.from({ length: calls }, (_, i) => callScript(i < calls - 1, n)))
  ))
})

const sessionUpdates = (frames: ReadonlyArray<{ kind: string }>, sessionId: string, until?: number) =>
  frames.slice(0, until).flatMap((f: any) => f.kind === "update" && f.sessionId === sessionId ? [f.update as acp.SessionUpdate] : [])

describe("ACP projection: live equals replay", () => {
  it.effect.prop("for any scripted session, coalesced live updates equal the session/load replay", [session], ([turns]) => {
    const scripts = turns.flatMap((calls) => calls)
    const prompts = turns.map((_, i) => `prompt ${i + 1}`)
    return Effect.gen(function*() {
      const live = yield* connect()
      const { sessionId } = yield* live.request("session/new", { cwd: CWD, mcpServers: [] })
      for (const text of prompts) {
        const answer = yield* live.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] })
        assert.strictEqual(answer.stopReason, "end_turn")
      }
      yield* live.close
      const liveUpdates = coalesce(sessionUpdates(live.frames, sessionId))

      const loader = yield* connect()
      yield* loader.request("session/load", { sessionId, cwd: CWD, mcpServers: [] })
      const answer = loader.frames.findIndex((f) => f.kind === "response" && f.method === "session/load")
      assert.deepStrictEqual(sessionUpdates(loader.frames, sessionId), sessionUpdates(loader.frames, sessionId, answer))
      const replay = sessionUpdates(loader.frames, sessionId, answer)
      const users = replay.filter((u) => u.sessionUpdate === "user_message_chunk")
      assert.deepStrictEqual(users.map((u: any) => u.content.text), prompts)
      assert.deepStrictEqual(replay.filter((u) => u.sessionUpdate !== "user_message_chunk"), liveUpdates)
    }).pipe(Effect.scoped, Effect.provide(environment(scripts).layer))
  }, { fastCheck: { numRuns: 30 } })
})
