/**
 * `session-log export` and `import` (docs/cli.md, SPEC §12): sessions between any store and JSONL
 * files (format version 1). Export never overwrites without `--force` and removes what it created
 * when a write fails or is interrupted; import is all or nothing (`ImportFiles`).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as NodeFs from "node:fs/promises"
import { type NotASessionFile, OutputExists, StoreFailure } from "../../schema/Errors.js"
import { encodeSessionId } from "../../schema/SessionIdEncoding.js"
import { encodeEvent } from "../../schema/EventCodec.js"
import type { Event } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { headerLine } from "../../layers/jsonl/JsonlStore.js"
import { readEach, type ReadEachResult } from "../../services/ReadEach.js"
import type { ReadError } from "../../services/SessionStore.js"
import { file, json, resolve, resolveSpec, runCommand, session, store } from "./CommandSupport.js"
import { importItems, readImportFiles } from "./ImportFiles.js"
import { from, importTranscripts, replace } from "./ImportTranscripts.js"
import { green, printJson, progress, red } from "./Output.js"
import { sourceWithProgress } from "./Progress.js"
import { checkOutputPath, openStore, sourceReader, type SourceReader, storeNotFound, UsageError } from "./Target.js"

// --- export ---------------------------------------------------------------------------------

const out = Options.text("out").pipe(
  Options.optional,
  Options.withPseudoName("<path>"),
  Options.withDescription("the file to write (one session) or the directory (a whole store); default: JSONL on stdout")
)

const force = Options.boolean("force").pipe(Options.withDescription("overwrite existing output files"))

const format = Options.choice("format", ["jsonl", "markdown", "html"]).pipe(
  Options.withDefault("jsonl" as const),
  Options.withPseudoName("<format>"),
  Options.withDescription(
    "jsonl (default), or for one session markdown (a transcript) or html (one self-contained page of the viewer, docs/viewer.md)"
  )
)

const isAlreadyExists = (e: PlatformError): boolean => e._tag === "SystemError" && e.reason === "AlreadyExists"

/** One session to export, validated by a first streamed read. */
interface Exported {
  readonly id: string
  readonly header: SessionHeader
  readonly events: number
  /** Read it again, validated, handing on its events chunk by chunk. */
  readonly each: <E>(
    onEvents: (events: ReadonlyArray<Event>) => Effect.Effect<void, E>
  ) => Effect.Effect<ReadEachResult, ReadError | NotASessionFile | E>
  /** Another format than JSONL (`--format markdown|html`): how to write it. */
  readonly render?: <E>(write: (text: string) => Effect.Effect<void, E>) => Effect.Effect<void, ReadError | NotASessionFile | E>
}

/** Validate a session by a streamed read (SPEC §12: memory bounded by a chunk); how to read it again. */
const validated = (id: string, reader: SourceReader, validating: SourceReader = reader) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const each = <E>(onEvents: (events: ReadonlyArray<Event>) => Effect.Effect<void, E>) =>
      readEach(reader.read, reader.reload, onEvents).pipe(Effect.provideService(FileSystem.FileSystem, fs))
    const { count, header } = yield* readEach(validating.read, validating.reload, () => Effect.void).pipe(
      Effect.provideService(FileSystem.FileSystem, fs)
    )
    return { id, header, events: count, each } satisfies Exported
  })

/** The JSONL text of a chunk of events. */
const linesOf = (events: ReadonlyArray<Event>): string => {
  let text = ""
  for (const e of events) text += encodeEvent(e) + "\n"
  return text
}

/** Stream one session's JSONL (format version 1) to `write`. */
const streamJsonl = <E>(session: Exported, write: (text: string) => Effect.Effect<void, E>) =>
  session.render !== undefined
    ? session.render(write)
    : Effect.zipRight(write(headerLine({ ...session.header, version: 1 })), session.each((events) => write(linesOf(events))))

/**
 * Write one export file through a temporary file beside it, published only when complete: a new
 * file by a hard link (a file that appeared meanwhile is refused, never overwritten), an existing
 * one (`--force`) by a rename over it. A failed write leaves the target as it was and no temporary
 * file; `onCreated` runs with the publication of a new file (both or neither, even on interrupt).
 */
