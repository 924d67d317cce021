/**
 * The commands that write to a session (docs/cli.md, SPEC §12): `repair`, `compact`, `prune`,
 * `fork` and `migrate`. A `.jsonl` path is exactly that file; a command with nothing to do, or
 * one that is refused, writes nothing (not even the closers and end-seed marker of an open).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SessionExists, SessionNotFound } from "../../schema/Errors.js"
import { SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import { make as makeMemoryStore } from "../../layers/memory/MemoryStore.js"
import * as SessionLive from "../../layers/session/SessionLive.js"
import { layerDeterministic as layerSummarizerDeterministic } from "../../layers/model/SummarizerLive.js"
import * as Fork from "../../services/Fork.js"
import { inspectLoaded } from "../../services/Resume.js"
import * as Session from "../../services/Session.js"
import { SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"
import * as Compact from "../compaction/Compact.js"
import * as Migrate from "../Migrate.js"
import * as PruneToolResults from "../compaction/PruneToolResults.js"
import {
  failOn,
  file,
  inspectSource,
  json,
  optionalInteger,
  resolve,
  resolveSpec,
  runCommand,
  runWritingCommand,
  session,
  store
} from "./CommandSupport.js"
import { bold, clip, dim, errorDocument, green, printJson, red, table, yellow } from "./Output.js"
import { storeWithProgress } from "./Progress.js"
import { eventTable } from "./Render.js"
import { fileTarget, openExistingStore, openStore, type SessionSource, UsageError } from "./Target.js"

/** The store and id a writing command acts on: a `.jsonl` path is exactly that file (Target.fileTarget). */
const storeOfSource = (src: SessionSource) => fileTarget(src)

/**
 * The store holding the session a writing command names, and the session's id. `readOnly` for
 * the decision whether there is anything to write: a SQLite file opened for writing is written
 * by the open alone (its WAL checkpointed and removed at close), so nothing to do must not open it so.
 */
const openSessionStore = (src: SessionSource, options: { readonly readOnly?: boolean } = {}) =>
  Effect.gen(function*() {
    const { id, spec } = yield* storeOfSource(src)
    const { store: s } = yield* openStore(spec, { mustExist: true, readOnly: options.readOnly === true })
    if (s === undefined) return yield* new SessionNotFound({ rule: "L11", sessionId: id, detail: "no such store" })
    return { id, store: s }
  })

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

/**
 * Open a session for a writing command and run `program` on it; returns the events it appended.
 * `interruptible` marks the trial run (no write yet) as the part a SIGINT may cut short, when
 * the command runs the rest uninterruptibly (`runWritingCommand`).
 */
const onOpenedSession = <E, R>(
  src: SessionSource,
  program: Effect.Effect<unknown, E, Session.Session | R>,
  interruptible: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z> = (effect) => effect
) =>
  Effect.gen(function*() {
    // nothing to do (or a rejection) writes nothing: not even the closers and end-seed of an open
    const { appended, id } = yield* interruptible(Effect.gen(function*() {
      const { id, store: read } = yield* openSessionStore(src, { readOnly: true })
      return { appended: yield* trialRun(read, id, program), id }
    }))
    if (appended === 0) return []
    const { store: s } = yield* openSessionStore(src)
    const handle = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, s))
    const before = (yield* handle.events).length
    yield* program.pipe(Effect.provideService(Session.Session, handle))
    yield* handle.flush
    return (yield* handle.events).slice(before)
  })

// --- repair ---------------------------------------------------------------------------------

const dryRun = Options.boolean("dry-run").pipe(Options.withDescription("print the closers without writing"))

