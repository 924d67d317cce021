/**
 * The ACP agent (docs/acp.md §2.3–§2.4): an SDK 2.x `AgentApp` whose handlers run on the captured
 * Effect runtime — `initialize` (only what is true), `session/new`, `session/load` (repair on open,
 * then the whole transcript as awaited updates, then the answer), `session/resume` (no replay),
 * `session/list` (dated by each session's last event), `session/prompt` (one in flight per session,
 * answered after its updates drained; one sent while a cancelled one settles waits for it),
 * `session/cancel`, `session/set_mode` and `session/set_config_option` (durable log-only switches
 * that take effect at the next model call). Disconnect and scope close share
 * one teardown: prompts interrupted, outbound queues stopped, handles closed (flushed).
 */
import * as acp from "@agentclientprotocol/sdk"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Runtime from "effect/Runtime"
import * as Scope from "effect/Scope"
import { isAbsolutePath, type SessionHeader } from "../../schema/SessionHeader.js"
import type { HeaderSnapshotter } from "../../services/HeaderSnapshotter.js"
import { nextId } from "../../services/IdGenerator.js"
import { Session, type SessionShape } from "../../services/Session.js"
import { type SessionEntry, SessionStore } from "../../services/SessionStore.js"
import * as AgentLoop from "../agent/AgentLoop.js"
import type { Route } from "../agent/TurnTypes.js"
import { AcpRejected, invalidParams, sessionNotFound, toRequestError } from "./AcpErrors.js"
import {
  type AcpMode,
  composition,
  configOptions,
  defaultModes,
  foldMode,
  MODE_CONFIG_ID,
  MODE_EVENT,
  modeState
} from "./AcpModes.js"
import { permissionGate } from "./AcpPermission.js"
import { defaultPresenter, projectTranscript, type ToolPresenter } from "./AcpProjection.js"
import { PROMPT_CAPABILITIES, promptText, stopReasonOf } from "./AcpPrompt.js"
import {
  type AcpSession,
  type InFlight,
  sendAll,
  SessionFactory,
  type SessionPersistence,
  startOutbound
} from "./AcpSessions.js"

/** A streamed read stopped at the header (`storedCwd`). */
class HeaderRead extends Data.TaggedClass("HeaderRead")<{ readonly cwd: string | undefined }> {}

/** Options of the agent. */
export interface AcpAgentOptions<Tools extends Record<string, Tool.Any>> {
  /** `agentInfo` of `initialize`. */
  readonly name?: string
  readonly version?: string
  readonly toolkit: Toolkit.Toolkit<Tools>
  /** The base system prompt (a mode may add a section). */
  readonly system: string
  readonly route: Route
  /** The mode catalog (default: `code`, and `plan` offering only `readOnlyTools`); the first is the default. */
  readonly modes?: ReadonlyArray<AcpMode>
  /** Tools the default `plan` mode offers. */
  readonly readOnlyTools?: ReadonlyArray<string>
  /** Tools that need the user's permission (`session/request_permission`) before each call. */
  readonly gatedTools?: ReadonlyArray<string>
  /** How tool calls are shown (title, kind, locations). */
  readonly presenter?: ToolPresenter
  /** Model requests per prompt before it stops with `max_turn_requests` (default 50). */
  readonly maxTurnRequests?: number
  /**
   * How the agent's sessions reach the store (default batched: streamed chunks never wait for the
   * disk; the agent loop's checkpoints flush before each model request and tool body, at each step
   * boundary and at the end of each turn, and a mode switch is flushed at once).
   */
  readonly persistence?: SessionPersistence
}

/** What the agent needs from its context. */
export type AcpRequirements<Tools extends Record<string, Tool.Any>> =
  | SessionFactory
  | SessionStore
  | LanguageModel.LanguageModel
  | HeaderSnapshotter
  | Tool.HandlersFor<Tools>
  | Tool.Requirements<Tools[keyof Tools]>

/** The longest title `session/list` gives a session (a first prompt longer than this is shortened). */
const TITLE_CHARS = 80

/** The title a `user/message` from the user gives its session: its text on one line, shortened. */
/** `session/list` looks for a session's title (its first user prompt) in this many events at most. */
const TITLE_SCAN_EVENTS = 1_000

/** Ends the streamed read of a title scan (the title found, or `TITLE_SCAN_EVENTS` read). */
class TitleScanDone extends Data.TaggedError("TitleScanDone") {}

