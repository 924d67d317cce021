/**
 * `session-log demo` (what `npm start` runs) and its internal child command `demo-crash`: the
 * scripted keyless agent of `Demo.ts` works through turns, a child process is killed inside a tool
 * call, and the reopened session is repaired and continued. The demo only ever adds a session of
 * its own (`demo-session`, then `demo-session-2`, …) to the store it is given.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as PlatformCommand from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { SessionExists } from "../../schema/Errors.js"
import * as SessionLive from "../../layers/session/SessionLive.js"
import * as Session from "../../services/Session.js"
import { SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"
import { foldSurface } from "../../services/SurfaceManager.js"
import { json, resolveSpec, runCommand } from "./CommandSupport.js"
import * as Demo from "./Demo.js"
import { bold, dim, green, printJson } from "./Output.js"
import { eventTable, messageTable, replacementTable, transcriptTable } from "./Render.js"
import { openStore, type StoreSpec, UsageError } from "./Target.js"

const DEMO_ID = "demo-session"
const DEMO_ID_ATTEMPTS = 1000

const demoStore = Options.text("store").pipe(
  Options.withDefault("./.demo/demo.db"),
  Options.withPseudoName("<store>"),
  Options.withDescription(
    "where the demo adds its session: a SQLite file (*.db, *.sqlite), jsonl:<dir>, jsonlz:<dir> or a postgres:// URL (default ./.demo/demo.db)"
  )
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

/** The child half of the demo: reopen the session and die inside a tool body (SIGKILL). Not in help. */
export const demoCrashCommand = Command.make("demo-crash", {
  store: demoStore,
  session: Options.text("session").pipe(
    Options.withDefault(DEMO_ID),
    Options.withPseudoName("<id>"),
    Options.withDescription("the demo session to reopen and crash")
  )
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
  )).pipe(Command.withDescription("internal: the demo's child process, killed inside a tool call"))

