/**
 * How a SQLite database file is opened (SPEC §7.5, §12): for writing (refused up front when the
 * file or its directory is not writable), or read-only — through SQLite's shared-memory protocol
 * when a `-wal` file exists, else as an immutable file whose identity is checked after every read —
 * so that a read creates, locks or modifies nothing. Uses node:fs directly: the store's
 * constructors require no FileSystem, and better-sqlite3 opens the file synchronously itself.
 * The driver (`@effect/sql-sqlite-node` over the better-sqlite3 native addon) is loaded by the
 * first open, never by an import: a program without SQLite runs where the addon is missing.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as NodeFs from "node:fs"
import * as NodePath from "node:path"
import { StoreFailure } from "../../../schema/Errors.js"

/** What an open needs to know. */
export interface SqliteOpenOptions {
  readonly filename: string
  readonly readOnly?: boolean
}

/** The error code of a Node file-system failure. */
const errnoOf = (e: unknown): string => {
  const code = (e as { readonly code?: unknown } | null)?.code
  return typeof code === "string" ? code : "unknown"
}

const isMemory = (filename: string): boolean => filename === ":memory:" || filename === ""

/** What identifies the file's content for an immutable read: it changes with any write to it. */
const identityOf = (filename: string): string | undefined => {
  try {
    const st = NodeFs.statSync(filename, { bigint: true })
    return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`
  } catch {
    return undefined
  }
}

/**
 * A `file:` URI for `filename` with `immutable=1` (SQLite reads the file alone: no locks, no
 * `-wal`/`-shm`). Every byte outside the unreserved set is percent-encoded (`?`, `#`, `%`).
 */
const immutableUri = (filename: string): string => {
  let path = NodePath.resolve(filename)
  if (process.platform === "win32") path = "/" + path.replace(/\\/g, "/")
  let encoded = ""
  for (const byte of Buffer.from(path, "utf8")) {
    const c = String.fromCharCode(byte)
    encoded += /[A-Za-z0-9/._~-]/.test(c) ? c : "%" + byte.toString(16).toUpperCase().padStart(2, "0")
  }
  return `file:${encoded}?immutable=1`
}

/**
 * better-sqlite3 interprets `file:` URIs only when SQLITE_USE_URI=1 was set before its native
 * addon loaded (on the first open in the process), so every open sets it while unset. A plain
 * filename starting with "file:" is then made relative ("./file:..."), so it keeps naming a file.
 */
const enableUriFilenames = (): void => {
  if (process.env.SQLITE_USE_URI === undefined) process.env.SQLITE_USE_URI = "1"
}

const literalName = (filename: string): string => filename.startsWith("file:") ? `./${filename}` : filename

/**
 * How a database file is opened. Read-only: when a `-wal` file exists a writer may be active (or
 * crashed), so SQLite's shared-memory protocol is used with the existing `-wal`/`-shm` pair
 * ("shared"; it reads the committed state under a writer's lock and creates no file); when there
 * is none, no connection has the database open in WAL mode, and the file is read alone
 * ("immutable": otherwise SQLite would create a `-wal`/`-shm` pair even for a read-only
 * connection and leave it behind, or fail in a read-only directory). An immutable read holds no
 * lock: `identity` is checked after every operation, and a database written meanwhile fails the
 * operation instead of answering from a mix of old and new pages.
 */
export type OpenTarget =
  | { readonly _tag: "write"; readonly filename: string }
  | { readonly _tag: "shared"; readonly filename: string }
  | { readonly _tag: "immutable"; readonly filename: string; readonly identity: string }

const openRefusal = (filename: string, cause: unknown, detail: string) =>
  new StoreFailure({ method: "open", cause, detail: `${filename}: ${detail}` })

/**
 * The open target of `options`, refusing before anything is opened: a read-only open of a missing
 * file or of something that is not a regular file (a FIFO would block), and a writing open of a
 * file or directory this process may not write (SQLite would otherwise open the file read-only and
 * leave a `-wal`/`-shm` pair behind before its first write fails).
 */
const openTarget = (options: SqliteOpenOptions): Effect.Effect<OpenTarget, StoreFailure> =>
  Effect.suspend((): Effect.Effect<OpenTarget, StoreFailure> => {
    const { filename } = options
    if (options.readOnly === true) {
      if (isMemory(filename)) return openRefusal(filename, "in-memory", "an in-memory database cannot be opened read-only")
      let st: NodeFs.Stats
      try {
        st = NodeFs.statSync(filename)
      } catch (e) {
        return openRefusal(filename, errnoOf(e), "no database file there, and a read-only open creates none")
      }
      if (!st.isFile()) return openRefusal(filename, "not a regular file", "not a regular file (a SQLite store is a file)")
      if (NodeFs.existsSync(`${filename}-wal`)) return Effect.succeed({ _tag: "shared", filename: literalName(filename) })
      const identity = identityOf(filename)
      if (identity === undefined) return openRefusal(filename, "stat failed", "the database file went away")
      return Effect.succeed({ _tag: "immutable", filename, identity })
    }
    if (isMemory(filename)) return Effect.succeed({ _tag: "write", filename })
    const exists = NodeFs.existsSync(filename)
    try {
      if (exists) {
        if (!NodeFs.statSync(filename).isFile()) {
          return openRefusal(filename, "not a regular file", "not a regular file (a SQLite store is a file)")
        }
        NodeFs.accessSync(filename, NodeFs.constants.R_OK | NodeFs.constants.W_OK)
      }
      // the -wal/-shm pair (or the new file) is created in the directory
      if (!(exists && NodeFs.existsSync(`${filename}-wal`) && NodeFs.existsSync(`${filename}-shm`))) {
        NodeFs.accessSync(NodePath.dirname(NodePath.resolve(filename)), NodeFs.constants.W_OK)
      }
    } catch (e) {
      const code = errnoOf(e)
      if (code === "EACCES" || code === "EPERM" || code === "EROFS") {
        return openRefusal(
          filename,
          code,
          "not writable: a writing open needs write access to the database file and its directory (nothing was written)"
        )
      }
    }
    return Effect.succeed({ _tag: "write", filename: literalName(filename) })
  })

/** What to do when the driver cannot be loaded. */
const ADDON_ADVICE =
  "the native addon better-sqlite3 (through @effect/sql-sqlite-node) could not be loaded: install it for this platform " +
  "(npm install better-sqlite3; it builds from source where no prebuilt binary is offered), or use another store"

/** Whether a failure is the driver's native addon missing or unloadable rather than the database's. */
const isAddonFailure = (cause: unknown): boolean => {
  const code = (cause as { readonly code?: unknown } | null)?.code
  if (code === "ERR_DLOPEN_FAILED" || code === "MODULE_NOT_FOUND" || code === "ERR_MODULE_NOT_FOUND") return true
  return cause instanceof Error && /bindings file|better_sqlite3\.node|NODE_MODULE_VERSION/.test(cause.message)
}

/** The SQLite driver module, imported on the first open (cached by the module system). */
const driver = Effect.tryPromise({
  try: () => import("@effect/sql-sqlite-node/SqliteClient"),
  catch: (cause) => new StoreFailure({ method: "open", cause, detail: ADDON_ADVICE })
})

/** The `@effect/sql-sqlite-node` client on `filename`, not yet checked; closed with the scope. */
const buildClient = (filename: string, readonly: boolean) =>
  Effect.flatMap(driver, (Sqlite: typeof SqliteClient) =>
    Layer.build(Sqlite.layer({ filename, readonly, disableWAL: true })).pipe(
      // the better-sqlite3 constructor throws (e.g. a missing directory, or an addon that cannot
      // be loaded) inside the client's Effect.gen, so its defect is this layer's StoreFailure
      Effect.catchAllDefect((cause) =>
        new StoreFailure({ method: "open", cause, ...(isAddonFailure(cause) ? { detail: ADDON_ADVICE } : {}) })
      ),
      Effect.mapError((e) => e instanceof StoreFailure ? e : new StoreFailure({ method: "open", cause: e })),
      Effect.map((context) => Context.get(context, SqlClient.SqlClient))
    ))

/**
 * The `@effect/sql-sqlite-node` client on `options.filename` as `openTarget` decides, not yet
 * checked; closed with the scope. `disableWAL`: the client would otherwise switch to WAL before
 * the ownership check, which persists in a foreign file.
 */
export const sqliteClient = (
  options: SqliteOpenOptions
): Effect.Effect<{ readonly sql: SqlClient.SqlClient; readonly target: OpenTarget }, StoreFailure, Scope.Scope> =>
  Effect.gen(function*() {
    const target = yield* openTarget(options)
    enableUriFilenames()
    if (target._tag !== "immutable") return { sql: yield* buildClient(target.filename, target._tag === "shared"), target }
    const immutable = yield* Effect.either(buildClient(immutableUri(target.filename), true))
    if (immutable._tag === "Right") return { sql: immutable.right, target }
    // URI filenames are off (better-sqlite3 was loaded before SQLITE_USE_URI could be set): read
    // through the shared-memory protocol, which creates the -wal/-shm pair where it may
    const shared: OpenTarget = { _tag: "shared", filename: literalName(target.filename) }
    return { sql: yield* buildClient(shared.filename, true), target: shared }
  })

/** A read of a read-only open whose file was replaced or written since the open (immutable reads only). */
export const changedUnderneath = (target: OpenTarget, method: string): StoreFailure | undefined =>
  target._tag === "immutable" && identityOf(target.filename) !== target.identity
    ? new StoreFailure({
      method,
      cause: "database changed",
      detail:
        `${target.filename} was written while it was read without locks (no -wal file at open); nothing was written, run the read again`
    })
    : undefined

