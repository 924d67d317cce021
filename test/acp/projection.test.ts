/**
 * The event → update projection as a pure function (ACP.md §2.5): replacements (pruning,
 * compaction) never replay as new messages, injected context is not shown, a compaction is a
 * `compaction_update` only for clients that advertised it, live chunks of one model call share
 * the `messageId` replay gives its message — a mode switch in the middle does not split them — and
 * coalescing folds a tool call's updates into the `tool_call` that announced it.
 */
import type * as acp from "@agentclientprotocol/sdk"
import { assert, describe, it } from "@effect/vitest"
import { coalesce, defaultPresenter, makeProjector, projectTranscript } from "../../src/programs/acp/Acp.js"
import type { Event } from "../../src/schema/Events.js"

let seq = 0
const ev = (type: string, data: unknown, extra: Partial<Event> = {}): Event => ({ type, seq: seq++, time: 0, data, ...extra })

const toolResult = (callId: string, text: string, surfaceOp: NonNullable<Event["surfaceOp"]>) =>
  ev("tool/result", {
    turn: 1,
    step: 1,
    message: { id: `r-${callId}`, role: "user", content: [{ type: "tool-result", toolCallId: callId, content: [{ type: "text", text }] }], source: { kind: "tool", callId } }
  }, { surfaceOp, sourceEventSeqs: [0] })

describe("ACP projection (pure)", () => {
  it("replacement events and injected context project to nothing; compaction only when advertised", () => {
    seq = 0
    const events: Array<Event> = [
      ev("context/message", { id: "c1", role: "user", content: [{ type: "text", text: "open file" }], source: { kind: "plugin", plugin: "editor" } }, { surfaceOp: "append" }),
      toolResult("x", "pruned", { op: "replace", start: 0, end: 0 }),
      ev("user/message", { id: "k", role: "user", content: [{ type: "text", text: "summary" }], source: { kind: "plugin", plugin: "compact", compactionId: "cmp-1" } }, { surfaceOp: { op: "replace", start: 0, end: 0 }, sourceEventSeqs: [0] })
    ]
    assert.deepStrictEqual(projectTranscript(events, { compaction: false, presenter: defaultPresenter }), [])
    assert.deepStrictEqual(projectTranscript(events, { compaction: true, presenter: defaultPresenter }), [{
      sessionUpdate: "compaction_update",
      compactionId: "cmp-1",
      status: "completed",
      summary: [{ type: "text", text: "summary" }]
    }])
  })

  it("live chunks of one call share the replayed messageId; an ignorable mode event does not split them", () => {
    seq = 0
    const chunk = (type: string, text: string) => ev("assistant/chunk", { turn: 1, step: 1, chunk: { type, index: 0, text } })
    const events: Array<Event> = [
      ev("step/start", { turn: 1, step: 1 }),
      chunk("reasoning-delta", "hmm "),
      chunk("text-delta", "Hello "),
      ev("acp/mode", { modeId: "plan" }, { ignorable: true }),
      chunk("text-delta", "world"),
      ev("assistant/message", {
        turn: 1,
        step: 1,
        message: { id: "a1", role: "assistant", content: [{ type: "reasoning", text: "hmm " }, { type: "text", text: "Hello world" }], source: { kind: "model", provider: "p", model: "m" } },
        interrupted: true
      }, { surfaceOp: "append", sourceEventSeqs: [1, 2, 4] })
    ]
    const live = makeProjector({ live: true, compaction: false, presenter: defaultPresenter })
    const liveUpdates = events.flatMap((e) => live.project(e))
    const modeless = liveUpdates.filter((u) => u.sessionUpdate !== "current_mode_update" && u.sessionUpdate !== "config_option_update")
    assert.deepStrictEqual(coalesce(modeless), projectTranscript(events, { compaction: false, presenter: defaultPresenter }))
    assert.deepStrictEqual(new Set(modeless.map((u: any) => u.messageId)), new Set(["m1"]))
    assert.isTrue(liveUpdates.some((u) => u.sessionUpdate === "current_mode_update"))
  })

  it("coalescing folds each tool call's updates into the tool_call that announced it, at its position", () => {
    const call = (id: string): acp.SessionUpdate => ({ sessionUpdate: "tool_call", toolCallId: id, title: id, kind: "read", status: "pending", rawInput: { id } })
    const started = (id: string): acp.SessionUpdate => ({ sessionUpdate: "tool_call_update", toolCallId: id, status: "in_progress" })
    const settled = (id: string, status: "completed" | "failed"): acp.SessionUpdate => ({
      sessionUpdate: "tool_call_update",
      toolCallId: id,
      status,
      content: [{ type: "content", content: { type: "text", text: `${id} ${status}` } }]
    })
    const text = (t: string): acp.SessionUpdate => ({ sessionUpdate: "agent_message_chunk", content: { type: "text", text: t }, messageId: "m1" })
    const live = [call("a"), call("b"), started("a"), settled("a", "completed"), started("b"), settled("b", "failed"), started("x"), settled("x", "completed"), text("done")]
    assert.deepStrictEqual(coalesce(live), [
      { sessionUpdate: "tool_call", toolCallId: "a", title: "a", kind: "read", status: "completed", rawInput: { id: "a" }, content: [{ type: "content", content: { type: "text", text: "a completed" } }] },
      { sessionUpdate: "tool_call", toolCallId: "b", title: "b", kind: "read", status: "failed", rawInput: { id: "b" }, content: [{ type: "content", content: { type: "text", text: "b failed" } }] },
      // updates of a call that was never shown stay one update
      { sessionUpdate: "tool_call_update", toolCallId: "x", status: "completed", content: [{ type: "content", content: { type: "text", text: "x completed" } }] },
      text("done")
    ])
    assert.deepStrictEqual(coalesce(coalesce(live)), coalesce(live))
  })
})
