/**
 * Runs one scenario (SPEC §10.2): a fresh working directory seeded from `workspace/`, the ACP agent
 * of the header class over the given store, an SDK client on an in-memory NDJSON transport whose
 * frames are captured both ways, the scenario's steps (prompts, cancels, mode switches, crashes,
 * reconnects and loads, forced compaction, seeded histories), and a model wrapper that records
 * every request with `Session.requestAt` of its dispatch point. Returns the logs, wire and calls.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Tool from "@effect/ai/Tool"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as HeaderSnapshotterLive from "../../../src/layers/session/HeaderSnapshotterLive.js"
import { layerSummarizerDeterministic } from "../../../src/layers/model/SummarizerLive.js"
import * as SessionLive from "../../../src/layers/session/SessionLive.js"
import * as Acp from "../../../src/programs/acp/Acp.js"
import * as Compact from "../../../src/programs/compaction/Compact.js"
import { StoreFailure } from "../../../src/schema/Errors.js"
import type { Event } from "../../../src/schema/Events.js"
import type { RequestConfig, ToolSpec } from "../../../src/schema/RequestHeader.js"
import { nextId } from "../../../src/services/IdGenerator.js"
import { ModelRequestConfig, toolSpecs } from "../../../src/services/PromptConversion.js"
import { type RequestSnapshot, Session, type SessionShape } from "../../../src/services/Session.js"
import type { SessionPersistence } from "../../../src/programs/acp/AcpSessions.js"
import { SessionStore, type SessionStoreShape } from "../../../src/services/SessionStore.js"
import type { Scenario, SeedInfo } from "./Fixture.js"
import { agentOptions, GENERATORS, toolHandlers } from "./Scenarios.js"

type Rec = Record<string, any>

/** One JSON-RPC frame on the wire. */
export interface Frame {
  readonly conn: number
  readonly from: "client" | "agent"
  readonly msg: Rec
}

/** One model call: the request received and `Session.requestAt` of its dispatch point. */
export interface CallRecord {
  readonly sessionId: string
  readonly seq: number
  readonly request: {
    readonly prompt: Prompt.Prompt
    readonly tools: ReadonlyArray<ToolSpec>
    readonly config: RequestConfig | undefined
  }
  readonly snapshot: RequestSnapshot
}

/** What a run produced. */
export interface RunResult {
  readonly cwd: string
  readonly sessions: ReadonlyArray<{ readonly id: string; readonly header: Rec; readonly events: ReadonlyArray<Event> }>
  readonly seeds: ReadonlyMap<string, SeedInfo>
  readonly frames: ReadonlyArray<Frame>
  readonly calls: ReadonlyArray<CallRecord>
  /** Things the driver saw go wrong (an unexpected permission request, a failed step). */
  readonly problems: ReadonlyArray<string>
}

/** The model a run talks to: any `LanguageModel` service (scripted replay, pretend-live, live). */
export interface RunModel {
  readonly service: LanguageModel.Service
}

interface Conn {
  readonly index: number
  capturing: boolean
  severed: boolean
  permissions: Array<string>
  readonly client: acp.ClientConnection
  readonly scope: Scope.CloseableScope
  readonly bases: Map<string, { readonly seq: number; readonly updates: number }>
}

const tick = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/** Two byte pipes with a tap that records each NDJSON line as a frame. */
const tap = (frames: Array<Frame>, conn: { readonly index: number; capturing: boolean }, from: Frame["from"]) => {
  const decoder = new TextDecoder()
  let buffered = ""
  return new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, controller) {
      buffered += decoder.decode(chunk, { stream: true })
      for (let i = buffered.indexOf("\n"); i >= 0; i = buffered.indexOf("\n")) {
        const text = buffered.slice(0, i)
        buffered = buffered.slice(i + 1)
        if (conn.capturing && text.trim() !== "") frames.push({ conn: conn.index, from, msg: JSON.parse(text) })
      }
      controller.enqueue(chunk)
    }
  })
}

