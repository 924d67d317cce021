/**
 * The `session-log` commands (DESIGN.md §6, SPEC §12), a thin layer over the services and
 * programs. Each command prints one JSON document with `--json`, text for people otherwise, and
 * records its exit code: 0 ok, 1 invalid data, 2 unusable input or I/O failure.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as Options from "@effect/cli/Options"
import * as PlatformCommand from "@effect/platform/Command"
import type * as CommandExecutor from "@effect/platform/CommandExecutor"
import type { PlatformError } from "@effect/platform/Error"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { OutputExists, SessionExists, SessionNotFound, StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { Message } from "../../schema/Messages.js"
import { encodeSessionId } from "../../schema/SessionIdEncoding.js"
import { readJsonlFile, toJsonlText } from "../../layers/JsonlStore.js"
import { makeMemoryStore } from "../../layers/MemoryStore.js"
import { layerSummarizerDeterministic } from "../../layers/SummarizerLive.js"
import * as SessionLive from "../../layers/SessionLive.js"
import { requestAtLog } from "../../services/RequestAt.js"
import { type InspectResult, inspectLoaded } from "../../services/Resume.js"
import { validateSeed } from "../../services/Seed.js"
import * as Session from "../../services/Session.js"
import { readPipeline, SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"
import { foldSurface } from "../../services/SurfaceManager.js"
import * as Demo from "./Demo.js"
import * as Compact from "../Compact.js"
import * as Migrate from "../Migrate.js"
import * as PruneToolResults from "../PruneToolResults.js"
import { verifyLoaded, type VerifyReport, verifySession } from "../Verify.js"
import { importItems, readImportFiles } from "./ImportFiles.js"
import {
  bold,
  clip,
  describeError,
  dim,
  errorDocument,
  exitCodeFor,
  formatTime,
  green,
  printJson,
  progress,
  red,
  table,
  yellow
} from "./Output.js"
import {
  loadSource,
  openExistingStore,
  openStore,
  parseStoreSpec,
  type SessionSource,
  sessionSource,
  type StoreSpec,
  storeNotFound,
  UsageError
} from "./Target.js"

/** The process exit code the last command asked for. */
export const exitState = { code: 0 }

const setExit = (code: number) => Effect.sync(() => void (exitState.code = Math.max(exitState.code, code)))

type Platform = FileSystem.FileSystem | Path.Path | CommandExecutor.CommandExecutor
type Env = Platform | Scope.Scope

/** Run a command body; on failure print the error document (or explanation) and set the exit code. */
const runCommand = <A, E extends { readonly _tag: string }>(
  json: boolean,
  body: Effect.Effect<A, E, Env>,
  render: (a: A) => Effect.Effect<void>
): Effect.Effect<void, never, Platform> =>
  Effect.scoped(body).pipe(
    Effect.matchEffect({
      onSuccess: render,
      onFailure: (e) =>
        Effect.zipRight(
          json ? printJson(errorDocument(e)) : Console.error(describeError(e)),
          setExit(exitCodeFor(e))
        )
    })
  )

const fail = <E>(e: E) => Effect.fail(e)

// --- shared options -------------------------------------------------------------------------

const json = Options.boolean("json").pipe(Options.withDescription("print one JSON document on stdout"))
const store = Options.text("store").pipe(
  Options.withDefault("./sessions.db"),
  Options.withDescription("a SQLite file (*.db, *.sqlite) or jsonl:<dir>")
)
const session = Options.text("session").pipe(Options.optional, Options.withDescription("session id in --store"))
const file = Args.text({ name: "file.jsonl" }).pipe(Args.optional)
const at = Options.integer("at").pipe(Options.optional, Options.withDescription("event seq"))

const resolve = (fileArg: Option.Option<string>, sessionOpt: Option.Option<string>, storeOpt: string) => {
  const src = sessionSource(fileArg, sessionOpt, storeOpt)
  return src instanceof UsageError ? fail(src) : Effect.succeed(src)
}

const resolveSpec = (storeOpt: string) => {
  const spec = parseStoreSpec(storeOpt)
  return spec instanceof UsageError ? fail(spec) : Effect.succeed(spec)
}

/** Cold read + read pipeline + validation + repair view (nothing written). */
const inspectSource = (src: SessionSource) => Effect.flatMap(loadSource(src), inspectLoaded)

