/**
 * The program of test/native/addons.test.ts, run with both native addons unloadable
 * (block-addons.cjs): it imports the package root, runs a memory-store session, then tries a
 * JSONL append and a SQLite open, and prints what happened as one JSON line.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Root from "../../src/index.js"

const dlopened = (): ReadonlyArray<string> => (globalThis as unknown as { __dlopened: Array<string> }).__dlopened
const afterImport = [...dlopened()]
const [dir] = process.argv.slice(2)

const turn = Effect.gen(function*() {
  const session = yield* Root.Session.Session
  yield* session.append("turn/start", { turn: 1 })
  yield* session.append("user/message", {
    id: "u1",
    role: "user",
    content: [{ type: "text", text: "Hello" }],
    source: { kind: "user" }
  }, { surfaceOp: "append" })
  yield* session.append("turn/end", { turn: 1, reason: { kind: "completed" } })
  return yield* session.messages
})

const outcome = <A, E extends { readonly _tag: string; readonly message: string }, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(Effect.either(effect), (result) =>
    result._tag === "Right" ? { ok: true } : { ok: false, tag: result.left._tag, message: result.left.message })

const program = Effect.gen(function*() {
  const memory = yield* turn.pipe(
    Effect.provide(Root.SessionLive.layerCreate({ id: "m" })),
    Effect.provide(Root.MemoryStore.layerMemoryStore())
  )
  const jsonl = yield* outcome(
    turn.pipe(
      Effect.provide(Root.SessionLive.layerCreate({ id: "j" })),
      Effect.provide(Root.JsonlStore.layerJsonlStore({ root: `${dir}/jsonl` }).pipe(Layer.provide(NodeContext.layer)))
    )
  )
  const sqlite = yield* outcome(
    turn.pipe(
      Effect.provide(Root.SessionLive.layerCreate({ id: "s" })),
      Effect.provide(Root.SqliteStore.layerSqliteStore({ filename: `${dir}/s.db` }))
    )
  )
  process.stdout.write(JSON.stringify({ afterImport, memory, jsonl, sqlite, dlopened: dlopened() }) + "\n")
})

NodeRuntime.runMain(program)
