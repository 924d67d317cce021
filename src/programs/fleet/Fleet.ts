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
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as PrimaryKey from "effect/PrimaryKey"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { SessionLogError, StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { HeaderSnapshotter } from "../../services/HeaderSnapshotter.js"
import { type AppendError, Session, type SessionShape } from "../../services/Session.js"
import { type CreateError, FOLLOW_POLL_MILLIS, type FollowError, type ReadError, SessionStore } from "../../services/SessionStore.js"
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
 * A client that stops waiting does not cancel it (uninterruptible for the client): `cancel` does.
 *
 * @since 0.2.0
 * @category rpcs
 */
export const Prompt = Rpc.make("prompt", { payload: PromptRequest, success: PromptAnswer, error: SessionLogError })
  .annotate(ClusterSchema.Persisted, true)
  // a client that stops waiting (a timeout, Ctrl-C, its process ending) does not cancel the
  // prompt: it stays stored and runs; `cancel` is the way to stop a turn
  .annotate(ClusterSchema.Uninterruptible, "client")

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
 * written, how the turn ended (its `turn/end` reason's kind). `storeFailed` is the message of a
 * turn that ended `error` because a checkpoint could not be written for a transient store failure
 * (`CHECKPOINT_FAILED` of a `StoreFailure` without a rule id): such a turn did not answer its prompt.
 *
 * @since 0.2.0
 * @category models
 */
export interface Attempt {
  readonly turn: number
  end: string | undefined
  text: string
  storeFailed?: string
}

// how a StoreFailure without a rule id renders (StoreFailure.message), in a CHECKPOINT_FAILED end
const TRANSIENT_STORE_MESSAGE = "store failure in "

/** The message of a `turn/end` reason that a transient store failure of a checkpoint caused. */
const storeFailedOf = (reason: unknown): string | undefined => {
  const r = reason as { readonly kind?: unknown; readonly error?: { readonly code?: unknown; readonly message?: unknown } } | undefined
  const error = r?.error
  return r?.kind === "error" && error?.code === "CHECKPOINT_FAILED" && typeof error.message === "string" &&
      error.message.startsWith(TRANSIENT_STORE_MESSAGE)
    ? error.message
    : undefined
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
      if (a !== undefined) {
        const reason = data.reason as { readonly kind: string; readonly error?: { readonly code?: unknown; readonly message?: unknown } }
        a.end = reason.kind
        const error = reason.error
        const failed = storeFailedOf(reason)
        if (failed !== undefined) a.storeFailed = failed
      }
    }
  }
  return attempts
}

// a turn cut by a runner's death (repair's closers) or by a shard move (interrupted: `aborted`),
// or ended by a store that could not be reached, did not answer its prompt: it is run again
const answered = (a: Attempt): boolean =>
  a.end !== undefined && a.end !== "interrupted" && a.end !== "aborted" && a.storeFailed === undefined

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
  /**
   * How a prompt retries a transient store failure (`isTransientStoreFailure`) on this runner
   * before it gives the message back to the cluster (default `DEFAULT_STORE_RETRY`).
   */
  readonly storeRetry?: Schedule.Schedule<unknown, unknown>
}

/**
 * Whether an error is a transient failure of the store: a `StoreFailure` without a rule id (the
 * database could not be reached, a query timed out). A `StoreFailure` carrying a rule id is a
 * verdict on the data (a rule broken), as are the other errors: those are a prompt's answer.
 *
 * @since 0.2.0
 * @category utils
 */
export const isTransientStoreFailure = (error: unknown): error is StoreFailure =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === "StoreFailure" &&
  (error as { readonly rule?: unknown }).rule === undefined

/**
 * The default of `FleetOptions.storeRetry`: six retries, 100 ms apart then doubling (6.3 s of
 * waits, about 10 s in all with the failing attempts' own time).
 *
 * @since 0.2.0
 * @category constants
 */
export const DEFAULT_STORE_RETRY: Schedule.Schedule<unknown, unknown> = Schedule.exponential("100 millis").pipe(
  Schedule.intersect(Schedule.recurs(6))
)

