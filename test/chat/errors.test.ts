/**
 * The failures of `ChatPersistence` (issue #30): `get` of an unknown id is `ChatNotFoundError`;
 * `getOrCreate` writes the session at once (a new store instance finds it); store failures are
 * `PersistenceBackingError` with our tagged error as the cause (a corrupt JSONL file on `get`; an
 * append conflict with another writer during a call, after which the next call reopens);
 * `timeToLive` expires nothing; and a crash mid-stream: a child process killed (SIGKILL) while its
 * chat's model stream hangs, reopened, has the completed call and the crashed call's prompt (made
 * durable by the checkpoint before the model was called, where `@effect/ai`'s own chat loses the
 * whole call), and its open turn closed by the repair closers.
 */
import * as Chat from "@effect/ai/Chat"
import { PersistenceBackingError } from "@effect/experimental/Persistence"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as TestClock from "effect/TestClock"
import { join } from "node:path"
import * as ChatPersistence from "../../src/layers/chat/ChatPersistence.js"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { AppendConflict } from "../../src/schema/Errors.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { type ChatCall, encodeHistory, modelLayer } from "./helpers.js"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import type { Event } from "../../src/schema/Events.js"
import { bundleScript, childEnv } from "../helpers/processes.js"

const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ prefix: "chat-err-" })
).pipe(Effect.provide(NodeContext.layer), Effect.orDie)

const persistence = Effect.flatMap(Chat.Persistence, (p) => Effect.succeed(p))

/** Run `effect` with a `ChatPersistence` layer over `store` (built for this run only). */
const withChats = <A, E, R>(store: Layer.Layer<SessionStore, unknown>, effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.provide(ChatPersistence.layer().pipe(Layer.provide(store))))

const reply = (text: string): ChatCall => ({ kind: "text", prompt: "Hi", script: [{ type: "text", text }, { type: "finish", reason: "stop" }] })

describe("ChatPersistence failures", () => {
  it.effect("get of an unknown id fails ChatNotFoundError; getOrCreate then get finds it, empty", () =>
    Effect.gen(function*() {
      const chats = yield* persistence
      const missing = yield* Effect.flip(chats.get("nobody"))
      assert.instanceOf(missing, Chat.ChatNotFoundError)
      assert.strictEqual((missing as Chat.ChatNotFoundError).chatId, "nobody")
      const created = yield* chats.getOrCreate("somebody")
      assert.strictEqual(created.id, "somebody")
      const again = yield* chats.get("somebody")
      assert.deepStrictEqual(encodeHistory(yield* again.history), { content: [] })
      // still unknown after a failed get: the failure is not kept
      assert.instanceOf(yield* Effect.flip(chats.get("nobody")), Chat.ChatNotFoundError)
    }).pipe(Effect.provide(ChatPersistence.layer()), Effect.provide(layerMemoryStore())))

  it.scoped("getOrCreate writes the session at once: another store instance over the file gets it", () =>
    Effect.gen(function*() {
      const filename = join(yield* tempDir, "chats.db")
      yield* withChats(layerSqliteStore({ filename }), Effect.flatMap(persistence, (p) => p.getOrCreate("c")))
      const chat = yield* withChats(layerSqliteStore({ filename }), Effect.flatMap(persistence, (p) => p.get("c")))
      assert.strictEqual(chat.id, "c")
    }))

  it.scoped("a corrupt JSONL file: get fails PersistenceBackingError with the store's tagged error as cause", () =>
    Effect.gen(function*() {
      const root = yield* tempDir
      const store = layerJsonlStore({ root }).pipe(Layer.provide(NodeContext.layer))
      yield* withChats(store, Effect.flatMap(persistence, (p) => p.getOrCreate("c")))
      const fs = yield* Effect.provide(FileSystem.FileSystem, NodeContext.layer)
      const [file] = yield* Effect.orDie(fs.readDirectory(root))
      yield* Effect.orDie(fs.writeFileString(join(root, file), "this is not a session log\n"))
      const error = yield* withChats(store, Effect.flatMap(persistence, (p) => Effect.flip(p.get("c"))))
      assert.instanceOf(error, PersistenceBackingError)
      const cause = (error as PersistenceBackingError).cause as { _tag: string; rule: string }
      assert.strictEqual(typeof cause._tag, "string")
      assert.match(cause.rule, /^[A-Z][0-9]+$/)
    }))

  it.scoped("another writer's append: the call dies with PersistenceBackingError(AppendConflict); the next call reopens", () =>
    Effect.gen(function*() {
      const filename = join(yield* tempDir, "chats.db")
      // the conflicting call fails at its checkpoint, before the model is called: no script for it
      const calls = [reply("first"), reply("theirs"), reply("after")]
      const reached = yield* Deferred.make<void>()
      const models = modelLayer(calls, reached)
      yield* Effect.gen(function*() {
        const mine = yield* persistence
        const chat = yield* mine.getOrCreate("c")
        yield* chat.generateText({ prompt: "one" })
        // a second layer over another store instance of the same file writes a turn
        yield* withChats(
          layerSqliteStore({ filename }),
          Effect.flatMap(persistence, (p) => Effect.flatMap(p.get("c"), (other) => other.generateText({ prompt: "two" })))
        )
        const exit = yield* Effect.exit(chat.generateText({ prompt: "three" }))
        assert.isTrue(Exit.isFailure(exit))
        const defect = Exit.isFailure(exit) ? Cause.dieOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(defect))
        const error = Option.getOrThrow(defect)
        assert.instanceOf(error, PersistenceBackingError)
        assert.instanceOf((error as PersistenceBackingError).cause, AppendConflict)
        // the handle was dropped: this call reopens the log, which has the other writer's turn
        yield* chat.generateText({ prompt: "four" })
        const texts = (yield* chat.history).content.map((m) =>
          m.role === "system" ? m.content : m.content.map((p) => (p.type === "text" ? p.text : "")).join("")
        )
        assert.deepStrictEqual(texts, ["one", "first", "two", "theirs", "four", "after"])
      }).pipe(
        Effect.provide(Layer.merge(ChatPersistence.layer().pipe(Layer.provide(layerSqliteStore({ filename }))), models))
      )
    }))

  it.effect("timeToLive expires nothing: the chat is there after the time has passed", () =>
    Effect.gen(function*() {
      const chats = yield* persistence
      yield* chats.getOrCreate("ttl", { timeToLive: "1 second" })
      yield* TestClock.adjust("1 hour")
      const chat = yield* chats.get("ttl", { timeToLive: "1 second" })
      assert.strictEqual(chat.id, "ttl")
    }).pipe(Effect.provide(ChatPersistence.layer()), Effect.provide(layerMemoryStore())))
})

