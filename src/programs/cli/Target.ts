/**
 * What a CLI command reads or writes: the `--store` spec (a SQLite file, `jsonl:<dir>` or
 * `jsonlz:<dir>`, a PostgreSQL URL) turned into a SessionStore, and a session named by
 * `--session` in that store or by a `.jsonl` path read directly (SPEC §12). A path that is no
 * session log file is `NotASessionFile`; a writing command given a path acts on exactly that file.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { NotASessionFile, SessionNotFound, StoreCorrupt, StoreFailure, type StoreSchemaMismatch } from "../../schema/Errors.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { make as makeJsonlStore, type NamedFile, readJsonlFile, readJsonlFileEach, readJsonlFileHeader } from "../../layers/jsonl/JsonlStore.js"
import { displayLocation, hasSchema, make as makePostgresStore } from "../../layers/sql/postgres/PostgresStore.js"
import { make as makeSqliteStore } from "../../layers/sql/sqlite/SqliteStore.js"
import type { EventSink, LoadError, LoadResult, LoadSummary, SessionStoreShape } from "../../services/SessionStore.js"
import { nearest } from "./ArgumentHints.js"

/**
 * A usage problem: bad arguments (also those @effect/cli rejects), an unknown store scheme, a
 * store that does not exist, a seq outside the log (exit code 2). `rule` names the SPEC rule
 * behind it when there is one (e.g. L10 for a seq outside the log).
 */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly detail: string; readonly rule?: string }> {
  override get message(): string {
    return this.detail
  }
}

/**
 * A parsed `--store` value. A JSONL spec with `compress` (`jsonlz:<dir>`) writes new sessions in
 * the compressed layout (`<id>.jsonlz`, docs/formats.md "Compressed JSONL"); sessions already stored keep
 * their layout, and reads see both either way. A JSONL spec with `file` is the single-file store
 * of a `.jsonl` path (`fileTarget`). A PostgreSQL spec keeps the URL as given (credentials
 * included: it is shown only through `displayLocation`).
 */
export type StoreSpec =
  | { readonly kind: "sqlite"; readonly filename: string }
  | { readonly kind: "jsonl"; readonly root: string; readonly compress?: true; readonly file?: NamedFile }
  | { readonly kind: "postgres"; readonly url: string }

/** The JSONL schemes of `--store`: plain, and compressed for new sessions. */
const JSONL_SCHEMES = [["jsonl:", false], ["jsonlz:", true]] as const

/**
 * Parse `--store`: `*.db` / `*.sqlite` (SQLite), `jsonl:<dir>` or `jsonlz:<dir>` (JSONL, new
 * sessions plain or compressed), `postgres://` or `postgresql://` URLs (PostgreSQL); anything else
 * is a usage error.
 */
export const parseStoreSpec = (value: string): StoreSpec | UsageError => {
  for (const [scheme, compress] of JSONL_SCHEMES) {
    if (!value.startsWith(scheme)) continue
    const root = value.slice(scheme.length)
    if (root.length === 0) return new UsageError({ detail: `${scheme} needs a directory, e.g. ${scheme}./sessions` })
    return compress ? { kind: "jsonl", root, compress } : { kind: "jsonl", root }
  }
  if (value.startsWith("postgres://") || value.startsWith("postgresql://")) {
    return URL.canParse(value) ? { kind: "postgres", url: value } : new UsageError({
      detail: `${displayLocation(value)} is not a valid URL: use postgres://user@host:port/database`
    })
  }
  if (/\.(db|sqlite|sqlite3)$/i.test(value)) return { kind: "sqlite", filename: value }
  return new UsageError({
    detail: `unknown store "${value}": use a path ending in .db or .sqlite, jsonl:<dir>, jsonlz:<dir>, or postgres://user@host:port/database`
  })
}

/**
 * Open the store of a spec. `mustExist` refuses to create a missing SQLite file or JSONL root, and
 * finds no store in a PostgreSQL database without the session-log schema (writing none into it).
 * `readOnly` (the reading commands, SPEC §12): a SQLite file is opened read-only (nothing created,
 * locked by a file or modified; it works on read-only media and beside a writer's transaction);
 * JSONL reads take no lock and create no file anyway.
 */
