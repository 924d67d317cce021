/**
 * Prompt -> log -> Prompt (issue #30): a random history (every message role; text, reasoning,
 * files as text, bytes and URLs, tool calls and results with JSON params and results, provider
 * options on parts and messages) set on a chat and saved, then read back by a new layer over the
 * same store, is the same Prompt; a second random history set over it (an edit) too.
 */
import * as Chat from "@effect/ai/Chat"
import * as Prompt from "@effect/ai/Prompt"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { aiIds, encodeHistory } from "./helpers.js"

const key = fc.string({ maxLength: 6 }).filter((k) => k !== "__proto__")
const scalar = fc.oneof(fc.string({ maxLength: 12 }), fc.integer(), fc.boolean(), fc.constant(null))
const json: fc.Arbitrary<unknown> = fc.oneof(
  scalar,
  fc.array(scalar, { maxLength: 3 }),
  fc.dictionary(key, scalar, { maxKeys: 3 })
)
const options = fc.oneof(
  fc.constant({}),
  fc.dictionary(key, fc.dictionary(key, json, { maxKeys: 2 }), { minKeys: 1, maxKeys: 2 })
)

const text = fc.record({ text: fc.string({ maxLength: 20 }), options }).map((p) => Prompt.makePart("text", p))
const reasoning = fc.record({ text: fc.string({ maxLength: 20 }), options }).map((p) => Prompt.makePart("reasoning", p))
const file = fc.record({
  mediaType: fc.constantFrom("image/png", "application/pdf"),
  fileName: fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
  data: fc.oneof(
    fc.string({ maxLength: 16 }),
    fc.uint8Array({ maxLength: 8 }),
    fc.webUrl().map((u) => new URL(u))
  ),
  options
}).map(({ fileName, ...rest }) => Prompt.makePart("file", fileName === undefined ? rest : { ...rest, fileName }))
const callId = fc.string({ minLength: 1, maxLength: 6 })
const toolCall = fc.record({ id: callId, name: fc.string({ minLength: 1, maxLength: 8 }), params: json, providerExecuted: fc.boolean(), options })
  .map((p) => Prompt.makePart("tool-call", p))
const toolResult = fc.record({
  id: callId,
  name: fc.string({ minLength: 1, maxLength: 8 }),
  isFailure: fc.boolean(),
  result: json,
  providerExecuted: fc.boolean(),
  options
}).map((p) => Prompt.makePart("tool-result", p))

const message: fc.Arbitrary<Prompt.Message> = fc.oneof(
  fc.record({ content: fc.string({ maxLength: 20 }), options }).map((m) => Prompt.makeMessage("system", m)),
  fc.record({ content: fc.array(fc.oneof(text, file), { maxLength: 3 }), options }).map((m) => Prompt.makeMessage("user", m)),
  // an assistant message with no content projects to no message (SPEC §1.3.6): not generated
  fc.record({ content: fc.array(fc.oneof(text, reasoning, file, toolCall, toolResult), { minLength: 1, maxLength: 4 }), options })
    .map((m) => Prompt.makeMessage("assistant", m)),
  fc.record({ content: fc.array(toolResult, { minLength: 1, maxLength: 3 }), options }).map((m) => Prompt.makeMessage("tool", m))
)
const history = fc.array(message, { minLength: 1, maxLength: 6 }).map(Prompt.fromMessages)

/** Comparable form: URLs by their text, bytes as arrays. */
const comparable = (prompt: Prompt.Prompt): unknown =>
  JSON.parse(JSON.stringify(encodeHistory(prompt), (_k, v) =>
    v instanceof URL ? { url: v.href } : v instanceof Uint8Array ? { bytes: Array.from(v) } : v))

let n = 0

describe("ChatPersistence round trip", () => {
  it.effect.prop("Prompt -> log -> Prompt is the identity, for a history and an edit of it", [history, history], ([prompt, edited]) =>
    Effect.gen(function*() {
      const chatId = `chat-${++n}`
      const readBack = Effect.gen(function*() {
        const chat = yield* (yield* Chat.Persistence).get(chatId)
        return yield* chat.history
      }).pipe(Effect.provide(ChatPersistence.layer()))
      for (const next of [prompt, Prompt.fromMessages([...prompt.content.slice(0, 2), ...edited.content])]) {
        yield* Effect.gen(function*() {
          const chat = yield* (yield* Chat.Persistence).getOrCreate(chatId)
          yield* Ref.set(chat.history, next)
          yield* chat.save
          assert.deepStrictEqual(comparable(yield* chat.history), comparable(next))
        }).pipe(Effect.provide(Layer.merge(ChatPersistence.layer(), aiIds)))
        // a new layer reads the log back
        assert.deepStrictEqual(comparable(yield* readBack), comparable(next))
      }
    }).pipe(Effect.provide(layerMemoryStore())), { fastCheck: { numRuns: 15 } })
})
