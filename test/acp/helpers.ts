/**
 * Shared fixtures of the ACP adapter tests: a toolkit (a read-only tool, a gated write, a tool that
 * hangs until interrupted, optionally with a slow cleanup), the agent's layers over one store, and an in-process SDK client that records every
 * `session/update` and every response in arrival order.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { assert } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as HeaderSnapshotterLive from "../../src/layers/session/HeaderSnapshotterLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { type CallScript, layerScriptedLanguageModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import * as Acp from "../../src/programs/acp/Acp.js"
import type { Event } from "../../src/schema/Events.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import { SessionStore } from "../../src/services/SessionStore.js"

export const ReadFile = Tool.make("read_file", {
  description: "Read a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
export const WriteFile = Tool.make("write_file", {
  description: "Write a file",
  parameters: { path: Schema.String, text: Schema.String },
  success: Schema.String
})
export const Slow = Tool.make("slow", { description: "Waits until interrupted", success: Schema.String })
export const toolkit = Toolkit.make(ReadFile, WriteFile, Slow)

export const CWD = "/work/project"
export const system = "You are a careful test agent."
export const route = { provider: "scripted", model: "test-model", maxTokens: 1024 }

/**
 * How an interrupted `slow` tool winds down: it completes `begun`, then waits for `done` (a tool
 * whose cleanup takes a while, e.g. stopping a subprocess).
 */
export interface SlowCleanup {
  readonly begun: Deferred.Deferred<void>
  readonly done: Deferred.Deferred<void>
}

/** Files the tools see; `written` records the bodies that actually ran. */
export const makeTools = (reached?: Deferred.Deferred<void>, cleanup?: SlowCleanup) => {
  const written: Array<string> = []
  const layer = toolkit.toLayer({
    read_file: ({ path }) => Effect.succeed(`contents of ${path}`),
    write_file: ({ path }) => Effect.sync(() => (written.push(path), `wrote ${path}`)),
    slow: () =>
      (reached === undefined ? Effect.void : Deferred.succeed(reached, undefined)).pipe(
        Effect.zipRight(Effect.never),
        Effect.onInterrupt(() =>
          cleanup === undefined ? Effect.void : Effect.zipRight(Deferred.succeed(cleanup.begun, undefined), Deferred.await(cleanup.done))
        )
      )
  })
  return { layer, written }
}

export const agentOptions: Acp.AcpAgentOptions<typeof toolkit.tools> = {
  name: "test-agent",
  toolkit,
  system,
  route,
  readOnlyTools: ["read_file"],
  gatedTools: ["write_file"],
  presenter: (name, args) => ({
    title: `${name} ${String((args as { path?: unknown } | null)?.path ?? "")}`.trim(),
    kind: name === "read_file" ? "read" : name === "write_file" ? "edit" : "other"
  })
}

/** The agent's environment over `store`: session factory, scripted model, snapshotter, ids, tools. */
export const environment = (
  scripts: ReadonlyArray<CallScript>,
  options: {
    readonly store?: Layer.Layer<SessionStore>
    readonly reached?: Deferred.Deferred<void>
    readonly cleanup?: SlowCleanup
  } = {}
) => {
  const tools = makeTools(options.reached, options.cleanup)
  const store = options.store ?? layerMemoryStore()
  const layer = Layer.mergeAll(
    Acp.layerSessionFactory({ create: SessionLive.create, open: SessionLive.open }),
    layerScriptedLanguageModel({ scripts }),
    HeaderSnapshotterLive.layer,
    IdGenerator.layerCounter("id-"),
    tools.layer
  ).pipe(Layer.provideMerge(store))
  return { layer, written: tools.written }
}

/** One frame the client observed, in arrival order. */
export type Frame =
  | { readonly kind: "update"; readonly sessionId: string; readonly update: acp.SessionUpdate }
  | { readonly kind: "permission"; readonly request: acp.RequestPermissionRequest }
  | { readonly kind: "response"; readonly method: string; readonly result: unknown }