/** Step 1: a new session and the first turns of the scripted agent. */
const firstTurns = (spec: StoreSpec) =>
  Effect.scoped(Effect.gen(function*() {
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

/** Steps 3 and 4: reopen (repair), continue with a new loop, and gather what the demo shows. */
const resumeAndReport = (spec: StoreSpec, storeOpt: string, id: string, childExitCode: number) =>
  Effect.scoped(Effect.gen(function*() {
    const { store: s } = yield* openStore(spec, { mustExist: true })
    const store = s!
    const before = (yield* store.load(id)).events.length
    const handle = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, store))
    const closers = (yield* handle.events).slice(before).filter((e) => e.type !== "session/end-seed")
    yield* Demo.makeLoop().runTurn([{ type: "user", content: Demo.prompts.resume }]).pipe(
      Effect.provideService(Session.Session, handle),
      Effect.provide(Demo.environment(Demo.resumeScripts, Effect.never, "c"))
    )
    const events = yield* handle.events
    const fold = foldSurface(events)
    const last = yield* handle.requestAt(events.length - 1)
    return {
      sessionId: id,
      store: storeOpt,
      events: events.length,
      turns: events.filter((e) => e.type === "turn/start").length,
      compactions: events.filter((e) => e.type === "compaction/summary").map((e) => e.seq),
      prunes: events.filter((e) => e.type === "compaction/prune").map((e) => e.seq),
      crash: { childExitCode, closers },
      transcript: yield* handle.transcript,
      surface: "nodes" in fold ? fold : { nodes: [], replacements: [] },
      lastRequest: { seq: events.length - 1, header: last.header ?? null, messages: last.messages },
      next: nextCommands(storeOpt, id, events.filter((e) => e.type === "compaction/summary")[0]?.seq)
    }
  }))

type DemoReport = Effect.Effect.Success<ReturnType<typeof resumeAndReport>>

/** A command to try after the demo: its `session-log` arguments and what it shows. */
export interface NextCommand {
  readonly args: ReadonlyArray<string>
  readonly shows: string
}

/** The commands the demo suggests next, on its own store and session. */
const nextCommands = (store: string, id: string, compactedAt: number | undefined): ReadonlyArray<NextCommand> => {
  const on = ["--store", store, "--session", id]
  return [
    { args: ["messages", ...on], shows: "the messages a model would be sent now" },
    ...(compactedAt === undefined ? [] : [{
      args: ["request", ...on, "--at", String(compactedAt - 1)],
      shows: `the exact request just before the first compaction (seq ${compactedAt})`
    }]),
    { args: ["surface", ...on], shows: "which events each compaction and pruning replaced" },
    { args: ["show", ...on, "--tail", "20"], shows: "the last 20 events of the log, one line each" },
    { args: ["verify", ...on], shows: "every rule checked on the whole log" }
  ]
}

/** What people see after the demo's steps. */
const renderDemo = (r: DemoReport): string =>
  [
    `   ${r.prunes.length} prune(s) at seq ${r.prunes.join(", ")}; ${r.compactions.length} compaction(s) at seq ${
      r.compactions.join(", ")
    }`,
    "",
    bold("Closers written by repair"),
    eventTable(r.crash.closers),
    "",
    bold("Human transcript (append-origin events; replacements do not erase what was seen)"),
    transcriptTable(r.transcript),
    "",
    bold("Surface") + dim(" (the events the messages are made from, by seq, after the recorded replacements)"),
    `   ${r.surface.nodes.join(", ")}`,
    replacementTable("REPLACED BY", r.surface.replacements),
    "",
    bold(`Last request (seq ${r.lastRequest.seq}), rebuilt from the log`),
    r.lastRequest.header === null ? "" : `${r.lastRequest.header.config.provider}/${r.lastRequest.header.config.model}, tools: ${
      (r.lastRequest.header.tools ?? []).map((t) => t.name).join(", ")
    }`,
    messageTable(r.lastRequest.messages),
    "",
    `${green("done")}: ${r.events} events in ${r.store}. Next, try:`,
    ...r.next.map((c) => `  npm run session-log -- ${c.args.join(" ")}\n    ${dim(c.shows)}`),
    // last: the session in the web viewer (docs/viewer.md), one line
    `  npm run session-log -- view --store ${r.store} --session ${r.sessionId}    ${dim("all of it in the web viewer: time travel, provenance")}`
  ].join("\n")

/** `demo`. */
export const demoCommand = Command.make("demo", { json, store: demoStore }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const spec = yield* resolveSpec(o.store)
      // the demo adds a new session to the store (created if missing); it never deletes or rewrites
      if (spec.kind !== "postgres") {
        yield* fs.makeDirectory(path.dirname(spec.kind === "sqlite" ? spec.filename : spec.root), { recursive: true })
      }
      const say = (line: string) => (o.json ? Effect.void : Console.log(line))

      yield* say(
        "effect-session-log records everything an AI agent does (each prompt, model reply, tool call and result) as an\n" +
          "append-only log of numbered events, and rebuilds from that log exactly what the model is sent.\n"
      )
      yield* say(bold("1. A scripted agent (no model or API key needed) works through two turns that call tools"))
      yield* say(dim("   every step is appended to the log as an event with a number, its seq"))
      yield* say(dim("   when the conversation grows too long, old tool output is pruned and older turns are summarised:"))
      yield* say(dim("   both are new events that name what they replace; nothing is deleted"))
      const { first, id } = yield* firstTurns(spec)
      yield* say(dim(`   ${first} events written`))

      yield* say(bold("2. Another process reopens the session and is killed (SIGKILL) in the middle of a tool call"))
      yield* say(dim("   like a crash: the log now ends inside an unfinished turn"))
      const child = PlatformCommand.make(process.execPath, process.argv[1], "demo-crash", "--store", o.store, "--session", id)
      const code = yield* PlatformCommand.exitCode(child).pipe(Effect.orElseSucceed(() => -1))
      yield* say(dim(`   child exited with ${code === 137 || code === -1 ? "SIGKILL" : `code ${code}`}`))

      yield* say(bold("3. Reopening the session repairs it with closers: events that end the unfinished tool calls and turn"))
      yield* say(bold("4. The agent goes on in this process; its first request to the model is marked as a resume"))
      return yield* resumeAndReport(spec, o.store, id, code)
    }),
    (r) => o.json ? printJson(r) : Console.log(renderDemo(r))
  )).pipe(Command.withDescription("the scripted keyless agent demo (what npm start runs)"))
