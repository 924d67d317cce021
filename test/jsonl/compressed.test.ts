/**
 * The compressed JSONL layout (docs/formats.md "Compressed JSONL", C.1–C.7): `<encode(id)>.jsonlz` files of a
 * store with `compress: true` — the magic and frames as specified, layout-blind reads of every
 * layout (round trips under random batch partitions), the torn final frame (L1/L3), damaged
 * frames in the committed region (L2, L7), the header frame (L5), one session under two names
 * (J14), `list`, the read's hint, appends after a reopen (a new segment) and streamed reads.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import * as Logger from "effect/Logger"
import { execFile } from "node:child_process"
import * as nodePath from "node:path"
import * as Zlib from "node:zlib"
import { layerTest, nodeSyncFileSystem } from "../../src/layers/jsonl/SyncFileSystem.js"
import { makeJsonlStore, toJsonlText } from "../../src/layers/jsonl/JsonlStore.js"
import { deflateFrame, HISTORY_BYTES, inflateFrame, slideHistory, WriterCodec } from "../../src/layers/jsonl/Compression.js"
import {
  DEFLATE,
  encodeFramesSync,
  FRAME_HEADER_BYTES,
  FRAME_TEXT_TARGET,
  frameBytes,
  frameTexts,
  MAGIC,
  type OpenSegment,
  parseFrameHeader,
  SEGMENT_START,
  SEGMENT_TEXT_CAP,
  TURN_END
} from "../../src/layers/jsonl/FrameEncoding.js"
import { migrateSession } from "../../src/programs/Migrate.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { encodeSessionId } from "../../src/schema/SessionIdEncoding.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { partition, validLogArb } from "../store-contract/contract.js"
import { ev, fixture, header, line, turn, turnEnd, turnStart, userMessage, writeRaw } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)
/** Writes in the first layout's codec (brotli segments), as files written before deflate are. */
const brotli = Effect.provideService(WriterCodec, "brotli")
/** The header flags of a deflate segment's first frame and of the frames after it. */
const D0 = SEGMENT_START | DEFLATE
const rule = (e: unknown) => (e as { rule?: string }).rule

/** The frames of a compressed file: offset, header fields. */
const framesOf = (bytes: Uint8Array) => {
  const out: Array<{ readonly start: number; readonly end: number; readonly flags: number; readonly textBytes: number }> = []
  let at = MAGIC.length
  while (at < bytes.length) {
    const h = parseFrameHeader(bytes.subarray(at, at + FRAME_HEADER_BYTES))
    if (h === undefined) throw new Error(`no frame header at ${at}`)
    const end = at + FRAME_HEADER_BYTES + h.payloadBytes
    out.push({ start: at, end, flags: h.flags, textBytes: h.textBytes })
    at = end
  }
  return out
}

const lines = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

const sessionRecord = (id: string, extra: Record<string, unknown> = {}) => ({ type: "session", ...header(id), ...extra })

/**
 * A hand-made compressed file: the magic, then one frame per text, each its own segment (a whole
 * brotli stream), with the given extra flags (`TURN_END`).
 */
const craft = (frames: ReadonlyArray<{ readonly text: string; readonly flags?: number }>): Uint8Array => {
  const parts: Array<Uint8Array> = [MAGIC]
  for (const { flags, text } of frames) {
    const bytes = Buffer.from(text, "utf8")
    parts.push(frameBytes(SEGMENT_START | (flags ?? 0), bytes.length, Zlib.brotliCompressSync(bytes)))
  }
  return Buffer.concat(parts)
}

/** A crafted compressed session "c": the header frame, then one frame per group of events. */
const craftSession = (groups: ReadonlyArray<ReadonlyArray<Event>>, id = "c") =>
  craft([
    { text: line(sessionRecord(id)) },
    ...groups.map((g) => ({ text: g.map(line).join(""), flags: g.some((e) => e.type === "turn/end") ? TURN_END : 0 }))
  ])

/** Write `bytes` as the compressed file of session `id` in a fresh store root and load it with `options`. */
const loadCrafted = (bytes: Uint8Array, id = "c", options: Parameters<typeof fixture>[0] = {}) =>
  Effect.gen(function*() {
    const f = yield* fixture(options)
    yield* f.fs.makeDirectory(f.root, { recursive: true })
    const file = `${f.root}/${encodeSessionId(id)}.jsonlz`
    yield* writeRaw(f.fs, file, bytes)
    const loaded = yield* Effect.either(f.store.load(id))
    // a read never modifies the file (L8)
    assert.deepStrictEqual(new Uint8Array(yield* f.fs.readFile(file)), new Uint8Array(bytes))
    return { f, file, loaded }
  })