/** The stored events of an inspection (closers excluded). */
const storedEvents = (r: InspectResult): ReadonlyArray<Event> => r.events.slice(0, r.events.length - r.closers.length)

const textOf = (m: { readonly content: ReadonlyArray<unknown> }): string =>
  m.content.map((b) => {
    const block = b as Record<string, unknown>
    switch (block.type) {
      case "text":
      case "reasoning":
        return String(block.text)
      case "tool-call":
        return `→ ${String(block.name)}(${String(block.arguments)})`
      case "tool-result":
        return `← ${textOf({ content: (block.content as ReadonlyArray<unknown>) ?? [] })}`
      default:
        return `[${String(block.type)}]`
    }
  }).join(" ")

const surfaceLabel = (e: Event): string =>
  e.surfaceOp === undefined ? "" : e.surfaceOp === "append" ? "append" : `replace ${e.surfaceOp.start}..${e.surfaceOp.end}`

const summary = (e: Event): string => {
  const d = e.data as Record<string, unknown> | null
  if (d === null || typeof d !== "object") return ""
  switch (e.type) {
    case "user/message":
    case "context/message":
      return textOf(d as unknown as Message)
    case "assistant/message":
    case "tool/result":
      return textOf(d.message as Message)
    case "assistant/chunk": {
      const c = d.chunk as Record<string, unknown>
      return `${String(c.type)} ${c.text === undefined ? "" : JSON.stringify(c.text)}`
    }
    case "turn/start":
    case "step/start":
    case "step/end":
      return `turn ${String(d.turn)}${d.step === undefined ? "" : ` step ${String(d.step)}`}`
    case "turn/end":
      return `turn ${String(d.turn)} ${String((d.reason as Record<string, unknown>)?.kind)}`
    case "tool/call":
      return `${String(d.name)} ${String(d.callId)}`
    case "request/header": {
      const cfg = ((d.header as Record<string, unknown>)?.config ?? {}) as Record<string, unknown>
      return `${String(d.reason)} ${String(cfg.provider)}/${String(cfg.model)}`
    }
    default:
      return ""
  }
}

const eventRows = (events: ReadonlyArray<Event>) =>
  events.map((e) => [String(e.seq), formatTime(e.time), e.type, surfaceLabel(e), clip(summary(e))])

const messageRows = (messages: ReadonlyArray<Message>) => messages.map((m) => [m.role, m.id, clip(textOf(m), 80)])

// --- commands -------------------------------------------------------------------------------

const listCommand = Command.make("list", { json, store }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const spec = yield* resolveSpec(o.store)
      // a store that does not exist is not found (exit 2), never "no sessions", and is not created
      const s = yield* openExistingStore(spec)
      const headers = yield* s.list()
      return yield* Effect.forEach(headers, (h) =>
        s.load(h.id).pipe(
          Effect.map((l) => ({ ...h, events: l.events.length })),
          Effect.orElseSucceed(() => ({ ...h, events: null }))
        ))
    }),
    (rows) =>
      o.json ? printJson(rows) : Console.log(
        rows.length === 0 ? dim("no sessions") : table(
          ["ID", "CREATED", "EVENTS"],
          rows.map((r) => [r.id, formatTime(r.createdAt), String(r.events ?? "?")])
        )
      )
  )).pipe(Command.withDescription("sessions in a store"))

const showCommand = Command.make("show", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.flatMap(resolve(o.file, o.session, o.store), inspectSource),
    (r) => o.json ? printJson(storedEvents(r)) : Console.log(table(["SEQ", "TIME", "TYPE", "SURFACE", "SUMMARY"], eventRows(storedEvents(r))))
  )).pipe(Command.withDescription("events, one line each"))

const renderVerify = (jsonOut: boolean, report: VerifyReport, label: string) =>
  Effect.zipRight(
    jsonOut ? printJson(report) : Console.log(
      report.ok
        ? `${green("valid")} ${label}: ${report.events} events, ${report.surface.length} surface nodes`
        : `${red("invalid")} ${label}\n  ${describeError(report.error as unknown as { _tag: string })}`
    ),
    setExit(report.ok ? 0 : exitCodeFor(report.error))
  )