const titleOf = (event: unknown): string | undefined => {
  const e = event as { readonly type?: unknown; readonly data?: unknown } | null
  if (e === null || typeof e !== "object" || e.type !== "user/message") return undefined
  const data = e.data as { readonly content?: unknown; readonly source?: { readonly kind?: unknown } } | null
  if (data === null || typeof data !== "object" || data.source?.kind !== "user" || !Array.isArray(data.content)) return undefined
  const text = data.content
    .flatMap((p: { readonly type?: unknown; readonly text?: unknown }) =>
      p !== null && typeof p === "object" && p.type === "text" && typeof p.text === "string" ? [p.text] : []
    )
    .join(" ")
    .replace(/\s+/g, " ")
    .trim()
  if (text === "") return undefined
  const chars = [...text]
  return chars.length <= TITLE_CHARS ? text : `${chars.slice(0, TITLE_CHARS - 1).join("").trimEnd()}…`
}

const rejectCwd = (cwd: string, sessionId?: string): AcpRejected | undefined =>
  isAbsolutePath(cwd) ? undefined : invalidParams(`cwd must be an absolute path, got "${cwd}"`, sessionId)

const rejectExtras = (
  params: { readonly mcpServers?: ReadonlyArray<unknown> | undefined; readonly additionalDirectories?: ReadonlyArray<unknown> | undefined },
  sessionId?: string
): AcpRejected | undefined =>
  (params.mcpServers?.length ?? 0) > 0
    ? invalidParams("MCP servers are not supported by this agent", sessionId)
    : (params.additionalDirectories?.length ?? 0) > 0
    ? invalidParams("additional directories are not supported by this agent", sessionId)
    : undefined

/**
 * Build the agent app. Its sessions live until the scope closes or the connection it serves
 * closes. Connect it once: `app.connect(stream)` (or a `ClientApp`, in-process).
 */
