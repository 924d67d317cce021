/**
 * What a CLI command reads or writes: the `--store` spec (a SQLite file, `jsonl:<dir>`, a
 * PostgreSQL URL) turned into a SessionStore, and a session named by `--session` in that store
 * or by a `.jsonl` path read directly (SPEC §12).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import type * as Path from "@effect/platform/Path"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { SessionNotFound, type StoreSchemaMismatch } from "../../schema/Errors.js"
import { makeJsonlStore, readJsonlFile } from "../../layers/JsonlStore.js"
import { makeSqliteStore } from "../../layers/SqliteStore.js"
import type { LoadError, LoadResult, SessionStoreShape } from "../../services/SessionStore.js"

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

/** A parsed `--store` value. */
export type StoreSpec =
  | { readonly kind: "sqlite"; readonly filename: string }
  | { readonly kind: "jsonl"; readonly root: string }

/** Parse `--store`: `*.db` / `*.sqlite` (SQLite), `jsonl:<dir>`; anything else is a usage error. */
export const parseStoreSpec = (value: string): StoreSpec | UsageError => {
  if (value.startsWith("jsonl:")) {
    const root = value.slice("jsonl:".length)
    return root.length === 0 ? new UsageError({ detail: "jsonl: needs a directory, e.g. jsonl:./sessions" }) : {
      kind: "jsonl",
      root
    }
  }
  if (value.startsWith("postgres://") || value.startsWith("postgresql://")) {
    return new UsageError({ detail: "the PostgreSQL store is not available in this build yet" })
  }
  if (/\.(db|sqlite|sqlite3)$/i.test(value)) return { kind: "sqlite", filename: value }
  return new UsageError({
    detail: `unknown store "${value}": use a path ending in .db or .sqlite, or jsonl:<dir>`
  })
}

/** Open the store of a spec. `mustExist` refuses to create a missing SQLite file or JSONL root. */
export const openStore = (
  spec: StoreSpec,
  options: { readonly mustExist: boolean }
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const location = spec.kind === "sqlite" ? spec.filename : spec.root
    if (options.mustExist && !(yield* fs.exists(location).pipe(Effect.orElseSucceed(() => false)))) {
      return { store: undefined, location }
    }
    const store: SessionStoreShape = spec.kind === "sqlite"
      ? yield* makeSqliteStore({ filename: spec.filename })
      : yield* makeJsonlStore({ root: spec.root })
    return { store, location }
  })

/** The refusal for a store that does not exist (a reading or updating command creates none). */
export const storeNotFound = (store: string): UsageError =>
  new UsageError({ detail: `no store at ${store}: not found (nothing was created)` })

/** Open a store that must exist: a missing SQLite file or JSONL root is `storeNotFound` (exit 2). */
export const openExistingStore = (spec: StoreSpec) =>
  Effect.flatMap(
    openStore(spec, { mustExist: true }),
    ({ store: s }) =>
      s === undefined
        ? Effect.fail(storeNotFound(spec.kind === "sqlite" ? spec.filename : `jsonl:${spec.root}`))
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
  LoadError | UsageError | StoreSchemaMismatch,
  FileSystem.FileSystem | Path.Path | Scope.Scope
> =>
  Effect.gen(function*() {
    if (source.kind === "file") return yield* readJsonlFile(source.path)
    const { store } = yield* openStore(source.spec, { mustExist: true })
    if (store === undefined) {
      return yield* new SessionNotFound({ rule: "L11", sessionId: source.id, detail: "the store does not exist" })
    }
    return yield* store.load(source.id)
  })
