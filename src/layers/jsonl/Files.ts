/**
 * The JSONL file layout and its steps over `@effect/platform` FileSystem (SPEC §7.4.1, §7.4.3):
 * session paths (`.jsonl`, or `.jsonlz` for the compressed layout) and the names `list`
 * considers, the root made on first use (0700, parents fsynced), temporary files (`wx`, 0600,
 * fsynced), the no-overwrite publish by hard link, the backup-then-rename replacement, truncation
 * and directory fsync. Failures stay PlatformErrors.
 */
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Random from "effect/Random"
import { encodeSessionId } from "../../schema/SessionIdEncoding.js"
import { COMPRESSED_SUFFIX } from "./FrameEncoding.js"

/** Where a session's file lives. */
export interface SessionPath {
  /** `encode(id)` (SPEC §7.4.1); the file name without `.jsonl`/`.jsonlz` for the store's named file. */
  readonly name: string
  readonly file: string
  /** The store's named file (`JsonlStoreOptions.file`): its name is not checked against the id. */
  readonly named?: true
}

/** Where `locate` finds a session: one file, none, or (a damaged store) both names. */
export type Located = SessionPath | undefined | { readonly _tag: "BothNames"; readonly files: ReadonlyArray<string> }

/** One session of the store kept in a file of any name (SPEC §12: a `.jsonl` path given to the CLI). */
export interface NamedFile {
  readonly sessionId: string
  /** In the store's root (temporary files and backups are made beside it). */
  readonly path: string
}

/** A written and fsynced temporary file: its path and the identity a link or rename publishes. */
export interface TempFile {
  readonly path: string
  readonly ino: string
  readonly size: number
}

/** The file steps of one store's root. */
export interface JsonlFiles {
  /** The session's path in a layout (`<encode(id)>.jsonl`, or `.jsonlz` when `compressed`); the named file for its id. */
  readonly pathOf: (id: string, compressed?: boolean) => SessionPath
  /** The paths a session may have: both layouts' names, or the named file alone. */
  readonly candidates: (id: string) => ReadonlyArray<SessionPath>
  /** The one of `candidates` that exists. */
  readonly locate: (id: string) => Effect.Effect<Located, PlatformError>
  /**
   * The session files in the root (`.jsonl` and `.jsonlz`, not hidden); none when the root does
   * not exist. With a named file: that file, and not `<encode(its id)>.jsonl(z)`, which it stands in for.
   */
  readonly sessionFiles: Effect.Effect<ReadonlyArray<SessionPath>, PlatformError>
  /** A stat, none when the path does not exist. */
  readonly stat: (path: string) => Effect.Effect<Option.Option<FileSystem.File.Info>, PlatformError>
  /** Create the root and its missing parents (0700), fsyncing each new directory's parent. */
  readonly ensureRoot: Effect.Effect<void, PlatformError>
  /**
   * Write `parts` to a fresh temporary file in the root (or beside the file `beside`), named after
   * `name`, fsync it and run `use` with it; the file is removed afterwards whatever happened (a
   * publication or replacement links or renames it first). Its creation is uninterruptible and its
   * removal guaranteed from the moment it exists: an interruption at any point leaves nothing
   * behind (§7.4.3), and the writing itself stays interruptible.
   */
  readonly withTemp: <A, E, R>(
    name: string,
    parts: ReadonlyArray<string | Uint8Array>,
    use: (temp: TempFile) => Effect.Effect<A, E, R>,
    beside?: string
  ) => Effect.Effect<A, E | PlatformError, R>
  /** The file a path names: a symbolic link resolved (a rewrite replaces the file, never the link), else the path. */
  readonly realFile: (file: string) => Effect.Effect<string, PlatformError>
  /**
   * Publish a temporary file at `file` by a no-overwrite hard link: false (and the temp removed)
   * when `file` exists, or its `rival` (the session's name in the other layout) does.
   */
  readonly publish: (temp: string, file: string, rival?: string) => Effect.Effect<boolean, PlatformError>
  /** The hidden lock file a publication of the session named `name` holds while it publishes (`.<name>.lock`). */
  readonly publishLockOf: (name: string) => string
  /**
   * Keep `file` as `<file>.v<version>.bak` (then `.v<version>.1.bak`, ...), rename `temp` over it
   * and fsync its directory; the temp is removed on failure. `file` is never absent (nor a link:
   * pass `realFile`'s answer, and a temp written in its directory).
   */
  readonly replace: (temp: string, file: string, version: number) => Effect.Effect<void, PlatformError>
  /** Truncate `file` to `size` bytes and fsync it. */
  readonly truncate: (file: string, size: number) => Effect.Effect<void, PlatformError>
  readonly fsyncRoot: Effect.Effect<void, PlatformError>
  /** The root directory (resolved). */
  readonly root: string
  /** Remove a path, best effort (leftover temporary names are ignored by readers). */
  readonly removeQuietly: (path: string) => Effect.Effect<void>
}

