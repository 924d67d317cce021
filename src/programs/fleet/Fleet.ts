/**
 * A fleet of agent runners on `@effect/cluster` (docs/fleet.md): the `AgentSession` entity — one
 * per session id, owned by one runner at a time — with its RPC protocol (`prompt`, `cancel`,
 * `status`, `load`) and its behaviour, which runs the `AgentLoop` on the session opened from the
 * `SessionStore` in context. The entity's state is the session log: a runner that takes a shard
 * over opens the session (repair closes a turn the dead runner left open) and serves the next
 * message; nothing is kept only in a runner's memory. Runner and client layers are in
 * `FleetRunner`.
 *
 * @since 0.2.0
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as ClusterSchema from "@effect/cluster/ClusterSchema"
import * as Entity from "@effect/cluster/Entity"
import type { Sharding } from "@effect/cluster/Sharding"
import * as Rpc from "@effect/rpc/Rpc"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as PrimaryKey from "effect/PrimaryKey"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import { SessionLogError } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { HeaderSnapshotter } from "../../services/HeaderSnapshotter.js"
import { type AppendError, Session, type SessionShape } from "../../services/Session.js"
import { type CreateError, type ReadError, SessionStore } from "../../services/SessionStore.js"
import * as AgentLoop from "../agent/AgentLoop.js"
import type { Route } from "../agent/TurnTypes.js"

/**
 * A prompt for a session. `promptId` names it: the cluster stores the message under it (a prompt
 * sent twice with one id is run once), and the turn's user message carries it as its id
 * (`<promptId>` for the first attempt, `<promptId>#<n>` for a later one), so the log tells whether
 * the prompt was answered.
 *
 * @since 0.2.0
 * @category models
 */
export class PromptRequest extends Schema.Class<PromptRequest>("effect-session-log/fleet/PromptRequest")({
  promptId: Schema.NonEmptyString,
  text: Schema.String
}) {
  /**
   * The cluster's deduplication key (per session): the prompt id.
   *
   * @since 0.2.0
   */
  [PrimaryKey.symbol](): string {
    return this.promptId
  }
}

/**
 * The answer to a prompt: the turn that answered it, how it ended, the assistant's text, which
 * attempt answered (1 unless a runner died or was moved mid-turn) and the runner that ran it.
 * `replayed` is true when the answer was read from the log (the turn had ended before the reply
 * could be sent) rather than produced by this delivery.
 *
 * @since 0.2.0
 * @category models
 */
export const PromptAnswer = Schema.Struct({
  sessionId: Schema.String,
  promptId: Schema.String,
  turn: Schema.Number,
  reason: Schema.String,
  text: Schema.String,
  attempt: Schema.Number,
  runner: Schema.String,
  replayed: Schema.Boolean
})

/**
 * The answer to a prompt.
 *
 * @since 0.2.0
 * @category models
 */
export type PromptAnswer = typeof PromptAnswer.Type

/**
 * What `status` reports: the owning runner, the log's length and turns, and whether a turn runs.
 *
 * @since 0.2.0
 * @category models
 */
export const SessionStatus = Schema.Struct({
  sessionId: Schema.String,
  runner: Schema.String,
  events: Schema.Number,
  turns: Schema.Number,
  busy: Schema.Boolean
})

/**
 * What `status` reports.
 *
 * @since 0.2.0
 * @category models
 */
export type SessionStatus = typeof SessionStatus.Type

/**
 * One entry of the transcript `load` returns: an append-origin message event and its text.
 *
 * @since 0.2.0
 * @category models
 */
export const TranscriptEntry = Schema.Struct({
  seq: Schema.Number,
  type: Schema.String,
  text: Schema.String
})

/**
 * One transcript entry.
 *
 * @since 0.2.0
 * @category models
 */
export type TranscriptEntry = typeof TranscriptEntry.Type

/**
 * `prompt`: run a turn for the prompt (or answer it from the log when it was answered already).
 * Persisted: the message is stored in the cluster's SQL message storage before it is delivered,
 * and a runner that takes the session's shard over delivers it again when no reply was stored.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Prompt = Rpc.make("prompt", { payload: PromptRequest, success: PromptAnswer, error: SessionLogError })
  .annotate(ClusterSchema.Persisted, true)

/**
 * `cancel`: interrupt the turn in flight (it ends `aborted`); answers whether one was running.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Cancel = Rpc.make("cancel", { success: Schema.Boolean })

/**
 * `status`: the owning runner and the session's size.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Status = Rpc.make("status", { success: SessionStatus, error: SessionLogError })

/**
 * `load`: the transcript (SPEC §4.7) as text entries.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Load = Rpc.make("load", { success: Schema.Array(TranscriptEntry), error: SessionLogError })

/**
 * The `AgentSession` entity: one per session id.
 *
 * @since 0.2.0
 * @category entities
 */