describe("JsonlStore: the compressed layout", () => {
  it.scoped("C.1 C.2 a compressed store writes <encode(id)>.jsonlz: the magic, a header frame, then one frame per append", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("s/1"))
      yield* f.store.append("s/1", turn(0), { expectedSeq: 0 })
      yield* f.store.append("s/1", turn(3, 2), { expectedSeq: 3 })
      const file = `${f.root}/${encodeSessionId("s/1")}.jsonlz`
      assert.isFalse(yield* f.fs.exists(f.fileOf("s/1")))
      const bytes = yield* f.fs.readFile(file)
      assert.deepStrictEqual([...bytes.subarray(0, 8)], [...MAGIC])
      const frames = framesOf(bytes)
      assert.deepStrictEqual(frames.map((fr) => fr.flags), [D0, TURN_END | DEFLATE, TURN_END | DEFLATE])
      const loaded = yield* (yield* f.another()).load("s/1")
      assert.deepStrictEqual(lines(loaded.events), lines([...turn(0), ...turn(3, 2)]))
      assert.strictEqual(loaded.tornTail, undefined)
    }).pipe(provide))

  it.scoped("C.5 C.7 a reopened store appends a frame that starts a new segment; both layouts list", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("z"))
      yield* f.store.append("z", turn(0), { expectedSeq: 0 })
      const plain = yield* f.another({ compress: false })
      yield* plain.create(header("p"))
      yield* plain.append("p", turn(0), { expectedSeq: 0 })
      // a plain store appends to the compressed file in its layout (a new segment: no encoder)
      assert.strictEqual((yield* plain.load("z")).events.length, 3)
      yield* plain.append("z", turn(3, 2), { expectedSeq: 3 })
      const frames = framesOf(yield* f.fs.readFile(`${f.root}/z.jsonlz`))
      assert.deepStrictEqual(frames.map((fr) => fr.flags), [D0, TURN_END | DEFLATE, D0 | TURN_END])
      assert.deepStrictEqual(lines((yield* f.store.load("z")).events), lines([...turn(0), ...turn(3, 2)]))
      assert.deepStrictEqual((yield* f.store.list()).map((h) => h.id).sort(), ["p", "z"])
    }).pipe(provide))

  it.scoped.prop(
    "§7.1 fidelity: random valid logs under random batch partitions load identically from plain, packed and compressed files (both codecs)",
    { log: validLogArb, sizes: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 8 }) },
    ({ log, sizes }) =>
      Effect.gen(function*() {
        const f = yield* fixture()
        const stores = [
          { store: yield* f.another({ packChunks: false }), codec: "deflate" },
          { store: yield* f.another(), codec: "deflate" },
          { store: yield* f.another({ compress: true }), codec: "deflate" },
          { store: yield* f.another({ compress: true, packChunks: false }), codec: "deflate" },
          { store: yield* f.another({ compress: true }), codec: "brotli" }
        ] as const
        const expected = lines(log)
        // an empty log materialises nothing
        if (log.length === 0) return
        for (const [i, { codec, store }] of stores.entries()) {
          const id = `s${i}`
          yield* store.create(header(id))
          let next = 0
          for (const batch of partition(log, sizes)) {
            yield* Effect.provideService(store.append(id, batch, { expectedSeq: next }), WriterCodec, codec)
            next += batch.length
          }
          // another instance reads it, whole and streamed
          const reader = yield* makeJsonlStore({ root: f.root })
          assert.deepStrictEqual(lines((yield* reader.load(id)).events), expected)
          const streamed: Array<unknown> = []
          yield* reader.loadEach(id, { onEvents: (events) => Effect.sync(() => void streamed.push(...events)) })
          assert.deepStrictEqual(lines(streamed), expected)
        }
      }).pipe(provide),
    { fastCheck: { numRuns: 30 } }
  )

  it.scoped("L2 a damaged frame before a later frame holding a turn/end is StoreCorrupt; nothing is modified", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("c"))
      yield* f.store.append("c", turn(0), { expectedSeq: 0 })
      yield* f.store.append("c", turn(3, 2), { expectedSeq: 3 })
      const file = `${f.root}/c.jsonlz`
      const bytes = new Uint8Array(yield* f.fs.readFile(file))
      const frames = framesOf(bytes)
      // a byte of the middle frame's payload
      bytes[frames[1].start + FRAME_HEADER_BYTES + 2] ^= 0xff
      yield* writeRaw(f.fs, file, bytes)
      const error = yield* Effect.flip((yield* f.another()).load("c"))
      assert.strictEqual(error._tag, "StoreCorrupt")
      assert.strictEqual(rule(error), "L2")
      assert.deepStrictEqual(new Uint8Array(yield* f.fs.readFile(file)), bytes)
    }).pipe(provide))

  it.scoped("L1 a torn final frame is a torn tail at the frame's start; open's truncation removes exactly it", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("t"))
      yield* f.store.append("t", turn(0), { expectedSeq: 0 })
      yield* f.store.append("t", turn(3, 2), { expectedSeq: 3 })
      const file = `${f.root}/t.jsonlz`
      const bytes = yield* f.fs.readFile(file)
      const frames = framesOf(bytes)
      yield* writeRaw(f.fs, file, bytes.subarray(0, frames[2].end - 3))
      const store = yield* f.another()
      const loaded = yield* store.load("t")
      assert.strictEqual(loaded.events.length, 3)
      assert.deepStrictEqual(loaded.tornTail, { fromSeq: 3, reason: "fragment", position: frames[2].start })
      yield* store.truncateTornTail("t", loaded.tornTail!, { revision: loaded.revision })
      assert.strictEqual((yield* f.fs.stat(file)).size, BigInt(frames[2].start))
      yield* store.append("t", turn(3, 2), { expectedSeq: 3 })
      assert.deepStrictEqual(lines((yield* (yield* f.another()).load("t")).events), lines([...turn(0), ...turn(3, 2)]))
    }).pipe(provide))

  it.scoped("L5 a file holding only the magic, or a damaged header frame, is StoreCorrupt", () =>
    Effect.gen(function*() {
      const onlyMagic = yield* loadCrafted(MAGIC)
      assert.strictEqual(onlyMagic.loaded._tag === "Left" && rule(onlyMagic.loaded.left), "L5")
      const good = craftSession([turn(0)])
      const damaged = new Uint8Array(good)
      damaged[MAGIC.length + FRAME_HEADER_BYTES + 1] ^= 0x55
      const r = yield* loadCrafted(damaged)
      assert.strictEqual(r.loaded._tag === "Left" && r.loaded.left._tag, "StoreCorrupt")
      assert.strictEqual(r.loaded._tag === "Left" && rule(r.loaded.left), "L5")
    }).pipe(provide))

  it.scoped("L3 a damaged frame with no later turn/end is a torn tail from its first byte, counting the complete frames after it", () =>
    Effect.gen(function*() {
      const bytes = new Uint8Array(craftSession([turn(0), [turnStart(3, 2)], [userMessage(4)], [userMessage(5)]]))
      const frames = framesOf(bytes)
      bytes[frames[2].start + FRAME_HEADER_BYTES + 3] ^= 0x01
      const { loaded } = yield* loadCrafted(bytes)
      assert.strictEqual(loaded._tag, "Right")
      if (loaded._tag !== "Right") return
      assert.strictEqual(loaded.right.events.length, 3)
      assert.deepStrictEqual(loaded.right.tornTail, { fromSeq: 3, reason: "unparsable", position: frames[2].start })
      assert.deepStrictEqual(loaded.right.tornTailExtent, { line: 5, completeLines: 2, bytes: bytes.length - frames[2].start })
    }).pipe(provide))

  it.scoped("L2 a damaged frame header (its length) is resynchronised: a later frame holding a turn/end makes it StoreCorrupt", () =>
    Effect.gen(function*() {
      const bytes = new Uint8Array(craftSession([turn(0), [turnStart(3, 2), userMessage(4)], [turnEnd(5, 2)]]))
      const frames = framesOf(bytes)
      // the payload length of frame 3 now claims far more than the file holds
      bytes[frames[2].start + 7] = 0x01
      const { loaded } = yield* loadCrafted(bytes)
      assert.strictEqual(loaded._tag === "Left" && loaded.left._tag, "StoreCorrupt")
      assert.strictEqual(loaded._tag === "Left" && rule(loaded.left), "L2")
      // the same damage with no later turn/end: a torn tail
      const noTurnEnd = new Uint8Array(craftSession([turn(0), [turnStart(3, 2), userMessage(4)], [userMessage(5)]]))
      noTurnEnd[framesOf(noTurnEnd)[2].start + 7] = 0x01
      const torn = yield* loadCrafted(noTurnEnd)
      assert.strictEqual(torn.loaded._tag === "Right" && torn.loaded.right.tornTail?.fromSeq, 3)
    }).pipe(provide))

  const l7Cases: Array<readonly [string, Uint8Array]> = [
    ["a line that is no record", craft([{ text: line(sessionRecord("c")) }, { text: "{not json\n" }])],
    ["a frame ending inside a line", craft([{ text: line(sessionRecord("c")) }, { text: line(turnStart(0)).slice(0, -1) }])],
    ["a seq gap", craft([{ text: line(sessionRecord("c")) }, { text: line(turnStart(1)) }])],
    ["a turn/end flag without a turn/end", craft([{ text: line(sessionRecord("c")) }, { text: line(turnStart(0)), flags: TURN_END }])],
    ["a turn/end without its flag", craft([{ text: line(sessionRecord("c")) }, { text: turn(0).map(line).join("") }])],
    ["a payload decoding to more text than declared", (() => {
      const text = Buffer.from(line(turnStart(0)))
      return Buffer.concat([
        craft([{ text: line(sessionRecord("c")) }]),
        frameBytes(SEGMENT_START, text.length - 1, Zlib.brotliCompressSync(text))
      ])
    })()]
  ]
  /** A crafted deflate file: the header frame, then one frame per text, all one segment. */
  const craftDeflate = (texts: ReadonlyArray<string>) => {
    const encoded = encodeFramesSync(undefined, [line(sessionRecord("c")), ...texts].map((t) => ({ text: Buffer.from(t), turnEnd: false })))
    if (!("bytes" in encoded)) throw new Error(String(encoded.cause))
    return Buffer.concat([MAGIC, encoded.bytes])
  }
  /** `bytes` with frame `i` replaced by a frame of `flags`, `textBytes` and `payload` (its CRC recomputed). */
  const reframe = (bytes: Uint8Array, i: number, change: (fr: { flags: number; textBytes: number; payload: Uint8Array }) => void) => {
    const fr = framesOf(bytes)[i]
    const parts = { flags: fr.flags, textBytes: fr.textBytes, payload: bytes.subarray(fr.start + FRAME_HEADER_BYTES, fr.end) }
    change(parts)
    return Buffer.concat([bytes.subarray(0, fr.start), frameBytes(parts.flags, parts.textBytes, parts.payload), bytes.subarray(fr.end)])
  }
  const two = [line(turnStart(0)), line(userMessage(1, "the same words again and again"))]
  l7Cases.push(
    ["a deflate frame of a brotli segment", reframe(craftDeflate(two), 2, (fr) => void (fr.flags &= ~DEFLATE))],
    ["a brotli frame of a deflate segment", Buffer.concat([craftDeflate([two[0]]), frameBytes(0, Buffer.byteLength(two[1]), Zlib.brotliCompressSync(Buffer.from(two[1])))])],
    ["a deflate payload decoding to more text than declared", reframe(craftDeflate(two), 2, (fr) => void (fr.textBytes -= 1))],
    ["a deflate payload that is no DEFLATE stream", reframe(craftDeflate(two), 2, (fr) => void (fr.payload = Uint8Array.of(0xff, 0xff, 0xff, 0xff)))],
    ["a deflate frame referring to text before its segment", (() => {
      // the second message repeats the first: its stream refers back into the history, which a segment start does not have
      const repeat = line(userMessage(1, "x".repeat(200)))
      const history = Buffer.from(line(sessionRecord("c")) + line(turnStart(0)) + repeat.replace("\"seq\":1", "\"seq\":9"))
      const payload = deflateFrame(Buffer.from(repeat), history)
      if (!(payload instanceof Uint8Array)) throw new Error("deflate failed")
      return Buffer.concat([craftDeflate([line(turnStart(0))]), frameBytes(SEGMENT_START | DEFLATE, Buffer.byteLength(repeat), payload)])
    })()]
  )
  for (const [what, bytes] of l7Cases) {
    it.scoped(`L7 a frame that passes its CRC but holds ${what} is StoreCorrupt, even as the last frame`, () =>
      Effect.gen(function*() {
        const { loaded } = yield* loadCrafted(bytes)
        assert.strictEqual(loaded._tag === "Left" && loaded.left._tag, "StoreCorrupt")
        assert.strictEqual(loaded._tag === "Left" && rule(loaded.left), "L7")
      }).pipe(provide))
  }

  it.scoped("L7 a complete frame longer than the reader's cap is StoreCorrupt; cut short it is a torn tail", () =>
    Effect.gen(function*() {
      const big = "x".repeat(2 * FRAME_TEXT_TARGET)
      const bytes = craftSession([turn(0), [userMessage(3, big)]])
      const small = { maxLineBytes: FRAME_TEXT_TARGET, maxEventBytes: FRAME_TEXT_TARGET }
      const complete = yield* loadCrafted(bytes, "c", small)
      assert.strictEqual(complete.loaded._tag === "Left" && rule(complete.loaded.left), "L7")
      const cut = yield* loadCrafted(bytes.subarray(0, bytes.length - 1), "c", small)
      assert.strictEqual(cut.loaded._tag === "Right" && cut.loaded.right.tornTail?.reason, "fragment")
      // the default cap reads it
      const read = yield* loadCrafted(bytes)
      assert.strictEqual(read.loaded._tag === "Right" && read.loaded.right.events.length, 4)
    }).pipe(provide))

  const bigEvents = [turnStart(0), ...Array.from({ length: 12 }, (_, i) => userMessage(1 + i, String(i % 10).repeat(600_000))), turnEnd(13)]

  it.scoped("C.3 C.4 a batch over 1 MiB of text is cut into frames at line boundaries, one deflate segment over 4 MiB, read whole and streamed", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("big"))
      yield* f.store.append("big", bigEvents, { expectedSeq: 0 })
      const frames = framesOf(yield* f.fs.readFile(`${f.root}/big.jsonlz`))
      assert.isAbove(frames.length, 4)
      for (const fr of frames) assert.isAtMost(fr.textBytes, FRAME_TEXT_TARGET)
      // a deflate segment is not capped: only the header frame starts one, every frame is deflate
      assert.deepStrictEqual(frames.map((fr) => fr.flags & (SEGMENT_START | DEFLATE)), frames.map((_, i) => i === 0 ? D0 : DEFLATE))
      assert.isAbove(frames.reduce((n, fr) => n + fr.textBytes, 0), SEGMENT_TEXT_CAP)
      assert.deepStrictEqual(frames.map((fr) => (fr.flags & TURN_END) !== 0), frames.map((_, i) => i === frames.length - 1))
      assert.deepStrictEqual(lines((yield* (yield* f.another()).load("big")).events), lines(bigEvents))
      const streamed: Array<unknown> = []
      yield* (yield* f.another()).loadEach("big", { onEvents: (e) => Effect.sync(() => void streamed.push(...e)) })
      assert.deepStrictEqual(lines(streamed), lines(bigEvents))
    }).pipe(provide))

  it.scoped("C.3 C.4 brotli (the first layout): segments hold at most 4 MiB of text, streamed reads go a segment at a time", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("big"))
      yield* brotli(f.store.append("big", bigEvents, { expectedSeq: 0 }))
      const frames = framesOf(yield* f.fs.readFile(`${f.root}/big.jsonlz`))
      assert.isAbove(frames.length, 4)
      let segment = 0
      for (const fr of frames) {
        assert.isAtMost(fr.textBytes, FRAME_TEXT_TARGET)
        assert.strictEqual(fr.flags & DEFLATE, 0)
        segment = (fr.flags & SEGMENT_START) !== 0 ? fr.textBytes : segment + fr.textBytes
        assert.isAtMost(segment, SEGMENT_TEXT_CAP)
      }
      assert.isAbove(frames.filter((fr) => (fr.flags & SEGMENT_START) !== 0).length, 1)
      assert.deepStrictEqual(frames.map((fr) => (fr.flags & TURN_END) !== 0), frames.map((_, i) => i === frames.length - 1))
      assert.deepStrictEqual(lines((yield* (yield* f.another()).load("big")).events), lines(bigEvents))
      const chunks: Array<number> = []
      yield* (yield* f.another()).loadEach("big", { onEvents: (e) => Effect.sync(() => void chunks.push(e.length)) })
      assert.strictEqual(chunks.reduce((a, b) => a + b, 0), bigEvents.length)
      assert.isAtLeast(chunks.length, frames.filter((fr) => (fr.flags & SEGMENT_START) !== 0).length - 1)
    }).pipe(provide))

  it.prop(
    "C.3 a deflate segment spanning many frames and batches decodes frame by frame over its history, whatever the text",
    {
      batches: fc.array(
        fc.array(fc.oneof(fc.string({ maxLength: 40 }), fc.string({ unit: "grapheme", maxLength: 3_000 })).map((t) => JSON.stringify(t)), {
          minLength: 1,
          maxLength: 6
        }),
        { minLength: 1, maxLength: 12 }
      )
    },
    ({ batches }) => {
      let segment: OpenSegment | undefined
      const written: Array<Uint8Array> = []
      for (const batch of batches) {
        const encoded = encodeFramesSync(segment, frameTexts(batch))
        if (!("bytes" in encoded)) throw new Error(String(encoded.cause))
        written.push(encoded.bytes)
        segment = encoded.segment
      }
      const bytes = Buffer.concat([MAGIC, ...written])
      // one segment: only the first frame starts it; each frame decodes given the text before it alone
      let history: Uint8Array = new Uint8Array(0)
      const texts: Array<string> = []
      for (const [i, fr] of framesOf(bytes).entries()) {
        assert.strictEqual(fr.flags & (SEGMENT_START | DEFLATE), i === 0 ? D0 : DEFLATE)
        const text = inflateFrame(bytes.subarray(fr.start + FRAME_HEADER_BYTES, fr.end), history, fr.textBytes)
        if (!(text instanceof Uint8Array)) throw new Error(String(text.cause))
        texts.push(Buffer.from(text).toString("utf8"))
        history = slideHistory(history, text, HISTORY_BYTES)
      }
      assert.strictEqual(texts.join(""), batches.flat().map((l) => l + "\n").join(""))
    },
    { fastCheck: { numRuns: 40 } }
  )

  it.scoped("C.4 a frame with an unknown flag (bit 3) is not sound: a torn tail at its start, L2 before a later turn/end", () =>
    Effect.gen(function*() {
      const groups = [[turnStart(3, 2)], [userMessage(4)]]
      const withFlag = (bytes: Uint8Array) => reframe(bytes, 2, (fr) => void (fr.flags |= 0x08))
      const good = craftSession([turn(0), ...groups])
      const { loaded } = yield* loadCrafted(withFlag(good))
      assert.strictEqual(loaded._tag, "Right")
      if (loaded._tag !== "Right") return
      assert.deepStrictEqual(loaded.right.tornTail, { fromSeq: 3, reason: "unparsable", position: framesOf(good)[2].start })
      const committed = withFlag(craftSession([turn(0), ...groups, [turnEnd(5, 2)]]))
      const l2 = yield* loadCrafted(committed)
      assert.strictEqual(l2.loaded._tag === "Left" && rule(l2.loaded.left), "L2")
    }).pipe(provide))

  it.scoped("C.3 C.4 a deflate segment of many small frames past twice the history reads back exactly (frames refer back into it)", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("many"))
      // ~1.6 KiB messages whose words recur from earlier frames: 60 of them are over 64 KiB of text
      const words = Array.from({ length: 400 }, (_, i) => `w${(i * 7919) % 1000}`)
      const events = [turnStart(0), ...Array.from({ length: 60 }, (_, i) => userMessage(1 + i, words.slice(i % 13 * 7, i % 13 * 7 + 300).join(" ")))]
      for (const [i, e] of events.entries()) yield* f.store.append("many", [e], { expectedSeq: i })
      const frames = framesOf(yield* f.fs.readFile(`${f.root}/many.jsonlz`))
      assert.strictEqual(frames.length, events.length + 1)
      assert.deepStrictEqual(frames.map((fr) => fr.flags), frames.map((_, i) => i === 0 ? D0 : DEFLATE))
      assert.isAbove(frames.reduce((n, fr) => n + fr.textBytes, 0), 2 * HISTORY_BYTES)
      assert.deepStrictEqual(lines((yield* (yield* f.another()).load("many")).events), lines(events))
      // a writer may use all 32 KiB of history: frames deflated over it, each repeating the unique
      // text of the frame 8 back (about 26 KiB), read back exactly
      let seed = 1
      const unique = Array.from({ length: 40 }, () =>
        Array.from({ length: 1_600 }, () => ((seed = (seed * 48271) % 2147483647) % 36).toString(36)).join(""))
      const far = [turnStart(0), ...unique.map((u, i) => userMessage(1 + i, u + " " + (i >= 8 ? unique[i - 8] : "")))]
      const texts = [line(sessionRecord("c")), ...far.map(line)]
      const parts: Array<Uint8Array> = [MAGIC]
      let history: Uint8Array = new Uint8Array(0)
      for (const [i, t] of texts.entries()) {
        const text = Buffer.from(t)
        const payload = deflateFrame(text, history)
        if (!(payload instanceof Uint8Array)) throw new Error("deflate failed")
        parts.push(frameBytes((i === 0 ? SEGMENT_START : 0) | DEFLATE, text.length, payload))
        history = slideHistory(history, text, HISTORY_BYTES)
      }
      const { loaded } = yield* loadCrafted(Buffer.concat(parts))
      assert.strictEqual(loaded._tag === "Right" && loaded.right.tornTail, undefined)
      assert.deepStrictEqual(loaded._tag === "Right" && lines(loaded.right.events), lines(far))
    }).pipe(provide))

  it.scoped("C.3 an old brotli file reads, and a writer continues it with deflate segments; it reads back exactly", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("old"))
      yield* brotli(f.store.append("old", turn(0), { expectedSeq: 0 }))
      yield* brotli(f.store.append("old", turn(3, 2), { expectedSeq: 3 }))
      const file = `${f.root}/old.jsonlz`
      assert.deepStrictEqual(framesOf(yield* f.fs.readFile(file)).map((fr) => fr.flags), [SEGMENT_START, TURN_END, TURN_END])
      const reader = yield* f.another()
      const old = yield* reader.load("old")
      assert.strictEqual(old.tornTail, undefined)
      assert.deepStrictEqual(lines(old.events), lines([...turn(0), ...turn(3, 2)]))
      // the same instance, now writing deflate: its live brotli segment is not continued
      yield* f.store.append("old", turn(6, 3), { expectedSeq: 6 })
      // another instance after its read: a new deflate segment too, then continued
      const other = yield* f.another()
      yield* other.load("old")
      yield* other.append("old", turn(9, 4), { expectedSeq: 9 })
      yield* other.append("old", turn(12, 5), { expectedSeq: 12 })
      const all = [...turn(0), ...turn(3, 2), ...turn(6, 3), ...turn(9, 4), ...turn(12, 5)]
      assert.deepStrictEqual(framesOf(yield* f.fs.readFile(file)).map((fr) => fr.flags), [
        SEGMENT_START,
        TURN_END,
        TURN_END,
        D0 | TURN_END,
        D0 | TURN_END,
        DEFLATE | TURN_END
      ])
      const loaded = yield* (yield* f.another()).load("old")
      assert.strictEqual(loaded.tornTail, undefined)
      assert.deepStrictEqual(lines(loaded.events), lines(all))
    }).pipe(provide))

  it.scoped("L1 an old brotli file's torn final frame is a torn tail; truncated, it takes deflate appends and reads back", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("ob"))
      yield* brotli(f.store.append("ob", turn(0), { expectedSeq: 0 }))
      yield* brotli(f.store.append("ob", turn(3, 2), { expectedSeq: 3 }))
      const file = `${f.root}/ob.jsonlz`
      const frames = framesOf(yield* f.fs.readFile(file))
      yield* writeRaw(f.fs, file, (yield* f.fs.readFile(file)).subarray(0, frames[2].end - 5))
      const store = yield* f.another()
      const loaded = yield* store.load("ob")
      assert.deepStrictEqual(loaded.tornTail, { fromSeq: 3, reason: "fragment", position: frames[2].start })
      yield* store.truncateTornTail("ob", loaded.tornTail!, { revision: loaded.revision })
      yield* store.append("ob", turn(3, 2), { expectedSeq: 3 })
      assert.deepStrictEqual(framesOf(yield* f.fs.readFile(file)).map((fr) => fr.flags), [SEGMENT_START, TURN_END, D0 | TURN_END])
      assert.deepStrictEqual(lines((yield* (yield* f.another()).load("ob")).events), lines([...turn(0), ...turn(3, 2)]))
    }).pipe(provide))

  it.scoped("J14 C.7 a session is never stored under both names: create and the first append refuse, reads refuse, list skips it", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      const plain = yield* f.another({ compress: false })
      yield* plain.create(header("a"))
      yield* plain.append("a", turn(0), { expectedSeq: 0 })
      const exists = yield* Effect.flip(f.store.create(header("a")))
      assert.strictEqual(exists._tag, "SessionExists")
      assert.strictEqual(rule(exists), "J14")
      // registered by both stores; the plain one materialises first: the compressed one's first append is J14
      yield* f.store.create(header("b"))
      yield* plain.create(header("b"))
      yield* plain.append("b", turn(0), { expectedSeq: 0 })
      const late = yield* Effect.flip(f.store.append("b", turn(0), { expectedSeq: 0 }))
      assert.strictEqual(late._tag, "SessionExists")
      assert.deepStrictEqual((yield* f.fs.readDirectory(f.root)).sort(), ["a.jsonl", "b.jsonl"])
      // made by hand: both names
      yield* f.fs.copyFile(f.fileOf("a"), `${f.root}/a.jsonlz`)
      const both = yield* Effect.flip(f.store.load("a"))
      assert.strictEqual(both._tag, "StoreCorrupt")
      assert.strictEqual(rule(both), "J14")
      const warnings: Array<string> = []
      const logger = Logger.make(({ message }) => void warnings.push(String(message)))
      const listed = yield* f.store.list().pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)))
      assert.deepStrictEqual(listed.map((h) => h.id), ["b"])
      assert.strictEqual(warnings.filter((w) => w.includes("two names")).length, 2)
    }).pipe(provide))

  it.scoped("§7.4.3 the first append after a load checks the read's last frame: a later frame is C7, a damaged one L1; nothing written", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("h"))
      yield* f.store.append("h", turn(0), { expectedSeq: 0 })
      const file = `${f.root}/h.jsonlz`
      const reader = yield* f.another()
      yield* reader.load("h")
      yield* f.store.append("h", turn(3, 2), { expectedSeq: 3 })
      const before = yield* f.fs.readFile(file)
      const conflict = yield* Effect.flip(reader.append("h", turn(3, 3), { expectedSeq: 3 }))
      assert.strictEqual(rule(conflict), "C7")
      assert.deepStrictEqual(yield* f.fs.readFile(file), before)
      // the last frame damaged in place (same size): the hint fails its CRC, the rescan finds the torn tail
      const other = yield* f.another()
      yield* other.load("h")
      const damaged = new Uint8Array(before)
      damaged[damaged.length - 2] ^= 0x10
      yield* writeRaw(f.fs, file, damaged)
      const torn = yield* Effect.flip(other.append("h", turn(6, 3), { expectedSeq: 6 }))
      assert.strictEqual(rule(torn), "L1")
      assert.deepStrictEqual(new Uint8Array(yield* f.fs.readFile(file)), damaged)
      // a clean hint: the append continues the file
      const fresh = yield* f.another()
      yield* writeRaw(f.fs, file, before)
      yield* fresh.load("h")
      yield* fresh.append("h", turn(6, 3), { expectedSeq: 6 })
      assert.deepStrictEqual(lines((yield* f.store.load("h")).events), lines([...turn(0), ...turn(3, 2), ...turn(6, 3)]))
    }).pipe(provide))

  it.scoped("S7 a failed write is truncated back; the retry starts a new segment and the file reads back whole", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("w"))
      yield* f.store.append("w", turn(0), { expectedSeq: 0 })
      const file = `${f.root}/w.jsonlz`
      const before = yield* f.fs.readFile(file)
      let fail = true
      const failing = yield* f.another().pipe(Effect.provide(layerTest({
        write: (fd, buffer, offset, length) => {
          if (fail) throw Object.assign(new Error("EIO: injected"), { code: "EIO", syscall: "write" })
          return nodeSyncFileSystem.write(fd, buffer, offset, length)
        }
      })))
      yield* failing.load("w")
      const error = yield* Effect.flip(failing.append("w", turn(3, 2), { expectedSeq: 3 }))
      assert.strictEqual(rule(error), "S7")
      assert.deepStrictEqual(yield* f.fs.readFile(file), before)
      fail = false
      yield* failing.append("w", turn(3, 2), { expectedSeq: 3 })
      yield* failing.append("w", turn(6, 3), { expectedSeq: 6 })
      const frames = framesOf(yield* f.fs.readFile(file))
      assert.deepStrictEqual(frames.map((fr) => fr.flags), [D0, TURN_END | DEFLATE, D0 | TURN_END, TURN_END | DEFLATE])
      assert.deepStrictEqual(lines((yield* f.store.load("w")).events), lines([...turn(0), ...turn(3, 2), ...turn(6, 3)]))
    }).pipe(provide))

  it.scoped("C.5 a store's named file (a .jsonlz path given to the CLI) is read and appended to in its layout", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      yield* f.store.create(header("n"))
      yield* f.store.append("n", turn(0), { expectedSeq: 0 })
      const renamed = `${f.root}/renamed.jsonlz`
      yield* f.fs.rename(`${f.root}/n.jsonlz`, renamed)
      const named = yield* makeJsonlStore({ root: f.root, file: { sessionId: "n", path: renamed } })
      assert.strictEqual((yield* named.load("n")).events.length, 3)
      yield* named.append("n", turn(3, 2), { expectedSeq: 3 })
      const frames = framesOf(yield* f.fs.readFile(renamed))
      assert.strictEqual(frames.length, 3)
      assert.deepStrictEqual((yield* named.list()).map((h) => h.id), ["n"])
      assert.deepStrictEqual(lines((yield* named.load("n")).events), lines([...turn(0), ...turn(3, 2)]))
    }).pipe(provide))

  it.scoped("K3 a version-0 compressed file is upgraded in the compressed layout; the original is kept as the backup", () =>
    Effect.gen(function*() {
      const events = [ev("turn/start", 0, { turn: 1 }), ev("turn/end", 1, { turn: 1, reason: { kind: "completed" } })]
      const v0 = craft([{ text: line({ ...sessionRecord("v"), version: 0 }) }, { text: events.map(line).join(""), flags: TURN_END }])
      const f = yield* fixture()
      yield* f.fs.makeDirectory(f.root, { recursive: true })
      const file = `${f.root}/v.jsonlz`
      yield* writeRaw(f.fs, file, v0)
      const report = yield* migrateSession("v").pipe(Effect.provideService(SessionStore, f.store))
      assert.strictEqual(report.status, "upgraded")
      const after = yield* f.fs.readFile(file)
      assert.deepStrictEqual([...after.subarray(0, MAGIC.length)], [...MAGIC])
      assert.deepStrictEqual(new Uint8Array(yield* f.fs.readFile(`${file}.v0.bak`)), new Uint8Array(v0))
      const loaded = yield* f.store.load("v")
      assert.strictEqual(loaded.storedVersion, 1)
      assert.deepStrictEqual(lines(loaded.events), lines(events))
    }).pipe(provide))
})

