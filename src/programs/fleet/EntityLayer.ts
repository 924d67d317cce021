/**
 * The `AgentSession` entity's behaviour (docs/fleet.md): per session id, the session opened once
 * per activation, prompts run one at a time on the `AgentLoop` (answered from the log when an
 * attempt answered already, retried on a transient store failure), and `cancel`, `status`, `load`.
 * Internal to the fleet: `Fleet` re-exports it.
 *
 * @since 0.2.0
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import type * as Toolkit from "@effect/ai/Toolkit"
import * as Entity from "@effect/cluster/Entity"
import type { Sharding } from "@effect/cluster/Sharding"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import type * as Layer from "effect/Layer"
import type * as Schedule from "effect/Schedule"
import * as Scope from "effect/Scope"
import { StoreFailure } from "../../schema/Errors.js"
import type { HeaderSnapshotter } from "../../services/HeaderSnapshotter.js"
import { Session, type SessionShape } from "../../services/Session.js"
import * as AgentLoop from "../agent/AgentLoop.js"
import type { Route } from "../agent/TurnTypes.js"
import {
  answered,
  type Attempt,
  attemptId,
  attemptsOf,
  DEFAULT_STORE_RETRY,
  isTransientStoreFailure,
  StoreUnavailable,
  storeFailedOf,
  textOf
} from "./Attempts.js"
import { AgentSession, type PromptAnswer, type PromptRequest } from "./Protocol.js"
import { type Persistence, SessionFactory } from "./SessionFactory.js"

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