/** Run the child until it prints "ready", then kill it with SIGKILL. */
const crashChild = (bundle: string, file: string) =>
  Effect.async<void, Error>((resume) => {
    const child = spawn(process.execPath, [bundle, file], { env: childEnv(), stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    child.stdout.on("data", (d) => {
      out += String(d)
      if (out.includes("ready")) child.kill("SIGKILL")
    })
    child.stderr.on("data", (d) => (err += String(d)))
    child.on("exit", (_code, signal) =>
      resume(signal === "SIGKILL" ? Effect.void : Effect.fail(new Error(`child exited without the crash: ${err}`))))
  })

describe("ChatPersistence crash", () => {
  it.effect("a process killed mid-stream: reopened, the completed call and the crashed prompt are there; the turn is closed", () =>
    Effect.gen(function*() {
      const dir = fs.mkdtempSync(join(os.tmpdir(), "chat-crash-"))
      yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
      const file = join(dir, "chats.db")
      const bundle = bundleScript("test/chat/crash-child.ts", join(dir, "child.cjs"))
      yield* crashChild(bundle, file)
      const store = layerSqliteStore({ filename: file })
      const { events, texts } = yield* Effect.gen(function*() {
        const texts = yield* Effect.gen(function*() {
          const chat = yield* (yield* Chat.Persistence).get("crash")
          return (yield* chat.history).content.map((m) =>
            m.role === "system" ? m.content : m.content.map((p) => (p.type === "text" ? p.text : "")).join("")
          )
        }).pipe(Effect.provide(ChatPersistence.layer()))
        const loaded = yield* Effect.flatMap(SessionStore, (s) => s.load("crash"))
        return { texts, events: loaded.events as ReadonlyArray<Event> }
      }).pipe(Effect.provide(store))
      assert.deepStrictEqual(texts, ["Hi", "Hello.", "Tell me a story"])
      const ends = events.filter((e) => e.type === "turn/end").map((e) => (e.data as { reason: { kind: string } }).reason.kind)
      assert.deepStrictEqual(ends, ["completed", "interrupted"])
    }).pipe(Effect.scoped), 60_000)
})