const verifyCommand = Command.make("verify", { json, store, session, file }, (o) =>
  Effect.gen(function*() {
    if (Option.isNone(o.file) && Option.isNone(o.session)) {
      // a whole store
      return yield* runCommand(
        o.json,
        Effect.gen(function*() {
          const spec = yield* resolveSpec(o.store)
          const { store: s } = yield* openStore(spec, { mustExist: true })
          if (s === undefined) return yield* storeNotFound(o.store)
          const headers = yield* s.list()
          // JSONL: also the session files whose header cannot be read (`list` skips them)
          const listed = new Set(headers.map((h) => `${encodeSessionId(h.id)}.jsonl`))
          const unlisted = spec.kind === "jsonl"
            ? (yield* (yield* FileSystem.FileSystem).readDirectory(spec.root)).filter((name) =>
              name.endsWith(".jsonl") && !name.startsWith(".") && !listed.has(name)
            ).sort()
            : []
          const bar = progress("verify", headers.length + unlisted.length)
          const reports: Array<VerifyReport & { id: string }> = []
          for (const h of headers) {
            reports.push({ id: h.id, ...(yield* verifySession(h.id).pipe(Effect.provideService(SessionStore, s))) })
            yield* bar.tick(reports.length)
          }
          for (const name of unlisted) {
            const path = (yield* Path.Path).join(spec.kind === "jsonl" ? spec.root : "", name)
            const report = yield* readJsonlFile(path).pipe(
              Effect.matchEffect({
                onFailure: (e) => Effect.succeed({ ok: false as const, error: errorDocument(e).error }),
                onSuccess: verifyLoaded
              })
            )
            reports.push({ id: name, ...report })
            yield* bar.tick(reports.length)
          }
          yield* bar.done
          return reports
        }),
        (reports) =>
          Effect.gen(function*() {
            if (o.json) yield* printJson(reports)
            else {
              for (const r of reports) yield* renderVerify(false, r, r.id)
              if (reports.length === 0) yield* Console.log(dim("no sessions"))
            }
            for (const r of reports) if (!r.ok) yield* setExit(exitCodeFor(r.error))
          })
      )
    }
    return yield* runCommand(
      o.json,
      Effect.gen(function*() {
        const src = yield* resolve(o.file, o.session, o.store)
        const loaded = yield* loadSource(src).pipe(Effect.either)
        if (loaded._tag === "Left") return { ok: false as const, error: errorDocument(loaded.left).error }
        return yield* verifyLoaded(loaded.right)
      }),
      (report) => renderVerify(o.json, report, Option.getOrElse(o.file, () => Option.getOrElse(o.session, () => "")))
    )
  })).pipe(Command.withDescription("validate a session, a file or a whole store (exit 0 valid, 1 invalid, 2 unreadable)"))

const messagesCommand = Command.make("messages", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const r = yield* Effect.flatMap(resolve(o.file, o.session, o.store), inspectSource)
      const events = storedEvents(r)
      const last = requestAtLog(events, events.length - 1)
      return "messages" in last ? last.messages : []
    }),
    (messages) => o.json ? printJson(messages) : Console.log(table(["ROLE", "ID", "CONTENT"], messageRows(messages)))
  )).pipe(Command.withDescription("derived model messages"))

const transcriptCommand = Command.make("transcript", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const r = yield* Effect.flatMap(resolve(o.file, o.session, o.store), inspectSource)
      return storedEvents(r).filter((e) => e.surfaceOp === "append")
    }),
    (events) =>
      o.json ? printJson(events) : Console.log(table(["SEQ", "TYPE", "CONTENT"], events.map((e) => [String(e.seq), e.type, clip(summary(e), 80)])))
  )).pipe(Command.withDescription("human transcript (append-origin events, replacements not applied)"))

const surfaceCommand = Command.make("surface", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const r = yield* Effect.flatMap(resolve(o.file, o.session, o.store), inspectSource)
      const fold = foldSurface(storedEvents(r))
      return "nodes" in fold ? fold : { nodes: [], replacements: [] }
    }),
    (fold) =>
      o.json ? printJson(fold) : Console.log(
        `${bold("surface")} ${fold.nodes.join(", ") || dim("(empty)")}\n` + (fold.replacements.length === 0
          ? dim("no replacements")
          : table(
            ["SEQ", "RANGE", "SHADOWED"],
            fold.replacements.map((x) => [String(x.seq), `${x.start}..${x.end}`, x.shadowedSeqs.join(", ")])
          ))
      )
  )).pipe(Command.withDescription("surface nodes and replacement history"))

