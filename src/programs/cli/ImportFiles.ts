/**
 * `session-log import` as one unit (SPEC §12): every file is read through the read pipeline,
 * validated as a seed and pre-checked, and every id registered with the store (an id already
 * stored or given twice is `SessionExists`) before the first write. Reads are streamed (twice:
 * to check, then to write), so memory stays bounded by a batch whatever the files' length. A
 * store that did not exist is removed again when a write fails or the run is interrupted (SIGINT);
 * in an existing store, a write failing after others is `ImportIncomplete`, naming the files
 * already imported (a session longer than one batch that fails part-way keeps the batches written
 * before); an interrupt discards the session being written (`SessionStore.discard`) and keeps the
 * ones finished before it, which stderr names.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { ImportIncomplete, type InvalidEnvelope, type NotASessionFile } from "../../schema/Errors.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../../schema/Format.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { type PreparedEvent, prepareValidated } from "../../services/PrepareEvent.js"
import { readEach } from "../../services/ReadEach.js"
import type { LoadError, ReadError, SessionStoreShape } from "../../services/SessionStore.js"
import { makeProgress } from "./Progress.js"
import { readSessionFile, readSessionFileEach, type StoreSpec } from "./Target.js"

/** One validated file, ready to be written. */
export interface ImportItem {
  readonly file: string
  readonly header: SessionHeader
  /** How many events it holds. */
  readonly events: number
  /** Read it again, validated and prepared, chunk by chunk. */
  readonly each: <E>(
    onEvents: (events: ReadonlyArray<PreparedEvent>) => Effect.Effect<void, E>
  ) => Effect.Effect<unknown, ReadError | NotASessionFile | InvalidEnvelope | E>
}

/**
 * A session of up to this many events (and `IMPORT_BATCH_BYTES`) is written by one atomic append;
 * a longer one in appends of that size, so memory stays bounded whatever its length.
 */
export const IMPORT_BATCH_EVENTS = 4_096
export const IMPORT_BATCH_BYTES = 4 * 1024 * 1024

/**
 * Read, upgrade, validate and pre-check every file by a streamed read (memory bounded by a
 * chunk); the first rejection stops before any write. The validating read of each file shows
 * progress on a terminal (Progress.ts) unless `json`.
 */
export const readImportFiles = (
  files: ReadonlyArray<string>,
  onReject: (file: string) => Effect.Effect<void> = () => Effect.void,
  json = true
) =>
  Effect.forEach(files, (file) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const each = <E>(onEvents: (events: ReadonlyArray<PreparedEvent>) => Effect.Effect<void, E>) =>
        readEach<InvalidEnvelope | E, never, LoadError | NotASessionFile, FileSystem.FileSystem>(
          (sink) => readSessionFileEach(file, sink),
          readSessionFile(file),
          (events) => {
            // the store's own batch checks (B10 size cap), so the append cannot refuse the batch later
            const prepared = prepareValidated(events, DEFAULT_MAX_EVENT_BYTES)
            return "_tag" in prepared ? Effect.fail(prepared) : onEvents(prepared)
          }
        ).pipe(Effect.provideService(FileSystem.FileSystem, fs))
      const size = yield* fs.stat(file).pipe(
        Effect.map((info): number | undefined => Number(info.size)),
        Effect.orElseSucceed(() => undefined)
      )
      const progress = makeProgress(`import ${file}`, json, size)
      const { count, header } = yield* Effect.ensuring(
        each((prepared) => progress.add(prepared.map((p) => p.event))),
        progress.done
      )
      return { file, header, events: count, each } satisfies ImportItem
    }).pipe(Effect.tapError(() => onReject(file))))

/**
 * Append a file's prepared events to its registered session, in batches from seq 0; `progress.begun`
 * counts the events of the appends begun so far (the last one may not have committed).
 */
