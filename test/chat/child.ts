/**
 * The fresh process of the chat reopen test: opens a durable store (`jsonl <dir>`, `sqlite <file>`
 * or `postgres <url>`), gets chat `<id>` through `ChatPersistence.layer` and prints its encoded
 * history as one JSON line.
 */
import * as Chat from "@effect/ai/Chat"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { layerPostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { SessionStore } from "../../src/services/SessionStore.js"
import { encodeHistory } from "./helpers.js"

const [kind, location, chatId] = process.argv.slice(2)

const store: Layer.Layer<SessionStore, unknown> = kind === "jsonl"
  ? layerJsonlStore({ root: location }).pipe(Layer.provide(NodeContext.layer))
  : kind === "sqlite"
  ? layerSqliteStore({ filename: location })
  : layerPostgresStore({ url: location })

const program = Effect.gen(function*() {
  const persistence = yield* Chat.Persistence
  const chat = yield* persistence.get(chatId)
  const history = yield* chat.history
  yield* Effect.sync(() => process.stdout.write(JSON.stringify(encodeHistory(history)) + "\n"))
})

// a test child: its own edge
Effect.runPromise(program.pipe(Effect.provide(ChatPersistence.layer().pipe(Layer.provide(store))))).then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(String(e) + "\n")
    process.exit(1)
  }
)
