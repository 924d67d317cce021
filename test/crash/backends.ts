/**
 * Backends for the repair and crash tests: a store over a fresh temp location (memory, JSONL
 * directory, SQLite file), a second independent store instance over the same location (another
 * writer), a raw fingerprint of what is stored (file bytes, table rows) to prove "writes
 * nothing", a raw event-row count and SQLite's integrity check.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { createRequire } from "node:module"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodeSessionId } from "../../src/schema/SessionIdEncoding.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"

interface RawDb {
  pragma(source: string, options?: { simple: boolean }): unknown
  prepare(source: string): { all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>> }
  close(): void
}
const require = createRequire(import.meta.url)
const Database = require("better-sqlite3") as new(filename: string, options?: { readonly?: boolean }) => RawDb

/** Run `f` on a raw read-only better-sqlite3 connection to `file`. */
export const withRawDb = <A>(file: string, f: (db: RawDb) => A): A => {
  const db = new Database(file, { readonly: true })
  try {
    return f(db)
  } finally {
    db.close()
  }
}

/** `PRAGMA integrity_check` of a SQLite file ("ok" when sound). */
export const integrityCheck = (file: string): string =>
  withRawDb(file, (db) => String(db.pragma("integrity_check", { simple: true })))

export type BackendName = "memory" | "jsonl" | "sqlite"

export interface Backend {
  readonly name: BackendName
  readonly store: SessionStoreShape
  /** Another store instance over the same location (memory: the same instance). */
  readonly another: Effect.Effect<SessionStoreShape, unknown, Scope.Scope>
  /** Everything stored for `id`, raw: file bytes or table rows (memory: the loaded log and revision). */
  readonly fingerprint: (id: string) => Effect.Effect<string>
  /** JSONL: the session file; SQLite: the database file. */
  readonly location: (id: string) => string
}

/** A backend over a fresh temp location. */
export const makeBackend = (
  name: BackendName
): Effect.Effect<Backend, unknown, Scope.Scope | FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    if (name === "memory") {
      const store = yield* makeMemoryStore()
      return {
        name,
        store,
        another: Effect.succeed(store),
        fingerprint: (id) =>
          store.load(id).pipe(
            Effect.map((l) => JSON.stringify([l.header, l.events, l.revision])),
            Effect.orElseSucceed(() => "absent")
          ),
        location: () => ""
      }
    }
    const dir = yield* fs.makeTempDirectoryScoped()
    if (name === "jsonl") {
      const root = `${dir}/store`
      const open = makeJsonlStore({ root }).pipe(
        Effect.provideService(FileSystem.FileSystem, fs),
        Effect.provideService(Path.Path, path)
      )
      const fileOf = (id: string) => `${root}/${encodeSessionId(id)}.jsonl`
      return {
        name,
        store: yield* open,
        another: open,
        fingerprint: (id) =>
          fs.readFile(fileOf(id)).pipe(
            Effect.map((b) => Buffer.from(b).toString("base64")),
            Effect.orElseSucceed(() => "absent")
          ),
        location: fileOf
      }
    }
    const file = `${dir}/sessions.db`
    const open = makeSqliteStore({ filename: file })
    return {
      name,
      store: yield* open,
      another: open,
      fingerprint: (id) =>
        Effect.sync(() =>
          withRawDb(file, (db) =>
            JSON.stringify([
              db.prepare("SELECT * FROM sessions WHERE id = ?").all(id),
              db.prepare("SELECT * FROM event_rows WHERE session_id = ? ORDER BY seq").all(id),
              db.prepare("SELECT count(*) AS n FROM session_backups").all()
            ]))
        ),
      location: () => file
    }
  })

/** The platform layer the JSONL backend needs (harmless for the others). */
export const platform = NodeContext.layer