/**
 * The defect a prompt dies with when the store stayed unreachable through its retries. A defect
 * is not stored as the prompt's reply: the cluster restarts the entity and delivers the prompt
 * again (with its own backoff, at most 10 s apart) until the store answers.
 *
 * @since 0.2.0
 * @category errors
 */
export class StoreUnavailable extends Schema.TaggedError<StoreUnavailable>()("StoreUnavailable", {
  sessionId: Schema.String,
  promptId: Schema.String,
  cause: Schema.Defect
}) {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `the store of session ${this.sessionId} stayed unreachable while prompt ${this.promptId} was served ` +
      `(${cause}); the prompt stays stored and is delivered again`
  }
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
      const storeRetry = options.storeRetry ?? DEFAULT_STORE_RETRY
      let session: SessionShape | undefined
      let sessionScope: Scope.CloseableScope | undefined
      let inFlight: Fiber.RuntimeFiber<unknown, unknown> | undefined

      // the session, opened once per activation (repairing what a dead owner left open), or
      // created on the first prompt; its handle closes (and flushes) with the entity, or when a
      // transient store failure drops it (`dropSession`: the next use opens it again)
      const sessionOf = openLock.withPermits(1)(Effect.suspend(() =>
        session !== undefined ? Effect.succeed(session) : Effect.flatMap(
          Scope.fork(scope, ExecutionStrategy.sequential),
          (child) =>
            factory.open(sessionId, persistence).pipe(
              Effect.catchTag("SessionNotFound", () => factory.create(sessionId, persistence)),
              Scope.extend(child),
              Effect.tap((s) => {
                session = s
                sessionScope = child
              }),
              Effect.onError(() => Scope.close(child, Exit.void))
            )
        )
      ))
      const dropSession = openLock.withPermits(1)(Effect.suspend(() => {
        const child = sessionScope
        session = undefined
        sessionScope = undefined
        return child === undefined ? Effect.void : Scope.close(child, Exit.void)
      }))

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

      const attemptPrompt = (payload: PromptRequest) =>
        Effect.gen(function*() {
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
          const exit = yield* Fiber.await(fiber).pipe(
            Effect.onInterrupt(() => Fiber.interrupt(fiber)),
            Effect.ensuring(Effect.sync(() => {
              inFlight = undefined
            }))
          )
          if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) return yield* Effect.failCause(exit.cause)
          yield* s.flush
          const after = attemptsOf(yield* s.events, payload.promptId)
          const mine = after[attempt - 1]
          // the turn ended because a checkpoint could not be stored (maybe before its user
          // message was): not an answer, try again
          const storeFailed = Exit.isSuccess(exit) ? storeFailedOf(exit.value.reason) : undefined
          if (storeFailed !== undefined) return yield* new StoreFailure({ method: "checkpoint", cause: new Error(storeFailed) })
          return answerOf(payload.promptId, mine ?? { turn: 0, end: "aborted", text: "" }, attempt, false)
        })

      // a transient store failure (opening, reading or appending) is not the prompt's answer: the
      // session is dropped and the prompt tried again (the log says whether its turn was stored:
      // an answered prompt is answered from it, never run twice); when the store stays
      // unreachable the handler dies, and a defect is not stored as the reply: the cluster
      // restarts the entity and delivers the prompt again
      const prompt = ({ payload }: { readonly payload: PromptRequest }) =>
        turnLock.withPermits(1)(attemptPrompt(payload).pipe(
          Effect.tapError((error) =>
            isTransientStoreFailure(error)
              ? Effect.zipRight(
                Effect.logWarning(`prompt ${payload.promptId} of session ${sessionId}: ${error.message}; trying again`),
                dropSession
              )
              : Effect.void
          ),
          Effect.retry({ schedule: storeRetry, while: isTransientStoreFailure }),
          Effect.catchIf(
            isTransientStoreFailure,
            (error) => Effect.die(new StoreUnavailable({ sessionId, promptId: payload.promptId, cause: error }))
          )
        ))

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

