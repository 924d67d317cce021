/**
 * The first open of a session whose index is still being built (docs/viewer.md "First open"):
 * with `wait: false` the sessions list and the head answer at once with the events indexed so
 * far, the first page comes as soon as the index reached its end (the list without re-reading
 * lists the sessions of the last listing: no store read), and once the build is over
 * every answer is the whole log's. The build is held deterministically (no time involved): a
 * reader of the SQLite store holds its one connection until the test lets it go, so the viewer's
 * build waits behind it.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { make as makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { make as makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { BUILDS_AT_ONCE, LISTED_AFTER, makeViewData } from "../../src/programs/view/ViewData.js"
import { demo, seed } from "./helpers.js"

const { events } = demo()

describe("the first open while the index is built", () => {
  it.scopedLive("wait: false answers at once with the progress; the answers become the whole log's when the build ends", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "view-progress-" })
      const store = yield* makeSqliteStore({ filename: `${dir}/s.db` })
      const id = yield* seed(store, demo())
      // a reader that holds the store's connection until `gate` opens
      const holding = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const reader = yield* store.loadEach(id, {
        onEvents: () => Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(gate))
      }).pipe(Effect.fork)
      yield* Deferred.await(holding)

      const data = yield* makeViewData(store)
      // the session opened first (the app's `#session=`): its head at once, with the progress
      const head = yield* data.headOf(id, { wait: false })
      assert.deepStrictEqual(head, { id, count: 0, problem: null, indexing: true })
      // a page waits for the index to reach its end; time travel for its seq
      const page = yield* data.timelinePage(id, 0, 40, { wait: false }).pipe(Effect.fork)
      const travel = yield* data.timeTravelAt(id, 3).pipe(Effect.fork)
      assert.strictEqual((yield* Fiber.poll(page))._tag, "None")

      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(reader)
      const first = yield* Fiber.join(page)
      const covered = first.rows.flatMap((r) => Array.from({ length: r.lastSeq - r.seq + 1 }, (_, k) => r.seq + k))
      assert.deepStrictEqual(covered, Array.from({ length: 40 }, (_, k) => k))
      assert.ok(first.total >= 40 && first.total <= events.length)
      assert.strictEqual((yield* Fiber.join(travel)).at?.seq, 3)
      const listed = yield* data.listSessions({ wait: false })
      assert.deepStrictEqual(listed.map((s) => s.id), [id])
      assert.ok(listed[0].events <= events.length)

      // a condition, not a time: the list without re-reading shows the progress until the build ends
      let summary = (yield* data.listSessions({ wait: false, reread: false }))[0]
      while (summary.indexing === true) {
        assert.ok(summary.events <= events.length)
        yield* Effect.yieldNow()
        summary = (yield* data.listSessions({ wait: false, reread: false }))[0]
      }
      assert.strictEqual(summary.events, events.length)
      assert.strictEqual(summary.problem, null)
      const whole = yield* data.timelinePage(id, 0, 40, { wait: false })
      assert.strictEqual(whole.total, events.length)
      assert.strictEqual(whole.indexing, false)
      // a tool call paired with its result once the whole log is indexed
      assert.strictEqual(whole.rows.find((r) => r.seq === 19)?.pairedSeq, 20)
      assert.deepStrictEqual(yield* data.headOf(id), { id, count: events.length, problem: null, indexing: false })
    }).pipe(Effect.provide(NodeContext.layer)), 20_000)

  it.scopedLive("the list without waiting: sessions shorter than LISTED_AFTER are listed complete, however many are queued", () =>
    Effect.gen(function*() {
      const store = yield* makeMemoryStore()
      const ids: Array<string> = []
      for (let k = 0; k < BUILDS_AT_ONCE + 3; k++) ids.push(yield* seed(store, demo(), `s${k}`))
      assert.ok(events.length < LISTED_AFTER)
      const data = yield* makeViewData(store)
      const listed = yield* data.listSessions({ wait: false })
      assert.deepStrictEqual(listed.map((s) => [s.id, s.events, s.indexing]), ids.map((id) => [id, events.length, false]))
    }), 20_000)

  it.scopedLive("waiting (the default): a page answers once the index is complete, as before", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "view-progress-" })
      const store = yield* makeSqliteStore({ filename: `${dir}/s.db` })
      const id = yield* seed(store, demo())
      const holding = yield* Deferred.make<void>()
      const gate = yield* Deferred.make<void>()
      const reader = yield* store.loadEach(id, {
        onEvents: () => Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(gate))
      }).pipe(Effect.fork)
      yield* Deferred.await(holding)
      const data = yield* makeViewData(store)
      const list = yield* data.timelinePage(id, 0, 40).pipe(Effect.fork)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(reader)
      const page = yield* Fiber.join(list)
      assert.strictEqual(page.total, events.length)
      assert.strictEqual(page.indexing, false)
      assert.strictEqual(page.rows.find((r) => r.seq === 19)?.pairedSeq, 20)
    }).pipe(Effect.provide(NodeContext.layer)), 20_000)
})