export const AgentSession = Entity.make("AgentSession", [Prompt, Cancel, Status, Load])

/**
 * How a session's appends reach its store (`SessionLive`'s `persistence` option).
 *
 * @since 0.2.0
 * @category models
 */
export type Persistence = { readonly mode: "durable" } | { readonly mode: "batched"; readonly windowMs?: number }

/**
 * How the entity opens (with crash repair) and creates sessions; handles live in the given scope.
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionFactoryShape {
  readonly create: (id: string, persistence: Persistence) => Effect.Effect<SessionShape, CreateError, Scope.Scope>
  readonly open: (id: string, persistence: Persistence) => Effect.Effect<SessionShape, ReadError | AppendError, Scope.Scope>
}

/**
 * The entity's session constructors (the edge provides them from `SessionLive`).
 *
 * @since 0.2.0
 * @category services
 */
export class SessionFactory extends Context.Tag("effect-session-log/fleet/SessionFactory")<
  SessionFactory,
  SessionFactoryShape
>() {}

/**
 * Session constructors over the current `SessionStore` (pass `SessionLive.create` and `SessionLive.open`).
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionConstructors {
  readonly create: (
    options: { readonly id: string; readonly persistence?: Persistence }
  ) => Effect.Effect<SessionShape, CreateError, SessionStore | Scope.Scope>
  readonly open: (
    id: string,
    options?: { readonly persistence?: Persistence }
  ) => Effect.Effect<SessionShape, ReadError | AppendError, SessionStore | Scope.Scope>
}

/**
 * The factory from session constructors, over the provided store.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerSessionFactory = (constructors: SessionConstructors): Layer.Layer<SessionFactory, never, SessionStore> =>
  Layer.effect(
    SessionFactory,
    Effect.map(SessionStore, (store) => ({
      create: (id, persistence) => Effect.provideService(constructors.create({ id, persistence }), SessionStore, store),
      open: (id, persistence) => Effect.provideService(constructors.open(id, { persistence }), SessionStore, store)
    }))
  )

/**
 * One attempt at a prompt found in the log: its turn, the assistant's text in it and, once
 * written, how the turn ended (its `turn/end` reason's kind).
 *
 * @since 0.2.0
 * @category models
 */
export interface Attempt {
  readonly turn: number
  end: string | undefined
  text: string
}

const textOf = (content: unknown): string =>
  Array.isArray(content)
    ? content.flatMap((b: { readonly type?: unknown; readonly text?: unknown }) =>
      b?.type === "text" && typeof b.text === "string" ? [b.text] : []
    ).join("")
    : ""

const attemptId = (promptId: string, n: number): string => n === 1 ? promptId : `${promptId}#${n}`

/**
 * The attempts at `promptId` in a log, in order: each `user/message` whose id is the prompt's
 * (`<promptId>` or `<promptId>#<n>`), the turn it opened, the assistant text of that turn and its
 * `turn/end` reason.
 *
 * @since 0.2.0
 * @category utils
 */
export const attemptsOf = (events: ReadonlyArray<Event>, promptId: string): ReadonlyArray<Attempt> => {
  const attempts: Array<Attempt> = []
  const byTurn = new Map<number, Attempt>()
  let turn = 0
  for (const e of events) {
    const data = e.data as Record<string, unknown>
    if (e.type === "turn/start") turn = data.turn as number
    else if (e.type === "user/message") {
      const id = (data as { readonly id?: unknown }).id
      if (typeof id === "string" && (id === promptId || id.startsWith(`${promptId}#`)) && !byTurn.has(turn)) {
        const a: Attempt = { turn, end: undefined, text: "" }
        attempts.push(a)
        byTurn.set(turn, a)
      }
    } else if (e.type === "assistant/message") {
      const a = byTurn.get(data.turn as number)
      if (a !== undefined) a.text += textOf((data.message as { readonly content?: unknown }).content)
    } else if (e.type === "turn/end") {
      const a = byTurn.get(data.turn as number)
      if (a !== undefined) a.end = (data.reason as { readonly kind: string }).kind
    }
  }
  return attempts
}

// a turn cut by a runner's death (repair's closers) or by a shard move (interrupted: `aborted`)
// did not answer its prompt: the next delivery runs it again
const answered = (a: Attempt): boolean => a.end !== undefined && a.end !== "interrupted" && a.end !== "aborted"

/**
 * Options of the entity's behaviour: the agent loop's toolkit, system prompt and route, how the
 * sessions persist (default: the agent default, `batched`), and the entity's idle time before a
 * runner closes the session's handle.
 *
 * @since 0.2.0
 * @category models
 */
export interface FleetOptions<Tools extends Record<string, Tool.Any>> {
  readonly toolkit: Toolkit.Toolkit<Tools>
  readonly system: string
  readonly route: Route
  readonly persistence?: Persistence
  readonly maxIdleTimeMs?: number
}

