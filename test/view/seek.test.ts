/**
 * The viewer reads a deep page and the events time travel names from their seqs
 * (src/programs/view/ViewIndex.ts `readSpan`, `readNamed`; docs/viewer.md "Scale"): after the
 * index's build (a whole read, which leaves the JSONL store its checkpoints), a page at seq 4,500
 * reads the file only from the checkpoint at 4,096. Made observable without timing: a line near
 * the start damaged in place afterwards does not stop that page, while a read of the log from
 * its start (what the page cost before) finds a torn tail there.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { buildIndex, readNamed, readRange, readSpan } from "../../src/programs/view/ViewIndex.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { storeAt, tempDir } from "../follow/stores.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"

const N = 5_000

describe("view: reads from a seq", () => {
  it.scoped("a deep page and named events are read from the JSONL checkpoint before them, not from the start", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const file = NodePath.join(dir, "s.jsonl")
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.create(headerFor("s"))
        yield* store.append("s", pluginEvents(0, N), { expectedSeq: 0 })
        const index = yield* buildIndex(store, "s", undefined)
        assert.strictEqual(index.count, N)
        // damage the line of seq 10 in place (same file, same size)
        const text = NodeFs.readFileSync(file, "utf8")
        const at = text.indexOf("{", text.indexOf("\"seq\":10,") - 20)
        NodeFs.writeFileSync(file, text.slice(0, at) + "x" + text.slice(at + 1))
        const page = yield* readSpan(store, "s", 4_500, 4_550)
        assert.deepStrictEqual(page?.map((e) => e.seq), Array.from({ length: 50 }, (_, k) => 4_500 + k))
        const named = yield* readNamed(store, "s", new Set([4_200, 4_999]))
        assert.deepStrictEqual([...(named?.keys() ?? [])].sort(), [4_200, 4_999])
        // the read from the start that the page cost before stops at the damage
        assert.deepStrictEqual(yield* readRange(store, "s", 4_500, 4_550), [])
      }).pipe(Effect.provide(storeAt("jsonl-plain", dir)))
    }))
})
