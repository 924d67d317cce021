/**
 * The scenario registry of the ACP snapshot suite (SPEC §10): the header class `default` (the
 * agent composition every scenario runs: base prompt, `code`/`plan` modes, the `read` and `write`
 * tools on the scenario's real working directory, `write` gated), the pretend-live model scripts
 * `record` plays when no key is used, and the deterministic generator of seeded histories.
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import type { CallScript } from "../../../src/layers/model/ScriptedLanguageModel.js"
import * as Acp from "../../../src/programs/acp/Acp.js"

export const Read = Tool.make("read", {
  description: "Read a text file of the workspace",
  parameters: { path: Schema.String },
  success: Schema.String
})
export const Write = Tool.make("write", {
  description: "Write a text file of the workspace",
  parameters: { path: Schema.String, text: Schema.String },
  success: Schema.String
})
export const toolkit = Toolkit.make(Read, Write)
export type Tools = typeof toolkit.tools

/** §10.4: section A, and the plan-mode section added in `plan`. */
export const SYSTEM_A = [
  "You are a careful coding agent working in the user's workspace.",
  "Answer briefly. Use `read` to look at files and `write` to change them."
].join("\n")

export const route = { provider: "scripted", model: "snapshot-model", maxTokens: 1024 }

/** The agent of header class `default`. */
export const agentOptions: Acp.AcpAgentOptions<Tools> = {
  name: "snapshot-agent",
  version: "0.0.0",
  toolkit,
  system: SYSTEM_A,
  route,
  modes: Acp.defaultModes(["read"]),
  gatedTools: ["write"],
  presenter: (name, args) => ({
    title: `${name} ${String((args as { path?: unknown } | null)?.path ?? "")}`.trim(),
    kind: name === "read" ? "read" : name === "write" ? "edit" : "other"
  })
}

/**
 * The tools on the real working directory `cwd`. A call named in `hangOn` (`"read:slow.txt"`)
 * completes `reached` and never returns (a tool cut off by a cancel or a crash).
 */
export const toolHandlers = (cwd: string, hangOn: ReadonlyArray<string>, reached: Deferred.Deferred<void>) =>
  toolkit.toLayer(Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const hang = (key: string) => hangOn.includes(key) ? Deferred.succeed(reached, undefined).pipe(Effect.zipRight(Effect.never)) : Effect.void
    return {
      read: ({ path }) =>
        hang(`read:${path}`).pipe(
          Effect.zipRight(fs.readFileString(`${cwd}/${path}`)),
          Effect.catchAll(() => Effect.succeed(`no such file: ${path}`))
        ),
      write: ({ path, text }) =>
        hang(`write:${path}`).pipe(
          Effect.zipRight(fs.writeFileString(`${cwd}/${path}`, text)),
          Effect.as(`wrote ${new TextEncoder().encode(text).length} bytes to ${path}`),
          Effect.orDie
        )
    }
  }))

/** A text streamed in (at most) three deltas cut at word boundaries, so the fixtures stay short. */
const deltas = (text: string): ReadonlyArray<string> => {
  const words = text.split(/(?<= )/)
  const size = Math.ceil(words.length / 3)
  const out: Array<string> = []
  for (let i = 0; i < words.length; i += size) out.push(words.slice(i, i + size).join(""))
  return out
}
const say = (text: string): CallScript => [
  { type: "text", text, deltas: deltas(text) },
  { type: "finish", reason: "stop", usage: { inputTokens: 40, outputTokens: 12 } }
]
const call = (id: string, name: string, params: unknown): CallScript => [
  { type: "tool-call", id, name, params },
  { type: "finish", reason: "tool-calls", usage: { inputTokens: 40, outputTokens: 8 } }
]
const hangAfter = (text: string): CallScript => [{ type: "text", text, deltas: deltas(text) }, { type: "hang" }]

/**
 * Every scenario, in run order (the pin of a class first), with the model scripts `record` plays
 * as the "live" model when no key is used (the harness's own tests, and the first recording).
 */
