/**
 * The Session implementation (SPEC §3.1, §7.2, §11.2): the handle — its append pipeline
 * (validate, persist, commit, publish), append lock, folds, feed and write-behind — and the
 * constructors `create`, `fromSeed`, `open` and `fork` over any `SessionStore`, with their layers.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import {
  AppendConflict,
  SeqNotContiguous,
  SessionExists,
  SessionHeaderInvalid,
  SessionNotFound,
  type StoreFailure
} from "../schema/Errors.js"
import { type AppendOptions, type Event, isAppendSurfaceEvent } from "../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES, SESSION_FORMAT_VERSION } from "../schema/Format.js"
import { type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import { isRecord } from "../schema/Validation.js"
import { type ForkPoint, type PlanError, planFork, reject } from "../services/Fork.js"
import { nextId } from "../services/IdGenerator.js"
import { DerivedMessages } from "../services/DerivedMessages.js"
import { type PreparedEvent, prepareEvent, prepareValidated } from "../services/PrepareEvent.js"
import { RequestFold, requestAtLog } from "../services/RequestAt.js"
import { repairLoaded } from "../services/Resume.js"
import { instantiateValidators, type SeedError, validateSeed, withEndSeed } from "../services/Seed.js"
import {
  type AppendError,
  type FlushError,
  type PreCommitValidator,
  type RequestSnapshot,
  Session,
  type SessionShape,
  TraceAppends,
  type ValidatorFactory
} from "../services/Session.js"
import { type ReadError, SessionStore, type SessionStoreShape } from "../services/SessionStore.js"
import { isPlan, SurfaceTracker } from "../services/SurfaceManager.js"
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

interface CommonOptions {
  readonly persistence?: PersistenceOptions
  /** Extra pre-commit validators (the `Invariants` layer's, when provided, runs first). */
  readonly validators?: ReadonlyArray<ValidatorFactory>
  /** B10 cap on a serialised event (default 64 MiB). */
  readonly maxEventBytes?: number
}

/** Options of `create`. */
export interface CreateOptions extends CommonOptions {
  readonly id?: string
  /** Header fields; `version`, `id` and `createdAt` default to 1, the id and Clock now. */
  readonly header?: Record<string, unknown>
}

/** Options of `fromSeed`. */
export interface FromSeedOptions extends CommonOptions {
  readonly header: unknown
  readonly seed: unknown
}

/** Options of `open`. */
export interface OpenOptions extends CommonOptions {}

/** Errors of `create`. */
export type CreateError = SessionHeaderInvalid | SessionExists | StoreFailure

/** Errors of `fromSeed`. */
export type FromSeedError = SeedError | SessionHeaderInvalid | SessionExists | AppendError

/** Errors of `open`. */
export type OpenError = ReadError | AppendError

/** Options of `fork`: where, the child's id, and the child handle's options. */
export interface ForkOptions extends ForkPoint, CommonOptions {}

/** Errors of `fork`. */
export type ForkError = PlanError | Exclude<FromSeedError, SessionExists>



interface HandleInit {
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
    /** A store write whose AppendConflict fails the handle (N11). */
    noteConflict: <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.tapError(effect, (e) =>
        Effect.sync(() => {
          if (e instanceof AppendConflict) {
            state = "failed"
            failure = e
          }
        }))
  }
}

/** Build the handle over a validated, committed log. */
const makeHandle = (init: HandleInit): Effect.Effect<SessionShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { header, store, tracker, validators } = init
    const id = header.id
    const log = init.events
    const traced = (yield* TraceAppends) ? appendSpan : untraced
    const withLock = yield* makeAppendLock
    const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Event>(), PubSub.shutdown)
    const lifecycle = makeLifecycle(id)
    const { noteConflict } = lifecycle
    const requests = new RequestFold()
    for (const e of log) requests.apply(e)
    const derived = new DerivedMessages(log, tracker)
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

    /** Step 11 and later: commit in memory, hand to write-behind, publish. */
    const commit = (prepared: PreparedEvent): Effect.Effect<Event> => {
      const frozen = prepared.event
      log.push(frozen)
      snapshot = undefined
      tracker.catchUp()
      requests.apply(frozen)
      for (const v of validators) v.apply(frozen)
      const published = PubSub.publish(pubsub, frozen).pipe(Effect.as(frozen))
      return batched === undefined ? published : Effect.zipRight(batched.enqueue(prepared), published)
    }

    const appendUnknown = (type: unknown, data: unknown, options?: AppendOptions): Effect.Effect<Event, AppendError> =>
      traced(withLock(Effect.flatMap(Clock.currentTimeMillis, (time): Effect.Effect<Event, AppendError> => {
        const prepared = prepare(type, data, options, time)
        if ("_tag" in prepared) return Effect.fail(prepared)
        const seq = prepared.event.seq
        let effect: Effect.Effect<unknown, AppendError> = Effect.void
        // step 9: pre-commit validators; step 10: durable persistence
        for (const v of validators) effect = Effect.zipRight(effect, v.check(prepared.event, { logLength: seq }))
        // persist and commit as one uninterruptible step: an interruption between the store's
        // acknowledgement and the in-memory commit would leave the handle behind its store
        const persistAndCommit = batched === undefined
          ? Effect.uninterruptible(
            Effect.flatMap(noteConflict(store.append(id, [prepared], { expectedSeq: seq })), () => commit(prepared))
          )
          : commit(prepared)
        return Effect.zipRight(effect, persistAndCommit)
      })), type)

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
      surface: {
        nodes: Effect.sync(() => Object.freeze(tracker.nodes.slice())),
        replaceGeneration: Effect.sync(() => tracker.replaceGeneration)
      },
      messages: Effect.sync(() => derived.read()),
      transcript: Effect.sync(() => Object.freeze(log.filter(isAppendSurfaceEvent))),
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
    yield* Effect.addFinalizer(() => close.pipe(Effect.ignore))
    return handle
  })