/**
 * The `AgentSession` behaviour, registered with the `Sharding` in context. Prompts of a session
 * run one at a time, in arrival order; `cancel`, `status` and `load` are answered while a turn runs.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = <Tools extends Record<string, Tool.Any>>(
  options: FleetOptions<Tools>
): Layer.Layer<
  never,
  never,
  | Sharding
  | SessionFactory
  | LanguageModel.LanguageModel
  | HeaderSnapshotter
  | Tool.HandlersFor<Tools>
  | Tool.Requirements<Tools[keyof Tools]>
> =>
  AgentSession.toLayer(
    Effect.gen(function*() {
      const address = yield* Entity.CurrentAddress
      const runnerAddress = yield* Entity.CurrentRunnerAddress
      const runner = `${runnerAddress.host}:${runnerAddress.port}`
      const sessionId = address.entityId
      const factory = yield* SessionFactory
      const scope = yield* Effect.scope
      const context = yield* Effect.context<
        | LanguageModel.LanguageModel
        | HeaderSnapshotter
        | Tool.HandlersFor<Tools>
        | Tool.Requirements<Tools[keyof Tools]>
      >()
      const persistence: Persistence = options.persistence ?? { mode: "batched" }
      const loop = AgentLoop.make({ toolkit: options.toolkit, system: options.system, route: options.route })
      const openLock = yield* Effect.makeSemaphore(1)
      const turnLock = yield* Effect.makeSemaphore(1)
      let session: SessionShape | undefined
      let inFlight: Fiber.RuntimeFiber<unknown, unknown> | undefined

      // the session, opened once per activation (repairing what a dead owner left open), or
      // created on the first prompt; its handle closes (and flushes) with the entity
      const sessionOf = openLock.withPermits(1)(Effect.suspend(() =>
        session !== undefined ? Effect.succeed(session) : factory.open(sessionId, persistence).pipe(
          Effect.catchTag("SessionNotFound", () => factory.create(sessionId, persistence)),
          Scope.extend(scope),
          Effect.tap((s) => {
            session = s
          })
        )
      ))

      const answerOf = (promptId: string, a: Attempt, attempt: number, replayed: boolean): PromptAnswer => ({
        sessionId,
        promptId,
        turn: a.turn,
        reason: a.end ?? "open",
        text: a.text,
        attempt,
        runner,
        replayed
      })

      const prompt = ({ payload }: { readonly payload: PromptRequest }) =>
        turnLock.withPermits(1)(Effect.gen(function*() {
          const s = yield* sessionOf
          const before = attemptsOf(yield* s.events, payload.promptId)
          const done = before.findIndex(answered)
          if (done >= 0) return answerOf(payload.promptId, before[done], done + 1, true)
          const attempt = before.length + 1
          const fiber = yield* loop.runTurn([{ type: "user", content: payload.text, id: attemptId(payload.promptId, attempt) }]).pipe(
            Effect.provideService(Session, s),
            Effect.provide(context),
            Effect.fork
          )
          inFlight = fiber
          // a cancelled turn ends `aborted` (its turn/end is written before the fiber ends)
          const exit = yield* Fiber.await(fiber).pipe(Effect.onInterrupt(() => Fiber.interrupt(fiber)))
          inFlight = undefined
          if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) return yield* Effect.failCause(exit.cause)
          yield* s.flush
          const after = attemptsOf(yield* s.events, payload.promptId)
          const mine = after[attempt - 1]
          return answerOf(payload.promptId, mine ?? { turn: 0, end: "aborted", text: "" }, attempt, false)
        }))

      return AgentSession.of({
        prompt,
        cancel: () =>
          Effect.suspend(() => {
            const fiber = inFlight
            return fiber === undefined ? Effect.succeed(false) : Effect.as(Fiber.interrupt(fiber), true)
          }),
        status: () =>
          Effect.gen(function*() {
            const s = yield* sessionOf
            const counts = yield* s.counts
            return { sessionId, runner, events: counts.events, turns: counts.turnStarts, busy: inFlight !== undefined }
          }),
        load: () =>
          Effect.gen(function*() {
            const s = yield* sessionOf
            return (yield* s.transcript).map((e) => ({
              seq: e.seq,
              type: e.type,
              text: textOf((((e.data as { readonly message?: unknown }).message ?? e.data) as { readonly content?: unknown }).content)
            }))
          })
      })
    }),
    {
      concurrency: "unbounded",
      ...(options.maxIdleTimeMs === undefined ? {} : { maxIdleTime: options.maxIdleTimeMs })
    }
  )

/**
 * A client of the fleet: `client(sessionId).prompt(new PromptRequest({ promptId, text }))` sends
 * to whichever runner owns the session.
 *
 * @since 0.2.0
 * @category constructors
 */
export const client = AgentSession.client
