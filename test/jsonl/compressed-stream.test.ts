/**
 * The compressed layout's deflate writer as one zlib stream per segment (docs/formats.md
 * "Compressed JSONL" C.3, C.5): each frame sync-flushed and closed into a complete raw DEFLATE
 * stream that decodes over the segment's last 32 KiB of text, as the per-frame dictionary
 * encoder's frames do; segments continued append after append, a new one after a reopen; the
 * batch's text framed in one piece when it is small.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import {
  HISTORY_BYTES,
  inflateFrame,
  makeDictionaryDeflateEncoder,
  makeStreamingDeflateEncoder,
  type SegmentEncoder,
  slideHistory
} from "../../src/layers/jsonl/Compression.js"
import {
  DEFLATE,
  FRAME_HEADER_BYTES,
  FRAME_TEXT_TARGET,
  frameTexts,
  MAGIC,
  parseFrameHeader,
  SEGMENT_START,
  TURN_END
} from "../../src/layers/jsonl/FrameEncoding.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { fixture, header, turnEnd, turnStart, userMessage } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)

/** The frames of a compressed file: header fields and payload. */
const framesOf = (bytes: Uint8Array) => {
  const out: Array<{ readonly flags: number; readonly textBytes: number; readonly payload: Uint8Array }> = []
  let at = MAGIC.length
  while (at < bytes.length) {
    const h = parseFrameHeader(bytes.subarray(at, at + FRAME_HEADER_BYTES))
    if (h === undefined) throw new Error(`no frame header at ${at}`)
    const end = at + FRAME_HEADER_BYTES + h.payloadBytes
    out.push({ flags: h.flags, textBytes: h.textBytes, payload: bytes.subarray(at + FRAME_HEADER_BYTES, end) })
    at = end
  }
  return out
}

/** Encode `texts` as one segment's frames with `encoder`; each payload decoded as a reader does. */
const roundTrip = (encoder: SegmentEncoder, texts: ReadonlyArray<Uint8Array>, historyBytes = HISTORY_BYTES) => {
  let history: Uint8Array = new Uint8Array(0)
  const decoded: Array<Uint8Array> = []
  for (const text of texts) {
    const payload = encoder.encodeSync!(text, 0)
    if (!(payload instanceof Uint8Array)) throw new Error(`encode failed: ${String(payload.cause)}`)
    const back = inflateFrame(payload, history, text.length)
    if (!(back instanceof Uint8Array)) return { decoded, failed: back }
    decoded.push(back)
    history = slideHistory(history, back, historyBytes)
  }
  return { decoded, failed: undefined }
}

/** Deterministic text that does not compress much (base-36 digits of an LCG). */
const noise = (length: number, seed: number): string => {
  let x = seed
  return Array.from({ length }, () => ((x = (x * 48271) % 2147483647) % 36).toString(36)).join("")
}

const lines = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

