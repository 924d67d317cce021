/**
 * SQL `readFrom` seeks (SPEC §7.5 "`readFrom` seeks with `seq >= ?`"; src/layers/sql/Read.ts
 * `readFrom`): once a store instance has read a session whole and found every row good, its
 * `readFrom` reads only the rows from the one holding `fromSeq` (a packed row may start before it).
 * Made observable without timing: a row below the seek point damaged by hand afterwards is not
 * read by a seek from past it, while `load`, a seek that reaches the damage and a fresh store
 * instance (whose first read is whole) all report the torn tail exactly as before.
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { createRequire } from "node:module"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"

interface RawDb {
  prepare(source: string): { run(...params: ReadonlyArray<unknown>): unknown; get(...params: ReadonlyArray<unknown>): unknown }
  close(): void
}
const require = createRequire(import.meta.url)
const Database = require("better-sqlite3") as new(filename: string) => RawDb

/** Run `f` on the database file through a connection of its own (not the store's). */
const withRaw = <A>(file: string, f: (db: RawDb) => A) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Database(file)),
    (db) => Effect.sync(() => f(db)),
    (db) => Effect.sync(() => db.close())
  )

const tempFile = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const path = yield* Path.Path
  return path.join(yield* fs.makeTempDirectoryScoped({ prefix: "sql-seek-" }), "store.db")
})

const plugin = (seq: number): Event => ({ type: "test/plugin", seq, time: 1_000 + seq, data: { n: seq }, ignorable: true }) as unknown as Event
const delta = (seq: number): Event =>
  ({ type: "assistant/chunk", seq, time: 1_000 + seq, data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: `t${seq}` } } }) as unknown as Event

/** 0–4 plugin events, 5–14 one run of text deltas (packed rows), 15–19 plugin events. */
const events: ReadonlyArray<Event> = [
  ...Array.from({ length: 5 }, (_, k) => plugin(k)),
  ...Array.from({ length: 10 }, (_, k) => delta(5 + k)),
  ...Array.from({ length: 5 }, (_, k) => plugin(15 + k))
]
const lines = (es: ReadonlyArray<unknown>) => es.map((e) => encodeEvent(e as Event))
const header = { version: 1, id: "s", createdAt: 1 }

