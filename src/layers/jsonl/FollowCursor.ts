/**
 * A JSONL follower's reads (docs/follow.md "JSONL"): the first read scans the session file whole
 * and remembers where its committed prefix ends (the file's identity, the byte offset after the
 * last committed record, the next seq, the line count); each later read of the same file scans
 * only the bytes from there. A file replaced meanwhile (another identity: `migrate`, `compact`,
 * `replaceLog` and repairs rename a new file in) or shorter than that offset is read whole again,
 * and the follower then checks that it still holds the event delivered last. A compressed file
 * is followed the same way from the byte offset after the last sound frame read, keeping the
 * state its next frame needs to decode (the deflate segment's last 32 KiB of text); while the
 * file ends in a brotli segment (the layout's first version: its stream state is not kept) it is
 * read whole each time, until an append starts a deflate segment. A v0 file is read whole each
 * time. `readFrom`'s checkpoints keep no compressed state: a compressed file is read whole there.
 */
import * as Effect from "effect/Effect"
import { readPipeline, type SessionStoreImpl } from "../../services/SessionStore.js"
import type { ScanResume } from "./LineScanner.js"
import type { FrameResume } from "./FrameScanner.js"
import { type ScanOutcome, scanFile, scanFileFrom, toLoadResult } from "./Reader.js"
import { hintFromRead, type Pieces, scanOptions } from "./StoreContext.js"

interface Cursor {
  readonly file: string
  readonly ino: string
  readonly resume: ScanResume
  /** The event at `resume.nextSeq - 1`, as read (the follower's overlap check re-reads it). */
  readonly last: unknown
  /** A compressed file: where its frames go on (`resume` is then `frames.lines`, in text offsets). */
  readonly frames?: FrameResume
}

/**
 * Where a scan's committed prefix ends, when the next read can start there; a compressed file's
 * only with `compressed` (a follower's cursor) and when it ends in a deflate segment.
 */
const cursorOf = (
  file: string,
  scanned: ScanOutcome,
  before: Cursor | undefined,
  fresh: ReadonlyArray<unknown>,
  compressed = false
): Cursor | undefined => {
  const { result } = scanned
  if (result.storedVersion !== 1 || result.nextSeq === 0) return undefined
  if (result.compressed === true && (!compressed || scanned.frames === undefined)) return undefined
  const torn = result.tornTail
  const extent = result.tornTailExtent
  // a torn tail: the next read starts at its first byte, with the lines before it
  if (torn !== undefined && extent === undefined) return undefined
  const last = fresh.length > 0 ? fresh[fresh.length - 1] : before?.last
  if (last === undefined) return undefined
  // a compressed file: after its last sound frame (a torn frame's first byte), with the decoder's state
  if (scanned.frames !== undefined) return { file, ino: scanned.ino, last, resume: scanned.frames.lines, frames: scanned.frames }
  return {
    file,
    ino: scanned.ino,
    last,
    resume: {
      header: result.header,
      storedVersion: result.storedVersion,
      offset: torn === undefined ? scanned.size : torn.position,
      nextSeq: result.nextSeq,
      lines: extent === undefined ? result.lines ?? 0 : extent.line - 1
    }
  }
}

/**
 * The reads of one follower of `id` (`SessionStoreImpl.followReader`): `undefined` when the file
 * is not there (`SessionStore.make` then reads as for `readFrom`: a registered session, L11).
 */
