/**
 * `session-log export` and `import` (DESIGN.md §6, SPEC §12): sessions between any store and JSONL
 * files (format version 1). Export never overwrites without `--force` and removes what it created
 * when a write fails; import is all or nothing (`ImportFiles`).
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { OutputExists, StoreFailure } from "../../schema/Errors.js"
import { encodeSessionId } from "../../schema/SessionIdEncoding.js"
import { toJsonlText } from "../../layers/JsonlStore.js"
import { validateSeed } from "../../services/Seed.js"
import { readPipeline } from "../../services/SessionStore.js"
import { file, inspectSource, json, resolve, resolveSpec, runCommand, session, store, storedEvents } from "./CommandSupport.js"
import { importItems, readImportFiles } from "./ImportFiles.js"
import { green, printJson, progress, red } from "./Output.js"
import { checkOutputPath, openStore, storeNotFound, UsageError } from "./Target.js"

// --- export ---------------------------------------------------------------------------------

const out = Options.text("out").pipe(
  Options.optional,
  Options.withPseudoName("<path>"),
  Options.withDescription("the file to write (one session) or the directory (a whole store); default: JSONL on stdout")
)

const force = Options.boolean("force").pipe(Options.withDescription("overwrite existing output files"))

const isAlreadyExists = (e: PlatformError): boolean => e._tag === "SystemError" && e.reason === "AlreadyExists"

/**
 * Write export files. Existing files are refused unless `force` (`OutputExists`, nothing written);
 * when a write fails, the files and the directory this run created are removed again.
 */
const writeOutputs = (
  dir: string | undefined,
  targets: ReadonlyArray<{ readonly path: string; readonly text: string }>,
  force: boolean
) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const exists = (p: string) => fs.exists(p).pipe(Effect.orElseSucceed(() => false))
    yield* checkOutputPath(dir ?? targets[0].path, dir === undefined ? "file" : "directory")
    const existing: Array<string> = []
    for (const t of targets) if (yield* exists(t.path)) existing.push(t.path)
    if (!force && existing.length > 0) return yield* new OutputExists({ paths: existing })
    const dirCreated = dir !== undefined && !(yield* exists(dir))
    const created: Array<string> = []
    const write = Effect.gen(function*() {
      if (dir !== undefined) yield* fs.makeDirectory(dir, { recursive: true })
      for (const t of targets) {
        const fresh = !existing.includes(t.path)
        // `wx`: a file that appeared since the check is refused too, never overwritten
        yield* fs.writeFileString(t.path, t.text, { flag: fresh ? "wx" : "w" }).pipe(
          Effect.catchIf(isAlreadyExists, () => new OutputExists({ paths: [t.path] }))
        )
        if (fresh) created.push(t.path)
      }
    })
    const undo = Effect.gen(function*() {
      for (const p of created) yield* fs.remove(p)
      if (dirCreated && dir !== undefined && (yield* fs.readDirectory(dir)).length === 0) yield* fs.remove(dir)
    }).pipe(Effect.ignore)
    yield* write.pipe(
      Effect.tapError(() => undo),
      Effect.mapError((e) => e._tag === "OutputExists" ? e : new StoreFailure({ method: "export", cause: e }))
    )
  })

interface Exported {
  readonly id: string
  readonly text: string
  readonly events: number
}

/** The JSONL text of every session of a store (a whole-store export needs `--out <dir>`). */
const exportStore = (storeOpt: string, outOpt: Option.Option<string>) =>
  Effect.gen(function*() {
    const spec = yield* resolveSpec(storeOpt)
    const { store: s } = yield* openStore(spec, { mustExist: true })
    if (s === undefined) return yield* storeNotFound(storeOpt)
    if (Option.isNone(outOpt)) return yield* new UsageError({ detail: "exporting a whole store needs --out <dir>" })
    const headers = yield* s.list()
    const bar = progress("export", headers.length)
    const texts: Array<Exported> = []
    for (const h of headers) {
      const { events, header } = yield* readPipeline(yield* s.load(h.id))
      const valid = yield* validateSeed(events, { coldRead: true })
      texts.push({ id: h.id, text: toJsonlText(header, valid.events), events: valid.events.length })
      yield* bar.tick(texts.length)
    }
    yield* bar.done
    return texts
  })

/** `export`. */
export const exportCommand = Command.make("export", { json, store, session, file, out, force }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const single = Option.isSome(o.session) || Option.isSome(o.file)
      const texts: ReadonlyArray<Exported> = single
        ? yield* Effect.map(Effect.flatMap(resolve(o.file, o.session, o.store), inspectSource), (r) => {
          const events = storedEvents(r)
          return [{ id: r.header.id, text: toJsonlText({ ...r.header, version: 1 }, events), events: events.length }]
        })
        : yield* exportStore(o.store, o.out)
      if (Option.isNone(o.out)) {
        if (o.json) return yield* new UsageError({ detail: "--json needs --out (the JSONL text is the output otherwise)" })
        return { texts, written: false }
      }
      const path = yield* Path.Path
      const dir = o.out.value
      yield* writeOutputs(
        single ? undefined : dir,
        single
          ? [{ path: dir, text: texts[0].text }]
          : texts.map((t) => ({ path: path.join(dir, `${encodeSessionId(t.id)}.jsonl`), text: t.text })),
        o.force
      )
      return { texts, written: true }
    }),
    (r) =>
      !r.written
        ? Effect.sync(() => void process.stdout.write(r.texts.map((t) => t.text).join("")))
        : o.json
        ? printJson({ sessions: r.texts.length, events: r.texts.reduce((n, t) => n + t.events, 0) })
        : Console.log(`${green("exported")} ${r.texts.length} session(s), ${r.texts.reduce((n, t) => n + t.events, 0)} events`)
  )).pipe(Command.withDescription("write sessions as JSONL (format version 1)"))

// --- import ---------------------------------------------------------------------------------

const files = Args.text({ name: "file.jsonl" }).pipe(
  Args.withDescription("session log files (.jsonl) to import; each keeps the id of its header"),
  Args.repeated
)

/** `import`. */
export const importCommand = Command.make("import", { json, store, files }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      if (o.files.length === 0) return yield* new UsageError({ detail: "give one or more .jsonl files to import" })
      const spec = yield* resolveSpec(o.store)
      // all or nothing: every file is validated before the store is opened (or created)
      const items = yield* readImportFiles(
        o.files,
        (f) => o.json ? Effect.void : Console.error(`${red("rejected")} ${f}: nothing was imported`)
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
  )).pipe(Command.withDescription("read JSONL files into a store (all or nothing)"))