const writeExportFile = (path: string, fresh: boolean, session: Exported, onCreated: Effect.Effect<void>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const p = yield* Path.Path
    const temp = p.join(p.dirname(path), `.${p.basename(path)}.export-${process.pid}.tmp`)
    const encoder = new TextEncoder()
    const write = Effect.scoped(Effect.gen(function*() {
      const handle = yield* fs.open(temp, { flag: "wx", mode: 0o644 })
      yield* streamJsonl(session, (text) => handle.writeAll(encoder.encode(text)))
      yield* handle.sync
    }))
    // an overwritten file keeps its permission bits (a private export stays private)
    const keepMode = Effect.flatMap(fs.stat(path), (info) => fs.chmod(temp, info.mode & 0o7777))
    const publish = fresh
      ? Effect.uninterruptible(
        fs.link(temp, path).pipe(
          Effect.catchIf(isAlreadyExists, () => new OutputExists({ paths: [path] })),
          Effect.zipRight(onCreated)
        )
      )
      : Effect.zipRight(keepMode, fs.rename(temp, path))
    yield* Effect.zipRight(write, publish).pipe(Effect.ensuring(fs.remove(temp).pipe(Effect.ignore)))
  })

/** Where an export file goes: the path named, and whether something is there already. */
interface Placed {
  readonly path: string
  readonly existing: boolean
}

/**
 * Where `--force` writes an existing target (`--out`, or a file in the `--out` directory): the
 * regular file itself, or the one a symbolic link points to (the link stays, as for a file named
 * to a writing command, `Target.fileTarget`). Anything else is refused even with `--force`: a
 * FIFO, device or socket (the rename would replace it with a regular file), and a file with other
 * hard links (the rename would split them; an in-place write could not leave it as it was when
 * the export fails).
 */
const forcedTarget = (path: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const real = yield* Effect.orElseSucceed(fs.realPath(path), () => path)
    const info = yield* fs.stat(real).pipe(Effect.mapError((cause) => new StoreFailure({ method: "export", cause })))
    if (info.type !== "File") {
      return yield* new UsageError({
        detail: `--out ${path} is a ${info.type}, not a regular file: export writes regular files only (nothing written)`
      })
    }
    const links = Option.getOrElse(info.nlink, () => 1)
    if (links > 1) {
      return yield* new UsageError({
        detail: `--out ${path} has ${links} hard links: --force would split them (nothing written)`
      })
    }
    return real
  })

/**
 * The session file of the other JSONL layout beside a target (`<id>.jsonlz` for `<id>.jsonl`):
 * exporting into a store's directory must not store one session under two names (J14).
 */
const otherLayout = (path: string) => path.endsWith(".jsonl") ? `${path}z` : undefined

/**
 * The directories `mkdir -p dir` would create, outermost first: the missing ones up to the first
 * that exists.
 */
const missingDirectories = (dir: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const p = yield* Path.Path
    const missing: Array<string> = []
    let at = p.resolve(dir)
    while (!(yield* fs.exists(at).pipe(Effect.orElseSucceed(() => true)))) {
      missing.unshift(at)
      const parent = p.dirname(at)
      if (parent === at) break
      at = parent
    }
    return missing
  })

/**
 * Remove a directory only when it is empty (rmdir(2)): the platform FileSystem has no such call,
 * and a check-then-`remove({ recursive })` could delete a file written in between.
 */
const removeEmptyDirectory = (dir: string) =>
  Effect.tryPromise({ try: () => NodeFs.rmdir(dir), catch: (cause) => cause })

/**
 * Undo a failed or interrupted export: remove the files this run created, then the directories it
 * created, deepest first. A directory that now holds something this run did not write is left
 * (and named on stderr): it is not ours to remove, nor are the directories around it.
 */
