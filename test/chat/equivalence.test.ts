/**
 * Issue #30's equivalence: the same scripted conversation (system prompt, provider options, a
 * file, reasoning, tools with a failing one, generateObject, a failed call, a stream interrupted
 * mid-block, a stream that fails, histories edited outside a call, and a call after them) through `@effect/ai`'s own persisted chat
 * (`Chat.layerPersisted` over `Persistence.layerMemory`) and through `ChatPersistence.layer` on
 * memory, JSONL, SQLite and PostgreSQL: equal `history` after every call, and on the durable
 * backends after reopening the store in a fresh process.
 */
import * as Chat from "@effect/ai/Chat"
import * as Persistence from "@effect/experimental/Persistence"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { execFile } from "node:child_process"
import { join } from "node:path"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { layerPostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { SessionStore } from "../../src/services/SessionStore.js"
import { bundleScript, childEnv } from "../helpers/processes.js"
import { describePg, freshUrl } from "../postgres/helpers.js"
import { conversation, modelLayer, runConversation } from "./helpers.js"

/** `@effect/ai`'s own persisted chat over its in-memory backing persistence (run once per file). */
const theirs = Effect.gen(function*() {
  const reached = yield* Deferred.make<void>()
  const persistence = Chat.layerPersisted({ storeId: "chats" }).pipe(Layer.provide(Persistence.layerMemory))
  return yield* runConversation("chat-1", conversation, reached).pipe(
    Effect.provide(Layer.mergeAll(persistence, modelLayer(conversation, reached)))
  )
})

const ours = (store: Layer.Layer<SessionStore, unknown>) =>
  Effect.gen(function*() {
    const reached = yield* Deferred.make<void>()
    return yield* runConversation("chat-1", conversation, reached).pipe(
      Effect.provide(Layer.mergeAll(ChatPersistence.layer(), modelLayer(conversation, reached))),
      Effect.provide(store)
    )
  })

const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ prefix: "chat-" })
).pipe(Effect.provide(NodeContext.layer), Effect.orDie)

let bundle: string | undefined
/** The history a fresh process reads back from a durable store (one JSON line). */
const reopened = (kind: string, location: string) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    bundle ??= bundleScript("test/chat/child.ts", join(dir, "..", `chat-child-${process.pid}.cjs`))
    const out = yield* Effect.async<string, Error>((resume) => {
      execFile(process.execPath, [bundle!, kind, location, "chat-1"], { env: childEnv() }, (error, stdout, stderr) => {
        if (error !== null) resume(Effect.fail(new Error(`${error.message}\n${stderr}`)))
        else resume(Effect.succeed(stdout))
      })
    })
    return JSON.parse(out) as unknown
  })

let expectedRun: Effect.Effect.Success<typeof theirs> | undefined

const check = (store: Layer.Layer<SessionStore, unknown>, durable?: { readonly kind: string; readonly location: string }) =>
  Effect.gen(function*() {
    expectedRun ??= yield* theirs
    const expected = expectedRun
    // a conversation that exercises every call kind, a failure and an interruption
    assert.deepStrictEqual(expected.outcomes, [
      "Success", "Success", "Success", "Success", "Success", "Success", "Failure", "Failure", "Failure", "Success", "Success"
    ])
    const got = yield* ours(store)
    assert.deepStrictEqual(got.outcomes, expected.outcomes)
    assert.strictEqual(got.histories.length, expected.histories.length)
    for (let i = 0; i < expected.histories.length; i++) {
      assert.deepStrictEqual(got.histories[i], expected.histories[i], `history after call ${i}`)
    }
    if (durable !== undefined) {
      const fresh = yield* reopened(durable.kind, durable.location)
      assert.deepStrictEqual(fresh, JSON.parse(JSON.stringify(expected.histories[expected.histories.length - 1])))
    }
  })

describe("ChatPersistence equivalence with Chat.layerPersisted", () => {
  it.scoped("memory: equal history after every call", () => check(layerMemoryStore()))

  it.scoped("jsonl: equal history after every call and in a fresh process", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      yield* check(layerJsonlStore({ root }).pipe(Layer.provide(NodeContext.layer)), { kind: "jsonl", location: root })
    }))

  it.scoped("sqlite: equal history after every call and in a fresh process", () =>
    Effect.gen(function*() {
      const filename = join(yield* tempDir, "chats.db")
      yield* check(layerSqliteStore({ filename }), { kind: "sqlite", location: filename })
    }))
})

describePg("ChatPersistence equivalence on PostgreSQL", () => {
  it.scoped("postgres: equal history after every call and in a fresh process", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      yield* check(layerPostgresStore({ url }), { kind: "postgres", location: url })
    }), 60_000)
})