/** `repair`. */
export const repairCommand = Command.make("repair", { json, store, session, file, dryRun }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const src = yield* resolve(o.file, o.session, o.store)
      if (o.dryRun) return (yield* inspectSource(src)).closers
      const { id, store: read } = yield* openSessionStore(src, { readOnly: true })
      // the read shows progress on a terminal (Progress.ts)
      const loaded = yield* storeWithProgress(read, "repair", o.json).load(id)
      // nothing to repair writes nothing (no end-seed marker either)
      const view = yield* inspectLoaded(loaded)
      if (view.closers.length === 0 && view.tornTail === undefined) return []
      const { store: s } = yield* openSessionStore(src)
      const before = loaded.events.length
      const handle = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, s))
      const events = yield* handle.events
      return events.slice(before).filter((e) => e.type !== "session/end-seed")
    }),
    (closers) =>
      o.json ? printJson(closers) : Console.log(
        closers.length === 0
          ? green("nothing to repair")
          : `${o.dryRun ? yellow("would append") : green("appended")}\n${eventTable(closers)}`
      )
  )).pipe(Command.withDescription("remove a torn tail and append crash closers (--dry-run prints them)"))

// --- compact --------------------------------------------------------------------------------

const retain = optionalInteger("retain", "<tokens>", "tokens at the end of the surface to keep out of the summary (default 0)")
const rangeStart = optionalInteger("start", "<seq>", "first surface seq of an explicit region to summarise (with --end)")
const rangeEnd = optionalInteger("end", "<seq>", "last surface seq of an explicit region to summarise (with --start)")

/** `compact`. */
export const compactCommand = Command.make("compact", { json, store, session, file, retain, start: rangeStart, end: rangeEnd }, (o) =>
  runWritingCommand(
    o.json,
    (interruptible) => Effect.gen(function*() {
      const src = yield* resolve(o.file, o.session, o.store)
      const region = Option.isSome(o.start) && Option.isSome(o.end) ? { start: o.start.value, end: o.end.value } : undefined
      if ((Option.isSome(o.start) || Option.isSome(o.end)) && region === undefined) {
        return yield* new UsageError({ detail: "an explicit region needs both --start and --end" })
      }
      const options: Compact.CompactOptions = {
        mode: "manual",
        ...(region === undefined ? { retainTokens: Option.getOrElse(o.retain, () => 0) } : { region })
      }
      // the compaction's write is not cut in half by a SIGINT: it lands and is reported
      return yield* onOpenedSession(src, Compact.compact(options), interruptible).pipe(
        Effect.provide(layerSummarizerDeterministic)
      )
    }),
    (events) => o.json ? printJson(events) : Console.log(eventTable(events))
  )).pipe(Command.withDescription("manual compaction with the deterministic summariser (between turns)"))

// --- prune ----------------------------------------------------------------------------------

const threshold = optionalInteger("threshold", "<chars>", "prune tool results longer than this many characters")
const head = optionalInteger("head", "<chars>", "characters kept at the head of a pruned result")
const tail = optionalInteger("tail", "<chars>", "characters kept at the tail of a pruned result")

/** `prune`. */
export const pruneCommand = Command.make("prune", { json, store, session, file, threshold, head, tail }, (o) =>
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
      o.json ? printJson(events) : Console.log(events.length === 0 ? green("nothing to prune") : eventTable(events))
  )).pipe(Command.withDescription("trim oversized tool results (head and tail kept, a marker between)"))

// --- fork -----------------------------------------------------------------------------------

const forkAt = optionalInteger("at", "<seq>", "the seq of the last event the child inherits, at a closed-turn boundary (default: the last event)")
const child = Options.text("child").pipe(
  Options.optional,
  Options.withPseudoName("<id>"),
  Options.withDescription("id of the child session (default: generated)")
)

