/**
 * The session handle (SPEC §3.1, §7.3, §11.2) over a validated, committed log: the append
 * pipeline in order (prepare: walk, shapes, surface plan; pre-commit validators; durable store
 * write or write-behind; commit; feed), its re-entrant lock, lifecycle (N10, N11), folds, feed and
 * flush/close. An uncontended durable append on a memory store without validators runs the same
 * steps as one synchronous step. The constructors of `SessionLive` build the log and hand it here.
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { AppendConflict, SeqNotContiguous, SessionNotFound } from "../../schema/Errors.js"
import { type AppendOptions, type Event, isAppendSurfaceEvent } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { DerivedMessages } from "../../services/DerivedMessages.js"
import { type PreparedEvent, prepareEvent } from "../../services/PrepareEvent.js"
import { RequestFold, requestAtLog } from "../../services/RequestAt.js"
import {
  type AppendError,
  type FlushError,
  type PreCommitValidator,
  type RequestSnapshot,
  type SessionShape,
  TraceAppends
} from "../../services/Session.js"
import { type SessionStoreShape, syncAppendOf } from "../../services/SessionStore.js"
import { isPlan, type SurfaceTracker } from "../../services/SurfaceManager.js"
import { makeAppendLock } from "./AppendLock.js"
import { makeWriteBehind } from "./WriteBehind.js"

/** How appends reach the store. */
export type PersistenceOptions =
  | { readonly mode: "durable" }
  | {
    readonly mode: "batched"
    /** Fixed write-behind window in ms (default 200; an integer from 1 to 2,147,483,647). */
    readonly windowMs?: number
  }

export interface HandleInit {
  readonly store: SessionStoreShape
  readonly header: SessionHeader
  readonly events: Array<Event>
  readonly tracker: SurfaceTracker
  readonly firstLiveSeq: number
  readonly validators: ReadonlyArray<PreCommitValidator>
  readonly maxEventBytes: number
  readonly persistence: PersistenceOptions | undefined
}

/** The span of one append (hot path: no stack trace captured). */
const appendSpan = <A, E>(effect: Effect.Effect<A, E>, type: unknown): Effect.Effect<A, E> =>
  Effect.withSpan(effect, "Session.append", {
    captureStackTrace: false,
    attributes: { type: typeof type === "string" ? type : "invalid" }
  })

const untraced = <A, E>(effect: Effect.Effect<A, E>, _type: unknown): Effect.Effect<A, E> => effect

/** The handle's lifecycle (SPEC §3.1 step 0, N10, N11): open, failed by an append conflict, closed. */
const makeLifecycle = (id: string) => {
  let state: "open" | "failed" | "closed" = "open"
  let failure: AppendConflict | undefined
  return {
    get state() {
      return state
    },
    close: () => {
      state = "closed"
    },
    /** An AppendConflict from the store fails the handle (N11). */
    noteFailure: (e: unknown): void => {
      if (e instanceof AppendConflict) {
        state = "failed"
        failure = e
      }
    },
    /** N10 for a closed handle, N11 for a failed one. */
    unusable: (): SessionNotFound | AppendConflict | undefined => {
      if (state === "closed") {
        return new SessionNotFound({ rule: "N10", sessionId: id, detail: "the session handle is closed" })
      }
      if (state === "failed" && failure !== undefined) {
        return new AppendConflict({
          rule: "N11",
          sessionId: id,
          expectedSeq: failure.expectedSeq,
          storedSeq: failure.storedSeq,
          detail: "the handle failed after an append conflict; reopen the session"
        })
      }
      return undefined
    },
  }
}

