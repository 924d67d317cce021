/**
 * The codecs of the compressed JSONL layout (docs/formats.md "Compressed JSONL", `FrameEncoding`), the one
 * module that uses node:zlib: CRC-32; the writer's codec, raw DEFLATE per frame over its
 * segment's earlier text (one zlib stream per segment, sync-flushed and closed per frame,
 * synchronous; or, where Node's zlib cannot do that, a dictionary per frame); the
 * first layout's brotli segments (one stream flushed per frame, asynchronous), which every reader
 * still decodes and which `WriterCodec` can select to measure it or to make files of that layout.
 * Per session, the store keeps the encoder of the segment its last write continued
 * (`SegmentEncoders`, a small LRU).
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as Zlib from "node:zlib"

/** CRC-32 (ISO-HDLC, the one of zlib and gzip) of `data`, continuing from `value`. */
export const crc32 = (data: Uint8Array, value = 0): number => Zlib.crc32(data, value)

/** The codec of a segment: `deflate` (what is written) or `brotli` (the first layout's). */
export type SegmentCodec = "deflate" | "brotli"

/**
 * The codec a writer starts new segments with: `deflate` unless a caller provides `brotli` (the
 * size benchmark, and tests making files of the first layout). A live segment of the other codec
 * is never continued: the next frame starts a segment.
 */
export class WriterCodec extends Context.Reference<WriterCodec>()("effect-session-log/jsonl/WriterCodec", {
  defaultValue: (): SegmentCodec => "deflate"
}) {}

/** A failure of the codec (a zlib error), carried as a `StoreFailure` cause by the store. */
export interface CodecFailure {
  readonly codec: string
  readonly cause: unknown
}

/**
 * One segment's encoder. `encode` compresses one frame's text: the bytes returned are that
 * frame's payload, decodable after the segment's earlier frames; `encodeSync` does it without an
 * effect where the codec is synchronous (deflate), returning `headroom` bytes left free for the
 * caller (the frame header) followed by the payload. An encoder that failed, or whose `encode`
 * was interrupted, is `broken` and never used again (its state no longer matches the file).
 */
export interface SegmentEncoder {
  readonly codec: SegmentCodec
  readonly encode: (text: Uint8Array) => Effect.Effect<Uint8Array, CodecFailure>
  readonly encodeSync: ((text: Uint8Array, headroom: number) => Uint8Array | CodecFailure) | undefined
  readonly broken: () => boolean
  readonly close: () => void
}

/** A fresh encoder of a segment of `codec`. */
export const makeSegmentEncoder = (codec: SegmentCodec): SegmentEncoder =>
  codec === "deflate" ? makeDeflateEncoder() : makeBrotliEncoder()

// ---------------------------------------------------------------------------------------------
// deflate: one complete raw DEFLATE stream per frame, the segment's earlier text as history

/**
 * How much of a segment's earlier text a frame's DEFLATE stream may refer to (DEFLATE's window):
 * a reader keeps this much and passes it as the dictionary of every frame.
 */
export const HISTORY_BYTES = 32_768

/**
 * The streaming writer's zlib parameters (measured on the issue-16 workload, bench/README.md):
 * level 1 (zlib's fastest matching) over the whole 32 KiB window, and a small hash table
 * (`memLevel` 5: 8 KiB instead of 64 KiB), which the store's appends, each meeting zlib's state
 * cold in the CPU's caches after the previous `fsync`, pay for by the cache line.
 */
const STREAM_OPTIONS: Zlib.ZlibOptions = { level: 1, memLevel: 5 }

/** The fallback writer's DEFLATE level (with `DICTIONARY_BYTES`; at level 1 its files exceed 0.12x of plain). */
const DICTIONARY_LEVEL = 3

/**
 * The fallback writer's dictionary (`makeDictionaryDeflateEncoder`): the last this-many bytes of
 * the segment's earlier text (a suffix of a reader's history). zlib loads it into its hash chains
 * on every call, so its cost grows with its size while the size gained shrinks.
 */
export const DICTIONARY_BYTES = 4_096

const EMPTY: Uint8Array = new Uint8Array(0)

/** The last `keep` bytes of `history` followed by `text`. */
export const slideHistory = (history: Uint8Array, text: Uint8Array, keep: number): Uint8Array => {
  if (text.length >= keep) return text.slice(text.length - keep)
  const out = new Uint8Array(Math.min(keep, history.length + text.length))
  const fromHistory = out.length - text.length
  out.set(history.subarray(history.length - fromHistory), 0)
  out.set(text, fromHistory)
  return out
}