const requestCommand = Command.make("request", { json, store, session, file, at }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const r = yield* Effect.flatMap(resolve(o.file, o.session, o.store), inspectSource)
      const events = storedEvents(r)
      const seq = Option.getOrElse(o.at, () => events.length - 1)
      const snap = requestAtLog(events, seq)
      // the log itself was validated above: an L10 here is a seq that is not in it (exit 2)
      if ("_tag" in snap) return yield* snap
      return { seq, header: snap.header ?? null, messages: snap.messages }
    }),
    (req) =>
      o.json ? printJson({ header: req.header, messages: req.messages }) : Console.log(
        `${bold(`request at seq ${req.seq}`)}\n` +
          (req.header === null
            ? dim("no request header")
            : `${req.header.config.provider}/${req.header.config.model}` +
              (req.header.system === undefined ? "" : `\nsystem: ${clip(req.header.system, 100)}`) +
              (req.header.tools === undefined ? "" : `\ntools: ${req.header.tools.map((t) => t.name).join(", ")}`)) +
          `\n${table(["ROLE", "ID", "CONTENT"], messageRows(req.messages))}`
      )
  )).pipe(Command.withDescription("the exact request in force at --at <seq> (header + messages)"))

const dryRun = Options.boolean("dry-run").pipe(Options.withDescription("print the closers without writing"))

/** Open a file source as a session of the JSONL store of its directory. */
const storeOfSource = (src: SessionSource) =>
  Effect.gen(function*() {
    if (src.kind === "store") return { spec: src.spec, id: src.id }
    const path = yield* Path.Path
    const loaded = yield* readJsonlFile(src.path)
    return { spec: { kind: "jsonl", root: path.dirname(src.path) } as StoreSpec, id: loaded.header.id }
  })

const repairCommand = Command.make("repair", { json, store, session, file, dryRun }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const src = yield* resolve(o.file, o.session, o.store)
      if (o.dryRun) return (yield* inspectSource(src)).closers
      const { id, spec } = yield* storeOfSource(src)
      const { store: s } = yield* openStore(spec, { mustExist: true })
      if (s === undefined) return yield* new SessionNotFound({ rule: "L11", sessionId: id, detail: "no such store" })
      const loaded = yield* s.load(id)
      // nothing to repair writes nothing (no end-seed marker either)
      const view = yield* inspectLoaded(loaded)
      if (view.closers.length === 0 && view.tornTail === undefined) return []
      const before = loaded.events.length
      const handle = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, s))
      const events = yield* handle.events
      return events.slice(before).filter((e) => e.type !== "session/end-seed")
    }),
    (closers) =>
      o.json
        ? printJson(closers)
        : Console.log(
          closers.length === 0
            ? green("nothing to repair")
            : `${o.dryRun ? yellow("would append") : green("appended")}\n${
              table(["SEQ", "TIME", "TYPE", "SURFACE", "SUMMARY"], eventRows(closers))
            }`
        )
  )).pipe(Command.withDescription("append crash closers (--dry-run prints them)"))

const out = Options.text("out").pipe(Options.optional, Options.withDescription("output file (or directory for a store)"))

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

const exportCommand = Command.make("export", { json, store, session, file, out, force }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const path = yield* Path.Path
      const texts: Array<{ id: string; text: string; events: number }> = []
      if (Option.isNone(o.session) && Option.isNone(o.file)) {
        const spec = yield* resolveSpec(o.store)
        const { store: s } = yield* openStore(spec, { mustExist: true })
        if (s === undefined) return yield* storeNotFound(o.store)
        if (Option.isNone(o.out)) return yield* new UsageError({ detail: "exporting a whole store needs --out <dir>" })
        const headers = yield* s.list()
        const bar = progress("export", headers.length)
        for (const h of headers) {
          const loaded = yield* s.load(h.id)
          const { events, header } = yield* readPipeline(loaded)
          const valid = yield* validateSeed(events, { coldRead: true })
          texts.push({ id: h.id, text: toJsonlText(header, valid.events), events: valid.events.length })
          yield* bar.tick(texts.length)
        }
        yield* bar.done
      } else {
        const src = yield* resolve(o.file, o.session, o.store)
        const r = yield* inspectSource(src)
        const events = storedEvents(r)
        texts.push({ id: r.header.id, text: toJsonlText({ ...r.header, version: 1 }, events), events: events.length })
      }
      if (Option.isNone(o.out)) {
        if (o.json) return yield* new UsageError({ detail: "--json needs --out (the JSONL text is the output otherwise)" })
        return { texts, written: false }
      }
      const single = Option.isSome(o.session) || Option.isSome(o.file)
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

const files = Args.text({ name: "file.jsonl" }).pipe(Args.repeated)

const importCommand = Command.make("import", { json, store, files }, (o) =>
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
            s === undefined ? fail(new UsageError({ detail: `cannot open ${o.store}` })) : Effect.succeed(s)),
        bar.tick
      )
      yield* bar.done
      return counts
    }),
    (r) => o.json ? printJson(r) : Console.log(`${green("imported")} ${r.sessions} session(s), ${r.events} events`)
  )).pipe(Command.withDescription("read JSONL files into a store (all or nothing)"))