export const followReader = (p: Pieces): NonNullable<SessionStoreImpl["followReader"]> => (id) => {
  let cursor: Cursor | undefined
  const whole = (file: string, options: Parameters<typeof scanFile>[2], fromSeq: number) =>
    Effect.gen(function*() {
      cursor = undefined
      const scanned = yield* scanFile(p.fs, file, { ...options }, "follow")
      if (scanned === undefined) return undefined
      const { events } = yield* readPipeline(toLoadResult(scanned))
      cursor = cursorOf(file, scanned, undefined, events, true)
      return events.slice(fromSeq)
    })
  return (fromSeq) =>
    Effect.gen(function*() {
      const found = yield* scanOptions(p, id, "follow", true)
      if (found === undefined) {
        cursor = undefined
        return undefined
      }
      const at = cursor
      const overlap = at === undefined ? -1 : at.resume.nextSeq - fromSeq
      if (at === undefined || at.file !== found.file || (overlap !== 0 && overlap !== 1)) {
        return yield* whole(found.file, found.options, fromSeq)
      }
      const scanned = yield* scanFileFrom(p.fs, found.file, at.ino, { ...found.options, resume: at.resume }, "follow", at.frames)
      if (scanned === undefined) return yield* whole(found.file, found.options, fromSeq)
      // the vocabulary (K7) of the new events; the version is the earlier scan's
      const { events } = yield* readPipeline(toLoadResult(scanned))
      cursor = cursorOf(found.file, scanned, at, events, true)
      return overlap === 1 ? [at.last, ...events] : events
    })
}

/** How many checkpoints `readFrom` keeps per session file. */
const CHECKPOINTS_PER_FILE = 8

/**
 * `readFrom` of one JSONL store instance (`SessionStoreImpl.readFrom`; docs/follow.md "JSONL"):
 * the end of each read of a session file's committed prefix is kept as a checkpoint (the file's
 * identity, byte offset, next seq and line count; at most 8 per file). A read from `fromSeq` at or
 * after a checkpoint of the same file scans only the bytes from the nearest one, as a follower's
 * cursor does; any other read (no such checkpoint, another identity or a shorter file, a session
 * whose appends wait for a load (S8), the compressed layout, a v0 file) is the whole read through
 * the pipeline, as `load` reads it. `undefined` when the file is not there.
 */
export const checkpointedReadFrom = (p: Pieces): NonNullable<SessionStoreImpl["readFrom"]> => {
  const kept = new Map<string, ReadonlyArray<Cursor>>()
  const keep = (file: string, cursor: Cursor | undefined, others: ReadonlyArray<Cursor>) => {
    const same = others.filter((c) => cursor !== undefined && c.ino === cursor.ino && c.resume.nextSeq !== cursor.resume.nextSeq)
    const all = cursor === undefined ? same : [...same, cursor].sort((a, b) => a.resume.nextSeq - b.resume.nextSeq)
    if (all.length === 0) kept.delete(file)
    else kept.set(file, all.slice(-CHECKPOINTS_PER_FILE))
  }
  return (id, fromSeq) =>
    Effect.gen(function*() {
      const found = yield* scanOptions(p, id, "load", true)
      if (found === undefined) return undefined
      const known = kept.get(found.file) ?? []
      let at: Cursor | undefined
      if (!p.sessions.isSuspect(id)) for (const c of known) if (c.resume.nextSeq <= fromSeq) at = c
      if (at !== undefined) {
        const scanned = yield* scanFileFrom(p.fs, found.file, at.ino, { ...found.options, resume: at.resume }, "load")
        if (scanned !== undefined) {
          // the vocabulary (K7) of the events after the checkpoint; the version is the earlier scan's
          const { events } = yield* readPipeline(toLoadResult(scanned))
          keep(found.file, cursorOf(found.file, scanned, at, events), known)
          return events.slice(fromSeq - at.resume.nextSeq)
        }
      }
      const scanned = yield* scanFile(p.fs, found.file, found.options, "load")
      if (scanned === undefined) return undefined
      p.sessions.clearSuspect(id)
      hintFromRead(p, id, found.file, scanned)
      const { events } = yield* readPipeline(toLoadResult(scanned)).pipe(Effect.tapError(() => Effect.sync(() => kept.delete(found.file))))
      // a whole read's verdict replaces the checkpoints of earlier reads
      keep(found.file, cursorOf(found.file, scanned, undefined, events), [])
      return events.slice(fromSeq)
    })
}