// --- Streaming a prompt (docs/fleet.md "Streaming"): the client follows the session's log ------

/**
 * One update of a streamed prompt (`promptStream`), each from a committed event of the session's
 * log (`seq`): the prompt's turn started (`TurnStarted`: its user message is stored), a text delta
 * of the assistant (`TextDelta`), a tool call (`ToolCall`) and its result (`ToolResult`), the turn
 * ended (`TurnEnded`, with its `turn/end` reason's kind: `interrupted` for a turn a dead runner
 * left open, closed by the new owner's repair), and last the prompt's answer (`Answered`).
 * `attempt` is the attempt the turn belongs to (1, then 2 when a runner died or was moved mid-turn).
 *
 * @since 0.2.0
 * @category models
 */
export const PromptUpdate = Schema.Union(
  Schema.TaggedStruct("TurnStarted", { turn: Schema.Number, attempt: Schema.Number, seq: Schema.Number }),
  Schema.TaggedStruct("TextDelta", { turn: Schema.Number, attempt: Schema.Number, seq: Schema.Number, text: Schema.String }),
  Schema.TaggedStruct("ToolCall", {
    turn: Schema.Number,
    attempt: Schema.Number,
    seq: Schema.Number,
    callId: Schema.String,
    name: Schema.String,
    arguments: Schema.String
  }),
  Schema.TaggedStruct("ToolResult", {
    turn: Schema.Number,
    attempt: Schema.Number,
    seq: Schema.Number,
    callId: Schema.String,
    isError: Schema.Boolean
  }),
  Schema.TaggedStruct("TurnEnded", { turn: Schema.Number, attempt: Schema.Number, seq: Schema.Number, reason: Schema.String }),
  Schema.TaggedStruct("Answered", { answer: PromptAnswer })
)

/**
 * One update of a streamed prompt.
 *
 * @since 0.2.0
 * @category models
 */
export type PromptUpdate = typeof PromptUpdate.Type

/**
 * The attempt a user message's id names for `promptId`: 1 for `<promptId>`, n for
 * `<promptId>#<n>`, undefined for another prompt's message.
 *
 * @since 0.2.0
 * @category utils
 */
export const attemptOf = (messageId: unknown, promptId: string): number | undefined => {
  if (messageId === promptId) return 1
  if (typeof messageId !== "string" || !messageId.startsWith(`${promptId}#`)) return undefined
  const n = Number(messageId.slice(promptId.length + 1))
  return Number.isInteger(n) && n >= 2 ? n : undefined
}

/**
 * The state of `trackPrompt`: the turn the log is in (0 outside a turn, or when its `turn/start`
 * was not read) and the turns of the prompt's attempts.
 *
 * @since 0.2.0
 * @category models
 */
export interface PromptTracker {
  readonly promptId: string
  turn: number
  readonly attempts: Map<number, number>
}

/**
 * A tracker of `promptId`'s turns, for a log read from any seq on.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makePromptTracker = (promptId: string): PromptTracker => ({ promptId, turn: 0, attempts: new Map() })

/**
 * The updates one committed event makes for the tracked prompt (none for another prompt's turns).
 * Fed the events of a log in seq order, in chunks of any size, it gives the same updates.
 *
 * @since 0.2.0
 * @category utils
 */