/**
 * Run `program` on an in-memory copy of a stored session (the log `Session.open` would build:
 * stored events, repair closers, end-seed marker) and count the events it appends: a command
 * with nothing to do then writes nothing at all.
 */
const trialRun = <E, R>(
  store: SessionStoreShape,
  id: string,
  program: Effect.Effect<unknown, E, Session.Session | R>
) =>
  Effect.scoped(Effect.gen(function*() {
    const view = yield* Effect.flatMap(store.load(id), inspectLoaded)
    const handle = yield* SessionLive.fromSeed({ header: view.header, seed: view.events }).pipe(
      Effect.provideServiceEffect(SessionStore, makeMemoryStore())
    )
    const before = (yield* handle.events).length
    yield* program.pipe(Effect.provideService(Session.Session, handle))
    yield* handle.flush
    return (yield* handle.events).length - before
  }))

/** Open a session for a writing command and run `program` on it; returns the events it appended. */
const onOpenedSession = <E, R>(
  src: SessionSource,
  program: Effect.Effect<unknown, E, Session.Session | R>
) =>
  Effect.gen(function*() {
    const { id, spec } = yield* storeOfSource(src)
    const { store: s } = yield* openStore(spec, { mustExist: true })
    if (s === undefined) return yield* new SessionNotFound({ rule: "L11", sessionId: id, detail: "no such store" })
    // nothing to do (or a rejection) writes nothing: not even the closers and end-seed of an open
    if ((yield* trialRun(s, id, program)) === 0) return []
    const handle = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, s))
    const before = (yield* handle.events).length
    yield* program.pipe(Effect.provideService(Session.Session, handle))
    yield* handle.flush
    return (yield* handle.events).slice(before)
  })

const retain = Options.integer("retain").pipe(Options.optional, Options.withDescription("tokens of the tail to keep"))
const rangeStart = Options.integer("start").pipe(Options.optional, Options.withDescription("first surface seq of an explicit region"))
const rangeEnd = Options.integer("end").pipe(Options.optional, Options.withDescription("last surface seq of an explicit region"))

const compactCommand = Command.make("compact", { json, store, session, file, retain, start: rangeStart, end: rangeEnd }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const src = yield* resolve(o.file, o.session, o.store)
      const region = Option.isSome(o.start) && Option.isSome(o.end) ? { start: o.start.value, end: o.end.value } : undefined
      if ((Option.isSome(o.start) || Option.isSome(o.end)) && region === undefined) {
        return yield* new UsageError({ detail: "an explicit region needs both --start and --end" })
      }
      const options: Compact.CompactOptions = {
        mode: "manual",
        ...(region === undefined ? { retainTokens: Option.getOrElse(o.retain, () => 0) } : { region })
      }
      return yield* onOpenedSession(src, Compact.compact(options)).pipe(Effect.provide(layerSummarizerDeterministic))
    }),
    (events) =>
      o.json ? printJson(events) : Console.log(table(["SEQ", "TIME", "TYPE", "SURFACE", "SUMMARY"], eventRows(events)))
  )).pipe(Command.withDescription("manual compaction with the deterministic summariser (between turns)"))

const threshold = Options.integer("threshold").pipe(Options.optional, Options.withDescription("prune results above this many characters"))
const head = Options.integer("head").pipe(Options.optional, Options.withDescription("characters kept at the head"))
const tail = Options.integer("tail").pipe(Options.optional, Options.withDescription("characters kept at the tail"))

