/**
 * A JSONL follower reads on from the byte offset after the last committed record it read
 * (docs/follow.md "JSONL"), in the plain and packed layouts: the bytes before it are not read
 * again, a torn tail is read again from its first byte until it is whole, and a file replaced
 * by another (a new identity) is read whole, the follower continuing while it still holds the
 * event delivered last.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { SessionStore } from "../../src/services/SessionStore.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"
import { freshId, seqsOf } from "./contract.js"
import { storeAt, tempDir } from "./stores.js"

/** A follower of `id` that opens `ready` after `after` events and stops after `count`. */
const followUntil = (id: string, count: number, after: number, ready: Deferred.Deferred<void>) =>
  Effect.flatMap(SessionStore, (store) =>
    Effect.fork(Stream.runCollect(store.follow(id).pipe(
      Stream.zipWithIndex,
      Stream.tap(([, i]) => i + 1 === after ? Deferred.succeed(ready, undefined) : Effect.void),
      Stream.map(([e]) => e),
      Stream.take(count)
    )).pipe(Effect.map((chunk) => seqsOf(Chunk.toReadonlyArray(chunk))))))

for (const kind of ["jsonl-plain", "jsonl-packed"] as const) {
  describe(`JSONL follow reads from its offset: ${kind}`, () => {
    it.scopedLive("a committed line changed in place before the offset is not read again; later appends are delivered", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const id = freshId("cursor")
        const file = NodePath.join(dir, `${id}.jsonl`)
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor(id))
          yield* store.append(id, pluginEvents(0, 3), { expectedSeq: 0 })
          const ready = yield* Deferred.make<void>()
          const follower = yield* followUntil(id, 5, 3, ready)
          yield* Deferred.await(ready)
          // the first event's line made unparsable in place (same file, same size): a whole read
          // would now see a torn tail at seq 0 and fail the follower (L8)
          const text = NodeFs.readFileSync(file, "utf8")
          const second = text.indexOf("\n") + 1
          NodeFs.writeFileSync(file, text.slice(0, second) + "x" + text.slice(second + 1))
          yield* store.append(id, pluginEvents(3, 2), { expectedSeq: 3 })
          assert.deepStrictEqual(yield* Fiber.join(follower), [0, 1, 2, 3, 4])
          // a cold read sees the damage: what the follower skipped is really there
          const loaded = yield* store.load(id)
          assert.strictEqual(loaded.tornTail?.fromSeq, 0)
        }).pipe(Effect.provide(storeAt(kind, dir)))
      }))

    it.scopedLive("a torn tail is read again from its first byte: a line written in two parts is delivered once, whole", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const id = freshId("torn")
        const file = NodePath.join(dir, `${id}.jsonl`)
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor(id))
          yield* store.append(id, pluginEvents(0, 2), { expectedSeq: 0 })
          const line = JSON.stringify(pluginEvents(2, 1)[0]) + "\n"
          const cut = Math.floor(line.length / 2)
          NodeFs.appendFileSync(file, line.slice(0, cut))
          // the fragment is a torn tail: a cold read holds two events, and so does the follower's
          // first read (it delivers them, then reads on from the fragment's first byte)
          assert.strictEqual((yield* store.readFrom(id, 0)).length, 2)
          const ready = yield* Deferred.make<void>()
          const follower = yield* followUntil(id, 4, 2, ready)
          yield* Deferred.await(ready)
          NodeFs.appendFileSync(file, line.slice(cut) + JSON.stringify(pluginEvents(3, 1)[0]) + "\n")
          assert.deepStrictEqual(yield* Fiber.join(follower), [0, 1, 2, 3])
        }).pipe(Effect.provide(storeAt(kind, dir)))
      }))

    it.scopedLive("a file replaced by another is read whole: the follower goes on when it keeps the delivered events", () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const id = freshId("renamed")
        const file = NodePath.join(dir, `${id}.jsonl`)
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor(id))
          yield* store.append(id, pluginEvents(0, 3), { expectedSeq: 0 })
          const ready = yield* Deferred.make<void>()
          const follower = yield* followUntil(id, 6, 3, ready)
          yield* Deferred.await(ready)
          // another file with the same three lines first and three more, renamed in (a new
          // identity, a size below nothing the follower knows): it must be read from the start
          const lines = NodeFs.readFileSync(file, "utf8")
          const more = pluginEvents(3, 3).map((e) => JSON.stringify(e) + "\n").join("")
          NodeFs.writeFileSync(`${file}.new`, lines + more)
          NodeFs.renameSync(`${file}.new`, file)
          assert.deepStrictEqual(yield* Fiber.join(follower), [0, 1, 2, 3, 4, 5])
        }).pipe(Effect.provide(storeAt(kind, dir)))
      }))
  })
}

describe("JSONL store changes", () => {
  it.scopedLive("a wake-up once armed, then after another store instance writes a new session", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      yield* Effect.gen(function*() {
        const watching = yield* SessionStore
        assert.isDefined(watching.changes)
        const woken = yield* Queue.unbounded<void>()
        yield* Effect.forkScoped(Stream.runForEach(watching.changes!(), () => Queue.offer(woken, undefined)))
        yield* Queue.take(woken)
        yield* Effect.gen(function*() {
          const writer = yield* SessionStore
          yield* writer.create(headerFor("written-elsewhere"))
          yield* writer.append("written-elsewhere", pluginEvents(0, 1), { expectedSeq: 0 })
        }).pipe(Effect.provide(storeAt("jsonl-plain", dir)))
        yield* Queue.take(woken)
        assert.deepStrictEqual((yield* watching.list()).map((h) => h.id), ["written-elsewhere"])
      }).pipe(Effect.provide(storeAt("jsonl-plain", dir)))
    }))
})
