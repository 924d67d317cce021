/**
 * What a chat call records (issue #30): `request --at` on the recorded seqs rebuilds exactly the
 * prompt the scripted model received (in process for every call, through the CLI on SQLite for
 * the call with tools); the closers of a failed and an interrupted call and the surface a failed
 * call leaves; and the compaction option: with `Compact.preStepHook(policy)` a long chat is
 * compacted by recorded `replace` operations before a call, and the model is sent the compacted
 * surface, which is the chat's history.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { join } from "node:path"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { Event } from "../../src/schema/Events.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { buildBundle, json, removeBundle, runCli } from "../cli/helpers.js"
import { type ChatCall, conversation, encodeHistory, modelCalls, modelLayer, runConversation } from "./helpers.js"
import * as Chat from "@effect/ai/Chat"
import { layerDeterministic } from "../../src/layers/model/SummarizerLive.js"
import * as Compact from "../../src/programs/compaction/Compact.js"

let bundle: string | undefined
beforeAll(async () => {
  bundle = await buildBundle("chat-recording")
})
afterAll(() => removeBundle(bundle))

const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ prefix: "chat-rec-" })
).pipe(Effect.provide(NodeContext.layer), Effect.orDie)

/** Run the conversation on the store in context; the prompts the model received and the log. */
const recorded = Effect.gen(function*() {
  const reached = yield* Deferred.make<void>()
  const requests = yield* Effect.gen(function*() {
    yield* runConversation("chat-1", conversation, reached)
    return yield* Effect.flatMap(ScriptedModel, (m) => m.requests)
  }).pipe(Effect.provide(Layer.mergeAll(ChatPersistence.layer(), modelLayer(conversation, reached))))
  const store = yield* SessionStore
  const loaded = yield* store.load("chat-1")
  // the store hands back validated events
  return { requests, events: loaded.events as ReadonlyArray<Event> }
})

/**
 * Per turn: the seq after which the model was called: the event before the first chunk, or, in a
 * turn without chunks (a failed call), before its last assistant message (the retraction).
 */
const modelCallSeqs = (events: ReadonlyArray<Event>): Array<number> => {
  const out: Array<number> = []
  let turn: Array<Event> = []
  for (const e of events) {
    if (e.type === "turn/start") turn = []
    turn.push(e)
    if (e.type !== "turn/end") continue
    const chunk = turn.findIndex((t) => t.type === "assistant/chunk")
    const messages = turn.flatMap((t, i) => t.type === "assistant/message" ? [i] : [])
    const at = chunk >= 0 ? chunk : messages[messages.length - 1]
    if (at !== undefined) out.push(turn[at].seq - 1)
  }
  return out
}

/** The events of turn `n`, from its turn/start to its turn/end. */
const turnEvents = (events: ReadonlyArray<Event>, n: number): ReadonlyArray<Event> => {
  const isTurn = (e: Event, type: string) => e.type === type && (e.data as { turn: number }).turn === n
  const start = events.findIndex((e) => isTurn(e, "turn/start"))
  const end = events.findIndex((e) => isTurn(e, "turn/end"))
  return events.slice(start, end + 1)
}

const promptAt = (events: ReadonlyArray<Event>, seq: number) => {
  const snap = requestAtLog(events, seq)
  if ("_tag" in snap) throw snap
  return encodeHistory(ChatPersistence.promptOf(snap.messages))
}

