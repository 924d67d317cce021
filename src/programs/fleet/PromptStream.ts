/**
 * The fleet's client side (docs/fleet.md "Streaming", "No runner"): the entity's client, and
 * `promptStream`, which sends a prompt and follows the session's log for its updates, failing
 * with `FleetUnavailable` when no runner starts it in time. Internal to the fleet: `Fleet`
 * re-exports it.
 *
 * @since 0.2.0
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { FOLLOW_POLL_MILLIS, type FollowError, SessionStore } from "../../services/SessionStore.js"
import { makePromptTracker, type PromptUpdate, trackPrompt } from "./PromptTracker.js"
import { AgentSession, type PromptAnswer, type PromptRequest } from "./Protocol.js"

/**
 * A client of the fleet: `client(sessionId).prompt(new PromptRequest({ promptId, text }))` sends
 * to whichever runner owns the session.
 *
 * @since 0.2.0
 * @category constructors
 */
export const client = AgentSession.client

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
    const clock = yield* Effect.clock
    let lastActivity = clock.unsafeCurrentTimeMillis()
    let answered: PromptAnswer | undefined

    // fails the stream when nothing started the prompt for `timeoutMs`
    const watchdog = Effect.gen(function*() {
      while (!started) {
        const wait = lastActivity + timeoutMs - clock.unsafeCurrentTimeMillis()
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
      lastActivity = clock.unsafeCurrentTimeMillis()
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