export const makeAgentApp = <Tools extends Record<string, Tool.Any>>(
  options: AcpAgentOptions<Tools>
): Effect.Effect<acp.AgentApp, never, Scope.Scope | AcpRequirements<Tools>> =>
  Effect.gen(function*() {
    type R = AcpRequirements<Tools>
    const runtime = yield* Effect.runtime<R>()
    const factory = yield* SessionFactory
    const store = yield* SessionStore
    const modes = options.modes ?? defaultModes(options.readOnlyTools ?? [])
    const presenter = options.presenter ?? defaultPresenter
    const persistence: SessionPersistence = options.persistence ?? { mode: "batched" }
    const gated: ReadonlySet<string> = new Set(options.gatedTools ?? [])
    /** Sessions of the connection; `"reserved"` while a load or resume is opening one. */
    const sessions = new Map<string, AcpSession | "reserved">()
    let compaction = false

    const run = <A>(effect: Effect.Effect<A, unknown, R>): Promise<A> =>
      Runtime.runPromiseExit(runtime)(effect).then((exit) => {
        if (Exit.isSuccess(exit)) return exit.value
        throw toRequestError(exit.cause)
      })

    const lookup = (id: string) =>
      Effect.suspend(() => {
        const entry = sessions.get(id)
        return entry === undefined || entry === "reserved" ? Effect.fail(sessionNotFound(id)) : Effect.succeed(entry)
      })

    const reserve = (id: string) =>
      Effect.suspend(() => {
        if (sessions.has(id)) return Effect.fail(invalidParams("the session is already active on this connection", id))
        sessions.set(id, "reserved")
        return Effect.void
      })

    const closeEntry = (entry: AcpSession) =>
      Effect.suspend(() => {
        if (sessions.get(entry.id) === entry) sessions.delete(entry.id)
        return entry.close
      })

    /**
     * One teardown for disconnect and scope close. Best effort per session, as a handle's own close
     * is: a session whose close fails (its store broke) neither stops the others from flushing nor
     * fails the agent's scope.
     */
    const teardown = Effect.suspend(() => {
      const entries = [...sessions.values()].filter((e): e is AcpSession => e !== "reserved")
      return Effect.forEach(entries, (entry) => Effect.exit(closeEntry(entry)), { discard: true, concurrency: "unbounded" })
    })
    yield* Effect.addFinalizer(() => teardown)

    /** Register an open handle: its loop instance, mode, gate and outbound queue. */
    const activate = (session: SessionShape, scope: Scope.CloseableScope, client: acp.AgentContext) =>
      Effect.gen(function*() {
        const events = yield* session.events
        const id = session.id
        const drain = yield* startOutbound(session, scope, client, events.length, { compaction, presenter, modes })
        let entry: AcpSession | undefined
        const mode = foldMode(events, modes)
        const loop = AgentLoop.make({
          toolkit: options.toolkit,
          system: options.system,
          route: options.route,
          maxSteps: options.maxTurnRequests ?? 50,
          compose: Effect.sync(() => composition(options.system, modes, entry?.mode ?? mode)),
          beforeToolCall: permissionGate({
            entry: () => entry,
            client,
            gated,
            presenter,
            offered: () => composition(options.system, modes, entry?.mode ?? mode).tools
          })
        })
        // once: a disconnect and the scope's close both tear down, maybe at the same time (the second
        // waits for the first instead of closing a scope that is being closed)
        const close = yield* Effect.cached(Effect.suspend(() =>
          Effect.zipRight(
            entry?.prompt === undefined ? Effect.void : Fiber.interrupt(entry.prompt.fiber),
            Scope.close(scope, Exit.void)
          )
        ))
        entry = { id, session, scope, loop, mode, allowAlways: new Set(), prompt: undefined, cancels: 0, drain, close }
        sessions.set(id, entry)
        return entry
      })

    /**
     * The stored cwd of a session, read before it is opened (a streamed read stopped at the
     * header: nothing of the log is read); none when the header cannot be read (open reports why).
     */
    const storedCwd = (id: string) =>
      store.loadEach(id, {
        onHeader: (header) => Effect.fail(new HeaderRead({ cwd: header.cwd })),
        onEvents: () => Effect.void
      }).pipe(
        Effect.as(undefined),
        Effect.catchAll((e) => Effect.succeed(e instanceof HeaderRead ? e : undefined))
      )

    /**
     * Open a stored session into a fresh scope (crash repair runs in `open`). Its cwd is checked
     * first, so a load from the wrong directory repairs (writes) nothing.
     */
    const openStored = (params: acp.LoadSessionRequest | acp.ResumeSessionRequest, client: acp.AgentContext) =>
      Effect.gen(function*() {
        const id = params.sessionId
        const bad = rejectCwd(params.cwd, id) ?? rejectExtras(params, id)
        if (bad !== undefined) return yield* bad
        const stored = yield* storedCwd(id)
        if (stored !== undefined) {
          if (stored.cwd === undefined) return yield* invalidParams("the stored session has no cwd", id)
          if (stored.cwd !== params.cwd) return yield* invalidParams(`the session belongs to ${stored.cwd}, not ${params.cwd}`, id)
        }
        yield* reserve(id)
        const scope = yield* Scope.make()
        const opened = yield* Effect.exit(Effect.gen(function*() {
          const session = yield* factory.open(id, { persistence }).pipe(Scope.extend(scope))
          const cwd = session.header.cwd
          if (cwd === undefined) return yield* invalidParams("the stored session has no cwd", id)
          if (cwd !== params.cwd) return yield* invalidParams(`the session belongs to ${cwd}, not ${params.cwd}`, id)
          return session
        }))
        if (Exit.isFailure(opened)) {
          sessions.delete(id)
          yield* Scope.close(scope, Exit.void)
          return yield* Effect.failCause(opened.cause)
        }
        return { session: opened.value, scope }
      })

    /**
     * A session's last activity and title (its first user prompt, shortened) for `session/list`.
     * Last activity: the time of its last event (of the handle when it is open on this connection,
     * unflushed events included; else the store's `listEntries`, which reads no log), its creation
     * when it has none. The title: a streamed read of the log's start that stops at the first user
     * prompt or after `TITLE_SCAN_EVENTS` events; none when the log cannot be read.
     */
    const activity = (entry: SessionEntry): Effect.Effect<{ readonly time?: number; readonly title?: string }> =>
      Effect.suspend(() => {
        const { header } = entry
        const open = sessions.get(header.id)
        if (open !== undefined && open !== "reserved") {
          return Effect.map(open.session.events, (events) => {
            let title: string | undefined
            for (const e of events) if ((title = titleOf(e)) !== undefined) break
            return { time: events.at(-1)?.time ?? header.createdAt, ...(title === undefined ? {} : { title }) }
          })
        }
        const time = entry.last?.time ?? header.createdAt
        let title: string | undefined
        let seen = 0
        return store.loadEach(header.id, {
          onEvents: (events) =>
            Effect.suspend(() => {
              for (const e of events) if (title === undefined) title = titleOf(e)
              seen += events.length
              return title !== undefined || seen >= TITLE_SCAN_EVENTS ? Effect.fail(new TitleScanDone()) : Effect.void
            })
        }).pipe(
          Effect.catchTag("TitleScanDone", () => Effect.void),
          Effect.map(() => ({ time, ...(title === undefined ? {} : { title }) })),
          Effect.orElseSucceed(() => ({ time }))
        )
      })

    const answerModes = (mode: string) => ({ modes: modeState(modes, mode), configOptions: configOptions(modes, mode) })

    /** A mode switch: a durable log-only event, in force from the next model call. */
    const switchMode = (entry: AcpSession, modeId: string) =>
      Effect.gen(function*() {
        if (!modes.some((m) => m.id === modeId)) return yield* invalidParams(`unknown mode "${modeId}"`, entry.id)
        if (modeId === entry.mode) return
        yield* entry.session.appendUnknown(MODE_EVENT, { modeId }, { ignorable: true })
        // a switch is durable before it is acknowledged
        yield* entry.session.flush
        entry.mode = modeId
        yield* entry.drain // current_mode_update and config_option_update before the answer
      })

    const prompt = (params: acp.PromptRequest) =>
      Effect.gen(function*() {
        const entry = yield* lookup(params.sessionId)
        const text = promptText(params.prompt, entry.id)
        if (text instanceof AcpRejected) return yield* text
        // a prompt sent while a cancelled one is still settling (its tools winding down, its turn end
        // being written) waits for it, as the client already let that prompt go; a cancel received
        // meanwhile is this prompt's, which then never runs
        const cancels = entry.cancels
        while (entry.prompt !== undefined && entry.prompt.cancelled) yield* Deferred.await(entry.prompt.settled)
        if (entry.cancels !== cancels) return { stopReason: "cancelled" } satisfies acp.PromptResponse
        if (entry.prompt !== undefined) return yield* invalidParams("a prompt is already running in this session", entry.id)
        const before = (yield* entry.session.events).length
        const fiber = yield* entry.loop.runTurn([{ type: "user", content: text }]).pipe(
          Effect.provideService(Session, entry.session),
          Effect.forkIn(entry.scope)
        ) as Effect.Effect<Fiber.RuntimeFiber<AgentLoop.TurnResult, AgentLoop.AgentError>>
        const inFlight: InFlight = { fiber, cancelled: false, settled: yield* Deferred.make<void>() }
        entry.prompt = inFlight
        // this prompt awaits its own turn only: a late end of a cancelled turn cannot settle another
        const exit = yield* Effect.gen(function*() {
          const exit = yield* Fiber.await(fiber).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)))
          yield* entry.drain // the answer follows every update of the turn
          return exit
        }).pipe(Effect.ensuring(Effect.suspend(() => {
          if (entry.prompt === inFlight) entry.prompt = undefined
          return Deferred.done(inFlight.settled, Exit.void)
        })))
        if (Exit.isFailure(exit)) {
          if (Cause.isInterruptedOnly(exit.cause)) return { stopReason: "cancelled" } satisfies acp.PromptResponse
          return yield* Effect.failCause(exit.cause)
        }
        const turnEvents = (yield* entry.session.events).slice(before)
        const stopReason = stopReasonOf(exit.value.reason, turnEvents, entry.id)
        if (stopReason instanceof AcpRejected) return yield* stopReason
        return { stopReason } satisfies acp.PromptResponse
      })

    const app = acp.agent({ name: options.name ?? "effect-session-log" })
      .onConnect((connection) => {
        connection.closed.then(
          () => Runtime.runFork(runtime)(teardown),
          () => Runtime.runFork(runtime)(teardown)
        )
      })
      .onRequest(acp.methods.agent.initialize, ({ params }) =>
        run(Effect.sync(() => {
          compaction = params.clientCapabilities?.session?.compaction != null
          return {
            protocolVersion: acp.PROTOCOL_VERSION,
            agentCapabilities: {
              loadSession: true,
              promptCapabilities: PROMPT_CAPABILITIES,
              mcpCapabilities: { http: false, sse: false },
              sessionCapabilities: { list: {}, resume: {} }
            },
            authMethods: [],
            agentInfo: { name: options.name ?? "effect-session-log", version: options.version ?? "0.1.0" }
          } satisfies acp.InitializeResponse
        })))
      .onRequest(acp.methods.agent.session.new, ({ client, params }) =>
        run(Effect.gen(function*() {
          const bad = rejectCwd(params.cwd) ?? rejectExtras(params)
          if (bad !== undefined) return yield* bad
          const id = yield* nextId
          yield* reserve(id)
          const scope = yield* Scope.make()
          const created = yield* Effect.exit(factory.create({ id, header: { cwd: params.cwd }, persistence }).pipe(Scope.extend(scope)))
          if (Exit.isFailure(created)) {
            sessions.delete(id)
            yield* Scope.close(scope, Exit.void)
            return yield* Effect.failCause(created.cause)
          }
          const entry = yield* activate(created.value, scope, client)
          return { sessionId: id, ...answerModes(entry.mode) } satisfies acp.NewSessionResponse
        }).pipe(Effect.withSpan("Acp.newSession"))))
      .onRequest(acp.methods.agent.session.load, ({ client, params }) =>
        run(Effect.gen(function*() {
          const { scope, session } = yield* openStored(params, client)
          const id = session.id
          const replayed = yield* Effect.exit(Effect.gen(function*() {
            const events = yield* session.events
            // the whole transcript, no cap, each update awaited, all before the answer
            yield* sendAll(client, id, projectTranscript(events, { compaction, presenter })).pipe(
              Effect.mapError(() => new AcpRejected({ code: "internal", detail: "the replay could not be sent", sessionId: id }))
            )
            return yield* activate(session, scope, client)
          }))
          if (Exit.isFailure(replayed)) {
            sessions.delete(id)
            yield* Scope.close(scope, Exit.void)
            return yield* Effect.failCause(replayed.cause)
          }
          return answerModes(replayed.value.mode) satisfies acp.LoadSessionResponse
        }).pipe(Effect.withSpan("Acp.loadSession"))))
      .onRequest(acp.methods.agent.session.resume, ({ client, params }) =>
        run(Effect.gen(function*() {
          const { scope, session } = yield* openStored(params, client)
          const entry = yield* activate(session, scope, client)
          return answerModes(entry.mode) satisfies acp.ResumeSessionResponse
        }).pipe(Effect.withSpan("Acp.resumeSession"))))
      .onRequest(acp.methods.agent.session.list, ({ params }) =>
        run(Effect.gen(function*() {
          const entries = (yield* store.listEntries()).filter(({ header: h }) =>
            h.cwd !== undefined && (params.cwd == null || params.cwd === h.cwd)
          )
          const listed = yield* Effect.forEach(entries, (entry) =>
            Effect.map(activity(entry), ({ time, title }): acp.SessionInfo => ({
              sessionId: entry.header.id,
              cwd: entry.header.cwd!,
              ...(title === undefined ? {} : { title }),
              ...(time === undefined ? {} : { updatedAt: new Date(time).toISOString() })
            })), { concurrency: 4 })
          return { sessions: listed } satisfies acp.ListSessionsResponse
        })))
      .onRequest(acp.methods.agent.session.prompt, ({ params }) =>
        run(prompt(params).pipe(Effect.withSpan("Acp.prompt"))))
      .onNotification(acp.methods.agent.session.cancel, ({ params }) =>
        run(Effect.suspend(() => {
          // unknown sessions and idle cancels are ignored; only the prompt in flight is interrupted
          const entry = sessions.get(params.sessionId)
          if (entry === undefined || entry === "reserved") return Effect.void
          entry.cancels++
          if (entry.prompt === undefined) return Effect.void
          entry.prompt.cancelled = true
          return Effect.asVoid(Fiber.interruptFork(entry.prompt.fiber))
        })))
      .onRequest(acp.methods.agent.session.setMode, ({ params }) =>
        run(Effect.gen(function*() {
          const entry = yield* lookup(params.sessionId)
          yield* switchMode(entry, params.modeId)
          return {} satisfies acp.SetSessionModeResponse
        })))
      .onRequest(acp.methods.agent.session.setConfigOption, ({ params }) =>
        run(Effect.gen(function*() {
          const entry = yield* lookup(params.sessionId)
          if (params.configId !== MODE_CONFIG_ID) {
            return yield* invalidParams(`unknown config option "${params.configId}"`, entry.id)
          }
          if (typeof params.value !== "string") return yield* invalidParams("the mode option takes a mode id", entry.id)
          yield* switchMode(entry, params.value)
          return { configOptions: configOptions(modes, entry.mode) } satisfies acp.SetSessionConfigOptionResponse
        })))
    return app
  })