export const trackPrompt = (tracker: PromptTracker, event: unknown): ReadonlyArray<PromptUpdate> => {
  const e = event as { readonly seq: number; readonly type: string; readonly data: Record<string, any> }
  const data = e.data ?? {}
  switch (e.type) {
    case "turn/start":
      tracker.turn = data.turn as number
      return []
    case "user/message": {
      const attempt = attemptOf(data.id, tracker.promptId)
      // a message whose turn/start came before the followed part of the log is not tracked
      if (attempt === undefined || tracker.turn === 0 || tracker.attempts.has(tracker.turn)) return []
      tracker.attempts.set(tracker.turn, attempt)
      return [{ _tag: "TurnStarted", turn: tracker.turn, attempt, seq: e.seq }]
    }
    case "assistant/chunk": {
      const attempt = tracker.attempts.get(data.turn)
      const chunk = data.chunk as { readonly type?: unknown; readonly text?: unknown }
      return attempt !== undefined && chunk?.type === "text-delta" && typeof chunk.text === "string" && chunk.text !== ""
        ? [{ _tag: "TextDelta", turn: data.turn, attempt, seq: e.seq, text: chunk.text }]
        : []
    }
    case "tool/call": {
      const attempt = tracker.attempts.get(data.turn)
      return attempt === undefined ? [] : [{
        _tag: "ToolCall",
        turn: data.turn,
        attempt,
        seq: e.seq,
        callId: String(data.callId),
        name: String(data.name),
        arguments: String(data.arguments)
      }]
    }
    case "tool/result": {
      const attempt = tracker.attempts.get(data.turn)
      const block = (data.message?.content ?? [])[0] as { readonly toolCallId?: unknown; readonly isError?: unknown } | undefined
      return attempt === undefined ? [] : [{
        _tag: "ToolResult",
        turn: data.turn,
        attempt,
        seq: e.seq,
        callId: String(block?.toolCallId ?? data.message?.source?.callId ?? ""),
        isError: block?.isError === true
      }]
    }
    case "turn/end": {
      const attempt = tracker.attempts.get(data.turn)
      tracker.turn = 0
      return attempt === undefined ? [] : [{ _tag: "TurnEnded", turn: data.turn, attempt, seq: e.seq, reason: String(data.reason?.kind) }]
    }
    default:
      return []
  }
}

/**
 * No runner started the prompt in time: within `timeoutMs` of sending it (or of the session's last
 * committed event, while its log moves) neither the prompt's turn started nor its answer came, as
 * when no runner of the fleet is alive. The prompt stays stored in the cluster's message table: a
 * runner that starts later runs it, and sending it again with its `promptId` waits for that answer
 * (docs/fleet.md "No runner").
 *
 * @since 0.2.0
 * @category errors
 */
export class FleetUnavailable extends Schema.TaggedError<FleetUnavailable>()("FleetUnavailable", {
  sessionId: Schema.String,
  promptId: Schema.String,
  timeoutMs: Schema.Number
}) {
  override get message(): string {
    return `no runner of the fleet started prompt ${this.promptId} of session ${this.sessionId} within ${this.timeoutMs} ms ` +
      `(is a runner running on this database?); the prompt stays stored: a runner that starts later runs it, ` +
      `and sending it again with --prompt-id ${this.promptId} waits for its answer`
  }
}

/**
 * Options of `promptStream`.
 *
 * @since 0.2.0
 * @category models
 */
export interface PromptStreamOptions {
  /**
   * How long the prompt may wait for a runner to start its turn (default 60,000 ms): without its
   * turn started, its answer, or a new event of the session for that long, the stream fails with
   * `FleetUnavailable`. Once the turn started there is no time limit (a failover runs it again).
   */
  readonly timeoutMs?: number
}

/**
 * The default of `PromptStreamOptions.timeoutMs`.
 *
 * @since 0.2.0
 * @category constants
 */
export const DEFAULT_PROMPT_TIMEOUT_MS = 60_000

/** The committed length of a session's log (0 before it exists). */
const lengthOf = (store: SessionStore["Type"], sessionId: string) =>
  store.loadEach(sessionId, { onEvents: () => Effect.void }).pipe(
    Effect.map((summary) => summary.count),
    Effect.catchTag("SessionNotFound", () => Effect.succeed(0))
  )

/** The session's committed events from `fromSeq`, waiting for the session to exist. */
const followFrom = (store: SessionStore["Type"], sessionId: string, fromSeq: number): Stream.Stream<unknown, FollowError> =>
  store.follow(sessionId, { fromSeq }).pipe(
    Stream.catchTag("SessionNotFound", () =>
      Stream.unwrap(Effect.as(Effect.sleep(FOLLOW_POLL_MILLIS), followFrom(store, sessionId, fromSeq))))
  )

