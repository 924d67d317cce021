/**
 * The compaction option (issue #30): with `Compact.preStepHook(policy)` a long chat is compacted by
 * recorded `replace` operations before a call; the model is sent the compacted surface, which is
 * the chat's history, and `request --at` still rebuilds what it was sent.
 */
import * as Chat from "@effect/ai/Chat"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { ScriptedModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import { layerDeterministic } from "../../src/layers/model/SummarizerLive.js"
import * as Compact from "../../src/programs/compaction/Compact.js"
import type { Event } from "../../src/schema/Events.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { type ChatCall, encodeHistory, modelLayer } from "./helpers.js"

const long = (n: number) => `Paragraph ${n}: ${"lorem ipsum dolor sit amet ".repeat(12)}`
const calls: ReadonlyArray<Extract<ChatCall, { kind: "text" }>> = Array.from({ length: 8 }, (_, i) => ({
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
        for (const call of calls) yield* chat.generateText({ prompt: call.prompt })
        return { history: yield* chat.history, requests: yield* Effect.flatMap(ScriptedModel, (m) => m.requests) }
      }).pipe(Effect.provide(Layer.mergeAll(layer, modelLayer(calls, reached))), Effect.provide(layerDeterministic))
      const loaded = yield* Effect.flatMap(SessionStore, (s) => s.load("long"))
      const events = loaded.events as ReadonlyArray<Event>
      const summaries = events.filter((e) => e.type === "compaction/summary")
      assert.isAbove(summaries.length, 0)
      // the replacements are recorded on the surface; nothing was removed from the log
      assert.isTrue(events.some((e) => typeof e.surfaceOp === "object"))
      assert.strictEqual(events.filter((e) => e.type === "user/message" && e.surfaceOp === "append").length, calls.length)
      // the last request is smaller than the whole conversation and starts with the summary
      const last = requests[requests.length - 1].prompt
      assert.isBelow(last.content.length, 2 * calls.length)
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