const writeItem = (store: SessionStoreShape, item: ImportItem, progress: { begun: number }) =>
  Effect.gen(function*() {
    let pending: Array<PreparedEvent> = []
    let pendingBytes = 0
    let expectedSeq = 0
    const flush = Effect.suspend(() => {
      const batch = pending
      pending = []
      pendingBytes = 0
      if (batch.length === 0) return Effect.void
      const at = expectedSeq
      expectedSeq += batch.length
      progress.begun = expectedSeq
      return store.append(item.header.id, batch, { expectedSeq: at })
    })
    yield* item.each((events) =>
      Effect.suspend(() => {
        for (const e of events) {
          pending.push(e)
          pendingBytes += e.line.length
        }
        return pending.length >= IMPORT_BATCH_EVENTS || pendingBytes >= IMPORT_BATCH_BYTES ? flush : Effect.void
      })
    )
    yield* flush
  })

/**
 * Undo the session of `item` an interrupted import began (`begun` events in appends begun): its
 * log is read for its revision, and discarded when it holds no more than those events (nothing
 * another writer appended); otherwise, or when that fails, it stays and a warning says so.
 */
const undoSession = (store: SessionStoreShape, item: ImportItem, begun: number) =>
  Effect.gen(function*() {
    const id = item.header.id
    const read = yield* store.loadEach(id, { onEvents: () => Effect.void })
    if (read.count > begun) {
      return yield* Effect.logWarning(`import interrupted: session "${id}" holds events this import did not write; it was kept`)
    }
    yield* store.discard(id, { revision: read.revision })
  }).pipe(
    Effect.catchAll((e) =>
      Effect.logWarning(`import interrupted: the partial session "${item.header.id}" of ${item.file} could not be removed`, e)
    )
  )

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
    // the store was created by this run (its scope is closed by then): remove it again
    const removeFresh = Effect.forEach(
      fresh,
      (p) => fs.exists(p).pipe(Effect.flatMap((there) => there ? fs.remove(p, { recursive: true }) : Effect.void)),
      { discard: true }
    )
    // an interrupt (SIGINT) is no failure, so `Effect.either` below never sees it: a store this
    // run created is removed on it too; in an existing store the session being written was
    // discarded (`undoSession`) and the ones finished before stay: say which
    const undoInterrupted = Effect.suspend(() =>
      fresh.length > 0
        ? Effect.ignore(removeFresh)
        : Effect.logWarning(
          `import interrupted: ${imported.length === 0 ? "no file was imported" : `imported ${imported.join(", ")} (kept)`}` +
            (current === "" || imported.includes(current) ? "" : `; ${current} was not imported`)
        )
    )
    const written = yield* Effect.scoped(Effect.gen(function*() {
      const store = yield* open(spec)
      // registration writes nothing: an existing or repeated id fails here, before any append
      for (const item of items) {
        current = item.file
        yield* store.create(item.header)
      }
      for (const item of items) {
        current = item.file
        const progress = { begun: 0 }
        yield* writeItem(store, item, progress).pipe(
          Effect.onInterrupt(() => Effect.suspend(() => progress.begun === 0 ? Effect.void : undoSession(store, item, progress.begun)))
        )
        imported.push(item.file)
        yield* onImported(imported.length)
      }
    })).pipe(Effect.onInterrupt(() => undoInterrupted), Effect.either)
    if (written._tag === "Right") {
      // a store keeps a session from its first event (SPEC §7.1): a file of a header alone adds nothing
      const empty = items.filter((i) => i.events === 0)
      for (const i of empty) {
        yield* Effect.logWarning(`import: ${i.file} holds session "${i.header.id}" without events; a session is stored from its first event, so it was not stored`)
      }
      return { sessions: items.length - empty.length, events: items.reduce((n, i) => n + i.events, 0) }
    }
    const error = written.left
    if (fresh.length > 0) {
      const removed = yield* Effect.either(removeFresh)
      if (removed._tag === "Right") return yield* Effect.fail(error)
    }
    if (imported.length === 0) return yield* Effect.fail(error)
    return yield* new ImportIncomplete({ imported, failed: current, cause: error })
  })