// ---------------------------------------------------------------------------------------------
// The CLI on a compressed file

const BIN = nodePath.resolve(__dirname, "../../bin/session-log.js")

const cli = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    execFile(process.execPath, [BIN, ...args], { encoding: "utf8", maxBuffer: 1 << 26, env: { ...process.env, NO_COLOR: "1" } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

describe("session-log on a compressed .jsonlz file", () => {
  it.scoped("C.1 list shows it, verify and messages read it as its plain twin, export writes plain JSONL", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ compress: true })
      const events = [...turn(0), ...turn(3, 2)]
      yield* f.store.create(header("cli"))
      yield* f.store.append("cli", events, { expectedSeq: 0 })
      const plainDir = nodePath.join(f.dir, "plain")
      yield* f.fs.makeDirectory(plainDir)
      const plainFile = nodePath.join(plainDir, "cli.jsonl")
      const loaded = yield* f.store.load("cli")
      yield* writeRaw(f.fs, plainFile, toJsonlText(loaded.header, events))
      const zfile = `${f.root}/cli.jsonlz`
      const [list, verify, messages, plainMessages, exported] = yield* Effect.all([
        cli(["list", "--json", "--store", `jsonl:${f.root}`]),
        cli(["verify", "--json", zfile]),
        cli(["messages", "--json", zfile]),
        cli(["messages", "--json", plainFile]),
        cli(["export", zfile])
      ], { concurrency: 2 })
      assert.strictEqual(list.code, 0, list.stderr)
      assert.include(list.stdout, "\"cli\"")
      assert.strictEqual(verify.code, 0, verify.stderr)
      assert.strictEqual(JSON.parse(verify.stdout.trim()).events, events.length)
      assert.strictEqual(messages.code, 0, messages.stderr)
      assert.strictEqual(messages.stdout, plainMessages.stdout)
      assert.strictEqual(exported.code, 0, exported.stderr)
      assert.strictEqual(exported.stdout, toJsonlText(loaded.header, events))
    }).pipe(provide), { timeout: 180_000 })
})