/** `fork`. */
export const forkCommand = Command.make("fork", { json, store, session, file, at: forkAt, child }, (o) =>
  runWritingCommand(
    o.json,
    (interruptible) => Effect.gen(function*() {
      // the plan (M1–M9) reads only: a refused fork never opens the store for writing
      const { plan, src } = yield* interruptible(Effect.gen(function*() {
        const src = yield* resolve(o.file, o.session, o.store)
        const { id, store: read } = yield* openSessionStore(src, { readOnly: true })
        const plan = yield* Fork.planFork(id, {
          ...(Option.isSome(o.at) ? { at: o.at.value } : {}),
          ...(Option.isSome(o.child) ? { childId: o.child.value } : {})
        }).pipe(Effect.provideService(SessionStore, read))
        return { plan, src }
      }))
      // the child's write (M10, what SessionLive.fork does after its plan) is not cut in half by a
      // SIGINT: it lands and is reported (runWritingCommand)
      const { store: s } = yield* openSessionStore(src)
      const handle = yield* SessionLive.fromSeed({ header: plan.header, seed: plan.seed }).pipe(
        Effect.provideService(SessionStore, s),
        Effect.mapError((e) =>
          e instanceof SessionExists
            ? Fork.reject("M1", "SESSION_ALREADY_EXISTS", `a session "${String(plan.header.id)}" was created concurrently`)
            : e
        )
      )
      return handle.header
    }),
    (header) =>
      o.json ? printJson(header) : Console.log(
        `${green("forked")} ${header.parentSession} → ${bold(header.id)} (${header.seedLength} inherited events)`
      )
  )).pipe(Command.withDescription("start a child session from a closed-turn boundary (--at <seq>)"))

// --- migrate --------------------------------------------------------------------------------

const dropTornTail = Options.boolean("drop-torn-tail").pipe(
  Options.withDescription("accept dropping the complete lines of a torn tail (the original is kept as a backup)")
)

/**
 * The reports of a migration with nothing to do (every session of `id`, or of the store, is in
 * the current format), read without writing; `undefined` when a session needs an upgrade or
 * cannot be read (the migration itself then reports it).
 */
const currentOnly = (read: SessionStoreShape, id: string | undefined) =>
  Effect.gen(function*() {
    const ids = id === undefined ? (yield* read.list()).map((h) => h.id) : [id]
    for (const each of ids) {
      const loaded = yield* Effect.either(read.load(each))
      if (loaded._tag === "Left" || loaded.right.storedVersion !== SESSION_FORMAT_VERSION) return undefined
    }
    return ids.map((each): Migrate.MigrateReport => ({ id: each, status: "current" }))
  })

/** `migrate`. */
export const migrateCommand = Command.make("migrate", { json, store, session, file, dropTornTail }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const whole = Option.isNone(o.file) && Option.isNone(o.session)
      const target = whole
        ? { spec: yield* resolveSpec(o.store), id: undefined }
        : yield* Effect.flatMap(resolve(o.file, o.session, o.store), storeOfSource)
      // nothing to migrate writes nothing: every session already current is decided on a
      // read-only open (a SQLite store opened for writing is written by the open alone)
      // (the reads show progress on a terminal: Progress.ts)
      const current = yield* currentOnly(
        storeWithProgress(yield* openExistingStore(target.spec, { readOnly: true }), "migrate", o.json),
        target.id
      )
      if (current !== undefined) return current
      const s = storeWithProgress(yield* openExistingStore(target.spec), "migrate", o.json)
      const options = { dropTornTail: o.dropTornTail }
      const program = target.id === undefined
        ? Migrate.migrateStore(options)
        : Effect.map(Migrate.migrateSession(target.id, options), (r) => [r])
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
      Effect.zipRight(
        o.json ? printJson(reports) : Console.log(
          reports.length === 0 ? dim("no sessions") : table(
            ["ID", "STATUS", "DETAIL"],
            reports.map((r) => [
              r.id,
              r.status === "failed" ? red(r.status) : r.status === "upgraded" ? green(r.status) : r.status,
              r.error === undefined ? "" : `${r.error.rule ?? ""} ${r.error._tag}: ${clip(r.error.message, 70)}`
            ])
          )
        ),
        failOn(reports.flatMap((r) => (r.error === undefined ? [] : [r.error])))
      )
  )).pipe(Command.withDescription("upgrade v0 sessions to v1 (keeps the original as a backup)"))