/** The frame's payload: `text` as one raw DEFLATE stream whose preset dictionary is `dictionary`. */
export const deflateFrame = (text: Uint8Array, dictionary: Uint8Array): Uint8Array | CodecFailure => {
  try {
    return Zlib.deflateRawSync(text, dictionary.length === 0 ? { level: DICTIONARY_LEVEL } : { level: DICTIONARY_LEVEL, dictionary })
  } catch (cause) {
    return { codec: "deflate", cause }
  }
}

/**
 * A frame's text from its payload, a raw DEFLATE stream that may refer to `history` (the last
 * `HISTORY_BYTES` of its segment's earlier text); it must be exactly `textBytes` long.
 */
export const inflateFrame = (payload: Uint8Array, history: Uint8Array, textBytes: number): Uint8Array | CodecFailure => {
  try {
    const text = Zlib.inflateRawSync(payload, {
      ...(history.length === 0 ? {} : { dictionary: history }),
      // a bomb stops here: never more than the frame declares (plus one byte to notice it)
      maxOutputLength: textBytes + 1
    })
    if (text.length !== textBytes) {
      return { codec: "deflate", cause: `decoded ${text.length} bytes where the frame declares ${textBytes}` }
    }
    return text
  } catch (cause) {
    return { codec: "deflate", cause }
  }
}

/**
 * A deflate segment's encoder: the segment's one zlib stream when this Node's zlib offers it
 * synchronously (`makeStreamingDeflateEncoder`), else a stream per frame over a dictionary
 * (`makeDictionaryDeflateEncoder`). Both write the same layout; readers cannot tell them apart.
 */
const makeDeflateEncoder = (): SegmentEncoder => makeStreamingDeflateEncoder() ?? makeDictionaryDeflateEncoder()

/**
 * The fallback deflate encoder: each frame one `deflateRawSync` call with the segment's last
 * `DICTIONARY_BYTES` of text as preset dictionary (a new zlib stream, its state allocated, its
 * hash chains filled from the dictionary, per frame).
 */
export const makeDictionaryDeflateEncoder = (): SegmentEncoder => {
  let history = EMPTY
  let broken = false
  const encodeSync = (text: Uint8Array, headroom: number): Uint8Array | CodecFailure => {
    if (broken) return { codec: "deflate", cause: "the segment encoder is no longer usable" }
    const payload = deflateFrame(text, history)
    if (!(payload instanceof Uint8Array)) {
      broken = true
      return payload
    }
    history = slideHistory(history, text, DICTIONARY_BYTES)
    if (headroom === 0) return payload
    const out = new Uint8Array(headroom + payload.length)
    out.set(payload, headroom)
    return out
  }
  return syncEncoder("deflate", encodeSync, () => broken, () => {
    broken = true
    history = EMPTY
  })
}

/**
 * An empty final block (BFINAL set, fixed Huffman codes, the end-of-block code alone): after a
 * sync flush, which ends on a byte boundary, these two bytes close the frame's DEFLATE stream.
 */
const FINAL_BLOCK: Uint8Array = Uint8Array.of(0x03, 0x00)

/** The part of a node:zlib stream's native handle the streaming encoder drives. */
interface NativeZlib {
  readonly writeSync: (
    flush: number,
    input: Uint8Array,
    inputOffset: number,
    inputLength: number,
    output: Uint8Array,
    outputOffset: number,
    outputLength: number
  ) => void
}

/**
 * The synchronous write of a node:zlib stream, the one its own `deflateRawSync` drives: the native
 * handle's `writeSync` and the `[availOut, availIn]` it leaves in the stream's write state. Not
 * a documented API of Node 20 (which has no synchronous flush of a stream), so it is looked for:
 * `undefined` when this Node's zlib lacks it.
 */
const nativeOf = (stream: Zlib.DeflateRaw): { readonly handle: NativeZlib; readonly state: Uint32Array } | undefined => {
  const inner = stream as unknown as { readonly _handle?: unknown; readonly _writeState?: unknown }
  const handle = inner._handle
  const state = inner._writeState
  if (typeof handle !== "object" || handle === null || typeof (handle as Partial<NativeZlib>).writeSync !== "function") {
    return undefined
  }
  if (!(state instanceof Uint32Array) || state.length < 2) return undefined
  return { handle: handle as NativeZlib, state }
}

/** Room the streaming encoder's output buffer starts with (it grows for larger frames). */
const OUTPUT_BYTES = 64 * 1024

/**
 * The streaming deflate encoder: the segment's frames go through ONE raw DEFLATE stream (level
 * `STREAM_OPTIONS`, a 32 KiB window), each ended by a sync flush and closed by `FINAL_BLOCK`, so
 * that each frame's payload is a complete raw DEFLATE stream whose back-references reach at most
 * 32 KiB into the segment's earlier text (C.3) — what a reader's history holds. Nothing is set up
 * per frame: zlib's state and hash chains carry over from frame to frame. `undefined` when this
 * Node's zlib offers no synchronous write of a stream (`nativeOf`).
 */