const pruneCommand = Command.make("prune", { json, store, session, file, threshold, head, tail }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const src = yield* resolve(o.file, o.session, o.store)
      const config = {
        ...(Option.isSome(o.threshold) ? { thresholdChars: o.threshold.value } : {}),
        ...(Option.isSome(o.head) ? { headChars: o.head.value } : {}),
        ...(Option.isSome(o.tail) ? { tailChars: o.tail.value } : {})
      }
      return yield* onOpenedSession(src, PruneToolResults.pruneToolResults({ config }))
    }),
    (events) =>
      o.json ? printJson(events) : Console.log(
        events.length === 0
          ? green("nothing to prune")
          : table(["SEQ", "TIME", "TYPE", "SURFACE", "SUMMARY"], eventRows(events))
      )
  )).pipe(Command.withDescription("trim oversized tool results (head and tail kept, a marker between)"))

const child = Options.text("child").pipe(Options.optional, Options.withDescription("id of the child session (default: generated)"))

const forkCommand = Command.make("fork", { json, store, session, file, at, child }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const src = yield* resolve(o.file, o.session, o.store)
      const { id, spec } = yield* storeOfSource(src)
      const { store: s } = yield* openStore(spec, { mustExist: true })
      if (s === undefined) return yield* new SessionNotFound({ rule: "L11", sessionId: id, detail: "no such store" })
      const handle = yield* SessionLive.fork(id, {
        ...(Option.isSome(o.at) ? { at: o.at.value } : {}),
        ...(Option.isSome(o.child) ? { childId: o.child.value } : {})
      }).pipe(Effect.provideService(SessionStore, s))
      return handle.header
    }),
    (header) =>
      o.json ? printJson(header) : Console.log(
        `${green("forked")} ${header.parentSession} → ${bold(header.id)} (${header.seedLength} inherited events)`
      )
  )).pipe(Command.withDescription("start a child session from a closed-turn boundary (--at <seq>)"))

const migrateCommand = Command.make("migrate", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const whole = Option.isNone(o.file) && Option.isNone(o.session)
      const target = whole
        ? { spec: yield* resolveSpec(o.store), id: undefined }
        : yield* Effect.flatMap(resolve(o.file, o.session, o.store), storeOfSource)
      const s = yield* openExistingStore(target.spec)
      const program = target.id === undefined ? Migrate.migrateStore() : Effect.map(Migrate.migrateSession(target.id), (r) => [r])
      // an upgraded JSONL file keeps its permission bits (the store's replaceLog keeps them)
      return yield* program.pipe(Effect.provideService(SessionStore, s))
    }).pipe(
      // the report array in every case (DESIGN §6): a refusal before any session could be migrated
      // (a file refused at read time, a missing store) is one failed entry, the way Migrate reports
      // a failed session; it names the file as given, the --session id or the store
      Effect.catchAll((e) =>
        Effect.succeed<ReadonlyArray<Migrate.MigrateReport>>([{
          id: Option.getOrElse(o.file, () => Option.getOrElse(o.session, () => o.store)),
          status: "failed",
          error: errorDocument(e).error
        }])
      )
    ),
    (reports) =>
      Effect.gen(function*() {
        if (o.json) yield* printJson(reports)
        else {
          yield* Console.log(
            reports.length === 0 ? dim("no sessions") : table(
              ["ID", "STATUS", "DETAIL"],
              reports.map((r) => [
                r.id,
                r.status === "failed" ? red(r.status) : r.status === "upgraded" ? green(r.status) : r.status,
                r.error === undefined ? "" : `${r.error.rule ?? ""} ${r.error._tag}: ${clip(r.error.message, 70)}`
              ])
            )
          )
        }
        for (const r of reports) if (r.error !== undefined) yield* setExit(exitCodeFor(r.error))
      })
  )).pipe(Command.withDescription("upgrade v0 sessions to v1 (keeps the original as a backup)"))

// --- demo -----------------------------------------------------------------------------------

const DEMO_ID = "demo-session"
const DEMO_ID_ATTEMPTS = 1000
const demoStore = Options.text("store").pipe(
  Options.withDefault("./.demo/demo.db"),
  Options.withDescription("where the demo adds its session: a SQLite file (*.db, *.sqlite) or jsonl:<dir>")
)

/**
 * Create the demo's session under the first free id of `demo-session`, `demo-session-2`, …: the
 * store refuses an id that is stored (or a file of that name), so nothing existing is touched.
 */