export const openStore = (
  spec: StoreSpec,
  options: { readonly mustExist: boolean; readonly readOnly?: boolean }
) =>
  Effect.gen(function*() {
    if (spec.kind === "postgres") {
      const location = displayLocation(spec.url)
      if (options.mustExist && !(yield* hasSchema({ url: spec.url }))) return { store: undefined, location }
      const store: SessionStoreShape = yield* makePostgresStore({ url: spec.url, readOnly: options.readOnly === true })
      return { store, location }
    }
    const fs = yield* FileSystem.FileSystem
    const location = spec.kind === "sqlite" ? spec.filename : spec.root
    if (options.mustExist && !(yield* fs.exists(location).pipe(Effect.orElseSucceed(() => false)))) {
      return { store: undefined, location }
    }
    yield* checkStoreLocation(spec, options)
    if (spec.kind === "sqlite") {
      const opened = yield* Effect.either(makeSqliteStore({ filename: spec.filename, readOnly: options.readOnly === true }))
      if (opened._tag === "Right") return { store: opened.right as SessionStoreShape | undefined, location }
      // a read-only open of a pristine database (S4) finds no store there and creates none
      if (options.mustExist && opened.left._tag === "StoreFailure" && opened.left.rule === "S4") return { store: undefined, location }
      return yield* opened.left
    }
    const store: SessionStoreShape = yield* makeJsonlStore({
      root: spec.root,
      compress: spec.compress === true,
      ...(spec.file === undefined ? {} : { file: spec.file })
    })
    return { store, location }
  })

/** A store spec as given on the command line (a PostgreSQL URL with its credentials: `storeNotFound` hides them). */
const specText = (spec: StoreSpec): string =>
  spec.kind === "sqlite" ? spec.filename : spec.kind === "postgres" ? spec.url : `${spec.compress === true ? "jsonlz" : "jsonl"}:${spec.root}`

/** The refusal for a store that does not exist (a reading or updating command creates none). */
export const storeNotFound = (store: string): UsageError =>
  new UsageError({ detail: `no store at ${/^postgres(ql)?:\/\//.test(store) ? displayLocation(store) : store}: not found (nothing was created)` })

/**
 * Open a store that must exist: a missing SQLite file or JSONL root is `storeNotFound` (exit 2).
 * `readOnly` as in `openStore`.
 */
export const openExistingStore = (spec: StoreSpec, options: { readonly readOnly?: boolean } = {}) =>
  Effect.flatMap(
    openStore(spec, { mustExist: true, ...options }),
    ({ store: s }) =>
      s === undefined
        ? Effect.fail(storeNotFound(specText(spec)))
        : Effect.succeed(s)
  )

/** Where a session comes from. */
export type SessionSource =
  | { readonly kind: "file"; readonly path: string }
  | { readonly kind: "store"; readonly spec: StoreSpec; readonly id: string }

/** Resolve `[file]` / `--session` / `--store` into a session source. */
export const sessionSource = (
  file: Option.Option<string>,
  session: Option.Option<string>,
  store: string
): SessionSource | UsageError => {
  if (Option.isSome(file)) {
    if (Option.isSome(session)) return new UsageError({ detail: "give either a .jsonl path or --session, not both" })
    if (/\.(db|sqlite|sqlite3)$/i.test(file.value)) {
      return new UsageError({ detail: `${file.value} is a SQLite store: use --store ${file.value} --session <id>` })
    }
    return { kind: "file", path: file.value }
  }
  if (Option.isNone(session)) return new UsageError({ detail: "name a session with --session <id> or a .jsonl path" })
  const spec = parseStoreSpec(store)
  if (spec instanceof UsageError) return spec
  return { kind: "store", spec, id: session.value }
}

/** Cold-read a session source (never writes). */
export const loadSource = (
  source: SessionSource
): Effect.Effect<
  LoadResult,
  LoadError | UsageError | StoreSchemaMismatch | NotASessionFile,
  FileSystem.FileSystem | Path.Path | Scope.Scope
> =>
  Effect.gen(function*() {
    if (source.kind === "file") return yield* readSessionFile(source.path)
    const { store } = yield* openStore(source.spec, { mustExist: true, readOnly: true })
    if (store === undefined) {
      return yield* new SessionNotFound({ rule: "L11", sessionId: source.id, detail: "the store does not exist" })
    }
    return yield* withNearIds(store, store.load(source.id))
  })

/**
 * `effect`, whose SessionNotFound for an id the store does not hold names the store's ids near it
 * (`did you mean "s1"?`), listed only on that failure.
 */
const withNearIds = <A, E, R>(store: SessionStoreShape, effect: Effect.Effect<A, E | SessionNotFound, R>) =>
  Effect.catchIf(effect, (e): e is SessionNotFound => e instanceof SessionNotFound && e.detail === undefined, (e) =>
    Effect.flatMap(Effect.orElseSucceed(store.list(), () => []), (headers) => {
      const near = nearest(e.sessionId, headers.map((h) => h.id))
      return Effect.fail(
        near.length === 0 ? e : new SessionNotFound({
          rule: e.rule,
          sessionId: e.sessionId,
          detail: `did you mean ${near.map((id) => JSON.stringify(id)).join(" or ")}?`
        })
      )
    }))

