/**
 * `import --from claude-code` on a subagent file whose record shapes follow a real Claude Code
 * 2.1.39 Explore subagent (test/import/fixtures/claude-code/sibling/README.md): one record per
 * content block under one `message.id`, each result chained after its call, `progress` hook
 * records, and `is_error` results of a failed call and of its siblings. On a real SQLite file;
 * the session verified as `verify` does.
 */
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { importClaudeCode } from "../../src/programs/import/ClaudeCode.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { fixtures, messagesOf, verified, withStore } from "./helpers.js"

const SESSION = "0c1d2e3f-4a5b-4c6d-8e7f-000000000020"
const file = `${fixtures}/claude-code/sibling/${SESSION}/subagents/agent-b17.jsonl`
const id = `claude-code:${SESSION}/agent-b17`

const run = <A, E>(body: Effect.Effect<A, E, SessionStore | NodeContext.NodeContext>) =>
  withStore(() => body).pipe(Effect.provide(NodeContext.layer))

describe("import --from claude-code, a subagent file with sibling tool errors", () => {
  it.scoped("every call is answered by its own result, errors stay errors, hook progress is kept aside", () =>
    run(Effect.gen(function*() {
      const [report] = yield* importClaudeCode(file)
      assert.deepStrictEqual(report.records, { read: 11, mapped: 9, kept: 2, refused: 0 })
      assert.deepStrictEqual(report.keptReasons, { "type:progress": 2 })
      assert.deepStrictEqual(
        report.sessions.map((s) => [s.id, s.parentSession, s.status, s.toolCalls, s.toolResults]),
        [[id, `claude-code:${SESSION}`, "imported", 3, 3]]
      )
      assert.strictEqual(yield* verified(id), "ok")
      const messages = yield* messagesOf(id)
      const shape = messages.map((m: any) =>
        `${m.role}:` + m.content.map((b: any) =>
          b.type === "tool-call" ? `call ${b.id}` : b.type === "tool-result" ? `result ${b.toolCallId}${b.isError ? " error" : ""}` : b.text
        ).join("|")
      )
      assert.deepStrictEqual(shape, [
        "user:Read the three files and report.",
        "assistant:Reading them.|call toolu_1",
        "user:result toolu_1",
        "assistant:call toolu_2",
        "user:result toolu_2 error",
        "assistant:call toolu_3",
        "user:result toolu_3 error",
        "assistant:a.ex defines A; b.html.heex does not exist."
      ])
    })))
})