const createDemoSession = (store: SessionStoreShape) =>
  Effect.gen(function*() {
    for (let n = 1; n <= DEMO_ID_ATTEMPTS; n++) {
      const id = n === 1 ? DEMO_ID : `${DEMO_ID}-${n}`
      const created = yield* SessionLive.create({ id }).pipe(
        Effect.provideService(SessionStore, store),
        Effect.map(Option.some),
        Effect.catchTag("SessionExists", () => Effect.succeed(Option.none()))
      )
      if (Option.isSome(created)) return created.value
    }
    return yield* new SessionExists({ rule: "J14", sessionId: `${DEMO_ID}-${DEMO_ID_ATTEMPTS}` })
  })

/** The child half of the demo: reopen the session and die inside a tool body (SIGKILL). */
const demoCrashCommand = Command.make("demo-crash", {
  store: demoStore,
  session: Options.text("session").pipe(Options.withDefault(DEMO_ID))
}, (o) =>
  runCommand(
    false,
    Effect.gen(function*() {
      const spec = yield* resolveSpec(o.store)
      const { store: s } = yield* openStore(spec, { mustExist: true })
      if (s === undefined) return yield* new UsageError({ detail: "run the demo first" })
      const handle = yield* SessionLive.open(o.session).pipe(Effect.provideService(SessionStore, s))
      const kill = Effect.sync(() => process.kill(process.pid, "SIGKILL")).pipe(Effect.zipRight(Effect.never))
      return yield* Demo.makeLoop().runTurn([{ type: "user", content: Demo.prompts.crash }]).pipe(
        Effect.provideService(Session.Session, handle),
        Effect.provide(Demo.environment(Demo.crashScripts, kill, "b"))
      )
    }),
    () => Effect.void
  ))

const demoCommand = Command.make("demo", { json, store: demoStore }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const spec = yield* resolveSpec(o.store)
      const location = spec.kind === "sqlite" ? spec.filename : spec.root
      // the demo adds a new session to the store (created if missing); it never deletes or rewrites
      yield* fs.makeDirectory(path.dirname(location), { recursive: true })
      const say = (line: string) => (o.json ? Effect.void : Console.log(line))

      yield* say(bold("1. A scripted agent (AgentLoop over a keyless LanguageModel) works through two turns with tool calls"))
      yield* say(dim("   automatic pruning and compaction run in the pre-step hook when the request grows too large"))
      const { first, id } = yield* Effect.scoped(Effect.gen(function*() {
        const { store: s } = yield* openStore(spec, { mustExist: false })
        const handle = yield* createDemoSession(s!)
        const loop = Demo.makeLoop()
        yield* Effect.forEach(Demo.prompts.first, (prompt) => loop.runTurn([{ type: "user", content: prompt }]), {
          discard: true
        }).pipe(
          Effect.provideService(Session.Session, handle),
          Effect.provide(Demo.environment(Demo.firstScripts, Effect.never, "a"))
        )
        return { first: (yield* handle.events).length, id: handle.id }
      }))
      yield* say(dim(`   ${first} events written`))

      yield* say(bold("2. A child process reopens the session and is killed (SIGKILL) inside a tool call"))
      const script = process.argv[1]
      const child = PlatformCommand.make(process.execPath, script, "demo-crash", "--store", o.store, "--session", id)
      const code = yield* PlatformCommand.exitCode(child).pipe(Effect.orElseSucceed(() => -1))
      yield* say(dim(`   child exited with ${code === 137 || code === -1 ? "SIGKILL" : `code ${code}`}`))

      yield* say(bold("3. Reopening repairs the interrupted turn with explicit closers"))
      return yield* Effect.scoped(Effect.gen(function*() {
        const { store: s } = yield* openStore(spec, { mustExist: true })
        const store = s!
        const before = (yield* store.load(id)).events.length
        const handle = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, store))
        const afterOpen = yield* handle.events
        const closers = afterOpen.slice(before).filter((e) => e.type !== "session/end-seed")
        yield* say(bold("4. A new loop instance continues: its first request carries a resume header"))
        yield* Demo.makeLoop().runTurn([{ type: "user", content: Demo.prompts.resume }]).pipe(
          Effect.provideService(Session.Session, handle),
          Effect.provide(Demo.environment(Demo.resumeScripts, Effect.never, "c"))
        )
        const events = yield* handle.events
        const fold = foldSurface(events)
        const last = yield* handle.requestAt(events.length - 1)
        return {
          sessionId: id,
          store: o.store,
          events: events.length,
          turns: events.filter((e) => e.type === "turn/start").length,
          compactions: events.filter((e) => e.type === "compaction/summary").map((e) => e.seq),
          prunes: events.filter((e) => e.type === "compaction/prune").map((e) => e.seq),
          crash: { childExitCode: code, closers },
          transcript: yield* handle.transcript,
          surface: "nodes" in fold ? fold : { nodes: [], replacements: [] },
          lastRequest: { seq: events.length - 1, header: last.header ?? null, messages: last.messages }
        }
      }))
    }),
    (r) =>
      o.json ? printJson(r) : Console.log([
        `   ${r.prunes.length} prune(s) at seq ${r.prunes.join(", ")}; ${r.compactions.length} compaction(s) at seq ${
          r.compactions.join(", ")
        }`,
        "",
        bold("Closers written by repair"),
        table(["SEQ", "TIME", "TYPE", "SURFACE", "SUMMARY"], eventRows(r.crash.closers)),
        "",
        bold("Human transcript (append-origin events; replacements do not erase what was seen)"),
        table(["SEQ", "TYPE", "CONTENT"], r.transcript.map((e) => [String(e.seq), e.type, clip(summary(e), 80)])),
        "",
        bold("Surface") + ` ${r.surface.nodes.join(", ")}`,
        table(
          ["REPLACED BY", "RANGE", "SHADOWED"],
          r.surface.replacements.map((x) => [String(x.seq), `${x.start}..${x.end}`, x.shadowedSeqs.join(", ")])
        ),
        "",
        bold(`Last request (seq ${r.lastRequest.seq}), rebuilt from the log`),
        r.lastRequest.header === null ? "" : `${r.lastRequest.header.config.provider}/${r.lastRequest.header.config.model}, tools: ${
          (r.lastRequest.header.tools ?? []).map((t) => t.name).join(", ")
        }`,
        table(["ROLE", "ID", "CONTENT"], messageRows(r.lastRequest.messages)),
        "",
        `${green("done")}: ${r.events} events in ${r.store}; try \`npx session-log show --store ${r.store} --session ${r.sessionId}\``
      ].join("\n"))
  )).pipe(Command.withDescription("the scripted keyless agent demo (what npm start runs)"))