export const SCENARIOS: ReadonlyArray<{ readonly name: string; readonly pretendLive: ReadonlyArray<CallScript> }> = [
  {
    name: "mode-switch",
    pretendLive: [
      call("call-1", "read", { path: "notes.md" }),
      say("notes.md says the build uses esbuild and the tests run with vitest."),
      say("Plan: 1. add a `lint` script running eslint. 2. run it in CI before the tests. 3. fix what it reports.")
    ]
  },
  { name: "plain-turn", pretendLive: [say("Hello! How can I help you today?")] },
  {
    name: "tool-round",
    pretendLive: [
      call("call-1", "read", { path: "notes.md" }),
      call("call-2", "write", { path: "summary.md", text: "The build uses esbuild; tests run with vitest.\n" }),
      say("Done: summary.md holds a one-line summary of notes.md.")
    ]
  },
  {
    name: "mode-switch-back-idle",
    pretendLive: [say("Hi! What shall we work on?"), say("Sure, let's look at the build next.")]
  },
  {
    name: "crash-mid-tool-load",
    pretendLive: [
      call("call-1", "read", { path: "slow.txt" }),
      say("The earlier read of slow.txt failed when the agent stopped; I can retry it when you like.")
    ]
  },
  {
    name: "compaction-load",
    pretendLive: [
      say(
        "The build uses esbuild to bundle the library and the CLI into dist, with one entry point per public module. " +
          "Type declarations come from tsc in a separate pass, so a type error never hides behind a successful bundle. " +
          "The CLI bundle is a single file with its dependencies inlined, except better-sqlite3, which stays external " +
          "because it ships a native addon built for the machine it is installed on."
      ),
      say(
        "The tests run with vitest: one contract suite runs against every store backend (memory, JSONL, SQLite and " +
          "PostgreSQL when a server is available), plus property tests, crash tests and the CLI tests. " +
          "Crash tests kill a child process in the middle of an append and check that the reopened log is repaired " +
          "and never loses a committed event."
      ),
      say(
        "Releases are tagged from main after the full suite passes on CI; the changelog is written from the merged " +
          "pull requests, and the package is published with its built ESM files and declarations. " +
          "A consumer check installs the packed tarball into an empty project and type-checks an example against it, " +
          "so a missing export is caught before a user sees it."
      ),
      say("We discussed the build (esbuild), the tests (vitest) and how releases are tagged.")
    ]
  },
  {
    name: "cancel-mid-stream",
    pretendLive: [hangAfter("Once upon a time, in a small repository, "), say("ok")]
  },
  {
    name: "cancel-mid-tool",
    pretendLive: [call("call-1", "read", { path: "slow.txt" }), say("ok")]
  },
  {
    name: "cancel-permission",
    pretendLive: [call("call-1", "write", { path: "out.txt", text: "hello\n" }), say("ok, I did not write anything")]
  },
  { name: "long-session", pretendLive: [say("You asked 260 questions, one per turn.")] }
]

/**
 * The seeded history `long-history`: `turns` turns of a question and its answer (no model calls
 * in it), as a seed of SPEC §3.2 (events with seq and time 0).
 */
export const longHistory = (turns: number): ReadonlyArray<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  const push = (type: string, data: unknown, extra: Record<string, unknown> = {}) =>
    out.push({ type, seq: out.length, time: 0, data, ...extra })
  for (let turn = 1; turn <= turns; turn++) {
    push("turn/start", { turn })
    push("user/message", { id: `u${turn}`, role: "user", content: [{ type: "text", text: `Question ${turn}?` }], source: { kind: "user" } }, {
      surfaceOp: "append"
    })
    push("assistant/message", {
      turn,
      step: 1,
      message: {
        id: `a${turn}`,
        role: "assistant",
        content: [{ type: "text", text: `Answer ${turn}.` }],
        source: { kind: "model", provider: route.provider, model: route.model }
      }
    }, { surfaceOp: "append", sourceEventSeqs: [] })
    push("turn/end", { turn, reason: { kind: "completed" } })
  }
  return out
}

/** The seed generators a `seed` step may name. */
export const GENERATORS: Record<string, (turns: number) => ReadonlyArray<Record<string, unknown>>> = {
  "long-history": longHistory
}