/** Create a fresh session: registers the header lazily; nothing is written before the first append. */
export const create = (
  options: CreateOptions = {}
): Effect.Effect<SessionShape, CreateError, SessionStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const id = options.id ?? (isRecord(options.header) && typeof options.header.id === "string"
      ? options.header.id
      : yield* nextId)
    const now = yield* Clock.currentTimeMillis
    const input = { version: SESSION_FORMAT_VERSION, id, createdAt: now, ...options.header }
    const checked = validateSessionHeader(input, { expectedId: id })
    if (checked instanceof SessionHeaderInvalid) return yield* checked
    const header = yield* store.create(checked)
    const validators = yield* instantiateValidators(header, options.validators)
    const events: Array<Event> = []
    return yield* makeHandle({
      store,
      header,
      events,
      tracker: new SurfaceTracker(events),
      firstLiveSeq: 0,
      validators,
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
      persistence: options.persistence
    })
  }).pipe(Effect.withSpan("Session.create"))

/** A new session whose initial log is the validated seed plus the end-seed marker. */
export const fromSeed = (
  options: FromSeedOptions
): Effect.Effect<SessionShape, FromSeedError, SessionStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const checked = validateSessionHeader(options.header)
    if (checked instanceof SessionHeaderInvalid) return yield* checked
    const validators = yield* instantiateValidators(checked, options.validators)
    const { events, tracker } = yield* validateSeed(options.seed, { validators })
    const firstLiveSeq = events.length
    yield* withEndSeed(events, tracker, validators)
    // a failed construction registers nothing: serialise and size-check (B10 with this session's
    // cap) before `create`. What remains after registration: a store whose own cap is lower, an
    // I/O failure, or another writer materialising the id first (J14).
    const prepared = prepareValidated(events, options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES)
    if ("_tag" in prepared) return yield* prepared
    const header = yield* store.create(checked)
    yield* store.append(header.id, prepared, { expectedSeq: 0 })
    return yield* makeHandle({
      store,
      header,
      events,
      tracker,
      firstLiveSeq,
      validators,
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
      persistence: options.persistence
    })
  }).pipe(Effect.withSpan("Session.fromSeed"))

/**
 * Resume a stored session (SPEC §7.2): read pipeline, repair closers, validation as a seed, then
 * persist (torn-tail truncation; one append of closers and end-seed marker) and construct.
 */
export const open = (
  id: string,
  options: OpenOptions = {}
): Effect.Effect<SessionShape, OpenError, SessionStore | Scope.Scope> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const loaded = yield* store.load(id)
    const r = { store, ...yield* Effect.withSpan(repairLoaded(loaded, options.validators ?? []), "Session.repair") }
    const { events, tracker } = r.all
    const firstLiveSeq = events.length
    const marker = yield* withEndSeed(events, tracker, r.validators)
    if (r.upgraded) {
      // K3: persist the upgraded log (keeping the v0 original as a backup); drops a torn tail too
      yield* r.store.replaceLog(id, r.header, events.slice(0, r.kept), {
        revision: r.loaded.revision,
        backup: "v0"
      })
    } else if (r.loaded.tornTail !== undefined) {
      yield* r.store.truncateTornTail(id, r.loaded.tornTail, { revision: r.loaded.revision })
    }
    const toWrite = prepareValidated([...r.closers, ...marker], options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES)
    if ("_tag" in toWrite) return yield* toWrite
    yield* r.store.append(id, toWrite, { expectedSeq: r.kept })
    return yield* makeHandle({
      store: r.store,
      header: r.header,
      events,
      tracker,
      firstLiveSeq,
      validators: r.validators,
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
      persistence: options.persistence
    })
  }).pipe(Effect.withSpan("Session.open"))

/**
 * Fork `source` at `options.at` (SPEC §11.1): plan (M1–M9, reads only), then the child as a new
 * session from the planned seed, written by one atomic first append (M10). A scoped handle.
 */
export const fork = (
  source: SessionShape | string,
  options: ForkOptions = {}
): Effect.Effect<SessionShape, ForkError, SessionStore | Scope.Scope> =>
  Effect.gen(function*() {
    const { at, childId, ...rest } = options
    const plan = yield* planFork(source, {
      ...(at === undefined ? {} : { at }),
      ...(childId === undefined ? {} : { childId })
    })
    // SessionStore.create and one first append; a concurrent creation of the id is M1
    return yield* fromSeed({ ...rest, header: plan.header, seed: plan.seed }).pipe(
      Effect.mapError((e) =>
        e instanceof SessionExists
          ? reject("M1", "SESSION_ALREADY_EXISTS", `a session "${String(plan.header.id)}" was created concurrently`)
          : e
      )
    )
  }).pipe(Effect.withSpan("Session.fork"))

/** A layer providing a freshly created session. */
export const layerCreate = (options: CreateOptions = {}): Layer.Layer<Session, CreateError, SessionStore> =>
  Layer.scoped(Session, create(options))

/** A layer providing a resumed session. */
export const layerOpen = (id: string, options: OpenOptions = {}): Layer.Layer<Session, OpenError, SessionStore> =>
  Layer.scoped(Session, open(id, options))

/** Cold-read a session with its repair closers, in memory only (SPEC §7.2); never writes. */
export { inspect, inspectLoaded, type InspectResult } from "../services/Resume.js"