/** Build the handle over a validated, committed log. */
export const makeHandle = (init: HandleInit): Effect.Effect<SessionShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { header, store, tracker, validators } = init
    const id = header.id
    const log = init.events
    const traced = (yield* TraceAppends) ? appendSpan : untraced
    const withLock = yield* makeAppendLock
    const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Event>(), PubSub.shutdown)
    const lifecycle = makeLifecycle(id)
    const noteConflict = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.tapError(effect, (e) => Effect.sync(() => lifecycle.noteFailure(e)))
    const requests = new RequestFold()
    for (const e of log) requests.apply(e)
    let turnStarts = 0
    for (const e of log) if (e.type === "turn/start") turnStarts++
    const derived = new DerivedMessages(log, tracker)
    // the human transcript (SPEC §4.7), kept as events commit; snapshots are reused until it grows
    const transcript: Array<Event> = log.filter(isAppendSurfaceEvent)
    let transcriptSnapshot: ReadonlyArray<Event> | undefined
    let snapshot: ReadonlyArray<Event> | undefined

    const batched = init.persistence?.mode === "batched"
      ? yield* makeWriteBehind({
        windowMs: init.persistence.windowMs ?? 200,
        storedNext: log.length,
        write: (batch) => noteConflict(store.append(id, batch, { expectedSeq: batch[0].event.seq })),
        isFailed: () => lifecycle.state === "failed",
        sessionId: id
      })
      : undefined
    // one synchronous step for steps 0–14: a durable handle on a memory store without validators
    const appendNow = batched === undefined && validators.length === 0 ? syncAppendOf(store) : undefined

    /** Steps 0 and 2–8 of SPEC §3.1: everything that needs no effect. Returns the prepared event or the error. */
    const prepare = (type: unknown, data: unknown, options: AppendOptions | undefined, time: number) => {
      const unusable = lifecycle.unusable()
      if (unusable !== undefined) return unusable
      const seq = log.length
      const prepared = prepareEvent(type, data, options, { seq, time, maxEventBytes: init.maxEventBytes })
      if ("_tag" in prepared) return prepared
      const plan = tracker.plan(prepared.event, seq)
      return isPlan(plan) ? prepared : plan
    }

    /** Step 11: commit in memory (log, surface, folds, validators, transcript). */
    const commit = (event: Event): void => {
      log.push(event)
      snapshot = undefined
      tracker.catchUp()
      requests.apply(event)
      if (event.type === "turn/start") turnStarts++
      for (const v of validators) v.apply(event)
      if (isAppendSurfaceEvent(event)) {
        transcript.push(event)
        transcriptSnapshot = undefined
      }
    }

    /** Step 13: publish on the feed (a subscriber cannot fail, delay or undo the append). */
    const publish = (event: Event): Event => {
      pubsub.unsafeOffer(event)
      return event
    }

    /** Steps 11–13 as an effect: commit, hand to write-behind (batched mode), publish. */
    const commitEffect = (prepared: PreparedEvent): Effect.Effect<Event> =>
      batched === undefined
        ? Effect.sync(() => {
          commit(prepared.event)
          return publish(prepared.event)
        })
        // committed and handed to write-behind together: a committed event is never left unqueued
        : Effect.uninterruptible(Effect.suspend(() => {
          commit(prepared.event)
          return Effect.map(batched.enqueue(prepared), () => publish(prepared.event))
        }))

    /** The append under the lock, one effect per step that may wait. */
    const appendLocked = (type: unknown, data: unknown, options: AppendOptions | undefined) =>
      withLock(Effect.flatMap(Clock.currentTimeMillis, (time): Effect.Effect<Event, AppendError> => {
        const prepared = prepare(type, data, options, time)
        if ("_tag" in prepared) return Effect.fail(prepared)
        const seq = prepared.event.seq
        // step 10: persist and commit as one uninterruptible step: an interruption between the
        // store's acknowledgement and the in-memory commit would leave the handle behind its store
        const persistAndCommit = batched === undefined
          ? Effect.uninterruptible(
            Effect.flatMap(noteConflict(store.append(id, [prepared], { expectedSeq: seq })), () => commitEffect(prepared))
          )
          : commitEffect(prepared)
        // step 9: pre-commit validators, in registration order
        let effect: Effect.Effect<Event, AppendError> = persistAndCommit
        for (let i = validators.length - 1; i >= 0; i--) {
          effect = Effect.zipRight(validators[i].check(prepared.event, { logLength: seq }), effect)
        }
        return effect
      }))

    const appendUnknown = (type: unknown, data: unknown, options?: AppendOptions): Effect.Effect<Event, AppendError> =>
      traced(
        appendNow === undefined ? appendLocked(type, data, options) : Effect.withFiberRuntime((fiber) => {
          // another fiber inside the lock (e.g. `exclusive`): wait for it like any append
          if (!withLock.admits(fiber)) return appendLocked(type, data, options)
          // steps 0–14 without yielding: nothing can interleave, so the lock is not taken
          const time = Context.get(fiber.currentDefaultServices, Clock.Clock).unsafeCurrentTimeMillis()
          const prepared = prepare(type, data, options, time)
          if ("_tag" in prepared) return Exit.fail(prepared)
          const failure = appendNow(id, [prepared], prepared.event.seq)
          if (failure !== undefined) {
            lifecycle.noteFailure(failure)
            return Exit.fail(failure)
          }
          commit(prepared.event)
          return Exit.succeed(publish(prepared.event))
        }),
        type
      )

    const requestAt = (seq: number): Effect.Effect<RequestSnapshot, SeqNotContiguous> =>
      Effect.suspend(() => {
        const r = requestAtLog(log, seq)
        return r instanceof SeqNotContiguous ? Effect.fail(r) : Effect.succeed(r)
      })

    const flush: Effect.Effect<void, FlushError> = Effect.withSpan(Effect.suspend(() => {
      const unusable = lifecycle.unusable()
      if (unusable !== undefined) return Effect.fail(unusable)
      return batched === undefined ? Effect.void : batched.flush
    }), "Session.flush", { captureStackTrace: false })

    const close: Effect.Effect<void, FlushError> = withLock(Effect.suspend(() => {
      if (lifecycle.state === "closed") return Effect.void
      const drain = lifecycle.state === "open" && batched !== undefined ? batched.flush : Effect.void
      return drain.pipe(Effect.ensuring(Effect.sync(lifecycle.close)))
    }))

    const handle: SessionShape = {
      id,
      header,
      firstLiveSeq: init.firstLiveSeq,
      append: appendUnknown as SessionShape["append"],
      appendUnknown,
      events: Effect.sync(() => {
        if (snapshot === undefined) snapshot = Object.freeze(log.slice())
        return snapshot
      }),
      counts: Effect.sync(() => ({
        events: log.length,
        turnStarts,
        replacedSinceHeader: requests.replacedSinceHeader
      })),
      surface: {
        nodes: Effect.sync(() => Object.freeze(tracker.nodes.slice())),
        replaceGeneration: Effect.sync(() => tracker.replaceGeneration)
      },
      messages: Effect.sync(() => derived.read()),
      transcript: Effect.sync(() => {
        if (transcriptSnapshot === undefined) transcriptSnapshot = Object.freeze(transcript.slice())
        return transcriptSnapshot
      }),
      requestHeader: Effect.sync(() => requests.header),
      requestContext: Effect.sync(() => requests.context),
      requestAt,
      flush,
      close,
      feed: Stream.fromPubSub(pubsub),
      subscribe: Stream.fromPubSub(pubsub, { scoped: true }),
      changes: (fromSeq) =>
        Stream.unwrapScoped(withLock(Effect.gen(function*() {
          const sub = yield* PubSub.subscribe(pubsub)
          const past = log.slice(Math.max(0, fromSeq))
          return Stream.concat(Stream.fromIterable(past), Stream.fromQueue(sub))
        }))),
      exclusive: withLock,
      state: Effect.sync(() => lifecycle.state)
    }
    // a scope cannot fail: events it could not write are reported, never dropped silently
    yield* Effect.addFinalizer(() =>
      close.pipe(Effect.catchAll((e) => {
        const seqs = batched?.unwritten() ?? []
        const which = seqs.length === 0 ? "" : ` (${seqs.length} event(s), seq ${seqs[0]}–${seqs[seqs.length - 1]})`
        return Effect.logError(
          `session ${id}: its scope closed before its pending events were written${which}; ` +
            "flush or close the session before its scope ends to handle the failure",
          e
        )
      }))
    )
    return handle
  })
