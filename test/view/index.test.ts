/**
 * The viewer's index (docs/viewer.md "Scale"), in process over real stores: paging over random
 * valid logs (a page is exactly the events of its range, every event on exactly one page, a tool
 * call and its result paired whatever the pages), provenance from the index equal to the fold of
 * the whole log, the index extended from the store's follow while the session is watched live
 * as a writer appends (the live count, a pairing across the append), a record appended that fails
 * validation, and the kept indexes bounded.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as fc from "effect/FastCheck"
import * as Stream from "effect/Stream"
import { appendFileSync } from "node:fs"
import { make as makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { make as makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { makeViewData } from "../../src/programs/view/ViewData.js"
import type { Event } from "../../src/schema/Events.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"
import { anyValidLog } from "../arbitraries.js"
import { demo, seed } from "./helpers.js"

type Rec = Record<string, any>

/** The pairing of a whole log, by the test's own reading: the first call of an id and the first result answering it. */
const expectedPairs = (events: ReadonlyArray<Event>): Map<number, number> => {
  const open = new Map<string, number>()
  const pairs = new Map<number, number>()
  for (const e of events) {
    const d = e.data as Rec
    if (e.type === "tool/call" && !open.has(d.callId)) open.set(d.callId, e.seq)
    if (e.type === "tool/result") {
      const id = d.message?.content?.[0]?.toolCallId
      const call = open.get(id)
      if (call !== undefined) {
        open.delete(id)
        pairs.set(call, e.seq)
        pairs.set(e.seq, call)
      }
    }
  }
  return pairs
}

const header = (id: string) => ({ type: "session", version: 1, id, createdAt: 1 })

