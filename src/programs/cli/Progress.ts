/**
 * Progress of long work on one session (issue 27): the events and bytes read so far, the rate and,
 * when the size is known, the time left, on one line of stderr rewritten in place. For people at a
 * terminal only: nothing with `--json` or when stderr is not a terminal (piped, redirected).
 * `SESSION_LOG_PROGRESS=1` forces it on (from the first chunk, with a final line), `=0` off.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import type { EventSink, LoadResult, SessionStoreShape } from "../../services/SessionStore.js"
import type { SessionSource, SourceReader } from "./Target.js"

/** How progress shows: not at all, on a terminal, or forced by `SESSION_LOG_PROGRESS=1`. */
type Mode = "off" | "terminal" | "forced"

const modeOf = (json: boolean): Mode => {
  const setting = process.env.SESSION_LOG_PROGRESS
  if (json || setting === "0") return "off"
  if (setting === "1") return "forced"
  return process.stderr.isTTY === true ? "terminal" : "off"
}

/** On a terminal, nothing is drawn for work shorter than this; then at most once per `EVERY_MS`. */
const AFTER_MS = 500
const EVERY_MS = 200

const megabytes = (bytes: number): string => `${(bytes / (1024 * 1024)).toFixed(1)} MB`

const duration = (seconds: number): string => {
  const s = Math.ceil(seconds)
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`
}

/**
 * The progress of one read labelled `label`; `totalBytes` (a file's size) gives the time left.
 * Bytes are counted as the events' JSON lines (about what a JSONL log holds).
 */
export const makeProgress = (label: string, json: boolean, totalBytes?: number) => {
  const mode = modeOf(json)
  let events = 0
  let bytes = 0
  let started: number | undefined
  let drawnAt: number | undefined
  const line = (now: number): string => {
    const seconds = Math.max((now - (started ?? now)) / 1000, 0.001)
    const rate = bytes / seconds
    const left = totalBytes !== undefined && rate > 0 ? Math.max(0, totalBytes - bytes) / rate : undefined
    const size = totalBytes === undefined ? megabytes(bytes) : `${megabytes(bytes)} of ${megabytes(totalBytes)}`
    return `${label}: ${events.toLocaleString("en-US")} events, ${size}, ${megabytes(rate)}/s` +
      (left === undefined ? "" : `, ${duration(left)} left`)
  }
  const draw = (now: number) => {
    drawnAt = now
    process.stderr.write(`\r\x1b[K${line(now)}`)
  }
  return {
    /** Count a chunk of events read; redraw when due. */
    add: (chunk: ReadonlyArray<unknown>): Effect.Effect<void> =>
      mode === "off" ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Effect.sync(() => {
          started ??= now
          events += chunk.length
          for (const e of chunk) bytes += JSON.stringify(e).length + 1
          const due = mode === "forced" || now - started >= AFTER_MS
          if (due && (drawnAt === undefined || now - drawnAt >= EVERY_MS)) draw(now)
        })),
    /** End the line: forced progress leaves its final state, a terminal's line is cleared. */
    done: mode === "off" ? Effect.void : Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        if (mode === "forced") process.stderr.write(`\r\x1b[K${line(now)}\n`)
        else if (drawnAt !== undefined) process.stderr.write("\r\x1b[K")
      }))
  }
}

/** `reader` whose reads show progress (`makeProgress`); `reload` is unchanged. */
export const withProgress = (reader: SourceReader, label: string, json: boolean, totalBytes?: number): SourceReader =>
  modeOf(json) === "off" ? reader : {
    read: <E, R>(sink: EventSink<E, R>) => {
      const progress = makeProgress(label, json, totalBytes)
      return Effect.ensuring(
        reader.read({ ...sink, onEvents: (events) => Effect.zipRight(progress.add(events), sink.onEvents(events)) }),
        progress.done
      )
    },
    reload: reader.reload
  }

/** The size of a session file source (for the time left); unknown for a session in a store. */
export const sourceSize = (source: SessionSource): Effect.Effect<number | undefined, never, FileSystem.FileSystem> =>
  source.kind !== "file" ? Effect.succeed(undefined) : Effect.flatMap(FileSystem.FileSystem, (fs) =>
    fs.stat(source.path).pipe(
      Effect.map((info): number | undefined => Number(info.size)),
      Effect.orElseSucceed(() => undefined)
    ))

/** `withProgress` over the reader of `source`, sized when it is a file. */
export const sourceWithProgress = (source: SessionSource, reader: SourceReader, label: string, json: boolean) =>
  Effect.map(sourceSize(source), (size) => withProgress(reader, label, json, size))

/**
 * `store` whose whole-session reads (`load`, what `repair` and `migrate` read through) show
 * progress: the read goes through `loadEach`, counting each chunk, and the events are gathered
 * into the same `LoadResult`. Everything else is the store's own (its appends included).
 */
export const storeWithProgress = (store: SessionStoreShape, label: string, json: boolean): SessionStoreShape =>
  modeOf(json) === "off" ? store : {
    ...store,
    load: (id) =>
      Effect.suspend(() => {
        const progress = makeProgress(label, json)
        const events: Array<unknown> = []
        return Effect.ensuring(
          Effect.map(
            store.loadEach(id, {
              onEvents: (chunk) =>
                Effect.zipRight(progress.add(chunk), Effect.sync(() => {
                  for (const e of chunk) events.push(e)
                }))
            }),
            ({ count: _, ...summary }): LoadResult => ({ ...summary, events })
          ),
          progress.done
        )
      })
  }

