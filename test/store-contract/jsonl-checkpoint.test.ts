/**
 * JSONL `readFrom` from checkpoints (src/layers/jsonl/FollowCursor.ts `checkpointedReadFrom`;
 * docs/follow.md "JSONL"): the end of each read of a session file is kept, and a later read from
 * a seq at or after it scans only the bytes from there. Made observable without timing: a line
 * before the checkpoint changed in place (same file, same size) is not read again by a read from
 * past it, while `load`, a read from before the checkpoint and a new store instance read the file
 * whole and see the torn tail.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { storeAt, tempDir } from "../follow/stores.js"
import { headerFor, pluginEvents } from "./contract.js"

const lines = (es: ReadonlyArray<unknown>) => es.map((e) => encodeEvent(e as Event))

/** Make the line of seq 1 unparsable in place: same file, same size. */
const damageSeq1 = (file: string) => {
  const text = NodeFs.readFileSync(file, "utf8")
  const at = text.indexOf("{", text.indexOf("\"seq\":1,") - 20)
  NodeFs.writeFileSync(file, text.slice(0, at) + "x" + text.slice(at + 1))
}

for (const kind of ["jsonl-plain", "jsonl-packed"] as const) {
  describe(`JSONL readFrom from checkpoints: ${kind}`, () => {
    it.scoped("a read from past a checkpoint scans only what follows it; load, a read from before it and a new instance read whole", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = NodePath.join(dir, "s.jsonl")
        const events = pluginEvents(0, 12)
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor("s"))
          yield* store.append("s", events.slice(0, 6), { expectedSeq: 0 })
          // the first read is whole; its end (seq 6) becomes a checkpoint
          assert.deepStrictEqual(lines(yield* store.readFrom("s", 2)), lines(events.slice(2, 6)))
          yield* store.append("s", events.slice(6), { expectedSeq: 6 })
          damageSeq1(file)
          // from the checkpoint at seq 6: the damaged line lies before it
          assert.deepStrictEqual(lines(yield* store.readFrom("s", 8)), lines(events.slice(8)))
          assert.deepStrictEqual(lines(yield* store.readFrom("s", 6)), lines(events.slice(6)))
          assert.deepStrictEqual(yield* store.readFrom("s", 12), [])
          assert.deepStrictEqual(yield* store.readFrom("s", 40), [])
          // a read from before every checkpoint is whole: a torn tail from seq 1
          assert.deepStrictEqual(lines(yield* store.readFrom("s", 0)), lines(events.slice(0, 1)))
          assert.deepStrictEqual(yield* store.readFrom("s", 8), [])
          assert.strictEqual((yield* store.load("s")).tornTail?.fromSeq, 1)
        }).pipe(Effect.provide(storeAt(kind, dir)))
        const again = yield* Effect.provide(Effect.flatMap(SessionStore, (s) => s.readFrom("s", 8)), storeAt(kind, dir))
        assert.deepStrictEqual(again, [])
      }))

    it.scoped("a file replaced (another identity) is read whole: readFrom after replaceLog gives the new log", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor("r"))
          yield* store.append("r", pluginEvents(0, 6), { expectedSeq: 0 })
          assert.strictEqual((yield* store.readFrom("r", 0)).length, 6)
          const loaded = yield* store.load("r")
          const replacement = pluginEvents(0, 8, "new")
          yield* store.replaceLog("r", loaded.header, replacement, { revision: loaded.revision, backup: "test" })
          assert.deepStrictEqual(lines(yield* store.readFrom("r", 6)), lines(replacement.slice(6)))
          assert.deepStrictEqual(lines(yield* store.readFrom("r", 7)), lines(replacement.slice(7)))
        }).pipe(Effect.provide(storeAt(kind, dir)))
      }))
  })
}
