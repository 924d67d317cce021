import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { layerMemoryStore } from "../src/layers/memory/MemoryStore.js"
import * as Session from "../src/services/Session.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"

describe("smoke", () => {
  it.scoped("append, surface, messages", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "s1" })
      yield* s.append("turn/start", { turn: 1 })
      const u = yield* s.append("user/message", {
        id: "u1",
        role: "user",
        content: [{ type: "text", text: "hi" }],
        source: { kind: "user" }
      }, { surfaceOp: "append" })
      assert.strictEqual(u.seq, 1)
      const r = yield* s.append("user/message", {
        id: "u2",
        role: "user",
        content: [{ type: "text", text: "summary" }],
        source: { kind: "plugin", plugin: "compact" }
      }, { surfaceOp: { op: "replace", start: 1, end: 1 }, sourceEventSeqs: [1] })
      assert.strictEqual(r.seq, 2)
      assert.deepStrictEqual(yield* s.surface.nodes, [2])
      assert.strictEqual(yield* s.surface.replaceGeneration, 1)
      const msgs = yield* s.messages
      assert.strictEqual(msgs.length, 1)
      assert.strictEqual(msgs[0].id, "u2")
      const bad = yield* Effect.flip(s.appendUnknown("user/message", { id: "x", role: "user", content: [], source: { kind: "user" } }))
      assert.strictEqual(bad._tag, "SurfaceMarkerInvalid")
      assert.strictEqual((bad as any).rule, "D3")
      assert.strictEqual((yield* s.events).length, 3)
    }).pipe(Effect.provide(layerMemoryStore())))
})
