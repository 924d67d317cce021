/**
 * Shared fixtures of the agent-loop tests: a small toolkit with handlers, the three backends
 * (memory, JSONL and SQLite in temp dirs), the per-test environment, and log checks (pairing,
 * chunk citations, and the request each model call received versus `requestAt`).
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as HeaderSnapshotterLive from "../../src/layers/session/HeaderSnapshotterLive.js"
import * as InvariantsLive from "../../src/layers/session/InvariantsLive.js"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { type CallScript, layerScriptedLanguageModel, ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodePrompt, requestToPrompt } from "../../src/services/PromptConversion.js"
import type { Event } from "../../src/schema/Events.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import type { SessionShape } from "../../src/services/Session.js"
import type { SessionStore } from "../../src/services/SessionStore.js"

export const ListFiles = Tool.make("list_files", {
  description: "List files in a directory",
  parameters: { dir: Schema.String },
  success: Schema.Array(Schema.String)
})

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", { code: Schema.String, path: Schema.String }) {}

export const ReadFile = Tool.make("read_file", {
  description: "Read a file",
  parameters: { path: Schema.String },
  success: Schema.String,
  failure: NotFound,
  failureMode: "return"
})

export const Slow = Tool.make("slow", { description: "Waits until interrupted", success: Schema.String })

export const toolkit = Toolkit.make(ListFiles, ReadFile, Slow)

export const files: Record<string, string> = { "a.txt": "hello from a", "b.txt": "bee" }

/** Handlers; `slow` completes `reached` and then hangs (a tool body cut off by interruption). */
export const handlers = (reached?: Deferred.Deferred<void>) =>
  toolkit.toLayer({
    list_files: () => Effect.succeed(Object.keys(files)),
    read_file: ({ path }) =>
      path in files ? Effect.succeed(files[path]) : Effect.fail(new NotFound({ code: "ENOENT", path })),
    slow: () =>
      (reached === undefined ? Effect.void : Deferred.succeed(reached, undefined)).pipe(Effect.zipRight(Effect.never))
  })

export const route = { provider: "scripted", model: "test-model", maxTokens: 1024, contextWindow: 8192 }
export const system = "You are a careful test agent."

export interface Backend {
  readonly name: string
  readonly layer: () => Layer.Layer<SessionStore>
}

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "agent-loop-" })).pipe(
  Effect.provide(NodeContext.layer),
  Effect.orDie
)

export const backends: ReadonlyArray<Backend> = [
  { name: "memory", layer: () => layerMemoryStore() },
  {
    name: "jsonl",
    layer: () =>
      Layer.unwrapScoped(Effect.map(tempDir, (root) => layerJsonlStore({ root }).pipe(Layer.provide(NodeContext.layer)))).pipe(
        Layer.orDie
      )
  },
  {
    name: "sqlite",
    layer: () => Layer.unwrapScoped(Effect.map(tempDir, (dir) => layerSqliteStore({ filename: `${dir}/s.db` }))).pipe(Layer.orDie)
  }
]

/** Everything a loop test needs besides the Session: store, scripted model, snapshotter, invariants, ids, tools. */
export const environment = (
  store: Layer.Layer<SessionStore>,
  scripts: ReadonlyArray<CallScript>,
  reached?: Deferred.Deferred<void>,
  requireConsumed = true
) =>
  Layer.mergeAll(
    store,
    layerScriptedLanguageModel({ scripts, requireConsumed, captureRequests: true }),
    HeaderSnapshotterLive.layer,
    InvariantsLive.layer,
    IdGenerator.layerCounter("id-"),
    handlers(reached)
  )

type Rec = Record<string, any>

/** Every tool-call block of every assistant message is answered by exactly one tool/result citing its tool/call. */
export const assertPaired = (events: ReadonlyArray<Event>): void => {
  const calls = new Map<string, number>()
  for (const e of events) {
    if (e.type !== "assistant/message") continue
    for (const b of (e.data as Rec).message.content) if (b.type === "tool-call") calls.set(b.id, (calls.get(b.id) ?? 0) + 1)
  }
  const results = new Map<string, number>()
  for (const e of events) {
    if (e.type !== "tool/result") continue
    const callId = (e.data as Rec).message.source.callId as string
    results.set(callId, (results.get(callId) ?? 0) + 1)
    assert.strictEqual((e.data as Rec).message.content[0].toolCallId, callId)
    assert.strictEqual(e.sourceEventSeqs?.length, 1, `tool/result ${e.seq} cites one event`)
    const cited = events[e.sourceEventSeqs![0]]
    assert.strictEqual(cited.type, "tool/call")
    assert.strictEqual((cited.data as Rec).callId, callId)
    assert.isTrue(calls.has(callId), `tool/result ${e.seq} answers a call of an assistant message`)
  }
  for (const [id, n] of calls) {
    assert.strictEqual(n, 1, `call ${id} appears once`)
    assert.strictEqual(results.get(id), 1, `call ${id} has exactly one tool/result`)
  }
}

/** Each assistant/message cites exactly the chunks of its own step written since the step's last model request. */
export const assertChunkCitations = (events: ReadonlyArray<Event>): void => {
  let attempt: Array<number> = []
  for (const e of events) {
    if (e.type === "step/start" || e.type === "request/header" || e.type === "request/context") attempt = []
    if (e.type === "assistant/chunk") attempt.push(e.seq)
    if (e.type === "assistant/message") {
      assert.deepStrictEqual(e.sourceEventSeqs, attempt, `assistant/message ${e.seq} cites its attempt's chunks`)
      attempt = []
    }
  }
}

/** The event types with runs of assistant/chunk collapsed to one `assistant/chunk*`. */
export const shape = (events: ReadonlyArray<Event>): Array<string> => {
  const out: Array<string> = []
  for (const e of events) {
    const t = e.type === "assistant/chunk" ? "assistant/chunk*" : e.type
    if (t === "assistant/chunk*" && out[out.length - 1] === t) continue
    out.push(t)
  }
  return out
}

/** The dispatch point of each completed model call: the event before its first chunk. */
export const dispatchPoints = (events: ReadonlyArray<Event>): Array<number> =>
  events.filter((e) => e.type === "assistant/message" && (e.data as Rec).interrupted !== true).map((e) =>
    e.sourceEventSeqs !== undefined && e.sourceEventSeqs.length > 0 ? e.sourceEventSeqs[0] - 1 : e.seq - 1
  )

/** The request the model received at every call equals `requestAt` of its dispatch point. */
export const assertRequestsMatch = (session: SessionShape, points: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const requests = yield* (yield* ScriptedModel).requests
    assert.strictEqual(requests.length, points.length)
    for (let i = 0; i < points.length; i++) {
      const at = yield* session.requestAt(points[i])
      const expected = requestToPrompt({ header: at.header, messages: at.messages })
      assert.deepStrictEqual(encodePrompt(requests[i].prompt), encodePrompt(expected), `prompt of call ${i + 1}`)
      assert.deepStrictEqual(requests[i].tools, at.header?.tools ?? [], `tools of call ${i + 1}`)
      assert.deepStrictEqual(requests[i].config, at.header?.config, `config of call ${i + 1}`)
    }
  })
