/**
 * A compressed JSONL follower (`.jsonlz`) reads on from the byte offset after the last sound frame
 * it read, with the deflate segment's text its next frame decodes over (docs/follow.md "JSONL"):
 * a frame damaged in place before that offset is not read again, appends after it (frames that
 * refer back into the segment's earlier text) are delivered as a whole read delivers them, a torn
 * last frame is read again from its first byte until it is whole, and a replaced file is read whole;
 * a property: a scan resumed after any prefix of a file (brotli and deflate segments) reads what a
 * whole scan reads.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { afterAll, assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { WriterCodec } from "../../src/layers/jsonl/Compression.js"
import { scanFile, scanFileFrom } from "../../src/layers/jsonl/Reader.js"
import { DEFAULT_MAX_LINE_BYTES } from "../../src/schema/Format.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { headerFor, pluginEvents } from "../store-contract/contract.js"
import { runs } from "../suites.js"
import { freshId } from "./contract.js"
import { storeAt, tempDir } from "./stores.js"

/** Events whose data repeats earlier text, so that later frames refer back into their segment. */
const events = (from: number, count: number) => pluginEvents(from, count, "a tag long enough to be worth a back-reference ".repeat(4))

/** A follower of `id` that opens `ready` after `after` events and stops after `count`. */
const followUntil = (id: string, count: number, after: number, ready: Deferred.Deferred<void>) =>
  Effect.flatMap(SessionStore, (store) =>
    Effect.fork(Stream.runCollect(store.follow(id).pipe(
      Stream.zipWithIndex,
      Stream.tap(([, i]) => i + 1 === after ? Deferred.succeed(ready, undefined) : Effect.void),
      Stream.map(([e]) => e),
      Stream.take(count)
    )).pipe(Effect.map((chunk) => Chunk.toReadonlyArray(chunk)))))

/** The file offset where the frame after the `n`th (0: the header frame) starts. */
const frameStart = (bytes: Uint8Array, n: number): number => {
  let at = 8
  for (let i = 0; i < n; i++) at += 16 + new DataView(bytes.buffer, bytes.byteOffset + at + 4, 4).getUint32(0, true)
  return at
}

/**
 * The bytes a compressed store appends to a copy of `file` for `batches` (another store instance
 * over another directory: it starts a new deflate segment, as after any other writer).
 */
const appendedBytes = (file: string, id: string, from: number, batches: ReadonlyArray<number>) =>
  Effect.gen(function*() {
    const other = yield* tempDir
    const copy = NodePath.join(other, NodePath.basename(file))
    NodeFs.copyFileSync(file, copy)
    const before = NodeFs.statSync(copy).size
    yield* Effect.gen(function*() {
      const store = yield* SessionStore
      let seq = from
      for (const n of batches) {
        yield* store.append(id, events(seq, n), { expectedSeq: seq })
        seq += n
      }
    }).pipe(Effect.provide(storeAt("jsonl-compressed", other)))
    return NodeFs.readFileSync(copy).subarray(before)
  })