/**
 * A streamed read of a session source (never writes): `read` hands the events to a sink chunk by
 * chunk (`SessionStore.loadEach`), `reload` reads the whole log (the version-0 edge needs it).
 */
export interface SourceReader {
  readonly read: <E, R>(
    sink: EventSink<E, R>
  ) => Effect.Effect<LoadSummary, LoadError | NotASessionFile | E, R | FileSystem.FileSystem>
  readonly reload: Effect.Effect<LoadResult, LoadError | NotASessionFile, FileSystem.FileSystem>
}

/** Open what a session source needs for streamed reads (a store must exist; nothing is created). */
export const sourceReader = (
  source: SessionSource
): Effect.Effect<
  SourceReader,
  SessionNotFound | UsageError | StoreSchemaMismatch | StoreFailure | StoreCorrupt,
  FileSystem.FileSystem | Path.Path | Scope.Scope
> =>
  Effect.gen(function*() {
    if (source.kind === "file") {
      const path = source.path
      return { read: (sink) => readSessionFileEach(path, sink), reload: readSessionFile(path) }
    }
    const { store } = yield* openStore(source.spec, { mustExist: true, readOnly: true })
    if (store === undefined) {
      return yield* new SessionNotFound({ rule: "L11", sessionId: source.id, detail: "the store does not exist" })
    }
    const id = source.id
    return { read: (sink) => withNearIds(store, store.loadEach(id, sink)), reload: withNearIds(store, store.load(id)) }
  })

// --- a `.jsonl` path ------------------------------------------------------------------------

const errnoCode = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/**
 * What is at a path named as a session log file, before it is read: `NotASessionFile` when there
 * is nothing (missing), a directory, something that is not a regular file (a FIFO would block the
 * read) or an empty file (L5). Other stat failures (permissions) are left to the read.
 */
const checkFile = (path: string): Effect.Effect<void, NotASessionFile, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* fs.stat(path).pipe(Effect.either)
    if (info._tag === "Left") {
      const e = info.left
      const missing = e._tag === "SystemError" &&
        (e.reason === "NotFound" || errnoCode(e.cause) === "ENOENT" || errnoCode(e.cause) === "ENOTDIR")
      return missing ? yield* new NotASessionFile({ path, reason: "missing" }) : undefined
    }
    const { size, type } = info.right
    if (type === "Directory") return yield* new NotASessionFile({ path, reason: "directory" })
    if (type !== "File") return yield* new NotASessionFile({ path, reason: "not-a-file", detail: `it is a ${type}` })
    if (Number(size) === 0) return yield* new NotASessionFile({ path, reason: "empty", rule: "L5" })
  })

/**
 * The store's header refusals that say "this is no session log" (SPEC §7.4.4 step 3): line 1 not
 * UTF-8 or JSON (L5), JSON but not an object (K5), an object that is not a `{"type":"session"}`
 * record (L5). A session header cut before its newline stays `StoreCorrupt` L5 (a damaged log).
 */
const HEADER_WITHOUT_NEWLINE = "header line without a newline"

/** A read failure of a named file, told precisely: no file there, or no session log in it. */
const classifyReadError = (path: string) => <E>(e: E): E | NotASessionFile => {
  if (e instanceof StoreCorrupt && e.line === 1 && (e.rule === "K5" || e.rule === "L5")) {
    if (e.detail === HEADER_WITHOUT_NEWLINE) return e
    return e.detail.startsWith("empty file")
      ? new NotASessionFile({ path, reason: "empty", rule: "L5" })
      : new NotASessionFile({ path, reason: "not-a-session-log", rule: e.rule, detail: e.detail })
  }
  // the file went away between the check and the read
  if (e instanceof StoreFailure && e.cause === "no such file") return new NotASessionFile({ path, reason: "missing" })
  return e
}

/**
 * Read a `.jsonl` file named on the command line (no root, no file-name check; the id is the
 * header's). A path that is no session log file is `NotASessionFile` (a missing path, a directory,
 * an empty file, a file whose first line is not a session header), never a raw I/O error.
 */
export const readSessionFile = (path: string): Effect.Effect<LoadResult, LoadError | NotASessionFile, FileSystem.FileSystem> =>
  Effect.zipRight(checkFile(path), Effect.mapError(readJsonlFile(path), classifyReadError(path)))