export const makeStreamingDeflateEncoder = (): SegmentEncoder | undefined => {
  let stream: Zlib.DeflateRaw
  try {
    stream = Zlib.createDeflateRaw(STREAM_OPTIONS)
  } catch {
    return undefined
  }
  const native = nativeOf(stream)
  if (native === undefined) {
    stream.close()
    return undefined
  }
  const { handle, state } = native
  let failure: unknown = undefined
  let broken = false
  // zlib reports an error by destroying the stream, which then emits it: kept, never thrown
  stream.on("error", (error) => {
    failure ??= error
    broken = true
  })
  let output: Uint8Array = new Uint8Array(OUTPUT_BYTES)
  const fail = (cause: unknown): CodecFailure => {
    broken = true
    return { codec: "deflate", cause }
  }
  const encodeSync = (text: Uint8Array, headroom: number): Uint8Array | CodecFailure => {
    if (broken) return { codec: "deflate", cause: failure ?? "the segment encoder is no longer usable" }
    let inputOffset = 0
    let inputLength = text.length
    let written = 0
    try {
      for (;;) {
        handle.writeSync(Zlib.constants.Z_SYNC_FLUSH, text, inputOffset, inputLength, output, written, output.length - written)
        if (stream.destroyed || failure !== undefined) return fail(failure ?? "the zlib stream was destroyed")
        const availOut = state[0]
        const availIn = state[1]
        written = output.length - availOut
        inputOffset += inputLength - availIn
        inputLength = availIn
        // room left: the input is consumed and the flush complete (zlib's contract for Z_SYNC_FLUSH)
        if (availOut !== 0) break
        const grown = new Uint8Array(output.length * 2)
        grown.set(output)
        output = grown
      }
    } catch (cause) {
      return fail(cause)
    }
    const out = new Uint8Array(headroom + written + FINAL_BLOCK.length)
    out.set(output.subarray(0, written), headroom)
    out.set(FINAL_BLOCK, headroom + written)
    // a live encoder does not keep the room a rare large frame needed
    if (output.length > OUTPUT_BYTES) output = new Uint8Array(OUTPUT_BYTES)
    return out
  }
  return syncEncoder("deflate", encodeSync, () => broken, () => {
    broken = true
    stream.close()
  })
}

/** A `SegmentEncoder` of a synchronous `encodeSync`. */
const syncEncoder = (
  codec: SegmentCodec,
  encodeSync: (text: Uint8Array, headroom: number) => Uint8Array | CodecFailure,
  broken: () => boolean,
  close: () => void
): SegmentEncoder => ({
  codec,
  encode: (text) =>
    Effect.suspend(() => {
      const payload = encodeSync(text, 0)
      return payload instanceof Uint8Array ? Effect.succeed(payload) : Effect.fail(payload)
    }),
  encodeSync,
  broken,
  close
})

// ---------------------------------------------------------------------------------------------
// brotli: one stream per segment, flushed after every frame (the first layout)

/** Brotli parameters of the first layout's writer (bench/README.md). */
const BROTLI_PARAMS = {
  [Zlib.constants.BROTLI_PARAM_QUALITY]: 5,
  [Zlib.constants.BROTLI_PARAM_LGWIN]: 20,
  [Zlib.constants.BROTLI_PARAM_MODE]: Zlib.constants.BROTLI_MODE_TEXT
}

/**
 * A brotli segment's encoder: a stream in flowing mode whose every write is processed with a
 * flush (the `flush` option), one trip to the thread pool per frame.
 */
const makeBrotliEncoder = (): SegmentEncoder => {
  const stream = Zlib.createBrotliCompress({ params: BROTLI_PARAMS, flush: Zlib.constants.BROTLI_OPERATION_FLUSH })
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
    codec: "brotli",
    encode,
    encodeSync: undefined,
    broken: () => broken,
    close: () => {
      broken = true
      stream.close()
    }
  }
}

/**
 * Decode the concatenated payloads of a brotli segment's first frames into their text, which must
 * be exactly `textBytes` long; a `CodecFailure` when the bytes are no such brotli stream prefix.
 */
export const decodeBrotliSegment = (payload: Uint8Array, textBytes: number): Uint8Array | CodecFailure => {
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
export interface LiveSegment {
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
  readonly take: (id: string, ino: string, size: number) => LiveSegment | undefined
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
      return segment
    },
    keep: (id, segment) => {
      drop(id)
      live.set(id, segment)
      if (live.size > LIVE_ENCODERS) drop(live.keys().next().value!)
    },
    drop
  }
})
