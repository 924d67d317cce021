/**
 * Sessions of the ACP adapter: the `SessionFactory` port it opens and creates sessions through
 * (so the adapter needs only Tags; the edge provides it from `SessionLive`), and the state of one
 * session on a connection — its handle and scope, the mode in force, the prompt in flight, and the
 * ordered outbound queue: one fiber projects the session's committed events (`changes`) through
 * the live projection and awaits each `session/update`, so updates are never reordered, and
 * `drain` waits until everything committed so far was sent.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as Context from "effect/Context"
import type * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type { AppendError, SessionShape } from "../../services/Session.js"
import { type CreateError, type ReadError, SessionStore } from "../../services/SessionStore.js"
import type { AgentError, AgentLoop, TurnResult } from "../agent/TurnTypes.js"
import { makeProjector, type ProjectionOptions } from "./AcpProjection.js"

/** How a session's appends reach its store (`SessionLive`'s `persistence` option). */
export type SessionPersistence = { readonly mode: "durable" } | { readonly mode: "batched"; readonly windowMs?: number }

/** Options of a session the adapter creates. */
export interface CreateSessionOptions {
  readonly id: string
  readonly header: Record<string, unknown>
  readonly persistence?: SessionPersistence
}

/** Options of a session the adapter opens. */
export interface OpenSessionOptions {
  readonly persistence?: SessionPersistence
}

/** How the adapter creates and opens (resumes, with crash repair) sessions; handles live in the scope. */
export interface SessionFactoryShape {
  readonly create: (options: CreateSessionOptions) => Effect.Effect<SessionShape, CreateError, Scope.Scope>
  readonly open: (id: string, options?: OpenSessionOptions) => Effect.Effect<SessionShape, ReadError | AppendError, Scope.Scope>
}

/** The adapter's session constructors. */
export class SessionFactory extends Context.Tag("effect-session-log/acp/SessionFactory")<
  SessionFactory,
  SessionFactoryShape
>() {}

/** Session constructors over the current `SessionStore` (pass `SessionLive.create` and `SessionLive.open`). */
export interface SessionConstructors {
  readonly create: (options: CreateSessionOptions) => Effect.Effect<SessionShape, CreateError, SessionStore | Scope.Scope>
  readonly open: (id: string, options?: OpenSessionOptions) => Effect.Effect<SessionShape, ReadError | AppendError, SessionStore | Scope.Scope>
}

/** The factory from session constructors, over the provided store. */
export const layerSessionFactory = (constructors: SessionConstructors): Layer.Layer<SessionFactory, never, SessionStore> =>
  Layer.effect(
    SessionFactory,
    Effect.map(SessionStore, (store) => ({
      create: (options) => Effect.provideService(constructors.create(options), SessionStore, store),
      open: (id, options) => Effect.provideService(constructors.open(id, options), SessionStore, store)
    }))
  )

/** The prompt in flight on a session. */
export interface InFlight {
  readonly fiber: Fiber.RuntimeFiber<TurnResult, AgentError>
  cancelled: boolean
  /** Completed when the prompt is ready to answer: its turn ended and its updates were sent. */
  readonly settled: Deferred.Deferred<void>
}

/** One session on a connection. */
export interface AcpSession {
  readonly id: string
  readonly session: SessionShape
  readonly scope: Scope.CloseableScope
  readonly loop: AgentLoop<any>
  mode: string
  /** Tools the user allowed for the rest of this session on this connection (`allow_always`). */
  readonly allowAlways: Set<string>
  prompt: InFlight | undefined
  /** How many `session/cancel`s the session received (a prompt waiting its turn is cancelled by a later one). */
  cancels: number
  /** Wait until the updates of every event committed so far were sent. */
  readonly drain: Effect.Effect<void>
  /** Interrupt the prompt in flight and close the session's scope (flushing it); once, however often called. */
  readonly close: Effect.Effect<void>
}

/** Send one update and wait for the transport; a closed connection drops it. */
export const sendUpdate = (client: acp.AgentContext, sessionId: string, update: acp.SessionUpdate): Effect.Effect<void> =>
  Effect.tryPromise(() => client.notify(acp.methods.client.session.update, { sessionId, update })).pipe(Effect.ignore)

/**
 * Send updates in order, each awaited before the next (one promise chain: a replay of thousands
 * of updates pays no per-update fiber overhead). A failed send (a closed connection) fails it.
 */
export const sendAll = (
  client: acp.AgentContext,
  sessionId: string,
  updates: ReadonlyArray<acp.SessionUpdate>
): Effect.Effect<void, unknown> =>
  Effect.tryPromise({
    try: async () => {
      for (const update of updates) await client.notify(acp.methods.client.session.update, { sessionId, update })
    },
    catch: (e) => e
  })

/**
 * Start the session's outbound queue from `fromSeq` (in the session's scope) and return `drain`.
 * Every committed event goes through the live projection; each update is awaited in order.
 */
export const startOutbound = (
  session: SessionShape,
  scope: Scope.Scope,
  client: acp.AgentContext,
  fromSeq: number,
  options: Omit<ProjectionOptions, "live">
): Effect.Effect<Effect.Effect<void>> =>
  Effect.gen(function*() {
    const delivered = yield* SubscriptionRef.make(fromSeq - 1)
    const projector = makeProjector({ ...options, live: true })
    const outbound = yield* session.changes(fromSeq).pipe(
      Stream.runForEach((event) =>
        Effect.forEach(projector.project(event), (u) => sendUpdate(client, session.id, u), { discard: true }).pipe(
          Effect.zipRight(SubscriptionRef.set(delivered, event.seq))
        )
      ),
      Effect.forkIn(scope)
    )
    return Effect.flatMap(session.events, (events) => {
      const target = events.length - 1
      // once the queue is stopped (teardown) there is nothing left to wait for
      // (interruptible even when awaited in a finaliser: the race interrupts its loser)
      return Effect.interruptible(Effect.raceFirst(
        delivered.changes.pipe(Stream.takeUntil((n) => n >= target), Stream.runDrain),
        Effect.asVoid(Fiber.await(outbound))
      ))
    })
  })
