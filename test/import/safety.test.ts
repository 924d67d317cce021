/**
 * Safety of the transcript import (issue #33 "Bounded and safe"): on a real JSONL store directory,
 * a hostile session id cannot place a file outside the store, hostile record content (`__proto__`
 * keys, markup) is stored as data, an import that did not finish is replaced by the next one
 * rather than taken as complete, and `--force` on a JSONL store keeps the replaced log as a backup.
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as JsonlStore from "../../src/layers/jsonl/JsonlStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { importClaudeCode } from "../../src/programs/import/ClaudeCode.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { eventsOf, tempDir, verified } from "./helpers.js"

const record = (sessionId: string, fields: Record<string, unknown>) =>
  JSON.stringify({ parentUuid: null, isSidechain: false, sessionId, timestamp: "2025-03-01T00:00:00.000Z", ...fields })

/** A directory holding `store/` (the JSONL store) and `in/` (the transcripts). */
const setUp = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  const dir = yield* tempDir
  const root = path.join(dir, "store")
  const input = path.join(dir, "in")
  yield* fs.makeDirectory(input)
  return { dir, root, input, fs, path }
})

const withJsonl = <A, E>(root: string, body: Effect.Effect<A, E, SessionStore | NodeContext.NodeContext>) =>
  body.pipe(Effect.provide(Layer.fresh(JsonlStore.layer({ root }))))

describe("import --from claude-code: safety", () => {
  it.scoped("a hostile session id stays inside the store; hostile content is stored as data", () =>
    Effect.gen(function*() {
      const { dir, fs, input, path, root } = yield* setUp
      const sessionId = "../../escaped"
      const file = path.join(input, "t.jsonl")
      yield* fs.writeFileString(
        file,
        [
          // a raw line, so that "__proto__" is an own key of the record
          `{"parentUuid":null,"sessionId":"${sessionId}","type":"user","uuid":"u1","timestamp":"2025-03-01T00:00:00.000Z",` +
          `"__proto__":{"polluted":true},"message":{"role":"user","content":"<script>alert(1)</script>"}}`,
          record(sessionId, { parentUuid: "u1", type: "assistant", uuid: "a1", message: { id: "m1", role: "assistant", model: "claude-x", content: [{ type: "text", text: "$(rm -rf /)" }] } })
        ].join("\n") + "\n"
      )
      yield* withJsonl(root, Effect.gen(function*() {
        const [report] = yield* importClaudeCode(file)
        const id = `claude-code:${sessionId}`
        assert.strictEqual(report.sessions[0].status, "imported")
        assert.strictEqual(yield* verified(id), "ok")
        const events = yield* eventsOf(id)
        const source = events.find((e) => e.type === "import/source" && (e.data as any).record.uuid === "u1")!
        assert.isTrue(Object.hasOwn((source.data as any).record, "__proto__"))
        assert.deepStrictEqual(Object.getOwnPropertyDescriptor((source.data as any).record, "__proto__")?.value, { polluted: true })
        assert.strictEqual(({} as any).polluted, undefined)
        const prompt = events.find((e) => e.type === "user/message")!
        assert.strictEqual((prompt.data as any).content[0].text, "<script>alert(1)</script>")
      }))
      // nothing but the store and the input beside each other, nothing above
      assert.deepStrictEqual((yield* fs.readDirectory(dir)).sort(), ["in", "store"])
      assert.deepStrictEqual((yield* fs.readDirectory(path.dirname(dir))).includes("escaped"), false)
      const stored = yield* fs.readDirectory(root)
      assert.strictEqual(stored.filter((n) => n.endsWith(".jsonl")).length, 1)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("an import that did not finish is replaced by the next one; --force keeps the old log as a backup", () =>
    Effect.gen(function*() {
      const { fs, input, path, root } = yield* setUp
      const sessionId = "2b1f0c9e-0000-4000-8000-000000000001"
      const id = `claude-code:${sessionId}`
      const file = path.join(input, `${sessionId}.jsonl`)
      yield* fs.writeFileString(
        file,
        [
          record(sessionId, { type: "user", uuid: "u1", message: { role: "user", content: "hello" } }),
          record(sessionId, { parentUuid: "u1", type: "assistant", uuid: "a1", message: { id: "m1", role: "assistant", model: "claude-x", content: [{ type: "text", text: "hi" }] } })
        ].join("\n") + "\n"
      )
      yield* withJsonl(root, Effect.gen(function*() {
        // what an interrupted import leaves: its origin record, and no import/end
        const store = yield* SessionStore
        yield* store.create({ version: 1, id, createdAt: 0 })
        const origin: Event = { type: "import/origin", seq: 0, time: 0, data: { tool: "claude-code" }, ignorable: true }
        yield* store.append(id, [origin], { expectedSeq: 0 })
        const [report] = yield* importClaudeCode(file)
        assert.strictEqual(report.sessions[0].status, "replaced")
        const events = yield* eventsOf(id)
        assert.strictEqual(events.at(-1)?.type, "import/end")
        assert.strictEqual(yield* verified(id), "ok")
        // now complete: left alone, or replaced with --force
        const [again] = yield* importClaudeCode(file)
        assert.strictEqual(again.sessions[0].status, "unchanged")
        const [forced] = yield* importClaudeCode(file, { force: true })
        assert.strictEqual(forced.sessions[0].status, "replaced")
        assert.deepStrictEqual(yield* eventsOf(id), events)
      }))
      // the JSONL store kept both replaced logs beside the session file (<file>.v1.bak, <file>.v1.1.bak)
      const names = yield* fs.readDirectory(root)
      assert.strictEqual(names.filter((n) => n.endsWith(".bak")).length, 2, names.join(", "))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a session a person continued after its import is never replaced, not even with --force", () =>
    Effect.gen(function*() {
      const { fs, input, path, root } = yield* setUp
      const sessionId = "2b1f0c9e-0000-4000-8000-000000000002"
      const id = `claude-code:${sessionId}`
      const file = path.join(input, `${sessionId}.jsonl`)
      yield* fs.writeFileString(
        file,
        [
          record(sessionId, { type: "user", uuid: "u1", message: { role: "user", content: "hello" } }),
          record(sessionId, { parentUuid: "u1", type: "assistant", uuid: "a1", message: { id: "m1", role: "assistant", model: "claude-x", content: [{ type: "text", text: "hi" }] } })
        ].join("\n") + "\n"
      )
      yield* withJsonl(root, Effect.gen(function*() {
        yield* importClaudeCode(file)
        // resumed by the library, and a prompt appended
        yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* SessionLive.open(id)
          yield* session.append("user/message", { id: "later", role: "user", content: [{ type: "text", text: "and now?" }], source: { kind: "user" } }, {
            surfaceOp: "append"
          })
          yield* session.close
        }))
        const continued = yield* eventsOf(id)
        assert.strictEqual(continued.at(-1)?.type, "user/message")
        assert.strictEqual(yield* verified(id), "ok")
        const [again] = yield* importClaudeCode(file)
        assert.strictEqual(again.sessions[0].status, "unchanged")
        const [forced] = yield* importClaudeCode(file, { force: true })
        assert.strictEqual(forced.sessions[0].status, "refused")
        assert.strictEqual(forced.sessions[0].error?._tag, "SessionExists")
        assert.deepStrictEqual(yield* eventsOf(id), continued)
      }))
    }).pipe(Effect.provide(NodeContext.layer)))
})