/** The identity of a stat, as the store compares it. */
export const inoOf = (info: FileSystem.File.Info): string => String(Option.getOrElse(info.ino, () => 0))

/** True when a PlatformError reports an existing target (EEXIST). */
export const isAlreadyExists = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "AlreadyExists"

/** True when a PlatformError reports a missing path (ENOENT). */
export const isNotFound = (error: PlatformError): boolean =>
  error._tag === "SystemError" && error.reason === "NotFound"

/** True when readlink found a path that is not a symbolic link (EINVAL). */
const isNotLink = (error: PlatformError): boolean => errnoCode(error) === "EINVAL"

/** The errno code (`EEXIST`, `EPERM`, ...) behind a PlatformError, when there is one. */
const errnoCode = (error: PlatformError): string | undefined => {
  if (error._tag !== "SystemError") return undefined
  const cause: unknown = error.cause
  if (typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string") {
    return cause.code
  }
  return undefined
}

// Directories cannot be opened or fsynced on some platforms (Windows: EPERM/EISDIR); SPEC §7.4.3 step 4.
const UNSYNCABLE: ReadonlySet<string> = new Set(["EPERM", "EISDIR", "EINVAL", "ENOTSUP", "EBADF", "EACCES"])

/** fsync a directory so a new or renamed entry in it is durable; skipped where the OS refuses. */
export const fsyncDirectory = (fs: FileSystem.FileSystem, dir: string): Effect.Effect<void, PlatformError> =>
  Effect.scoped(Effect.flatMap(fs.open(dir, { flag: "r" }), (handle) => handle.sync)).pipe(
    Effect.catchIf(
      (e) => {
        const code = errnoCode(e)
        return code !== undefined && UNSYNCABLE.has(code)
      },
      () => Effect.void
    )
  )

const encoder = new TextEncoder()
const WRITE_CHUNK = 1 << 20

/** Write text (or byte) parts in bounded chunks (a replaced log is never one giant string). */
const writeParts = (handle: FileSystem.File, parts: ReadonlyArray<string | Uint8Array>) =>
  Effect.gen(function*() {
    let pending = ""
    for (const part of parts) {
      if (typeof part !== "string") {
        if (pending.length > 0) yield* handle.writeAll(encoder.encode(pending))
        pending = ""
        yield* handle.writeAll(part)
        continue
      }
      pending += part
      if (pending.length >= WRITE_CHUNK) {
        yield* handle.writeAll(encoder.encode(pending))
        pending = ""
      }
    }
    if (pending.length > 0) yield* handle.writeAll(encoder.encode(pending))
  })

const randomHex = Effect.gen(function*() {
  let out = ""
  for (let i = 0; i < 4; i++) out += (yield* Random.nextIntBetween(0, 0x10000)).toString(16).padStart(4, "0")
  return out
})

/**
 * The file steps of the store rooted at `root` (resolved against the working directory); `named`
 * keeps its session in that file, which must lie in `root`, instead of `<encode(id)>.jsonl`.
 */
