/**
 * JSONL `loadEach` from a seq (src/layers/jsonl/JsonlStore.ts `loadEachFrom`; docs/guide.md
 * "Reading from a seq"): a whole read of a plain or packed file records a checkpoint every 4,096
 * seqs (byte offset, seq, lines before it), and a later read from a seq starts at the checkpoint
 * at or before it. Made observable without timing: a line before the checkpoint changed in place
 * (same file, same size) is not read by a read from past it, while `load`, a read from before the
 * checkpoint and a new store instance read from the start and see the torn tail; a file renamed in
 * (`replaceLog`) or cut shorter drops the checkpoints.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { storeAt, tempDir } from "../follow/stores.js"
import { headerFor, pluginEvents } from "./contract.js"

const lines = (es: ReadonlyArray<unknown>) => es.map((e) => encodeEvent(e as Event))

/** Make the line of seq 10 unparsable in place: same file, same size. */
const damageSeq10 = (file: string) => {
  const text = NodeFs.readFileSync(file, "utf8")
  const at = text.indexOf("{", text.indexOf("\"seq\":10,") - 20)
  NodeFs.writeFileSync(file, text.slice(0, at) + "x" + text.slice(at + 1))
}

/** The events `loadEach` from `fromSeq` hands over, and its summary. */
const from = (store: SessionStoreShape, id: string, fromSeq: number) =>
  Effect.gen(function*() {
    const got: Array<unknown> = []
    const summary = yield* store.loadEach(id, { onEvents: (e) => Effect.sync(() => void got.push(...e)) }, { fromSeq })
    return { lines: lines(got), summary }
  })

const N = 5_000

for (const kind of ["jsonl-plain", "jsonl-packed"] as const) {
  describe(`JSONL loadEach from a seq: ${kind}`, () => {
    it.scoped("after a whole read, a read from past a checkpoint reads only what follows it; load, a read from before it and a new instance read from the start", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = NodePath.join(dir, "s.jsonl")
        const events = pluginEvents(0, N)
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor("s"))
          yield* store.append("s", events, { expectedSeq: 0 })
          // the whole read records the checkpoints (at seqs 0 and 4,096)
          assert.strictEqual((yield* from(store, "s", 0)).lines.length, N)
          damageSeq10(file)
          for (const k of [4_096, 4_500, N - 1, N, N + 7]) {
            const read = yield* from(store, "s", k)
            assert.deepStrictEqual(read.lines, lines(events.slice(k)), `from ${k}: sought past the damage`)
            assert.strictEqual(read.summary.count, N)
            assert.strictEqual(read.summary.tornTail, undefined)
          }
          // before the checkpoint at 4,096: from the one at 0, which reaches the damage
          const early = yield* from(store, "s", 20)
          assert.deepStrictEqual(early.lines, [])
          assert.strictEqual(early.summary.tornTail?.fromSeq, 10)
          // the whole read sees it and records the checkpoints of what it found (only before seq 10)
          assert.strictEqual((yield* store.load("s")).tornTail?.fromSeq, 10)
          const after = yield* from(store, "s", 4_500)
          assert.deepStrictEqual(after.lines, [])
          assert.strictEqual(after.summary.count, 10)
        }).pipe(Effect.provide(storeAt(kind, dir)))
        const again = yield* Effect.provide(Effect.flatMap(SessionStore, (s) => from(s, "s", 4_500)), storeAt(kind, dir))
        assert.deepStrictEqual(again.lines, [])
        assert.strictEqual(again.summary.tornTail?.fromSeq, 10)
      }))

    it.scoped("a file renamed in (replaceLog) or cut shorter is read from the start", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = NodePath.join(dir, "r.jsonl")
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor("r"))
          yield* store.append("r", pluginEvents(0, N), { expectedSeq: 0 })
          yield* store.load("r")
          const loaded = yield* store.load("r")
          const replacement = pluginEvents(0, N, "new")
          yield* store.replaceLog("r", loaded.header, replacement, { revision: loaded.revision, backup: "test" })
          assert.deepStrictEqual((yield* from(store, "r", 4_500)).lines, lines(replacement.slice(4_500)))
          // checkpoints of the new file; then the file cut to its first 100 lines by hand
          assert.strictEqual((yield* from(store, "r", 0)).lines.length, N)
          const text = NodeFs.readFileSync(file, "utf8").split("\n")
          NodeFs.writeFileSync(file, text.slice(0, 101).join("\n") + "\n")
          const cut = yield* from(store, "r", 4_500)
          assert.deepStrictEqual(cut.lines, [])
          assert.strictEqual(cut.summary.count, 100)
        }).pipe(Effect.provide(storeAt(kind, dir)))
      }))
  })
}