type Step =
  | { readonly _tag: "Event"; readonly event: unknown }
  | { readonly _tag: "Answer"; readonly answer: PromptAnswer; readonly followed: boolean }

/**
 * Send a prompt and stream its updates: the turn's text deltas, tool calls and results as the
 * runner stores them, then the answer. The updates come from the session's log, followed through
 * the `SessionStore` in context (the fleet's database) from its length before the prompt was sent,
 * not from the runner: a runner's failover does not break the stream, every update is a committed
 * event (what the client saw is in the log), and the attempt a runner's death cut shows as its
 * updates, its `TurnEnded` with reason `interrupted`, then the next attempt's. The stream ends
 * with `Answered` once the answer came and the answering turn's end was delivered; a prompt
 * answered before (its `promptId` sent again) streams only `Answered`, its stored answer. Finding
 * where the log ends reads the session's log once (streamed, not kept).
 *
 * @since 0.2.0
 * @category constructors
 */
export const promptStream = (
  sessionId: string,
  request: PromptRequest,
  options?: PromptStreamOptions
) =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const store = yield* SessionStore
    const session = (yield* client)(sessionId)
    const timeoutMs = options?.timeoutMs ?? DEFAULT_PROMPT_TIMEOUT_MS
    const fromSeq = yield* lengthOf(store, sessionId)
    const answer = yield* Deferred.make<PromptAnswer, Effect.Effect.Error<ReturnType<typeof session.prompt>>>()
    yield* Effect.forkScoped(Effect.intoDeferred(session.prompt(request), answer))

    const tracker = makePromptTracker(request.promptId)
    const ended = new Set<number>()
    let started = false
    let lastActivity = Date.now()
    let answered: PromptAnswer | undefined

    // fails the stream when nothing started the prompt for `timeoutMs`
    const watchdog = Effect.gen(function*() {
      while (!started) {
        const wait = lastActivity + timeoutMs - Date.now()
        if (wait <= 0) return yield* new FleetUnavailable({ sessionId, promptId: request.promptId, timeoutMs })
        yield* Effect.sleep(wait)
      }
    })

    const step = (s: Step): ReadonlyArray<PromptUpdate> => {
      if (s._tag === "Answer") {
        started = true
        answered = s.answer
        return !s.followed || ended.has(s.answer.turn) ? [{ _tag: "Answered", answer: s.answer }] : []
      }
      const updates = trackPrompt(tracker, s.event)
      lastActivity = Date.now()
      const out: Array<PromptUpdate> = [...updates]
      for (const u of updates) {
        if (u._tag === "TurnStarted") started = true
        if (u._tag === "TurnEnded") {
          ended.add(u.turn)
          if (answered !== undefined && answered.turn === u.turn) out.push({ _tag: "Answered", answer: answered })
        }
      }
      return out
    }

    const events: Stream.Stream<Step, FollowError> = Stream.map(followFrom(store, sessionId, fromSeq), (event) => ({ _tag: "Event", event }))
    // the answering turn is stored before the answer is sent: the follower delivers its end,
    // unless it started before `fromSeq` (a prompt sent again while its first delivery ran)
    const reply = Stream.fromEffect(Effect.gen(function*() {
      const a = yield* Deferred.await(answer)
      const stored = a.replayed || a.turn === 0 ? [] : yield* store.readFrom(sessionId, fromSeq)
      const followed = stored.some((e) => {
        const ev = e as { readonly type: string; readonly data: { readonly turn?: unknown } }
        return ev.type === "turn/start" && ev.data.turn === a.turn
      })
      return { _tag: "Answer", answer: a, followed } satisfies Step
    }))
    return Stream.merge(events, reply).pipe(
      Stream.merge(Stream.drain(Stream.fromEffect(watchdog))),
      Stream.mapConcat(step),
      Stream.takeUntil((u) => u._tag === "Answered")
    )
  }))