/** `readSessionFile` streamed: the events are handed to `sink` as they are read (`SessionStore.loadEach`). */
export const readSessionFileEach = <E, R>(
  path: string,
  sink: EventSink<E, R>
): Effect.Effect<LoadSummary, LoadError | NotASessionFile | E, R | FileSystem.FileSystem> =>
  Effect.zipRight(checkFile(path), Effect.mapError(readJsonlFileEach(path, sink), classifyReadError(path)))

/** The header of a named `.jsonl` file (its first line only), with the refusals of `readSessionFile`. */
export const readSessionFileHeader = (
  path: string
): Effect.Effect<SessionHeader, LoadError | NotASessionFile, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    yield* checkFile(path)
    const header = yield* readJsonlFileHeader(path)
    if (header === undefined) return yield* new NotASessionFile({ path, reason: "missing" })
    return header
  }).pipe(Effect.mapError(classifyReadError(path)))

/**
 * The store and id a writing command (`repair`, `compact`, `prune`, `fork`, `migrate`) acts on.
 * A `.jsonl` path is exactly that file, whatever its name: the id is its header's, and the store
 * is the single-file JSONL store of the file's folder (`JsonlStoreOptions.file`) whose lock,
 * torn-tail truncation and `replaceLog` (backup beside it, mode kept) act on that file (the file a
 * symbolic link points to); a fork's child is written beside it as `<encoded id>.jsonl`.
 */
export const fileTarget = (
  source: SessionSource
): Effect.Effect<{ readonly spec: StoreSpec; readonly id: string }, LoadError | NotASessionFile, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    if (source.kind === "store") return { spec: source.spec, id: source.id }
    const path = yield* Path.Path
    const { id } = yield* readSessionFileHeader(source.path)
    // through a symbolic link: the file it points to (a rewrite would replace the link otherwise)
    const real = yield* Effect.orElseSucceed((yield* FileSystem.FileSystem).realPath(source.path), () => source.path)
    const spec: StoreSpec = { kind: "jsonl", root: path.dirname(real), file: { sessionId: id, path: real } }
    return { spec, id }
  })

// --- paths of the wrong kind ----------------------------------------------------------------

/** What is at a path (following links), none when nothing is there or it cannot be seen. */
const infoAt = (path: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => Effect.option(fs.stat(path)))

/** The type of what is at a path, as `infoAt`. */
const typeAt = (path: string) => Effect.map(infoAt(path), Option.map((info) => info.type))

/**
 * A `--store` path that exists as the wrong kind is a usage error (exit 2), before anything is
 * opened: a directory named as a SQLite file, a file named as a JSONL root, and for a command
 * that creates no store an empty file named as a SQLite store (opening it would write a schema
 * into it; a WAL holding its pages makes it a store).
 */
const checkStoreLocation = (spec: StoreSpec, options: { readonly mustExist: boolean }) =>
  Effect.gen(function*() {
    if (spec.kind === "sqlite") {
      const info = yield* infoAt(spec.filename)
      if (Option.isNone(info)) return
      if (info.value.type === "Directory") {
        return yield* new UsageError({ detail: `${spec.filename} is a directory, not a SQLite file (a JSONL store is jsonl:${spec.filename})` })
      }
      const walSize = Option.match(yield* infoAt(`${spec.filename}-wal`), { onNone: () => 0, onSome: (w) => Number(w.size) })
      if (options.mustExist && Number(info.value.size) === 0 && walSize === 0) {
        return yield* new UsageError({ detail: `${spec.filename} is an empty file, not a SQLite store (nothing was written)` })
      }
    } else if (spec.kind === "jsonl") {
      const type = yield* typeAt(spec.root)
      if (Option.isSome(type) && type.value !== "Directory") {
        return yield* new UsageError({ detail: `${specText(spec)}: ${spec.root} is not a directory (a .jsonl file is given without --store)` })
      }
    }
  })

/**
 * An `--out` path that exists as the wrong kind is a usage error (exit 2), nothing written: a
 * directory where one session's file goes, a file where a whole store's directory goes.
 */
export const checkOutputPath = (out: string, want: "file" | "directory") =>
  Effect.gen(function*() {
    const type = yield* typeAt(out)
    if (Option.isNone(type)) return
    if (want === "file" && type.value === "Directory") {
      return yield* new UsageError({ detail: `--out ${out} is a directory: give the file to write (a directory is for a whole store)` })
    }
    if (want === "directory" && type.value !== "Directory") {
      return yield* new UsageError({ detail: `--out ${out} is not a directory: a whole store is exported into a directory` })
    }
  })
