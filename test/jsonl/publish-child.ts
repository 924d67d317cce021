/**
 * One creator process of the JSONL publication race (test/jsonl/publish.test.ts): registers a
 * session, says `ready`, waits for a line on stdin, then materialises it with its first append
 * and prints `won`, or `lost <tag> <rule>` when the append is refused. Usage:
 *   node publish-child.cjs <root> <sessionId> <plain|compressed>
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { header, turn } from "./helpers.js"

const [root, sessionId, layout] = process.argv.slice(2)

const say = (line: string) => Effect.sync(() => void process.stdout.write(line + "\n"))

const go = Effect.async<void>((resume) => {
  process.stdin.once("data", () => resume(Effect.void))
})

const program = Effect.gen(function*() {
  const store = yield* makeJsonlStore({ root: root!, compress: layout === "compressed", lockTimeoutMs: 60_000 })
  yield* store.create(header(sessionId!))
  yield* say("ready")
  yield* go
  const result = yield* Effect.either(store.append(sessionId!, turn(0), { expectedSeq: 0 }))
  if (result._tag === "Right") yield* say("won")
  else yield* say(`lost ${result.left._tag} ${"rule" in result.left ? String(result.left.rule) : "-"}`)
  process.stdin.destroy()
})

NodeRuntime.runMain(Effect.scoped(program).pipe(Effect.provide(NodeContext.layer)))