describe("JsonlStore: the compressed layout's deflate stream per segment", () => {
  it("C.3 this Node's zlib offers the synchronous stream write the writer uses (else it falls back to a dictionary per frame)", () => {
    const encoder = makeStreamingDeflateEncoder()
    assert.isDefined(encoder)
    encoder?.close()
  })

  it.prop(
    "C.3 each frame of a streamed segment is a complete raw DEFLATE stream decoding over the last 32 KiB of the text before it, as the dictionary encoder's frames do",
    {
      frames: fc.array(
        fc.oneof(
          fc.string({ unit: "grapheme", minLength: 1, maxLength: 2_000 }),
          fc.string({ minLength: 1, maxLength: 300 }).map((s) => s.repeat(20)),
          fc.integer({ min: 1, max: 2 ** 30 }).map((seed) => noise(6_000, seed))
        ),
        { minLength: 1, maxLength: 16 }
      )
    },
    ({ frames }) => {
      const texts = frames.map((t) => Buffer.from(t, "utf8"))
      for (const encoder of [makeStreamingDeflateEncoder()!, makeDictionaryDeflateEncoder()]) {
        const { decoded, failed } = roundTrip(encoder, texts)
        encoder.close()
        assert.strictEqual(failed, undefined)
        assert.deepStrictEqual(decoded.map((d) => Buffer.from(d).toString("utf8")), frames)
      }
    },
    { fastCheck: { numRuns: 30 } }
  )

  it("C.3 a streamed frame refers up to 32 KiB back: a reader keeping less of the segment's text cannot decode it", () => {
    // the third frame repeats the first, 20 KiB back: only the whole window reaches it
    const first = Buffer.from(noise(4_000, 7))
    const texts = [first, Buffer.from(noise(20_000, 11)), first]
    const encoder = makeStreamingDeflateEncoder()!
    const full = roundTrip(encoder, texts)
    encoder.close()
    assert.strictEqual(full.failed, undefined)
    assert.deepStrictEqual(full.decoded.map((d) => Buffer.from(d)), texts)
    const again = makeStreamingDeflateEncoder()!
    const short = roundTrip(again, texts, 4_096)
    again.close()
    assert.isDefined(short.failed)
    assert.strictEqual(short.decoded.length, 2)
  })

  it("C.3 a frame whose compressed payload outgrows the encoder's first output buffer (64 KiB) decodes exactly", () => {
    const big = Buffer.from(noise(200_000, 3))
    const encoder = makeStreamingDeflateEncoder()!
    const payload = encoder.encodeSync!(big, 0)
    const after = encoder.encodeSync!(Buffer.from("and a small frame after it\n"), 0)
    encoder.close()
    if (!(payload instanceof Uint8Array) || !(after instanceof Uint8Array)) throw new Error("encode failed")
    assert.isAbove(payload.length, 64 * 1024)
    const back = inflateFrame(payload, new Uint8Array(0), big.length)
    assert.deepStrictEqual(back instanceof Uint8Array && Buffer.from(back), big)
    const next = inflateFrame(after, slideHistory(new Uint8Array(0), big, HISTORY_BYTES), 27)
    assert.strictEqual(next instanceof Uint8Array && Buffer.from(next).toString(), "and a small frame after it\n")
  })

  it("C.3 a closed streaming encoder fails with a codec failure, it does not throw", () => {
    const encoder = makeStreamingDeflateEncoder()!
    encoder.close()
    assert.isTrue(encoder.broken())
    const result = encoder.encodeSync!(Buffer.from("x\n"), 0)
    assert.isFalse(result instanceof Uint8Array)
    assert.strictEqual(!(result instanceof Uint8Array) && result.codec, "deflate")
  })

  it.prop(
    "C.2 a batch is framed as one text when small, else cut at line boundaries at 1 MiB; the text and TURN_END are the lines'",
    {
      lines: fc.array(
        fc.oneof(
          // stored lines hold no raw newline (JSON)
          fc.string({ unit: "grapheme", maxLength: 200 }).map((s) => s.replace(/\n/g, " ")),
          fc.constant("{\"type\":\"turn/end\",\"seq\":1}"),
          fc.integer({ min: 1, max: 300_000 }).map((n) => "é".repeat(n))
        ),
        { maxLength: 12 }
      )
    },
    ({ lines }) => {
      const frames = frameTexts(lines)
      const text = Buffer.concat(frames.map((f) => f.text)).toString("utf8")
      assert.strictEqual(text, lines.map((l) => l + "\n").join(""))
      // every frame is whole lines, within the target unless it is one line
      let at = 0
      for (const frame of frames) {
        const own = Buffer.from(frame.text).toString("utf8").split("\n").slice(0, -1)
        const mine = lines.slice(at, at + own.length)
        assert.deepStrictEqual(own, mine)
        assert.isTrue(frame.text.length <= FRAME_TEXT_TARGET || own.length === 1)
        assert.strictEqual(frame.turnEnd, mine.some((l) => l.startsWith("{\"type\":\"turn/end\"")))
        at += own.length
      }
      assert.strictEqual(at, lines.length)
      // and no frame could have taken the next line without passing the target
      for (let i = 0; i + 1 < frames.length; i++) {
        const nextLine = Buffer.byteLength(Buffer.from(frames[i + 1].text).toString("utf8").split("\n")[0] + "\n")
        assert.isAbove(frames[i].text.length + nextLine, FRAME_TEXT_TARGET)
      }
    },
    { fastCheck: { numRuns: 40 } }
  )

  it.scoped.prop(
    "C.5 random batches appended through the store, a reopen half-way: read back identical; one segment per writing instance",
    {
      texts: fc.array(
        fc.oneof(
          fc.string({ unit: "grapheme", maxLength: 400 }),
          fc.integer({ min: 1, max: 2 ** 30 }).map((seed) => noise(3_000, seed)),
          fc.string({ minLength: 1, maxLength: 40 }).map((s) => s.repeat(50))
        ),
        { minLength: 1, maxLength: 40 }
      ),
      sizes: fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 12 }),
      reopenAt: fc.nat({ max: 12 })
    },
    ({ reopenAt, sizes, texts }) =>
      Effect.gen(function*() {
        const f = yield* fixture({ compress: true })
        const events: Array<Event> = [turnStart(0), ...texts.map((t, i) => userMessage(1 + i, t)), turnEnd(texts.length + 1)]
        yield* f.store.create(header("s"))
        let store = f.store
        let writers = 1
        let next = 0
        for (const [b, size] of [...sizes, events.length].entries()) {
          if (next >= events.length) break
          if (b === reopenAt && next > 0) {
            // another instance: it checks the read's last frame, then starts its own segment
            store = yield* f.another()
            assert.strictEqual((yield* store.load("s")).events.length, next)
            writers++
          }
          const batch = events.slice(next, next + size)
          yield* store.append("s", batch, { expectedSeq: next })
          next += batch.length
        }
        const reader = yield* f.another()
        assert.deepStrictEqual(lines((yield* reader.load("s")).events), lines(events))
        const streamed: Array<unknown> = []
        yield* reader.loadEach("s", { onEvents: (e) => Effect.sync(() => void streamed.push(...e)) })
        assert.deepStrictEqual(lines(streamed), lines(events))
        const frames = framesOf(yield* f.fs.readFile(`${f.root}/s.jsonlz`))
        assert.isTrue(frames.every((fr) => (fr.flags & DEFLATE) !== 0))
        assert.strictEqual(frames.filter((fr) => (fr.flags & SEGMENT_START) !== 0).length, writers)
        assert.strictEqual(frames.filter((fr) => (fr.flags & TURN_END) !== 0).length, 1)
      }).pipe(provide),
    { fastCheck: { numRuns: 25 } }
  )
})
