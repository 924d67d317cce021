/**
 * `session-log import` as one unit (SPEC §12): every file is read through the read pipeline,
 * validated as a seed and pre-checked, and every id registered with the store (an id already
 * stored or given twice is `SessionExists`) before the first write. A store that did not exist is
 * removed again when a write fails; in an existing store, a write failing after others is
 * `ImportIncomplete`, naming the files already imported.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { ImportIncomplete } from "../../schema/Errors.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../../schema/Format.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { validateSeed } from "../../services/Seed.js"
import { type PreparedEvent, prepareValidated } from "../../services/PrepareEvent.js"
import { readPipeline, type SessionStoreShape } from "../../services/SessionStore.js"
import { readSessionFile, type StoreSpec } from "./Target.js"

/** One validated file, ready to be written. */
export interface ImportItem {
  readonly file: string
  readonly header: SessionHeader
  readonly events: ReadonlyArray<PreparedEvent>
}

/** Read, upgrade, validate and pre-check every file; the first rejection stops before any write. */
export const readImportFiles = (
  files: ReadonlyArray<string>,
  onReject: (file: string) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.forEach(files, (file) =>
    Effect.gen(function*() {
      const { events: raw, header } = yield* readPipeline(yield* readSessionFile(file))
      const valid = yield* validateSeed(raw, { coldRead: true })
      // the store's own batch checks (B10 size cap), so the append cannot refuse the batch later
      const events = prepareValidated(valid.events, DEFAULT_MAX_EVENT_BYTES)
      if ("_tag" in events) return yield* events
      return { file, header, events } satisfies ImportItem
    }).pipe(Effect.tapError(() => onReject(file))))

/** What opening the store at `spec` would create: nothing when its location exists already. */
const freshPaths = (spec: StoreSpec) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const exists = (p: string) => fs.exists(p).pipe(Effect.orElseSucceed(() => true))
    // a database server: nothing on this machine to remove
    if (spec.kind === "postgres") return []
    if (spec.kind === "sqlite") {
      if (yield* exists(spec.filename)) return []
      const fresh: Array<string> = [spec.filename]
      for (const suffix of ["-wal", "-shm", "-journal"]) {
        if (!(yield* exists(spec.filename + suffix))) fresh.push(spec.filename + suffix)
      }
      return fresh
    }
    // the JSONL store creates every missing directory of its root: the topmost one is ours
    let top: string | undefined
    let dir = path.resolve(spec.root)
    while (!(yield* exists(dir))) {
      top = dir
      const parent = path.dirname(dir)
      if (parent === dir) break
      dir = parent
    }
    return top === undefined ? [] : [top]
  })

/**
 * Open the store with `open`, register every id, then write each session with one first append.
 * On failure, a store this call created is removed (nothing is left behind); otherwise the files
 * already imported are reported (`ImportIncomplete`) unless there are none.
 */
export const importItems = <E>(
  spec: StoreSpec,
  items: ReadonlyArray<ImportItem>,
  open: (spec: StoreSpec) => Effect.Effect<SessionStoreShape, E, FileSystem.FileSystem | Path.Path | Scope.Scope>,
  onImported: (count: number) => Effect.Effect<void> = () => Effect.void
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fresh = yield* freshPaths(spec)
    const imported: Array<string> = []
    let current = ""
    const written = yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* open(spec)
      // registration writes nothing: an existing or repeated id fails here, before any append
      for (const item of items) {
        current = item.file
        yield* store.create(item.header)
      }
      for (const item of items) {
        current = item.file
        yield* store.append(item.header.id, item.events, { expectedSeq: 0 })
        imported.push(item.file)
        yield* onImported(imported.length)
      }
    })).pipe(Effect.either)
    if (written._tag === "Right") return { sessions: items.length, events: items.reduce((n, i) => n + i.events.length, 0) }
    const error = written.left
    if (fresh.length > 0) {
      // the store was created by this run (its scope is closed now): remove it again
      const removed = yield* Effect.forEach(
        fresh,
        (p) => fs.exists(p).pipe(Effect.flatMap((there) => there ? fs.remove(p, { recursive: true }) : Effect.void)),
        { discard: true }
      ).pipe(Effect.either)
      if (removed._tag === "Right") return yield* Effect.fail(error)
    }
    if (imported.length === 0) return yield* Effect.fail(error)
    return yield* new ImportIncomplete({ imported, failed: current, cause: error })
  })