export const make = (root: string, named?: NamedFile): Effect.Effect<JsonlFiles, never, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = path.resolve(root)
    const namedPath: SessionPath | undefined = named === undefined ? undefined : {
      name: path.basename(named.path).replace(/\.jsonlz?$/, ""),
      file: path.resolve(named.path),
      named: true
    }
    if (namedPath !== undefined && path.dirname(namedPath.file) !== dir) {
      return yield* Effect.dieMessage(`JsonlStore: the named file ${namedPath.file} must lie in the root ${dir}`)
    }
    const shadowed = named === undefined ? undefined : encodeSessionId(named.sessionId)
    const removeQuietly = (p: string) => Effect.ignore(fs.remove(p))
    const stat = (p: string) =>
      fs.stat(p).pipe(
        Effect.map(Option.some),
        Effect.catchIf(isNotFound, () => Effect.succeed(Option.none<FileSystem.File.Info>()))
      )
    let rootReady = false

    const ensureRoot = Effect.gen(function*() {
      if (rootReady) return
      const missing: Array<string> = []
      let d = dir
      while (!(yield* fs.exists(d))) {
        missing.unshift(d)
        const parent = path.dirname(d)
        if (parent === d) break
        d = parent
      }
      for (const m of missing) {
        yield* fs.makeDirectory(m, { mode: 0o700 }).pipe(Effect.catchIf(isAlreadyExists, () => Effect.void))
        yield* fsyncDirectory(fs, path.dirname(m))
      }
      rootReady = true
    })

    /** A fresh, empty temporary file (never an existing one: `wx`), closed again; its path. */
    const createTemp = (name: string, beside?: string) =>
      Effect.gen(function*() {
        const inDir = beside === undefined ? dir : path.dirname(beside)
        for (let attempt = 0;; attempt++) {
          const temp = path.join(inDir, `.${name}.${yield* randomHex}.tmp`)
          const created = yield* Effect.scoped(fs.open(temp, { flag: "wx", mode: 0o600 })).pipe(
            Effect.as(true),
            Effect.catchIf((e) => isAlreadyExists(e) && attempt < 8, () => Effect.succeed(false))
          )
          if (created) return temp
        }
      })

    const withTemp = <A, E, R>(
      name: string,
      parts: ReadonlyArray<string | Uint8Array>,
      use: (temp: TempFile) => Effect.Effect<A, E, R>,
      beside?: string
    ) =>
      Effect.acquireUseRelease(
        createTemp(name, beside),
        (temp) =>
          Effect.scoped(Effect.gen(function*() {
            const handle = yield* fs.open(temp, { flag: "r+" })
            yield* writeParts(handle, parts)
            yield* handle.sync
            return yield* handle.stat
          })).pipe(Effect.flatMap((info) => use({ path: temp, ino: inoOf(info), size: Number(info.size) }))),
        (temp) => removeQuietly(temp)
      )

    const publish = (temp: string, file: string, rival?: string) =>
      Effect.gen(function*() {
        if (rival !== undefined && Option.isSome(yield* stat(rival))) {
          yield* removeQuietly(temp)
          return false
        }
        return yield* fs.link(temp, file).pipe(
          Effect.as(true),
          Effect.catchIf(isAlreadyExists, () => Effect.as(removeQuietly(temp), false))
        )
      }).pipe(Effect.tapError(() => removeQuietly(temp)))

    const replace = (temp: string, file: string, version: number) =>
      Effect.gen(function*() {
        for (let n = 0;; n++) {
          const backup = `${file}.v${version}${n === 0 ? "" : `.${n}`}.bak`
          const linked = yield* fs.link(file, backup).pipe(
            Effect.as(true),
            Effect.catchIf((e) => isAlreadyExists(e) && n < 1000, () => Effect.succeed(false))
          )
          if (linked) break
        }
        // the replacement keeps the original's permission bits (existing files are not changed, §7.4.3)
        yield* fs.chmod(temp, (yield* fs.stat(file)).mode & 0o7777)
        yield* fs.rename(temp, file)
        yield* fsyncDirectory(fs, path.dirname(file))
      }).pipe(Effect.tapError(() => removeQuietly(temp)))

    const realFile = (file: string) =>
      Effect.gen(function*() {
        const link = yield* fs.readLink(file).pipe(Effect.map(Option.some), Effect.catchIf(isNotLink, () => Effect.succeed(Option.none())))
        return Option.isNone(link) ? file : yield* fs.realPath(file)
      })

    const truncate = (file: string, size: number) =>
      Effect.scoped(Effect.gen(function*() {
        const handle = yield* fs.open(file, { flag: "r+" })
        yield* handle.truncate(size)
        yield* handle.sync
      }))

    const sessionFiles = fs.readDirectory(dir).pipe(
      Effect.catchIf(isNotFound, () => Effect.succeed<Array<string>>([])),
      Effect.map((names) =>
        names.flatMap((entry): Array<SessionPath> => {
          const file = path.join(dir, entry)
          if (file === namedPath?.file) return [namedPath]
          const suffix = entry.endsWith(".jsonl") ? ".jsonl" : entry.endsWith(COMPRESSED_SUFFIX) ? COMPRESSED_SUFFIX : undefined
          if (suffix === undefined || entry.startsWith(".")) return []
          const name = entry.slice(0, -suffix.length)
          return name === shadowed ? [] : [{ name, file }]
        })
      )
    )

    const pathOf = (id: string, compressed?: boolean): SessionPath => {
      if (namedPath !== undefined && id === named?.sessionId) return namedPath
      const name = encodeSessionId(id)
      return { name, file: path.join(dir, name + (compressed === true ? COMPRESSED_SUFFIX : ".jsonl")) }
    }
    const candidates = (id: string): ReadonlyArray<SessionPath> => {
      const plain = pathOf(id)
      return plain.named === true ? [plain] : [plain, pathOf(id, true)]
    }
    const locate = (id: string) =>
      Effect.gen(function*() {
        const found: Array<SessionPath> = []
        for (const candidate of candidates(id)) if (Option.isSome(yield* stat(candidate.file))) found.push(candidate)
        if (found.length > 1) return { _tag: "BothNames" as const, files: found.map((f) => f.file) }
        return found[0]
      })

    const files: JsonlFiles = {
      pathOf,
      candidates,
      locate,
      sessionFiles,
      stat,
      ensureRoot,
      withTemp,
      publishLockOf: (name) => path.join(dir, `.${name}.lock`),
      realFile,
      publish,
      replace,
      truncate,
      fsyncRoot: fsyncDirectory(fs, dir),
      root: dir,
      removeQuietly
    }
    return files
  })