describe("ChatPersistence recording", () => {
  it.effect("request --at on each call's seqs is the prompt the model received", () =>
    Effect.gen(function*() {
      const { events, requests } = yield* recorded
      const seqs = modelCallSeqs(events)
      assert.strictEqual(requests.length, modelCalls(conversation).length)
      assert.strictEqual(seqs.length, modelCalls(conversation).length)
      for (const [i, seq] of seqs.entries()) {
        const sent = encodeHistory(requests[i].prompt)
        assert.deepStrictEqual(promptAt(events, seq), sent, `call ${i} at seq ${seq}`)
        // every chunk of the call rebuilds the same request
        for (const e of events) {
          if (e.type === "assistant/chunk" && (e.data as { turn: number }).turn === i + 1) {
            assert.deepStrictEqual(promptAt(events, e.seq), sent, `call ${i} at chunk ${e.seq}`)
          }
        }
      }
      // the tools of the toolkit are in the header in force for the tool calls
      const toolCall = requestAtLog(events, seqs[2])
      assert.deepStrictEqual(!("_tag" in toolCall) && toolCall.header?.tools?.map((t) => t.name), ["weather", "lookup"])
    }).pipe(Effect.provide(layerMemoryStore())))

  it.scoped("the CLI's request --at on SQLite rebuilds the prompt and tools of the call with tools", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const filename = join(dir, "chats.db")
      const { events, requests } = yield* recorded.pipe(Effect.provide(layerSqliteStore({ filename })))
      const seqs = modelCallSeqs(events)
      // the call with tools (one CLI run: the in-process test above covers every call)
      const run = yield* Effect.promise(() =>
        runCli(bundle!, ["request", "--store", filename, "--session", "chat-1", "--at", String(seqs[2]), "--json"], dir)
      )
      assert.strictEqual(run.code, 0, run.stderr)
      const printed = json(run)
      assert.deepStrictEqual(encodeHistory(ChatPersistence.promptOf(printed.messages)), encodeHistory(requests[2].prompt))
      assert.deepStrictEqual(printed.header.tools.map((t: { name: string }) => t.name), ["weather", "lookup"])
    }))

  it.effect("a failed call: error closers, its prompt shadowed by a recorded replace, kept in the log", () =>
    Effect.gen(function*() {
      const { events } = yield* recorded
      const turn = turnEvents(events, 6)
      const types = turn.map((e) => e.type)
      assert.deepStrictEqual(types, ["turn/start", "step/start", "user/message", "assistant/message", "step/end", "turn/end"])
      const user = turn[2]
      const replace = turn[3]
      assert.deepStrictEqual(replace.surfaceOp, { op: "replace", start: user.seq, end: user.seq })
      assert.deepStrictEqual(replace.sourceEventSeqs, [user.seq])
      assert.deepStrictEqual((replace.data as { message: { content: unknown } }).message.content, [])
      assert.deepStrictEqual((turn[5].data as { reason: unknown }).reason, {
        kind: "error",
        error: { message: "Test.generateText: boom", code: "UnknownError" }
      })
    }).pipe(Effect.provide(layerMemoryStore())))

  it.effect("an interrupted stream: its chunks (with the cut-off delta), an interrupted message of the finished blocks, aborted", () =>
    Effect.gen(function*() {
      const { events } = yield* recorded
      const turn = turnEvents(events, 7)
      const deltas = turn.filter((e) => e.type === "assistant/chunk").map((e) => (e.data as { chunk: { text?: string } }).chunk.text)
      assert.include(deltas, "there was")
      const message = turn.find((e) => e.type === "assistant/message")!
      const data = message.data as { interrupted?: boolean; message: { content: unknown } }
      assert.strictEqual(data.interrupted, true)
      assert.deepStrictEqual(data.message.content, [{ type: "text", text: "Once upon a time" }])
      assert.deepStrictEqual(message.sourceEventSeqs, turn.filter((e) => e.type === "assistant/chunk").map((e) => e.seq))
      assert.deepStrictEqual(turn.map((e) => e.type).slice(-2), ["step/end", "turn/end"])
      assert.deepStrictEqual((turn[turn.length - 1].data as { reason: unknown }).reason, { kind: "aborted", reason: { kind: "user" } })
    }).pipe(Effect.provide(layerMemoryStore())))
})

/** A chat long enough for a 1,000-token context window. */
const long = (n: number) => `Paragraph ${n}: ${"lorem ipsum dolor sit amet ".repeat(12)}`
const longCalls: ReadonlyArray<Extract<ChatCall, { kind: "text" }>> = Array.from({ length: 8 }, (_, i) => ({
  kind: "text" as const,
  prompt: long(i),
  script: [{ type: "text" as const, text: long(100 + i) }, { type: "finish" as const, reason: "stop" as const }]
}))

describe("ChatPersistence compaction option", () => {
  it.effect("a long chat is compacted before a call; the model gets the compacted history", () =>
    Effect.gen(function*() {
      const reached = yield* Deferred.make<void>()
      const layer = ChatPersistence.layer({
        provider: "scripted",
        model: "small",
        contextWindow: 1000,
        compaction: Compact.preStepHook({ retainTokens: 200, prune: false })
      })
      const { history, requests } = yield* Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).getOrCreate("long")
        for (const call of longCalls) yield* chat.generateText({ prompt: call.prompt })
        return { history: yield* chat.history, requests: yield* Effect.flatMap(ScriptedModel, (m) => m.requests) }
      }).pipe(Effect.provide(Layer.mergeAll(layer, modelLayer(longCalls, reached))), Effect.provide(layerDeterministic))
      const loaded = yield* Effect.flatMap(SessionStore, (s) => s.load("long"))
      const events = loaded.events as ReadonlyArray<Event>
      const summaries = events.filter((e) => e.type === "compaction/summary")
      assert.isAbove(summaries.length, 0)
      // the replacements are recorded on the surface; nothing was removed from the log
      assert.isTrue(events.some((e) => typeof e.surfaceOp === "object"))
      assert.strictEqual(events.filter((e) => e.type === "user/message" && e.surfaceOp === "append").length, longCalls.length)
      // the last request is smaller than the whole conversation and starts with the summary
      const last = requests[requests.length - 1].prompt
      assert.isBelow(last.content.length, 2 * longCalls.length)
      const first = last.content[0]
      assert.strictEqual(first.role, "user")
      // the history is the compacted surface, and what the model was last sent plus its answer
      const content = (p: typeof history) => (encodeHistory(p) as { content: ReadonlyArray<unknown> }).content
      assert.deepStrictEqual(content(history).slice(0, -1), content(last))
      // request --at before the last call's response rebuilds what the model was sent
      const lastChunk = events.filter((e) => e.type === "assistant/chunk").at(-1)!
      const snap = requestAtLog(events, lastChunk.seq)
      assert.isFalse("_tag" in snap)
      if (!("_tag" in snap)) assert.deepStrictEqual(encodeHistory(ChatPersistence.promptOf(snap.messages)), encodeHistory(last))
    }).pipe(Effect.provide(layerMemoryStore())))
})
