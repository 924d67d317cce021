/**
 * Reading a transcript (docs/import.md): a streamed line reader with a per-line cap, the parse of
 * one line, and the small record helpers both importers use. Internal to the importers.
 *
 * @since 0.2.0
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { Buffer } from "node:buffer"
import type { PlatformError } from "@effect/platform/Error"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { encodeJson } from "../../schema/Json.js"
import { parseJson } from "../../schema/JsonParse.js"
import type { ContentBlock } from "../../schema/Messages.js"

/**
 * One line of a transcript: its text, or why it has none.
 *
 * @since 0.2.0
 * @category models
 */
export type SourceLine =
  | { readonly _tag: "Text"; readonly line: number; readonly text: string }
  | { readonly _tag: "Refused"; readonly line: number; readonly reason: "too-long" | "not-utf8" }

const NEWLINE = 10

/**
 * Stream a file's lines (1-based numbers) to `onLine`, each decoded as UTF-8 on its own; a line
 * over `maxLineBytes` is dropped as it is read (never held whole) and handed on as refused.
 * Blank lines are skipped.
 *
 * @since 0.2.0
 * @category utils
 */
export const forEachLine = <E, R>(
  path: string,
  maxLineBytes: number,
  onLine: (line: SourceLine) => Effect.Effect<void, E, R>
): Effect.Effect<number, E | PlatformError, R | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const decoder = new TextDecoder("utf-8", { fatal: true })
    let parts: Array<Uint8Array> = []
    let size = 0
    let tooLong = false
    let lineNo = 0
    const take = (): SourceLine | undefined => {
      lineNo++
      const line = lineNo
      if (tooLong) {
        tooLong = false
        parts = []
        size = 0
        return { _tag: "Refused", line, reason: "too-long" }
      }
      const bytes = parts.length === 1 ? parts[0] : Buffer.concat(parts)
      parts = []
      size = 0
      let text: string
      try {
        text = decoder.decode(bytes)
      } catch {
        return { _tag: "Refused", line, reason: "not-utf8" }
      }
      return text.trim().length === 0 ? undefined : { _tag: "Text", line, text }
    }
    const add = (piece: Uint8Array) => {
      if (tooLong || piece.length === 0) return
      if (size + piece.length > maxLineBytes) {
        tooLong = true
        parts = []
        size = 0
        return
      }
      parts.push(piece)
      size += piece.length
    }
    yield* fs.stream(path, { chunkSize: 256 * 1024 }).pipe(
      Stream.runForEach((chunk) => {
        const lines: Array<SourceLine> = []
        let start = 0
        for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, start)) {
          add(chunk.subarray(start, i))
          const l = take()
          if (l !== undefined) lines.push(l)
          start = i + 1
        }
        // copied: the stream may reuse its buffer
        if (start < chunk.length) add(Uint8Array.prototype.slice.call(chunk, start))
        return lines.length === 0 ? Effect.void : Effect.forEach(lines, onLine, { discard: true })
      })
    )
    if (size > 0 || tooLong) {
      const l = take()
      if (l !== undefined) yield* onLine(l)
    }
    return lineNo
  })

/**
 * A parsed line: a lossless JSON value, or why it is not one.
 *
 * @since 0.2.0
 * @category models
 */
export type ParsedSource =
  | { readonly _tag: "Json"; readonly value: unknown }
  | { readonly _tag: "NotJson"; readonly reason: "not-json" | "not-lossless-json" }

/**
 * Parse one line as lossless JSON (SPEC §1.2): a `-0` or `1e400` is not kept as a number.
 *
 * @since 0.2.0
 * @category utils
 */
export const parseSourceLine = (text: string): ParsedSource => {
  const parsed = parseJson(text)
  if (parsed._tag === "Unparsable") return { _tag: "NotJson", reason: "not-json" }
  if (parsed._tag !== "Ok") return { _tag: "NotJson", reason: "not-lossless-json" }
  return { _tag: "Json", value: parsed.value }
}

/**
 * A plain JSON object.
 *
 * @since 0.2.0
 * @category utils
 */
export const isObject = (u: unknown): u is Readonly<Record<string, unknown>> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A string that is not empty, else `undefined`.
 *
 * @since 0.2.0
 * @category utils
 */
export const nonEmpty = (u: unknown): string | undefined => typeof u === "string" && u.length > 0 ? u : undefined

/**
 * An ISO timestamp as epoch ms, or `undefined`.
 *
 * @since 0.2.0
 * @category utils
 */
export const timeOf = (u: unknown): number | undefined => {
  if (typeof u !== "string") return undefined
  const t = Date.parse(u)
  return Number.isSafeInteger(t) ? t : undefined
}

/**
 * A copy of `record` without `keys`.
 *
 * @since 0.2.0
 * @category utils
 */
export const omit = (record: Readonly<Record<string, unknown>>, keys: ReadonlyArray<string>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const k of Object.keys(record)) {
    if (!keys.includes(k)) Object.defineProperty(out, k, { value: record[k], writable: true, enumerable: true, configurable: true })
  }
  return out
}

/**
 * A mapped block with the source block's other keys kept under `key` (lossless: a text block's
 * citations or annotations, a tool call's extra fields), or the block alone when there are none.
 *
 * @since 0.2.0
 * @category utils
 */
export const keepRest = (
  block: Readonly<Record<string, unknown>>,
  source: Readonly<Record<string, unknown>>,
  mapped: ReadonlyArray<string>,
  key: string
): ContentBlock => {
  const rest = omit(source, mapped)
  return (Object.keys(rest).length === 0 ? block : { ...block, [key]: rest }) as ContentBlock
}

/**
 * A value as raw JSON text (tool arguments are stored as the string the model produced).
 *
 * @since 0.2.0
 * @category utils
 */
export const jsonText = (u: unknown): string => typeof u === "string" ? u : encodeJson(u as never)