/** The root command. */
export const root = Command.make("session-log").pipe(
  Command.withDescription("inspect, verify and repair effect-session-log sessions"),
  Command.withSubcommands([
    demoCommand,
    demoCrashCommand,
    listCommand,
    showCommand,
    verifyCommand,
    messagesCommand,
    transcriptCommand,
    surfaceCommand,
    requestCommand,
    repairCommand,
    exportCommand,
    importCommand,
    migrateCommand,
    compactCommand,
    pruneCommand,
    forkCommand
  ])
)

/** The CLI application. */
export const cli = Command.run(root, { name: "session-log", version: "0.1.0" })

/** Whether the command line asks for `--json` (before a `--` that ends the options). */
const wantsJson = (argv: ReadonlyArray<string>): boolean => {
  const args = argv.slice(2)
  const end = args.indexOf("--")
  return (end < 0 ? args : args.slice(0, end)).includes("--json")
}

// eslint-disable-next-line no-control-regex
const plain = (s: string): string => s.replace(/\u001b\[[0-9;]*m/g, "").replace(/\s+/g, " ").trim()

/**
 * Run the CLI on `argv` (exit code in `exitState`). An argument error @effect/cli rejects (a
 * mistyped option, a missing or bad value, an unknown command) is exit 2: with `--json` it is one
 * `UsageError` document on stdout and @effect/cli's own text is not printed; without `--json`
 * people get @effect/cli's explanation on stderr.
 */
export const main = (argv: ReadonlyArray<string>) => {
  const jsonOut = wantsJson(argv)
  const run = jsonOut
    // with --json only the commands' own output remains: @effect/cli prints its argument errors
    // with Console.error, which the commands never use in --json mode (logs go to the logger)
    ? Effect.consoleWith((c) => Console.withConsole(cli(argv), { ...c, error: () => Effect.void }))
    : cli(argv)
  return run.pipe(
    Effect.catchAll((e) =>
      Effect.zipRight(
        jsonOut ? printJson(errorDocument(new UsageError({ detail: plain(HelpDoc.toAnsiText(e.error)) }))) : Effect.void,
        setExit(2)
      )
    )
  )
}
