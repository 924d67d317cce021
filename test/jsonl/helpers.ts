/**
 * Shared fixtures of the JSONL backend tests: a store over a fresh temp directory, event and
 * header builders, and raw file access for writing damaged files and checking bytes.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { type JsonlStoreOptions, makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import type { Event } from "../../src/schema/Events.js"
import { encodeSessionId } from "../../src/schema/SessionIdEncoding.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"

export interface Fixture {
  readonly fs: FileSystem.FileSystem
  readonly path: Path.Path
  readonly dir: string
  readonly root: string
  readonly store: SessionStoreShape
  /** The session file of `id` under root. */
  readonly fileOf: (id: string) => string
  /** A second store instance over the same root (another "process" view). */
  readonly another: (options?: Partial<JsonlStoreOptions>) => Effect.Effect<SessionStoreShape, never, Scope.Scope>
}

/** A JSONL store over `<tmp>/store` (root not yet created). */
export const fixture = (
  options: Partial<JsonlStoreOptions> = {}
): Effect.Effect<Fixture, unknown, FileSystem.FileSystem | Path.Path | Scope.Scope> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = yield* fs.makeTempDirectoryScoped()
    const root = path.join(dir, "store")
    const store = yield* makeJsonlStore({ root, ...options })
    const another = (more: Partial<JsonlStoreOptions> = {}) =>
      makeJsonlStore({ root, ...options, ...more }).pipe(
        Effect.provideService(FileSystem.FileSystem, fs),
        Effect.provideService(Path.Path, path)
      )
    return { fs, path, dir, root, store, fileOf: (id) => path.join(root, encodeSessionId(id) + ".jsonl"), another }
  })

/** A plain (untrusted) event record. */
export const ev = (type: string, seq: number, data: unknown, extra: Record<string, unknown> = {}): Event =>
  ({ type, seq, time: 1000 + seq, data, ...extra }) as unknown as Event

export const turnStart = (seq: number, turn = 1) => ev("turn/start", seq, { turn })
export const turnEnd = (seq: number, turn = 1) => ev("turn/end", seq, { turn, reason: { kind: "completed" } })
export const userMessage = (seq: number, text = "hi") =>
  ev("user/message", seq, {
    id: `u${seq}`,
    role: "user",
    content: [{ type: "text", text }],
    source: { kind: "user" }
  }, { surfaceOp: "append" })

/** A complete first turn: start, user message, end (seqs from `base`). */
export const turn = (base: number, turnNo = 1): Array<Event> => [
  turnStart(base, turnNo),
  userMessage(base + 1, `turn ${turnNo}`),
  turnEnd(base + 2, turnNo)
]

export const header = (id: string, extra: Record<string, unknown> = {}) => ({ version: 1, id, createdAt: 5, ...extra })

const enc = new TextEncoder()

/** The JSON line of a value followed by `\n`. */
export const line = (value: unknown): string => JSON.stringify(value) + "\n"

/** Write raw bytes (or text) to a file. */
export const writeRaw = (fs: FileSystem.FileSystem, file: string, content: string | Uint8Array) =>
  fs.writeFile(file, typeof content === "string" ? enc.encode(content) : content)

/** Concatenate byte arrays. */
export const bytes = (...parts: ReadonlyArray<string | Uint8Array | ReadonlyArray<number>>): Uint8Array => {
  const arrays = parts.map((p) => typeof p === "string" ? enc.encode(p) : Uint8Array.from(p))
  const out = new Uint8Array(arrays.reduce((n, a) => n + a.length, 0))
  let at = 0
  for (const a of arrays) {
    out.set(a, at)
    at += a.length
  }
  return out
}

/** A session-file text: header line plus the given event lines. */
export const fileText = (id: string, events: ReadonlyArray<unknown>, extraHeader: Record<string, unknown> = {}) =>
  line({ type: "session", ...header(id, extraHeader) }) + events.map(line).join("")
