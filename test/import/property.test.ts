/**
 * The import's property (issue #33): for any Claude Code transcript — turns of prompts, model
 * messages split into one record per block as Claude Code writes them, tool calls and results,
 * either chained one after the other or parallel as Claude Code 2.x writes them (each result's
 * parent is the record holding its call, hook progress records between), prompts queued while a
 * turn ran, mixed with meta records, file snapshots, duplicated records, malformed lines, unknown
 * record types and abandoned branches — the derived messages of the imported session keep every user
 * prompt, assistant text and tool call of the main branch, in order, and the session verifies.
 * The mapping is the subject here, so each run imports into a fresh memory store (the files on
 * disk are real; SQLite is covered by the other import tests).
 */
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { importClaudeCode } from "../../src/programs/import/ClaudeCode.js"
import * as MemoryStore from "../../src/layers/memory/MemoryStore.js"
import { messagesOf, verified } from "./helpers.js"

const dir = mkdtempSync(join(tmpdir(), "import-prop-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const text = fc.string({ minLength: 1, maxLength: 12 })
const noise = fc.array(fc.constantFrom("snapshot", "meta", "duplicate", "malformed", "unknown", "system", "abandoned"), {
  maxLength: 2
})
const step = fc.record({
  thinking: fc.option(text, { nil: undefined }),
  text,
  tools: fc.array(fc.record({ arg: text, result: text, isError: fc.boolean() }), { maxLength: 3 }),
  parallel: fc.boolean(),
  queued: fc.option(text, { nil: undefined })
})
const turn = fc.record({ noise, prompt: text, steps: fc.array(step, { minLength: 1, maxLength: 3 }) })
const transcript = fc.array(turn, { minLength: 1, maxLength: 5 })

type Turn = typeof turn extends fc.Arbitrary<infer T> ? T : never

/** The transcript's lines, and what its main branch says in order (P prompt, T text, C call). */
const build = (sessionId: string, turns: ReadonlyArray<Turn>) => {
  const lines: Array<string> = []
  const expected: Array<string> = []
  let n = 0
  let leaf: string | null = null
  let clock = Date.parse("2025-01-01T00:00:00.000Z")
  const rec = (fields: Record<string, unknown>, parent: string | null = leaf) => {
    const uuid = `u${++n}`
    const r = {
      parentUuid: parent,
      isSidechain: false,
      userType: "external",
      cwd: "/tmp/p",
      sessionId,
      version: "2.0.0",
      uuid,
      timestamp: new Date(clock += 1000).toISOString(),
      ...fields
    }
    lines.push(JSON.stringify(r))
    return uuid
  }
  const onBranch = (fields: Record<string, unknown>) => (leaf = rec(fields))
  let call = 0
  for (const t of turns) {
    for (const x of t.noise) {
      if (x === "snapshot") lines.push(JSON.stringify({ type: "file-history-snapshot", messageId: "m", snapshot: {} }))
      if (x === "meta") onBranch({ type: "user", isMeta: true, message: { role: "user", content: "<local-command-stdout>ok</local-command-stdout>" } })
      if (x === "duplicate" && lines.length > 0) lines.push(lines[lines.length - 1])
      if (x === "malformed") lines.push("{\"type\":\"assistant\",\"mess")
      if (x === "unknown") lines.push(JSON.stringify({ type: "future-record", uuid: `f${n}`, payload: [1, 2] }))
      if (x === "system") onBranch({ type: "system", subtype: "informational", content: "note", level: "info" })
      if (x === "abandoned") {
        const a = rec({ type: "user", message: { role: "user", content: "abandoned prompt" } })
        rec({ type: "assistant", message: { id: `msg_x${n}`, role: "assistant", model: "m", content: [{ type: "text", text: "abandoned" }] } }, a)
      }
    }
    onBranch({ type: "user", message: { role: "user", content: t.prompt } })
    expected.push(`P:${t.prompt}`)
    for (const s of t.steps) {
      const id = `msg_${n}`
      const blocks: Array<unknown> = []
      if (s.thinking !== undefined) blocks.push({ type: "thinking", thinking: s.thinking, signature: "sig" })
      blocks.push({ type: "text", text: s.text })
      expected.push(`T:${s.text}`)
      const calls = s.tools.map((tool) => ({ id: `toolu_${++call}`, ...tool }))
      for (const c of calls) {
        blocks.push({ type: "tool_use", id: c.id, name: "Bash", input: { command: c.arg } })
        expected.push(`C:${c.id}`)
      }
      // one record per content block, sharing the message id
      const holder = new Map<string, string>()
      for (const b of blocks) {
        const uuid = onBranch({ type: "assistant", message: { id, role: "assistant", model: "claude-x", content: [b] } })
        const callId = (b as any).type === "tool_use" ? (b as any).id as string : undefined
        if (callId !== undefined) holder.set(callId, uuid)
        // 2.x: a hook's progress record after each call, in the chain
        if (s.parallel && callId !== undefined) onBranch({ type: "progress", data: { type: "hook_progress", hookEvent: "PreToolUse" }, toolUseID: callId })
      }
      calls.forEach((c, k) => {
        const result = {
          type: "user",
          message: { role: "user", content: [{ type: "tool_result", tool_use_id: c.id, content: c.result, is_error: c.isError }] },
          toolUseResult: { stdout: c.result }
        }
        if (!s.parallel) return void onBranch(result)
        // 2.x: the result hangs off the record holding its call; the chain goes on from the last one
        const uuid = rec({ ...result, sourceToolAssistantUUID: holder.get(c.id) }, holder.get(c.id)!)
        if (k === calls.length - 1) leaf = uuid
        else rec({ type: "progress", data: { type: "hook_progress", hookEvent: "PostToolUse" }, toolUseID: c.id }, uuid)
      })
      if (s.queued !== undefined) {
        // a prompt typed while the turn ran, sent with the next request
        onBranch({ type: "attachment", attachment: { type: "queued_command", prompt: s.queued, commandMode: "prompt" } })
        expected.push(`P:${s.queued}`)
      }
    }
  }
  return { text: lines.join("\n") + "\n", expected }
}

/** What the derived messages say in order, in the same notation. */
const said = (messages: ReadonlyArray<any>): Array<string> => {
  const out: Array<string> = []
  for (const m of messages) {
    if (m.role === "user" && m.source.kind === "user") {
      out.push(`P:${m.content.filter((b: any) => b.type === "text").map((b: any) => b.text).join("")}`)
    }
    if (m.role === "assistant") {
      for (const b of m.content) {
        if (b.type === "text") out.push(`T:${b.text}`)
        if (b.type === "tool-call") out.push(`C:${b.id}`)
      }
    }
  }
  return out
}

let runs = 0

describe("import --from claude-code: the property", () => {
  it.effect.prop(
    "derived messages keep every prompt, assistant text and tool call of the main branch in order; verify passes",
    [transcript],
    ([turns]) =>
      Effect.gen(function*() {
        const sessionId = `s-${++runs}`
          const { expected, text } = build(sessionId, turns)
          const file = join(dir, `${sessionId}.jsonl`)
          writeFileSync(file, text)
          const [report] = yield* importClaudeCode(file)
          assert.strictEqual(report.sessions[0].status, "imported")
          const id = `claude-code:${sessionId}`
          assert.strictEqual(yield* verified(id), "ok")
          assert.deepStrictEqual(said(yield* messagesOf(id)), expected)
          const results = (yield* messagesOf(id)).filter((m: any) => m.source.kind === "tool")
          assert.strictEqual(results.length, expected.filter((e) => e.startsWith("C:")).length)
        }).pipe(Effect.provide(MemoryStore.layer()), Effect.provide(NodeContext.layer)),
    { fastCheck: { numRuns: 30 } }
  )
})
