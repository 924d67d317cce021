/**
 * The child of the chat crash test: on the SQLite file `<file>`, chat `crash` has one completed
 * call, then a `streamText` whose model streams a block and hangs; the child prints "ready" once
 * the stream is hanging and waits to be killed.
 */
import * as Chat from "@effect/ai/Chat"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerScriptedLanguageModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"

const [file] = process.argv.slice(2)

const program = Effect.gen(function*() {
  const reached = yield* Deferred.make<void>()
  const model = layerScriptedLanguageModel({
    scripts: [
      [{ type: "text", text: "Hello." }, { type: "finish", reason: "stop" }],
      [{ type: "text", text: "Once upon a time" }, { type: "hang", reached }]
    ],
    requireConsumed: false
  })
  yield* Effect.gen(function*() {
    const chat = yield* (yield* Chat.Persistence).getOrCreate("crash")
    yield* chat.generateText({ prompt: "Hi" })
    yield* Effect.fork(Stream.runDrain(chat.streamText({ prompt: "Tell me a story" })))
    yield* Deferred.await(reached)
    yield* Effect.sync(() => process.stdout.write("ready\n"))
    return yield* Effect.never
  }).pipe(Effect.provide(Layer.merge(ChatPersistence.layer().pipe(Layer.provide(layerSqliteStore({ filename: file }))), model)))
})

// a test child: its own edge
Effect.runPromise(program).catch((e) => {
  process.stderr.write(String(e) + "\n")
  process.exit(1)
})
