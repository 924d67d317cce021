/**
 * Streamed reads of JSONL session files (SPEC §7.4.4 steps 1 and 6): the bytes `[0, S0)` are fed
 * in chunks through the format's `Scanner`, never held as one string, and the read is retried when
 * the file was replaced or shrank meanwhile. Reads take no lock and create nothing. Also the
 * direct file reader of the CLI.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { StoreFailure } from "../schema/Errors.js"
import { DEFAULT_MAX_LINE_BYTES } from "../schema/Format.js"
import type { LoadError, LoadResult } from "../services/SessionStore.js"
import { inoOf, isNotFound } from "./JsonlFiles.js"
import { type Scanned, Scanner, type ScanOptions } from "./JsonlFormat.js"

const READ_CHUNK = 65_536
const READ_ATTEMPTS = 3

/** A scan's outcome plus the file identity and size it was read at. */
export interface ScanOutcome {
  readonly result: Scanned
  readonly ino: string
  readonly size: number
  /** `<ino>:<size>` (SPEC §7.4.4). */
  readonly revision: string
}

const orMissing = <A, R>(effect: Effect.Effect<A, PlatformError, R>) =>
  effect.pipe(
    Effect.map(Option.some),
    Effect.catchIf((e) => isNotFound(e), () => Effect.succeed(Option.none<A>()))
  )

/** Feed `[0, size0)` of the file at `path` through a scanner; none when the file does not exist. */
const readOnce = (fs: FileSystem.FileSystem, path: string, opts: ScanOptions) =>
  orMissing(Effect.scoped(Effect.gen(function*() {
    const file = yield* fs.open(path, { flag: "r" })
    const info = yield* file.stat
    const size0 = Number(info.size)
    const scanner = new Scanner(opts)
    const buffer = new Uint8Array(Math.min(READ_CHUNK, Math.max(size0, 1)))
    let offset = 0
    while (offset < size0 && !scanner.done) {
      const n = Number(yield* file.read(buffer))
      if (n === 0) break
      const take = Math.min(n, size0 - offset)
      scanner.push(buffer.subarray(0, take), offset)
      offset += take
    }
    return { scanner, ino: inoOf(info), size0 }
  })))

/**
 * Stream one file through the scanner: stat, read `[0, S0)` in chunks, re-stat and retry on an
 * identity change or a shrink. `undefined` when the file does not exist.
 */
export const scanFile = (
  fs: FileSystem.FileSystem,
  path: string,
  opts: ScanOptions,
  method: string
): Effect.Effect<ScanOutcome | undefined, LoadError> =>
  Effect.gen(function*() {
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const read = yield* readOnce(fs, path, opts)
      if (Option.isNone(read)) return undefined
      const { ino, scanner, size0 } = read.value
      const after = yield* orMissing(fs.stat(path))
      // consistency: the file was replaced or shrank during the read; read again
      if (Option.isNone(after) || inoOf(after.value) !== ino || Number(after.value.size) < size0) continue
      const outcome = scanner.finish()
      if (!("header" in outcome)) return yield* outcome
      return { result: outcome, ino, size: size0, revision: `${ino}:${size0}` }
    }
    return yield* new StoreFailure({ method, cause: "the file kept changing while it was read", detail: path })
  }).pipe(
    Effect.catchTag("SystemError", "BadArgument", (cause: PlatformError) => Effect.fail(new StoreFailure({ method, cause })))
  )

/** The load result of a scan. */
export const toLoadResult = (s: ScanOutcome): LoadResult => ({
  header: s.result.header,
  storedVersion: s.result.storedVersion,
  events: s.result.events,
  tornTail: s.result.tornTail,
  ...(s.result.tornTailExtent === undefined ? {} : { tornTailExtent: s.result.tornTailExtent }),
  revision: s.revision
})

/** Read one JSONL session file directly (CLI path reads: no root, no file-name check; the id is the header's). */
export const readJsonlFile = (
  path: string,
  options?: { readonly expectedId?: string; readonly maxLineBytes?: number }
): Effect.Effect<LoadResult, LoadError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const scanned = yield* scanFile(fs, path, {
      location: path,
      maxLineBytes: options?.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES,
      keepEvents: true,
      ...(options?.expectedId === undefined ? {} : { expectedId: options.expectedId })
    }, "readJsonlFile")
    if (scanned === undefined) {
      return yield* new StoreFailure({ method: "readJsonlFile", cause: "no such file", detail: path })
    }
    return toLoadResult(scanned)
  })