describe("the viewer's index", () => {
  it.effect.prop(
    "paging a random valid log: each page exactly its range, every event on one page, tool rows paired across pages",
    [anyValidLog, fc.integer({ min: 4, max: 40 }), fc.constantFrom(0, 3, 200)],
    ([built, size, tail]) =>
      Effect.scoped(Effect.gen(function*() {
        const events = built.events as unknown as ReadonlyArray<Event>
        const store = yield* makeMemoryStore()
        yield* seed(store, { header: header("s"), events })
        const data = yield* makeViewData(store, { tail })
        const pairs = expectedPairs(events)
        // the first page without waiting for the index (it may still be building): exactly the
        // events of its range among those indexed so far, as the whole log has them
        const early = yield* data.timelinePage("s", 0, size, { wait: false })
        assert.ok(early.total <= events.length)
        const earlyCovered = early.rows.flatMap((r) => Array.from({ length: r.lastSeq - r.seq + 1 }, (_, k) => r.seq + k))
        assert.deepStrictEqual(earlyCovered, Array.from({ length: Math.min(size, early.total) }, (_, k) => k))
        for (const r of early.rows) assert.strictEqual(r.type, events[r.seq].type)
        const seen: Array<number> = []
        for (let offset = 0; offset < Math.max(1, events.length); offset += size) {
          const page = yield* data.timelinePage("s", offset, size)
          assert.strictEqual(page.total, events.length)
          assert.strictEqual(page.problem, null)
          const covered = page.rows.flatMap((r) => Array.from({ length: r.lastSeq - r.seq + 1 }, (_, k) => r.seq + k))
          const end = Math.min(offset + size, events.length)
          assert.deepStrictEqual(covered, Array.from({ length: end - offset }, (_, k) => offset + k))
          seen.push(...covered)
          for (const r of page.rows) {
            assert.strictEqual(r.type, events[r.seq].type)
            if (r.type === "tool/call" || r.type === "tool/result") assert.strictEqual(r.pairedSeq, pairs.get(r.seq) ?? null)
          }
        }
        assert.deepStrictEqual(seen, events.map((e) => e.seq))
        // provenance from the index: the whole log's fold, both ways
        const fold = foldSurface(events)
        assert.ok("nodes" in fold)
        // the replacing events and a few others (each a read: the whole log would be slow)
        const probe = events.filter((e, k) => e.surfaceOp !== undefined && e.surfaceOp !== "append" || k % 17 === 0)
        for (const e of probe) {
          const { provenance, related } = yield* data.provenanceAt("s", e.seq)
          assert.deepStrictEqual(provenance?.replaced ?? null, fold.replacements.find((r) => r.seq === e.seq) ?? null)
          assert.deepStrictEqual(
            provenance?.shadowedBy.map((r) => r.seq),
            fold.replacements.filter((r) => r.shadowedSeqs.includes(e.seq)).map((r) => r.seq)
          )
          const named = new Set([...(provenance?.replaced?.shadowedSeqs ?? []), ...(provenance?.shadowedBy ?? []).map((r) => r.seq), ...(e.sourceEventSeqs ?? [])])
          assert.deepStrictEqual(related.map((r) => r.seq), [...named].sort((a, b) => a - b))
        }
      })),
    { fastCheck: { numRuns: 12 } }
  )

  it.scopedLive("a writer's appends reach the index through the store's follow: the live count, a call paired with its later result", () =>
    Effect.gen(function*() {
      const { events } = demo()
      const store = yield* makeMemoryStore()
      // the demo's first tool call is at 19, its result at 20: the session is indexed between them
      yield* seed(store, { header: header("live"), events: events.slice(0, 20) })
      const data = yield* makeViewData(store, { tail: 0 })
      const before = yield* data.timelinePage("live", 0, 20)
      assert.strictEqual(before.total, 20)
      assert.strictEqual(before.rows.find((r) => r.seq === 19)?.pairedSeq, null)
      const subscribed = yield* Deferred.make<void>()
      const counts = yield* data.live("live").pipe(
        Stream.tap(() => Deferred.succeed(subscribed, undefined)),
        Stream.takeUntil((n) => n === events.length),
        Stream.runCollect,
        Effect.fork
      )
      yield* Deferred.await(subscribed)
      yield* store.append("live", events.slice(20, 60), { expectedSeq: 20 })
      yield* store.append("live", events.slice(60), { expectedSeq: 60 })
      const seen = Chunk.toReadonlyArray(yield* Fiber.join(counts))
      assert.strictEqual(seen[0], 20)
      assert.strictEqual(seen.at(-1), events.length)
      const after = yield* data.timelinePage("live", 0, 20)
      assert.strictEqual(after.total, events.length)
      assert.strictEqual(after.rows.find((r) => r.seq === 19)?.pairedSeq, 20)
      assert.strictEqual((yield* data.timelinePage("live", 20, 1)).rows[0].pairedSeq, 19)
      const head = yield* data.headOf("live")
      assert.strictEqual(head.count, events.length)
    }), 30_000)

  it.scopedLive("a record appended that fails validation: the index stops before it, with the rule and seq", () =>
    Effect.gen(function*() {
      const { events } = demo()
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "view-index-" })
      const store = yield* makeJsonlStore({ root: dir })
      yield* seed(store, { header: header("grows"), events: events.slice(0, 10) })
      const data = yield* makeViewData(store)
      // a session is followed while the viewer watches it live
      const subscribed = yield* Deferred.make<void>()
      yield* data.live("grows").pipe(Stream.tap(() => Deferred.succeed(subscribed, undefined)), Stream.runDrain, Effect.fork)
      yield* Deferred.await(subscribed)
      // H5: a user message whose content is no array, appended behind the store's back
      const bad = { type: "user/message", seq: 10, time: 5, data: { id: "x", role: "user", content: "no array", source: { kind: "user" } }, surfaceOp: "append" }
      appendFileSync(`${dir}/grows.jsonl`, JSON.stringify(bad) + "\n" + JSON.stringify({ ...events[11], seq: 11 }) + "\n")
      // a condition, not a time: the follower has seen the record
      while ((yield* data.headOf("grows")).problem === null) yield* Effect.sleep("20 millis")
      const page = yield* data.timelinePage("grows", 0, 200)
      assert.strictEqual(page.total, 10)
      assert.strictEqual(page.problem?.rule, "H5")
      assert.strictEqual(page.problem?.seq, 10)
    }).pipe(Effect.provide(NodeContext.layer)), 30_000)

  it.scopedLive("the indexes kept are bounded: an index dropped ends its live stream and is rebuilt when asked", () =>
    Effect.gen(function*() {
      const { events } = demo()
      const store = yield* makeMemoryStore()
      yield* seed(store, { header: header("a"), events: events.slice(0, 30) })
      yield* seed(store, { header: { ...header("b"), createdAt: 2 }, events: events.slice(0, 40) })
      const data = yield* makeViewData(store, { maxIndexes: 1 })
      const subscribed = yield* Deferred.make<void>()
      const a = yield* data.live("a").pipe(Stream.tap(() => Deferred.succeed(subscribed, undefined)), Stream.runCollect, Effect.fork)
      yield* Deferred.await(subscribed)
      const list = yield* data.listSessions()
      assert.deepStrictEqual(list.map((s) => [s.id, s.events]), [["a", 30], ["b", 40]])
      // b's index pushed a's out: a's live stream ended with the count it had
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Fiber.join(a)), [30])
      assert.strictEqual((yield* data.timelinePage("a", 0, 200)).total, 30)
    }), 30_000)
})
