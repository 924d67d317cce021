/**
 * The first append after a read (SPEC §7.4.3 step 3): a clean `load` leaves this store instance
 * the file's identity, size and last record as a hint, so the first append of a long session
 * checks that one line under the lock instead of rescanning the whole file. The hint is never
 * trusted blindly: whatever happened to the file since the read, the append takes the stored
 * next seq (or refuses), exactly as after a rescan.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import { fixture, header, line, turn, turnEnd, turnStart, userMessage, writeRaw } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)

/** A store holding session "s" (one turn, seqs 0–2) and a second instance, `reader`, that has not read it yet. */
const oneTurnAndReader = Effect.gen(function*() {
  const f = yield* fixture()
  yield* f.store.create(header("s"))
  yield* f.store.append("s", turn(0), { expectedSeq: 0 })
  return { ...f, reader: yield* f.another() }
})

describe("JsonlStore: the first append after a load", () => {
  it.scoped("§7.4.3 a load then an append continues the log (the hint is the file as read)", () =>
    Effect.gen(function*() {
      const { fs, fileOf, reader, store } = yield* oneTurnAndReader
      assert.strictEqual((yield* reader.load("s")).events.length, 3)
      yield* reader.append("s", turn(3, 2), { expectedSeq: 3 })
      const loaded = yield* store.load("s")
      assert.deepStrictEqual(loaded.events.map((e) => encodeEvent(e as never)), [...turn(0), ...turn(3, 2)].map(encodeEvent))
      assert.isTrue((yield* fs.readFileString(fileOf("s"))).endsWith(encodeEvent(turnEnd(5, 2)) + "\n"))
    }).pipe(provide))

  it.scoped("C7 another process appended after the load: the first append conflicts with the real next seq, writes nothing", () =>
    Effect.gen(function*() {
      const { fs, fileOf, reader, store } = yield* oneTurnAndReader
      yield* reader.load("s")
      yield* store.append("s", turn(3, 2), { expectedSeq: 3 })
      const before = yield* fs.readFileString(fileOf("s"))
      const conflict = yield* Effect.flip(reader.append("s", turn(3, 3), { expectedSeq: 3 }))
      assert.strictEqual(conflict._tag, "AppendConflict")
      assert.strictEqual((conflict as { rule?: string }).rule, "C7")
      assert.strictEqual((conflict as { storedSeq?: number }).storedSeq, 6)
      assert.strictEqual(yield* fs.readFileString(fileOf("s")), before)
    }).pipe(provide))

  it.scoped("C5 the file was rewritten in place to the same size with fewer events: the hint's last line is checked, not trusted", () =>
    Effect.gen(function*() {
      const { fs, fileOf, reader, store } = yield* oneTurnAndReader
      yield* reader.load("s")
      // same inode, same size, two events: seq 1's text padded to the length of the old seqs 1 and 2
      const file = fileOf("s")
      const original = yield* fs.readFileString(file)
      const head = original.slice(0, original.indexOf("\n") + 1) + encodeEvent(turnStart(0)) + "\n"
      const short = encodeEvent(userMessage(1, "")) + "\n"
      const pad = original.length - head.length - short.length
      const rewritten = head + encodeEvent(userMessage(1, "x".repeat(pad))) + "\n"
      assert.strictEqual(rewritten.length, original.length)
      const inode = (yield* fs.stat(file)).ino
      yield* writeRaw(fs, file, rewritten)
      assert.deepStrictEqual((yield* fs.stat(file)).ino, inode)
      // a blind hint would write seq 3 after seq 1; the check finds the stored next seq, 2
      const conflict = yield* Effect.flip(reader.append("s", [turnEnd(3)], { expectedSeq: 3 }))
      assert.strictEqual(conflict._tag, "AppendConflict")
      assert.strictEqual((conflict as { rule?: string }).rule, "C5")
      assert.strictEqual((conflict as { storedSeq?: number }).storedSeq, 2)
      assert.strictEqual(yield* fs.readFileString(file), rewritten)
    }).pipe(provide))

  it.scoped("L1 a torn tail found by the load leaves no hint: the append refuses to write onto it", () =>
    Effect.gen(function*() {
      const { fs, fileOf, reader } = yield* oneTurnAndReader
      const file = fileOf("s")
      const torn = (yield* fs.readFileString(file)) + line(turnStart(3, 2)).slice(0, 12)
      yield* writeRaw(fs, file, torn)
      assert.isDefined((yield* reader.load("s")).tornTail)
      const refused = yield* Effect.flip(reader.append("s", turn(3, 2), { expectedSeq: 3 }))
      assert.strictEqual(refused._tag, "AppendConflict")
      assert.strictEqual((refused as { rule?: string }).rule, "L1")
      assert.strictEqual(yield* fs.readFileString(file), torn)
    }).pipe(provide))
})
