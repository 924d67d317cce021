/**
 * The demo's keyless agent: the real `AgentLoop` over a scripted `LanguageModel`, a small toolkit,
 * automatic compaction and tool-result pruning in the pre-step hook (deterministic summariser),
 * and a turn whose process dies inside a tool body. Everything runs through service tags, so the
 * same program works on any backend.
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as HeaderSnapshotterLive from "../../layers/session/HeaderSnapshotterLive.js"
import { type CallScript, layer as layerScriptedLanguageModel } from "../../layers/model/ScriptedLanguageModel.js"
import { layerDeterministic as layerSummarizerDeterministic } from "../../layers/model/SummarizerLive.js"
import * as AgentLoop from "../agent/AgentLoop.js"
import * as IdGenerator from "../../services/IdGenerator.js"
import * as Compact from "../compaction/Compact.js"

const ListFiles = Tool.make("list_files", {
  description: "List the files of a directory",
  parameters: { dir: Schema.String },
  success: Schema.Array(Schema.String)
})

const ReadFile = Tool.make("read_file", {
  description: "Read a file of the workspace",
  parameters: { path: Schema.String },
  success: Schema.String
})

const RunMigration = Tool.make("run_migration", {
  description: "Run a database migration script",
  parameters: { script: Schema.String },
  success: Schema.String
})

/** The demo agent's tools. */
export const toolkit = Toolkit.make(ListFiles, ReadFile, RunMigration)

const README = [
  "# effect-session-log",
  "",
  "An event-sourced session log for LLM agents. Every turn, step, streamed chunk, tool call and",
  "result is an append-only, validated event; the model's messages are derived through the surface.",
  ...Array.from({ length: 30 }, (_, i) => `- section ${i + 1}: details of the design, the rules and the tests of part ${i + 1}.`)
].join("\n")

const FILES: Record<string, string> = {
  "README.md": README,
  "migration.log": "migration 0042 started at 12:00:03\n(no completion record)"
}

/** Tool handlers; `crash` makes `run_migration` kill the process inside its body. */
export const handlers = (crash: Effect.Effect<never>) =>
  toolkit.toLayer({
    list_files: () => Effect.succeed(["README.md", "migration.log", "migrate.sql", "src/", "test/"]),
    read_file: ({ path }) => Effect.succeed(FILES[path] ?? `(${path} is empty)`),
    run_migration: () => crash
  })

/** The route of the demo model. */
export const route = { provider: "scripted", model: "demo-model", maxTokens: 1024, contextWindow: 2000 }

const system =
  "You are a careful coding agent. Inspect the workspace with tools before you answer, and keep answers short."

/** Automatic compaction and pruning policy: small numbers so both fire within a few turns. */
const policy: Compact.CompactionPolicy = {
  contextWindow: route.contextWindow,
  thresholdRatio: 0.5,
  retainTokens: 250,
  prune: { thresholdChars: 1200, headChars: 500, tailChars: 200 }
}

const say = (text: string): CallScript => [
  { type: "text", text },
  { type: "finish", reason: "stop", usage: { inputTokens: 400, outputTokens: 30 } }
]
const call = (text: string, id: string, name: string, params: unknown): CallScript => [
  { type: "text", text },
  { type: "tool-call", id, name, params },
  { type: "finish", reason: "tool-calls", usage: { inputTokens: 300, outputTokens: 20 } }
]

/** Scripts of the first process: two turns with tool calls. */
export const firstScripts: ReadonlyArray<CallScript> = [
  call("Let me look at the files.", "call-1", "list_files", { dir: "." }),
  call("I will read the README.", "call-2", "read_file", { path: "README.md" }),
  say("The repository holds an event-sourced session log with a README, sources and tests."),
  call("Checking the README again.", "call-3", "read_file", { path: "README.md" }),
  say("The README lists thirty sections describing the design, the rules and the tests.")
]

/** Scripts of the process that crashes: the model asks for the migration and a log read. */
export const crashScripts: ReadonlyArray<CallScript> = [[
  { type: "text", text: "Running the migration now." },
  { type: "tool-call", id: "call-4", name: "run_migration", params: { script: "migrate.sql" } },
  { type: "tool-call", id: "call-5", name: "read_file", params: { path: "migration.log" } },
  { type: "finish", reason: "tool-calls", usage: { inputTokens: 500, outputTokens: 25 } }
]]

/** Scripts after the repair: the model sees the closers and checks before retrying. */
export const resumeScripts: ReadonlyArray<CallScript> = [
  call("The migration was interrupted, so its outcome is unknown; I will check its log first.", "call-6", "read_file", {
    path: "migration.log"
  }),
  say("The log has no completion record, so the migration did not finish. Re-run it only after checking the schema.")
]

/** The environment of one demo process: scripted model, snapshotter, summariser, tools, ids. */
export const environment = (scripts: ReadonlyArray<CallScript>, crash: Effect.Effect<never>, idPrefix: string) =>
  Layer.mergeAll(
    IdGenerator.layerCounter(`${idPrefix}-`),
    layerScriptedLanguageModel({ scripts, requireConsumed: false }),
    HeaderSnapshotterLive.layer,
    layerSummarizerDeterministic,
    handlers(crash)
  )

/** A loop instance of the demo agent with automatic compaction and pruning before each step. */
export const makeLoop = () => {
  const hook = Compact.preStepHook(policy)
  return AgentLoop.make({
    toolkit,
    system,
    route,
    preStep: (ctx) => hook({ turn: ctx.turn, header: undefined, contextWindow: route.contextWindow })
  })
}

/** The prompts of the demo, in order. */
export const prompts = {
  first: ["What is in this repository?", "Read the README once more and tell me how long it is."],
  crash: "Run the migration script and report back.",
  resume: "Is the migration done?"
} as const