/** A client connected in-process to a fresh agent app. */
export interface Harness {
  readonly frames: Array<Frame>
  readonly connection: acp.ClientConnection
  /** Send a request; its response (or error) is recorded as a frame when it arrives. */
  readonly request: <A = any>(method: string, params: unknown) => Effect.Effect<A, acp.RequestError>
  readonly notify: (method: string, params: unknown) => Effect.Effect<void>
  /** The updates of one session, in order. */
  readonly updates: (sessionId: string) => Array<acp.SessionUpdate>
  readonly close: Effect.Effect<void>
}

export type PermissionAnswer = (
  request: acp.RequestPermissionRequest,
  signal: AbortSignal
) => Promise<acp.RequestPermissionResponse>

/** Connect a client with `initialize` done (compaction advertised unless told otherwise). */
export const connect = (options: {
  readonly permission?: PermissionAnswer
  readonly compaction?: boolean
  readonly agent?: Partial<Acp.AcpAgentOptions<typeof toolkit.tools>>
} = {}) =>
  Effect.gen(function*() {
    const app = yield* Acp.makeAgentApp({ ...agentOptions, ...options.agent })
    const frames: Array<Frame> = []
    const client = acp.client({ name: "test-client" })
      .onNotification(acp.methods.client.session.update, ({ params }) => {
        frames.push({ kind: "update", sessionId: params.sessionId, update: params.update })
      })
      .onRequest(acp.methods.client.session.requestPermission, ({ params, signal }) => {
        frames.push({ kind: "permission", request: params })
        return options.permission?.(params, signal) ?? Promise.resolve({ outcome: { outcome: "cancelled" } })
      })
    const connection = client.connect(app)
    connection.closed.catch(() => undefined)
    const close = Effect.sync(() => connection.close())
    yield* Effect.addFinalizer(() => close)
    const request = <A>(method: string, params: unknown) =>
      Effect.tryPromise({
        try: () => connection.agent.request<A>(method, params),
        catch: (e) => e as acp.RequestError
      }).pipe(Effect.tap((result) => Effect.sync(() => frames.push({ kind: "response", method, result }))))
    const harness: Harness = {
      frames,
      connection,
      request,
      notify: (method, params) => Effect.promise(() => connection.agent.notify(method, params)),
      updates: (sessionId) =>
        frames.flatMap((f) => f.kind === "update" && f.sessionId === sessionId ? [f.update] : []),
      close
    }
    yield* request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: options.compaction === false ? {} : { session: { compaction: {} } }
    })
    return harness
  }) satisfies Effect.Effect<Harness, unknown, Scope.Scope | Acp.AcpRequirements<typeof toolkit.tools>>

/** A text answer. */
export const say = (text: string): CallScript => [{ type: "text", text }, { type: "finish", reason: "stop" }]

/** A tool call. */
export const call = (id: string, name: string, params: unknown): CallScript => [
  { type: "tool-call", id, name, params },
  { type: "finish", reason: "tool-calls" }
]

/** The `request/header` reasons in a log. */
export const headerReasons = (events: ReadonlyArray<Event>): Array<string> =>
  events.filter((e) => e.type === "request/header").map((e) => (e.data as { reason: string }).reason)

/** Expect a JSON-RPC error with `code`. */
export const expectError = <A>(effect: Effect.Effect<A, acp.RequestError>, code: number) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    assert.strictEqual(error.code, code, JSON.stringify(error))
    return error
  })

/** Load a stored session's log directly from the store. */
export const storedEvents = (id: string) =>
  Effect.gen(function*() {
    const inspected = yield* SessionLive.inspect(id)
    return inspected.events
  })

/** Poll `condition` on real timers (the SDK settles its promises on the event loop). */
export const waitFor = (condition: () => boolean): Effect.Effect<void> =>
  Effect.suspend(function loop(): Effect.Effect<void> {
    return condition() ? Effect.void : Effect.zipRight(Effect.promise(() => new Promise((r) => setTimeout(r, 2))), Effect.suspend(loop))
  })

/** The stored events as they are (no repair, nothing written). */
export const rawEvents = (id: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const loaded = yield* store.load(id)
    return loaded.events as ReadonlyArray<Event>
  })
