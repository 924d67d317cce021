/**
 * The codec of the compressed JSONL layout (docs/formats.md "Compressed JSONL", `FrameEncoding`), the one
 * module that uses node:zlib: CRC-32, the segment encoder (one brotli stream whose every flush is
 * one frame's payload) and the one-shot decoder of a segment's frames. Per session, the store
 * keeps the encoder of the segment its last write continued (`SegmentEncoders`, a small LRU).
 */
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Zlib from "node:zlib"

/** CRC-32 (ISO-HDLC, the one of zlib and gzip) of `data`, continuing from `value`. */
export const crc32 = (data: Uint8Array, value = 0): number => Zlib.crc32(data, value)

/** Brotli parameters of the writer (measured on the issue-16 workload, bench/README.md). */
const ENCODER_PARAMS = {
  [Zlib.constants.BROTLI_PARAM_QUALITY]: 5,
  [Zlib.constants.BROTLI_PARAM_LGWIN]: 20,
  [Zlib.constants.BROTLI_PARAM_MODE]: Zlib.constants.BROTLI_MODE_TEXT
}

/** A failure of the codec (a zlib error), carried as a `StoreFailure` cause by the store. */
export interface CodecFailure {
  readonly codec: string
  readonly cause: unknown
}

/**
 * One segment's brotli stream. `encode` compresses one frame's text and flushes: the bytes
 * returned are that frame's payload, decodable after the payloads of the segment's earlier
 * frames. An encoder that failed, or whose `encode` was interrupted, is `broken` and never used
 * again (its stream state no longer matches the file).
 */
export interface SegmentEncoder {
  readonly encode: (text: Uint8Array) => Effect.Effect<Uint8Array, CodecFailure>
  readonly broken: () => boolean
  readonly close: () => void
}

/**
 * A fresh segment encoder: a brotli stream in flowing mode whose every write is processed with a
 * flush (the `flush` option), so a frame costs one trip to the thread pool, not two (a write, then
 * a flush); the bytes are the same.
 */
export const makeSegmentEncoder = (): SegmentEncoder => {
  const stream = Zlib.createBrotliCompress({ params: ENCODER_PARAMS, flush: Zlib.constants.BROTLI_OPERATION_FLUSH })
  let out: Array<Buffer> = []
  let failure: unknown = undefined
  let broken = false
  let pending: ((error: unknown) => void) | undefined
  stream.on("data", (chunk: Buffer) => void out.push(chunk))
  stream.on("error", (error) => {
    failure = error
    broken = true
    pending?.(error)
  })
  const encode = (text: Uint8Array) =>
    Effect.async<Uint8Array, CodecFailure>((resume) => {
      if (broken) {
        resume(Effect.fail({ codec: "brotli", cause: failure ?? "the segment encoder is no longer usable" }))
        return
      }
      out = []
      let settled = false
      const settle = (error: unknown) => {
        if (settled) return
        settled = true
        pending = undefined
        if (error !== undefined) {
          broken = true
          resume(Effect.fail({ codec: "brotli", cause: error }))
        } else {
          const payload = Buffer.concat(out)
          out = []
          resume(Effect.succeed(payload))
        }
      }
      pending = settle
      stream.write(text, (error) => settle(error ?? failure))
      // interrupted while the flush is in flight: the stream state is unknown from now on
      return Effect.sync(() => {
        if (!settled) {
          settled = true
          broken = true
          pending = undefined
        }
      })
    })
  return {
    encode,
    broken: () => broken,
    close: () => {
      broken = true
      stream.close()
    }
  }
}

/**
 * Decode the concatenated payloads of a segment's first frames into their text, which must be
 * exactly `textBytes` long; a `CodecFailure` when the bytes are no such brotli stream prefix.
 */
export const decodeSegment = (payload: Uint8Array, textBytes: number): Uint8Array | CodecFailure => {
  try {
    const text = Zlib.brotliDecompressSync(payload, {
      finishFlush: Zlib.constants.BROTLI_OPERATION_FLUSH,
      // a bomb stops here: never more than the frames declare (plus one byte to notice it)
      maxOutputLength: textBytes + 1
    })
    if (text.length !== textBytes) {
      return { codec: "brotli", cause: `decoded ${text.length} bytes where the frames declare ${textBytes}` }
    }
    return text
  } catch (cause) {
    return { codec: "brotli", cause }
  }
}

// ---------------------------------------------------------------------------------------------
// Live encoders per session

/** How many sessions keep a live encoder; the least recently used one is closed first. */
export const LIVE_ENCODERS = 8

/** The encoder a session's next frame may continue: valid while the file is what it wrote. */
interface LiveSegment {
  readonly encoder: SegmentEncoder
  readonly ino: string
  readonly size: number
  readonly textBytes: number
}

/** The live segment encoders of one store instance. */
export interface SegmentEncoders {
  /**
   * The segment the next frame of `id` continues, when its encoder wrote the file as it is now
   * (`ino`, `size`) and is usable; it is taken out (a failed write must not leave it behind).
   */
  readonly take: (id: string, ino: string, size: number) => { readonly encoder: SegmentEncoder; readonly textBytes: number } | undefined
  /** After a durable write: the segment continues from the file's new size. */
  readonly keep: (id: string, segment: LiveSegment) => void
  readonly drop: (id: string) => void
}

/** Live encoders closed with the scope. */
export const makeSegmentEncoders: Effect.Effect<SegmentEncoders, never, Scope.Scope> = Effect.gen(function*() {
  const live = new Map<string, LiveSegment>()
  const drop = (id: string) => {
    const segment = live.get(id)
    if (segment === undefined) return
    live.delete(id)
    segment.encoder.close()
  }
  yield* Effect.addFinalizer(() => Effect.sync(() => [...live.keys()].forEach(drop)))
  return {
    take: (id, ino, size) => {
      const segment = live.get(id)
      if (segment === undefined) return undefined
      live.delete(id)
      if (segment.ino !== ino || segment.size !== size || segment.encoder.broken()) {
        segment.encoder.close()
        return undefined
      }
      return { encoder: segment.encoder, textBytes: segment.textBytes }
    },
    keep: (id, segment) => {
      drop(id)
      live.set(id, segment)
      if (live.size > LIVE_ENCODERS) drop(live.keys().next().value!)
    },
    drop
  }
})