describe("JSONL follow reads from its offset: jsonl-compressed", () => {
  it.scopedLive("a frame damaged in place before the offset is not read again; later appends are delivered", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const id = freshId("zcursor")
      const file = NodePath.join(dir, `${id}.jsonlz`)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.create(headerFor(id))
        yield* store.append(id, events(0, 3), { expectedSeq: 0 })
        const ready = yield* Deferred.make<void>()
        const follower = yield* followUntil(id, 7, 3, ready)
        yield* Deferred.await(ready)
        // the first events' frame damaged in place (same file, same size): a whole read would now
        // see a torn tail at seq 0 and fail the follower (L8)
        const bytes = NodeFs.readFileSync(file)
        bytes[frameStart(bytes, 1) + 16] ^= 0xff
        NodeFs.writeFileSync(file, bytes)
        // the writer continues its deflate segment: these frames decode over the earlier text
        yield* store.append(id, events(3, 2), { expectedSeq: 3 })
        yield* store.append(id, events(5, 2), { expectedSeq: 5 })
        assert.deepStrictEqual(yield* Fiber.join(follower), events(0, 7))
        // a cold read sees the damage: what the follower skipped is really there
        const loaded = yield* store.load(id)
        assert.strictEqual(loaded.tornTail?.fromSeq, 0)
      }).pipe(Effect.provide(storeAt("jsonl-compressed", dir)))
    }))

  it.scopedLive("a torn last frame is read again from its first byte: completed later, it is delivered once", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const id = freshId("ztorn")
      const file = NodePath.join(dir, `${id}.jsonlz`)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.create(headerFor(id))
        yield* store.append(id, events(0, 2), { expectedSeq: 0 })
        const more = yield* appendedBytes(file, id, 2, [1, 2])
        // the first new frame's 16-byte header and 4 bytes of its payload
        const cut = 20
        NodeFs.appendFileSync(file, more.subarray(0, cut))
        // the part of a frame is a torn tail: a cold read holds two events, and so does the
        // follower's first read (it delivers them, then reads on from the frame's first byte)
        assert.strictEqual((yield* store.readFrom(id, 0)).length, 2)
        const ready = yield* Deferred.make<void>()
        const follower = yield* followUntil(id, 5, 2, ready)
        yield* Deferred.await(ready)
        NodeFs.appendFileSync(file, more.subarray(cut))
        const received = yield* Fiber.join(follower)
        assert.deepStrictEqual(received, events(0, 5))
        assert.deepStrictEqual(received, (yield* store.load(id)).events)
      }).pipe(Effect.provide(storeAt("jsonl-compressed", dir)))
    }))

  it.scopedLive("a file replaced by another is read whole: the follower goes on when it keeps the delivered events", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const id = freshId("zrenamed")
      const file = NodePath.join(dir, `${id}.jsonlz`)
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        yield* store.create(headerFor(id))
        yield* store.append(id, events(0, 3), { expectedSeq: 0 })
        const ready = yield* Deferred.make<void>()
        const follower = yield* followUntil(id, 6, 3, ready)
        yield* Deferred.await(ready)
        // another file with the same frames first and three events more, renamed in (a new
        // identity): it must be read from the start
        const more = yield* appendedBytes(file, id, 3, [3])
        NodeFs.writeFileSync(`${file}.new`, Buffer.concat([NodeFs.readFileSync(file), more]))
        NodeFs.renameSync(`${file}.new`, file)
        const received = yield* Fiber.join(follower)
        assert.deepStrictEqual(received, events(0, 6))
        assert.deepStrictEqual(received, (yield* store.load(id)).events)
      }).pipe(Effect.provide(storeAt("jsonl-compressed", dir)))
    }))

  it.scopedLive("brotli segments (the first layout, read whole) then deflate ones (resumed): every event delivered once, as a whole read has them", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const id = freshId("zbrotli")
      yield* Effect.gen(function*() {
        const store = yield* SessionStore
        const brotli = Effect.provideService(WriterCodec, "brotli")
        yield* brotli(store.create(headerFor(id)))
        yield* brotli(store.append(id, events(0, 3), { expectedSeq: 0 }))
        const ready = yield* Deferred.make<void>()
        const follower = yield* followUntil(id, 9, 3, ready)
        yield* Deferred.await(ready)
        yield* brotli(store.append(id, events(3, 2), { expectedSeq: 3 }))
        yield* store.append(id, events(5, 2), { expectedSeq: 5 })
        yield* store.append(id, events(7, 2), { expectedSeq: 7 })
        const received = yield* Fiber.join(follower)
        assert.deepStrictEqual(received, events(0, 9))
        assert.deepStrictEqual(received, (yield* store.load(id)).events)
      }).pipe(Effect.provide(storeAt("jsonl-compressed", dir)))
    }))
})

/** How often the property below resumed (it must not pass vacuously). */
const tally = { resumed: 0, whole: 0 }

describe("property: a compressed scan resumed after any prefix reads what a whole scan reads", () => {
  afterAll(() => {
    assert.isAbove(tally.resumed, 0, JSON.stringify(tally))
  })
  it.scoped.prop(
    "for random batches (brotli or deflate segments) and any cut, the prefix's events then the resumed scan's are the whole file's",
    [fc.array(fc.tuple(fc.integer({ min: 1, max: 4 }), fc.boolean()), { minLength: 1, maxLength: 6 }), fc.double({ min: 0, max: 1, noNaN: true })],
    ([batches, where]) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const dir = yield* tempDir
        const id = freshId("zprop")
        const file = NodePath.join(dir, `${id}.jsonlz`)
        yield* Effect.gen(function*() {
          const store = yield* SessionStore
          yield* store.create(headerFor(id))
          let seq = 0
          for (const [n, brotli] of batches) {
            const append = store.append(id, events(seq, n), { expectedSeq: seq })
            yield* brotli ? Effect.provideService(append, WriterCodec, "brotli") : append
            seq += n
          }
        }).pipe(Effect.provide(storeAt("jsonl-compressed", dir)))
        const all = NodeFs.readFileSync(file)
        const first = frameStart(all, 1)
        const cut = first + Math.floor(where * (all.length - first))
        const opts = { location: file, maxLineBytes: DEFAULT_MAX_LINE_BYTES, keepEvents: true }
        const whole = yield* scanFile(fs, file, opts, "test")
        NodeFs.writeFileSync(file, all.subarray(0, cut))
        const prefix = yield* scanFile(fs, file, opts, "test")
        NodeFs.appendFileSync(file, all.subarray(cut))
        const frames = prefix?.frames
        if (frames === undefined) {
          tally.whole++
          return
        }
        tally.resumed++
        const rest = yield* scanFileFrom(fs, file, prefix!.ino, { ...opts, resume: frames.lines }, "test", frames)
        assert.deepStrictEqual([...prefix!.result.events, ...rest!.result.events], whole!.result.events)
        assert.strictEqual(rest!.result.nextSeq, whole!.result.nextSeq)
        assert.isUndefined(rest!.result.tornTail)
      }).pipe(Effect.provide(NodeContext.layer)),
    { fastCheck: { numRuns: runs(40, 12) } }
  )
})