const undoExport = (files: ReadonlyArray<string>, dirs: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    for (const f of files) yield* Effect.ignore(fs.remove(f))
    for (const d of [...dirs].reverse()) {
      const removed = yield* Effect.either(removeEmptyDirectory(d))
      if (removed._tag === "Left") {
        return yield* Effect.logWarning(`export: left ${d}, created by this run: it holds files this run did not write`)
      }
    }
  })

/**
 * Write export files. Existing files are refused unless `force` (`OutputExists`, nothing written);
 * when a write fails or is interrupted, the files and directories this run created are removed.
 */
const writeOutputs = (
  dir: string | undefined,
  targets: ReadonlyArray<{ readonly path: string; readonly session: Exported }>,
  force: boolean
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const exists = (p: string) => fs.exists(p).pipe(Effect.orElseSucceed(() => false))
    yield* checkOutputPath(dir ?? targets[0].path, dir === undefined ? "file" : "directory")
    const placed: Array<Placed & { readonly session: Exported }> = []
    const existing: Array<string> = []
    const twoNames: Array<string> = []
    for (const t of targets) {
      const there = yield* exists(t.path)
      const other = dir === undefined ? undefined : otherLayout(t.path)
      if (other !== undefined && (yield* exists(other))) twoNames.push(other)
      if (there) existing.push(t.path)
      placed.push({ path: t.path, existing: there, session: t.session })
    }
    if (!force && existing.length + twoNames.length > 0) return yield* new OutputExists({ paths: [...existing, ...twoNames] })
    if (twoNames.length > 0) {
      return yield* new UsageError({
        detail: `--out ${dir} is a store holding ${twoNames.join(", ")}: a .jsonl beside it would store a session under two names (nothing written)`
      })
    }
    const writes: Array<{ readonly path: string; readonly fresh: boolean; readonly session: Exported }> = []
    for (const t of placed) {
      writes.push({ path: t.existing ? yield* forcedTarget(t.path) : t.path, fresh: !t.existing, session: t.session })
    }
    const dirs = dir === undefined ? [] : yield* missingDirectories(dir)
    const createdDirs: Array<string> = []
    const createdFiles: Array<string> = []
    const write = Effect.gen(function*() {
      for (const d of dirs) yield* Effect.uninterruptible(Effect.zipRight(fs.makeDirectory(d), Effect.sync(() => createdDirs.push(d))))
      for (const t of writes) {
        yield* writeExportFile(t.path, t.fresh, t.session, Effect.sync(() => void createdFiles.push(t.path)))
      }
    })
    yield* write.pipe(
      // on interrupt (SIGINT) too, which `tapError` would not see
      Effect.onExit((exit) => Exit.isSuccess(exit) ? Effect.void : undoExport(createdFiles, createdDirs)),
      Effect.mapError((e) => e._tag === "OutputExists" ? e : new StoreFailure({ method: "export", cause: e }))
    )
  })

/** Every session of a store, validated (a whole-store export needs `--out <dir>`). */
const exportStore = (storeOpt: string, outOpt: Option.Option<string>) =>
  Effect.gen(function*() {
    const spec = yield* resolveSpec(storeOpt)
    const { store: s } = yield* openStore(spec, { mustExist: true, readOnly: true })
    if (s === undefined) return yield* storeNotFound(storeOpt)
    if (Option.isNone(outOpt)) return yield* new UsageError({ detail: "exporting a whole store needs --out <dir>" })
    const headers = yield* s.list()
    const bar = progress("export", headers.length)
    const sessions: Array<Exported> = []
    for (const h of headers) {
      sessions.push(yield* validated(h.id, { read: (sink) => s.loadEach(h.id, sink), reload: s.load(h.id) }))
      yield* bar.tick(sessions.length)
    }
    yield* bar.done
    return sessions
  })

/** Write to stdout (synchronous for files and pipes on Linux: memory stays bounded). */
const writeStdout = (text: string) => Effect.sync(() => void process.stdout.write(text))