describe("SQL readFrom seeks", () => {
  it.scoped("after a good whole read, readFrom reads from the row holding fromSeq: a row damaged below it is not read; load, a seek reaching it and a new instance see the torn tail", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const store = yield* makeSqliteStore({ filename: file })
      yield* store.create(header)
      yield* store.append("s", events, { expectedSeq: 0 })
      const rows = yield* withRaw(file, (db) => db.prepare("SELECT count(*) AS n FROM event_rows").get() as { n: number })
      assert.isBelow(rows.n, events.length, "the run of deltas is stored as packed rows")
      // the first read of this instance is whole; it finds every row good
      assert.deepStrictEqual(lines(yield* store.readFrom("s", 0)), lines(events))
      // seeks into the middle of a packed row and past it
      for (const k of [3, 7, 12, 15, 19, 20, 25]) assert.deepStrictEqual(lines(yield* store.readFrom("s", k)), lines(events.slice(k)))

      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE session_id = 's' AND seq = 2").run())
      // the damaged row lies below the seek point: not read
      assert.deepStrictEqual(lines(yield* store.readFrom("s", 16)), lines(events.slice(16)))
      assert.deepStrictEqual(lines(yield* store.readFrom("s", 9)), lines(events.slice(9)))
      // the whole read sees it: a torn tail from seq 2
      const loaded = yield* store.load("s")
      assert.deepStrictEqual(loaded.tornTail, { fromSeq: 2, reason: "unparsable", position: 2 })
      // that read found a defect: this instance reads the session whole again, as before the seek
      assert.deepStrictEqual(yield* store.readFrom("s", 16), [])
      assert.deepStrictEqual(lines(yield* store.readFrom("s", 1)), lines(events.slice(1, 2)))
      // and a new instance's first read is whole
      const other = yield* makeSqliteStore({ filename: file })
      assert.deepStrictEqual(yield* other.readFrom("s", 16), [])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a seek that reaches a damaged row takes the whole read: the same torn tail or L2 as load", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const store = yield* makeSqliteStore({ filename: file })
      yield* store.create(header)
      yield* store.append("s", events, { expectedSeq: 0 })
      assert.strictEqual((yield* store.readFrom("s", 0)).length, events.length)
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE session_id = 's' AND seq = 17").run())
      // torn tail from 17: the events from 10 up to it
      assert.deepStrictEqual(lines(yield* store.readFrom("s", 10)), lines(events.slice(10, 17)))
      assert.deepStrictEqual((yield* store.load("s")).tornTail, { fromSeq: 17, reason: "unparsable", position: 17 })
      // good again (the row restored by hand), read whole once, then a turn/end after a damaged row: L2
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{\"n\":17}' WHERE session_id = 's' AND seq = 17").run())
      assert.strictEqual((yield* store.readFrom("s", 0)).length, events.length)
      yield* store.append("s", [{ type: "turn/end", seq: 20, time: 2_000, data: { turn: 1, reason: { kind: "completed" } } } as unknown as Event], {
        expectedSeq: 20
      })
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE session_id = 's' AND seq = 18").run())
      const e = yield* Effect.flip(store.readFrom("s", 18))
      assert.strictEqual(e._tag, "StoreCorrupt")
      assert.strictEqual((e as { rule?: string }).rule, "L2")
      // sessions.next_seq disagreeing with the rows is L2 on a seek past every row too
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{\"n\":18}' WHERE session_id = 's' AND seq = 18").run())
      assert.strictEqual((yield* store.readFrom("s", 0)).length, 21)
      yield* withRaw(file, (db) => db.prepare("UPDATE sessions SET next_seq = 30 WHERE id = 's'").run())
      assert.strictEqual((yield* Effect.flip(store.readFrom("s", 25))).rule, "L2")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("loadEach from a seq seeks likewise after a good whole read: a row damaged below the seek point is not read, a later whole read sees it and the next read from a seq is whole again", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const store = yield* makeSqliteStore({ filename: file })
      yield* store.create(header)
      yield* store.append("s", events, { expectedSeq: 0 })
      const from = (k: number) =>
        Effect.gen(function*() {
          const got: Array<unknown> = []
          const summary = yield* store.loadEach("s", { onEvents: (e) => Effect.sync(() => void got.push(...e)) }, { fromSeq: k })
          return { lines: lines(got), summary }
        })
      // the first read of this instance is whole
      assert.deepStrictEqual((yield* from(0)).lines, lines(events))
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE session_id = 's' AND seq = 2").run())
      // a read from the start that its sink ends learns nothing: the next read from a seq still seeks
      assert.strictEqual(yield* Effect.flip(store.loadEach("s", { onEvents: () => Effect.fail("stop" as const) })), "stop")
      for (const k of [7, 16]) {
        const read = yield* from(k)
        assert.deepStrictEqual(read.lines, lines(events.slice(k)), `from ${k}: sought past the damage`)
        assert.strictEqual(read.summary.tornTail, undefined)
        assert.strictEqual(read.summary.count, events.length)
      }
      // a whole read sees the torn tail; then a read from 16 reads from the start: nothing committed there
      assert.deepStrictEqual((yield* store.load("s")).tornTail, { fromSeq: 2, reason: "unparsable", position: 2 })
      const whole = yield* from(16)
      assert.deepStrictEqual(whole.lines, [])
      assert.deepStrictEqual(whole.summary.tornTail, { fromSeq: 2, reason: "unparsable", position: 2 })
      assert.strictEqual(whole.summary.count, 2)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a read-only open (the viewer's, the reading commands') passes fromSeq through: its reads from a seq seek too", () =>
    Effect.gen(function*() {
      const file = yield* tempFile
      const writer = yield* makeSqliteStore({ filename: file })
      yield* writer.create(header)
      yield* writer.append("s", events, { expectedSeq: 0 })
      const store = yield* makeSqliteStore({ filename: file, readOnly: true })
      const from = (k: number) =>
        Effect.gen(function*() {
          const got: Array<unknown> = []
          yield* store.loadEach("s", { onEvents: (e) => Effect.sync(() => void got.push(...e)) }, { fromSeq: k })
          return lines(got)
        })
      assert.deepStrictEqual(yield* from(0), lines(events))
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE session_id = 's' AND seq = 2").run())
      // sought past the damaged row: the events from 16, not a whole read that stops at seq 2
      assert.deepStrictEqual(yield* from(16), lines(events.slice(16)))
    }).pipe(Effect.provide(NodeContext.layer)))
})
