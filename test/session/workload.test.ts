import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { buildWorkload, describeWorkload, workload } from "../../bench/workload.js"
import * as InvariantsLive from "../../src/layers/session/InvariantsLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"

describe("the bench workload generator (issue 16)", () => {
  it("is deterministic: the same options give the same events; another seed gives others", () => {
    const a = buildWorkload({ turns: 30 })
    assert.deepStrictEqual(buildWorkload({ turns: 30 }), a)
    assert.notDeepEqual(buildWorkload({ turns: 30, seed: 7 }), a)
  })

  it("has the issue's shape: about 100,000 events over 658 turns, 92 % chunks, a compaction every 25 turns", () => {
    const d = describeWorkload(workload())
    assert.strictEqual(d.turns, 658)
    assert.isTrue(d.events > 95_000 && d.events < 105_000, `${d.events} events`)
    assert.isTrue(d.chunkShare > 0.91 && d.chunkShare < 0.93, `chunk share ${d.chunkShare}`)
    assert.strictEqual(d.compactions, Math.floor(658 / 25))
  })

  it.scoped("is a valid log: every event appends through a Session with the optional invariants", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "workload" })
      const input = buildWorkload({ turns: 60 })
      for (const e of input) yield* s.appendUnknown(e.type, e.data, e.options)
      const events = yield* s.events
      assert.strictEqual(events.length, input.length)
      const fold = foldSurface(events)
      assert.isTrue("nodes" in fold)
      if ("nodes" in fold) {
        assert.strictEqual(fold.replacements.length, 2)
        assert.deepStrictEqual(fold.nodes, [...(yield* s.surface.nodes)])
      }
      // a resumed copy derives the same messages
      const messages = (yield* s.messages).map((m) => m.id)
      const reopened = yield* SessionLive.open("workload")
      assert.deepStrictEqual((yield* reopened.messages).map((m) => m.id), messages)
    }).pipe(Effect.provide(Layer.merge(layerMemoryStore(), InvariantsLive.layer))), { timeout: 60_000 })
})
