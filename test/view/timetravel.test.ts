/**
 * Time travel from the viewer's index (docs/viewer.md "Scale"): the surface at a seq computed from
 * the index's numbers equals the fold of the prefix, and the API's answer at the seqs of random
 * valid logs (with compactions, prunes, tool-result rewrites and header changes) equals what the
 * core answers for `request --at`, `messages` and `surface` of the prefix, on the memory, JSONL
 * and SQLite stores. A campaign (test/suites.ts): a third of the runs in `npm test`.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import type * as Scope from "effect/Scope"
import { make as makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { make as makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { make as makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { makeViewData } from "../../src/programs/view/ViewData.js"
import { buildIndex } from "../../src/programs/view/ViewIndex.js"
import { timeTravel, timeTravelFrom } from "../../src/programs/view/Views.js"
import type { Event } from "../../src/schema/Events.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"
import { deriveMessages, foldSurface } from "../../src/services/SurfaceManager.js"
import { anyValidLog } from "../arbitraries.js"
import { runs, sample } from "../suites.js"
import { seed } from "./helpers.js"

const header = (id: string) => ({ type: "session", version: 1, id, createdAt: 1 })

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "view-travel-" })).pipe(
  Effect.provide(NodeContext.layer)
)

const backends: ReadonlyArray<readonly [string, Effect.Effect<SessionStoreShape, unknown, Scope.Scope>]> = [
  ["memory", makeMemoryStore()],
  ["jsonl", Effect.flatMap(tempDir, (dir) => makeJsonlStore({ root: dir }).pipe(Effect.provide(NodeContext.layer)))],
  ["sqlite", Effect.flatMap(tempDir, (dir) => makeSqliteStore({ filename: `${dir}/s.db` }))]
]

/** A value as the API sends it (JSON). */
const plain = (u: unknown) => JSON.parse(JSON.stringify(u ?? null))

describe("time travel from the viewer's index", () => {
  it.effect.prop(
    "the surface and headers at every seq, from the index's numbers, equal the fold of the prefix",
    [anyValidLog],
    ([built]) =>
      Effect.scoped(Effect.gen(function*() {
        const events = built.events as unknown as ReadonlyArray<Event>
        const store = yield* makeMemoryStore()
        yield* seed(store, { header: header("s"), events })
        const index = yield* buildIndex(store, "s", undefined, 0)
        assert.strictEqual(index.count, events.length)
        for (let seq = 0; seq < events.length; seq++) {
          const fold = foldSurface(events.slice(0, seq + 1))
          assert.ok("nodes" in fold)
          assert.deepStrictEqual(index.surfaceAt(seq), { nodes: fold.nodes, replacements: fold.replacements })
          const headers = events.filter((e) => e.seq <= seq && e.type === "request/header").map((e) => e.seq)
          assert.deepStrictEqual(index.headersAt(seq), {
            headerSeq: headers.at(-1) ?? null,
            previousSeq: headers.length > 1 ? headers[headers.length - 2] : null
          })
          // assembled from the numbers, the whole answer is the prefix's
          const fromNumbers = timeTravelFrom(seq, index.surfaceAt(seq), index.headersAt(seq), (s) => events[s])
          assert.deepStrictEqual(plain(fromNumbers), plain(timeTravel(events, seq)))
        }
      })),
    { fastCheck: { numRuns: runs(20, 5) } }
  )

  for (const [name, open] of backends) {
    it.effect.prop(
      `${name}: the API's time travel at a seq is request --at, messages and surface of the prefix`,
      [anyValidLog, fc.constantFrom(0, 5)],
      ([built, tail]) =>
        Effect.scoped(Effect.gen(function*() {
          const events = built.events as unknown as ReadonlyArray<Event>
          const store = yield* open
          yield* seed(store, { header: header("s"), events })
          const data = yield* makeViewData(store, { tail })
          // every seq in test:slow; in npm test a spread of them and every replacing event
          const seqs = new Set([
            ...sample(events.map((e) => e.seq), 10),
            ...events.filter((e) => typeof e.surfaceOp === "object").map((e) => e.seq)
          ])
          for (const seq of seqs) {
            const { at, problem } = yield* data.timeTravelAt("s", seq)
            assert.strictEqual(problem, null)
            assert.ok(at !== null)
            const request = requestAtLog(events, seq)
            assert.ok(!("_tag" in request))
            assert.deepStrictEqual(plain(at.request), plain({ header: request.header ?? null, messages: request.messages }))
            const fold = foldSurface(events.slice(0, seq + 1))
            assert.ok("nodes" in fold)
            assert.deepStrictEqual(plain(at.surface), plain(fold))
            assert.deepStrictEqual(plain(at.messages), plain(deriveMessages(fold.nodes, (s) => events[s])))
            assert.deepStrictEqual(plain(at), plain(timeTravel(events, seq)))
          }
          assert.strictEqual((yield* data.timeTravelAt("s", events.length)).at, null)
        })),
      { fastCheck: { numRuns: name === "memory" ? runs(12, 3) : runs(6, 2) } }
    )
  }
})