/**
 * Run `scenario` in a fresh working directory with `workspace` files, over the provided store.
 * `modelHang` is completed by a scripted `hang`; the run fails only on harness defects.
 */
export const runScenario = (options: {
  readonly scenario: Scenario
  readonly workspace: ReadonlyMap<string, string>
  readonly model: LanguageModel.Service
  readonly modelHang: Deferred.Deferred<void>
  /** The working directory (an empty temporary directory). */
  readonly cwd: string
  /** The sessions' persistence; the agent's default (batched, with checkpoints) when undefined. */
  readonly persistence?: SessionPersistence
}) =>
  Effect.gen(function*() {
    const { scenario } = options
    const fs = yield* FileSystem.FileSystem
    const store = yield* SessionStore
    const cwd = options.cwd
    for (const [name, text] of options.workspace) yield* fs.writeFileString(`${cwd}/${name}`, text)

    const toolReached = yield* Deferred.make<void>()
    const registry = new Map<string, SessionShape>()
    const created: Array<string> = []
    const seeds = new Map<string, SeedInfo>()
    const frames: Array<Frame> = []
    const calls: Array<CallRecord> = []
    const problems: Array<string> = []
    let active: string | undefined

    // the model, recording each request with requestAt of its dispatch point (the last event before the call)
    const inner = options.model
    const model: LanguageModel.Service = {
      ...inner,
      streamText: ((request: Rec) =>
        Stream.unwrap(Effect.gen(function*() {
          const config = yield* ModelRequestConfig
          const session = active === undefined ? undefined : registry.get(active)
          if (session === undefined) return yield* Effect.dieMessage("snapshot harness: a model call outside a prompt")
          const seq = (yield* session.events).length - 1
          const snapshot = yield* Effect.orDie(session.requestAt(seq))
          const toolkit = request.toolkit as { readonly tools: Record<string, Tool.Any> } | undefined
          calls.push({
            sessionId: session.id,
            seq,
            request: { prompt: Prompt.make(request.prompt), tools: toolSpecs(toolkit?.tools ?? {}), config },
            snapshot
          })
          return inner.streamText(request as never)
        }))) as LanguageModel.Service["streamText"]
    }

    const services = yield* Layer.build(Layer.mergeAll(
      HeaderSnapshotterLive.layer,
      toolHandlers(cwd, scenario.hangOn, toolReached).pipe(Layer.provide(NodeContext.layer)),
      Layer.succeed(LanguageModel.LanguageModel, model)
    ))

    let conn: Conn | undefined
    let connections = 0
    let current: string | undefined
    let pending: Fiber.RuntimeFiber<unknown, unknown> | undefined

    const updatesOf = (c: Conn, id: string) =>
      frames.filter((f) => f.conn === c.index && f.from === "agent" && f.msg.method === "session/update" && f.msg.params?.sessionId === id)
        .length

    const open = Effect.gen(function*() {
      const scope = yield* Scope.make()
      const state = { index: ++connections, capturing: true, severed: false }
      // the store as this connection's process sees it: a crash severs it, so nothing more is written
      const view: SessionStoreShape = {
        ...store,
        append: (id, events, o) =>
          state.severed
            ? Effect.fail(new StoreFailure({ method: "append", cause: "the agent process crashed (snapshot harness)" }))
            : store.append(id, events, o)
      }
      const register = (session: SessionShape) =>
        Effect.sync(() => {
          registry.set(session.id, session)
          if (!created.includes(session.id)) created.push(session.id)
        })
      const factory: Acp.SessionFactoryShape = {
        create: (o) => SessionLive.create(o).pipe(Effect.provideService(SessionStore, view), Effect.tap(register)),
        // options (persistence) pass through: the harness runs the sessions as production does
        open: (id, o) => SessionLive.open(id, o).pipe(Effect.provideService(SessionStore, view), Effect.tap(register))
      }
      const app = yield* Acp.makeAgentApp(
        options.persistence === undefined ? agentOptions : { ...agentOptions, persistence: options.persistence }
      ).pipe(
        Effect.provide(services),
        Effect.provideService(Acp.SessionFactory, factory),
        Effect.provideService(SessionStore, view),
        Scope.extend(scope)
      )
      const a2c = tap(frames, state, "agent")
      const c2a = tap(frames, state, "client")
      let c: Conn
      const clientApp = acp.client({ name: "snapshot-client" })
        .onNotification(acp.methods.client.session.update, () => undefined)
        .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
          const answer = c.permissions.shift()
          const cancelled: acp.RequestPermissionResponse = { outcome: { outcome: "cancelled" } }
          if (answer === undefined) problems.push(`unexpected permission request for ${params.toolCall.toolCallId}`)
          if (answer === undefined || answer === "pending") {
            return new Promise((resolve) => {
              if (signal.aborted || answer === undefined) resolve(cancelled)
              signal.addEventListener("abort", () => resolve(cancelled))
            })
          }
          const option = params.options.find((o) => o.kind === answer)
          return Promise.resolve(option === undefined ? cancelled : { outcome: { outcome: "selected", optionId: option.optionId } })
        })
      const agentConnection = app.connect(acp.ndJsonStream(a2c.writable, c2a.readable))
      agentConnection.closed.catch(() => undefined)
      const client = clientApp.connect(acp.ndJsonStream(c2a.writable, a2c.readable))
      client.closed.catch(() => undefined)
      c = Object.assign(state, { permissions: [], client, scope, bases: new Map() })
      conn = c
      yield* request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: scenario.clientCompaction ? { session: { compaction: {} } } : {},
        clientInfo: { name: "snapshot-client", version: "0.0.0" }
      })
      return c
    })

    const live = Effect.suspend(() => conn === undefined ? open : Effect.succeed(conn))

    /** A request of the client; a JSON-RPC error is an answer like any other (it is on the wire). */
    const request = (method: string, params: unknown) =>
      Effect.promise(() =>
        conn!.client.agent.request<Rec>(method, params).then(
          (result): { readonly result?: Rec; readonly error?: unknown } => ({ result }),
          (error: unknown): { readonly result?: Rec; readonly error?: unknown } => ({ error })
        )
      )

    /** Close the connection: stop capturing, disconnect, and run the agent's teardown to its end. */
    const close = Effect.gen(function*() {
      const c = conn
      if (c === undefined) return
      conn = undefined
      c.capturing = false
      c.client.close()
      if (pending !== undefined) {
        yield* Fiber.interrupt(pending)
        pending = undefined
      }
      yield* Scope.close(c.scope, Exit.void)
    })

    const sessionOf = (id: string | undefined) => {
      const s = id === undefined ? undefined : registry.get(id)
      if (s === undefined) throw new Error("snapshot harness: the step needs a session (a `new`, `seed` or `load` step first)")
      return s
    }

    /** Wait until the client received the live update of every event the session committed so far. */
    const settle = Effect.gen(function*() {
      const c = conn
      if (c === undefined || current === undefined || !c.bases.has(current)) return
      const session = sessionOf(current)
      const base = c.bases.get(current)!
      let stable = 0
      let last = ""
      for (let i = 0; stable < 3; i++) {
        if (i > 200_000) return yield* Effect.dieMessage("snapshot harness: the agent never delivered the updates of the committed events")
        const events = yield* session.events
        const projector = Acp.makeProjector({ live: true, compaction: scenario.clientCompaction, presenter: agentOptions.presenter!, modes: agentOptions.modes! })
        let expected = 0
        for (const e of events.slice(base.seq)) expected += projector.project(e).length
        const received = updatesOf(c, current) - base.updates
        const state = `${events.length}/${received}/${frames.length}`
        stable = received === expected && state === last ? stable + 1 : 0
        last = state
        yield* tick
      }
    })

    const activate = (c: Conn, id: string) =>
      Effect.gen(function*() {
        current = id
        const events = yield* sessionOf(id).events
        c.bases.set(id, { seq: events.length, updates: updatesOf(c, id) })
      })

    const waitUntil = (condition: () => boolean) =>
      Effect.gen(function*() {
        for (let i = 0; !condition(); i++) {
          if (i > 200_000) return yield* Effect.dieMessage("snapshot harness: a permission request never came")
          yield* tick
        }
      })

    for (const step of scenario.steps) {
      switch (step.do) {
        case "new": {
          const c = yield* live
          const answer = yield* request("session/new", { cwd, mcpServers: [] })
          if (answer.error !== undefined) return yield* Effect.dieMessage(`session/new failed: ${JSON.stringify(answer.error)}`)
          yield* activate(c, answer.result!.sessionId)
          break
        }
        case "seed": {
          const generate = GENERATORS[step.generator]
          if (generate === undefined) return yield* Effect.dieMessage(`unknown seed generator ${step.generator}`)
          const id = yield* nextId
          const seed = generate(step.turns)
          yield* Effect.scoped(SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0, cwd }, seed })).pipe(Effect.orDie)
          created.push(id)
          seeds.set(id, { generator: step.generator, turns: step.turns, events: seed.length + 1 })
          current = id
          break
        }
        case "load": {
          const c = yield* live
          if (current === undefined) return yield* Effect.dieMessage("a load step needs a session")
          const answer = yield* request("session/load", { sessionId: current, cwd, mcpServers: [] })
          if (answer.error !== undefined) return yield* Effect.dieMessage(`session/load failed: ${JSON.stringify(answer.error)}`)
          yield* activate(c, current)
          break
        }
        case "prompt": {
          const c = yield* live
          active = current
          c.permissions = [...(step.permissions ?? [])]
          const sent = request("session/prompt", { sessionId: current, prompt: [{ type: "text", text: step.text }] })
          if (step.until === undefined) {
            yield* sent
          } else {
            const before = frames.filter((f) => f.msg.method === "session/request_permission").length
            pending = yield* Effect.fork(sent)
            if (step.until === "model-hang") yield* Deferred.await(options.modelHang)
            else if (step.until === "tool-hang") yield* Deferred.await(toolReached)
            else yield* waitUntil(() => frames.filter((f) => f.msg.method === "session/request_permission").length > before)
          }
          yield* settle
          break
        }
        case "cancel": {
          const c = yield* live
          yield* Effect.promise(() => c.client.agent.notify("session/cancel", { sessionId: current }))
          if (pending !== undefined) {
            yield* Fiber.await(pending)
            pending = undefined
          }
          yield* settle
          break
        }
        case "mode": {
          yield* live
          yield* request("session/set_mode", { sessionId: current, modeId: step.mode })
          yield* settle
          break
        }
        case "compact": {
          yield* Compact.compact({ mode: "manual", retainTokens: 0 }).pipe(
            Effect.provideService(Session, sessionOf(current)),
            Effect.provide(layerSummarizerDeterministic),
            Effect.orDie
          )
          yield* settle
          break
        }
        case "crash": {
          if (conn !== undefined) conn.severed = true
          yield* close
          break
        }
        case "reconnect": {
          yield* close
          yield* open
          break
        }
      }
    }
    yield* close

    const sessions: Array<RunResult["sessions"][number]> = []
    for (const id of created) {
      const loaded = yield* Effect.orDie(store.load(id))
      sessions.push({ id, header: loaded.header as Rec, events: loaded.events as ReadonlyArray<Event> })
    }
    return { cwd, sessions, seeds, frames, calls, problems } satisfies RunResult
  })

/** The model service of a layer (scripted replay, pretend-live or live), built in the current scope. */
export const modelOf = <E, R>(layer: Layer.Layer<LanguageModel.LanguageModel, E, R>) =>
  Effect.map(Layer.build(layer), (ctx) => Context.get(ctx, LanguageModel.LanguageModel))