/** `export`. */
export const exportCommand = Command.make("export", { json, store, session, file, out, force, format }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const single = Option.isSome(o.session) || Option.isSome(o.file)
      if (o.format !== "jsonl" && !single) {
        return yield* new UsageError({ detail: `--format ${o.format} exports one session: name it with --session <id> or a .jsonl path` })
      }
      const read: ReadonlyArray<Exported> = single
        ? [yield* Effect.flatMap(resolve(o.file, o.session, o.store), (src) =>
          Effect.flatMap(sourceReader(src), (reader) =>
            // progress on a terminal for the validating read only (Progress.ts): stdout may be that terminal
            Effect.flatMap(sourceWithProgress(src, reader, "export", o.json), (validating) =>
              validated(src.kind === "store" ? src.id : src.path, reader, validating))))]
        : yield* exportStore(o.store, o.out)
      // --format markdown|html: the one session written for people (ViewExport, loaded only here)
      const sessions: ReadonlyArray<Exported> = o.format === "jsonl" ? read : yield* Effect.flatMap(
        Effect.promise(() => import("./ViewExport.js")),
        ({ readableRender }) =>
          Effect.map(readableRender<ReadError | NotASessionFile>(o.format as "markdown" | "html", read[0].header, read[0].each), (render) => [{ ...read[0], render }])
      )
      const counts = { sessions: sessions.length, events: sessions.reduce((n, t) => n + t.events, 0) }
      if (Option.isNone(o.out)) {
        if (o.json) return yield* new UsageError({ detail: "--json needs --out (the JSONL text is the output otherwise)" })
        for (const session of sessions) yield* streamJsonl(session, writeStdout)
        return { counts, written: false }
      }
      const path = yield* Path.Path
      const dir = o.out.value
      yield* writeOutputs(
        single ? undefined : dir,
        single
          ? [{ path: dir, session: sessions[0] }]
          : sessions.map((t) => ({ path: path.join(dir, `${encodeSessionId(t.id)}.jsonl`), session: t })),
        o.force
      )
      return { counts, written: true }
    }),
    ({ counts, written }) =>
      !written
        ? Effect.void
        : o.json
        ? printJson(counts)
        : Console.log(`${green("exported")} ${counts.sessions} session(s), ${counts.events} events`)
  )).pipe(Command.withDescription("write sessions as JSONL (format version 1)"))

// --- import ---------------------------------------------------------------------------------

const files = Args.text({ name: "file.jsonl" }).pipe(
  Args.withDescription("session log files (.jsonl) to import, each keeping the id of its header; with --from, transcripts (files or directories)"),
  Args.repeated
)

/** `import`; with `--from`, transcripts of another tool (ImportTranscripts.ts). */
export const importCommand = Command.make("import", { json, store, files, from, force: replace }, (o) =>
  Option.isSome(o.from)
    ? importTranscripts({ json: o.json, store: o.store, files: o.files, format: o.from.value, force: o.force })
    : o.force
    ? runCommand(o.json, new UsageError({ detail: "--force needs --from (an import of session logs never replaces)" }), () => Effect.void)
    : runCommand(
    o.json,
    Effect.gen(function*() {
      if (o.files.length === 0) return yield* new UsageError({ detail: "give one or more .jsonl files to import" })
      const spec = yield* resolveSpec(o.store)
      // all or nothing: every file is validated before the store is opened (or created)
      const items = yield* readImportFiles(
        o.files,
        (f) => o.json ? Effect.void : Console.error(`${red("rejected")} ${f}: nothing was imported`),
        o.json
      )
      const bar = progress("import", items.length)
      const counts = yield* importItems(
        spec,
        items,
        (sp) =>
          Effect.flatMap(openStore(sp, { mustExist: false }), ({ store: s }) =>
            s === undefined ? Effect.fail(new UsageError({ detail: `cannot open ${o.store}` })) : Effect.succeed(s)),
        bar.tick
      )
      yield* bar.done
      return counts
    }),
    (r) => o.json ? printJson(r) : Console.log(`${green("imported")} ${r.sessions} session(s), ${r.events} events`)
  )).pipe(Command.withDescription("read JSONL files into a store (all or nothing); with --from, Claude Code or Codex transcripts"))
