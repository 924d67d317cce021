/**
 * The Session implementation: the append pipeline of SPEC §3.1 (validate, persist, commit,
 * publish), the seed pipeline of §3.2, the read pipeline of §8.2 for cold reads, and the
 * constructors `create`, `fromSeed`, `open` and `inspect` over any `SessionStore`.
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Equal from "effect/Equal"
import type * as FiberId from "effect/FiberId"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import {
  AppendConflict,
  FormatUnsupported,
  InvalidEnvelope,
  InvariantViolation,
  LegacyFormRefused,
  NotLosslessJson,
  ProvenanceInvalid,
  SeqNotContiguous,
  type SessionExists,
  SessionHeaderInvalid,
  SessionNotFound,
  StoreCorrupt,
  type StoreFailure,
  SurfaceMarkerInvalid,
  UnknownEventType,
  type ValidationError
} from "../schema/Errors.js"
import { encodeEvent, isOrderedEnvelope, markTrusted, orderEnvelope } from "../schema/EventCodec.js"
import { type AppendOptions, type Event, isAppendSurfaceEvent, KNOWN_EVENT_TYPES } from "../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES, SESSION_FORMAT_VERSION } from "../schema/Format.js"
import { deepFreeze, utf8Length, walkJson } from "../schema/Json.js"
import type { Message } from "../schema/Messages.js"
import {
  canonicalHeader,
  RequestContext,
  type RequestContext as RequestContextType,
  type RequestHeader
} from "../schema/RequestHeader.js"
import { type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import { checkEnvelope, checkLegacy, checkRecordKind, checkTypeShape } from "../schema/Validation.js"
import { nextId } from "../services/IdGenerator.js"
import { Invariants } from "../services/Invariants.js"
import { Repair } from "../services/Repair.js"
import type { AppendError, FlushError, RequestSnapshot, SessionShape } from "../services/Session.js"
import {
  type LoadError,
  type LoadResult,
  precheckBatch,
  type ReadError,
  readPipeline,
  SessionStore,
  type SessionStoreShape,
  type TornTail
} from "../services/SessionStore.js"
import { deriveEventMessage, foldSurface, isPlan, SurfaceTracker } from "../services/SurfaceManager.js"

/** A pre-commit validator (SPEC §11.2): `check` may veto a candidate, `apply` runs after commit. */
export interface PreCommitValidator {
  readonly check: (candidate: Event, ctx: { readonly logLength: number }) => Effect.Effect<void, InvariantViolation>
  readonly apply: (event: Event) => void
}

/** Builds a validator for one session. */
export type ValidatorFactory = (header: SessionHeader) => Effect.Effect<PreCommitValidator>

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

/** Errors of seed validation. */
export type SeedError = ValidationError | InvariantViolation

/** Errors of `create`. */
export type CreateError = SessionHeaderInvalid | SessionExists | StoreFailure

/** Errors of `fromSeed`. */
export type FromSeedError = SeedError | SessionHeaderInvalid | SessionExists | AppendError

/** Errors of `open`. */
export type OpenError = ReadError | AppendError

type Rec = Record<string, unknown>
const isRecord = (v: unknown): v is Rec => typeof v === "object" && v !== null && !Array.isArray(v)

const lossless = (rule: string, seq: number, path: string, detail: string) =>
  new NotLosslessJson({ rule, seq, path, detail })

/**
 * The seed pipeline (SPEC §3.2) for every record, in order: kind and walk (skipped for records
 * of a cold read, already walked), envelope, legacy guard, shapes, `seq === i`, surface plan and
 * apply, pre-commit validators. Returns the frozen events (keys in §1.1 order) and their tracker.
 */
export const validateSeed = (
  seed: unknown,
  options: {
    readonly coldRead?: boolean
    readonly validators?: ReadonlyArray<PreCommitValidator>
    /** Continue a log already validated by this pipeline (the seed's indices follow it). */
    readonly continueFrom?: { readonly events: Array<Event>; readonly tracker: SurfaceTracker }
  } = {}
): Effect.Effect<{ readonly events: Array<Event>; readonly tracker: SurfaceTracker }, SeedError> =>
  Effect.gen(function*() {
    if (!Array.isArray(seed)) {
      return yield* new InvalidEnvelope({ rule: "B1", field: "", detail: "a seed must be an array of event records" })
    }
    const validators = options.validators ?? []
    const events: Array<Event> = options.continueFrom?.events ?? []
    const tracker = options.continueFrom?.tracker ?? new SurfaceTracker(events)
    const base = events.length
    const length = seed.length
    for (let k = 0; k < length; k++) {
      const i = base + k
      const raw: unknown = seed[k]
      let record: Rec
      if (options.coldRead === true && isRecord(raw)) {
        record = raw
      } else {
        const kind = checkRecordKind(raw, i)
        if (kind !== undefined) return yield* kind
        const walked = walkJson(raw)
        if (walked._tag === "Fail") return yield* lossless(walked.rule, i, walked.path, walked.detail)
        record = walked.value as Rec
      }
      const env = checkEnvelope(record, i)
      if (env !== undefined) return yield* env
      const type = record.type as string
      const legacy = checkLegacy(type, record.data, i)
      if (legacy !== undefined) return yield* legacy
      const shape = checkTypeShape(type, record.data, i)
      if (shape !== undefined) return yield* shape
      if (record.seq !== i) {
        return yield* new SeqNotContiguous({
          rule: "C1",
          seq: i,
          expected: i,
          actual: record.seq,
          detail: `seed record ${i} has seq ${String(record.seq)}`
        })
      }
      // records of a cold read are usually frozen and in §1.1 order already: no copy then
      // (deepFreeze stops at a frozen record too, so both branches freeze the same)
      const ordered = isOrderedEnvelope(record) ? record as unknown as Event : orderEnvelope(deepFreeze(record))
      // a cold read's events are not registered as trusted: a WeakSet entry per stored event
      // costs a resume more (insertion plus GC work) than the few later store writes of those
      // events (a v0 upgrade's replaceLog) save by skipping their walk
      const event = options.coldRead === true ? ordered : markTrusted(ordered)
      const plan = tracker.plan(event, i)
      if (!isPlan(plan)) return yield* plan
      for (const v of validators) yield* v.check(event, { logLength: i })
      events.push(event)
      tracker.catchUp()
      for (const v of validators) v.apply(event)
    }
    return { events, tracker }
  })

/** L9: a validation failure of stored events is corruption wrapping its cause (K10 stays unwrapped). */
const wrapL9 = (sessionId: string) => <E extends SeedError>(e: E): StoreCorrupt | LegacyFormRefused => {
  if (e instanceof LegacyFormRefused) return e
  return new StoreCorrupt({
    rule: "L9",
    ...(e.seq === undefined ? {} : { seq: e.seq }),
    location: `session ${sessionId}`,
    detail: `stored event failed validation: ${e.message}`,
    cause: e
  })
}

const instantiateValidators = (
  header: SessionHeader,
  extra: ReadonlyArray<ValidatorFactory> | undefined
): Effect.Effect<Array<PreCommitValidator>> =>
  Effect.gen(function*() {
    const out: Array<PreCommitValidator> = []
    const inv = yield* Effect.serviceOption(Invariants)
    if (Option.isSome(inv)) out.push(yield* inv.value(header))
    for (const f of extra ?? []) out.push(yield* f(header))
    return out
  })

const endSeedMarker = (seq: number, time: number): Event =>
  markTrusted(Object.freeze({ type: "session/end-seed", seq, time, data: Object.freeze({}) }) as Event)

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

const foldContext = (event: Event): RequestContextType | undefined =>
  Schema.is(RequestContext)(event.data) ? event.data : undefined

interface WriteBehind {
  readonly enqueue: (event: Event) => Effect.Effect<void>
  readonly flush: Effect.Effect<void, FlushError>
}

/**
 * The write-behind controller of a batched handle (SPEC §7.3): the first event into an idle
 * queue arms a fixed timer; on expiry the whole pending prefix is written as one batch; `flush`
 * cancels the timer and drains to quiescence; a failed batch goes back to the front and pauses
 * automatic retry until the next enqueue; an AppendConflict is never retried.
 */
const makeWriteBehind = (options: {
  readonly windowMs: number
  readonly storedNext: number
  readonly write: (batch: ReadonlyArray<Event>) => Effect.Effect<void, FlushError>
  readonly isFailed: () => boolean
  readonly sessionId: string
}): Effect.Effect<WriteBehind, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const writeLock = yield* Effect.makeSemaphore(1)
    let pending: Array<Event> = []
    let storedNext = options.storedNext
    let timer: Fiber.RuntimeFiber<void> | undefined
    let firstPendingAt = 0
    let paused = false
    let warned = false

    // one batch: everything pending now; events arriving meanwhile form the next batch
    const writeOnce: Effect.Effect<void, FlushError> = writeLock.withPermits(1)(Effect.uninterruptible(
      Effect.suspend(() => {
        if (options.isFailed()) {
          pending = []
          return Effect.void
        }
        const batch = pending.filter((e) => e.seq >= storedNext)
        pending = []
        if (batch.length === 0) return Effect.void
        return options.write(batch).pipe(
          Effect.tap(() =>
            Effect.sync(() => {
              storedNext = batch[batch.length - 1].seq + 1
              warned = false
            })
          ),
          Effect.tapError(() =>
            Effect.sync(() => {
              // an AppendConflict failed the handle: its pending events are never written
              if (!options.isFailed()) pending = [...batch, ...pending]
              paused = true
            })
          )
        )
      })
    ))

    const arm = (delayMs: number): Effect.Effect<void> =>
      Effect.gen(function*() {
        paused = false
        timer = yield* Effect.sleep(delayMs).pipe(
          Effect.zipRight(Effect.suspend(() => {
            timer = undefined
            return writeOnce
          })),
          Effect.zipRight(Effect.suspend(() => {
            if (pending.length === 0 || timer !== undefined) return Effect.void
            return Clock.currentTimeMillis.pipe(
              Effect.flatMap((now) => arm(Math.max(0, firstPendingAt + options.windowMs - now)))
            )
          })),
          Effect.catchAll((e) =>
            warned ? Effect.void : Effect.sync(() => {
              warned = true
            }).pipe(
              Effect.zipRight(Effect.logWarning(`session ${options.sessionId}: background write failed`, e))
            )
          ),
          // the timer must stay interruptible even when the append that armed it was not
          Effect.interruptible,
          Effect.forkIn(scope)
        )
      })

    const enqueue = (event: Event): Effect.Effect<void> =>
      Effect.gen(function*() {
        const wasIdle = pending.length === 0
        pending.push(event)
        if (wasIdle) firstPendingAt = yield* Clock.currentTimeMillis
        if (timer === undefined && (wasIdle || paused)) yield* arm(options.windowMs)
      })

    const flush: Effect.Effect<void, FlushError> = Effect.gen(function*() {
      const t = timer
      timer = undefined
      if (t !== undefined) yield* Fiber.interrupt(t)
      while (pending.length > 0 && !options.isFailed()) yield* writeOnce
    })

    return { enqueue, flush }
  })

/**
 * The request in force right after event `seq` of a validated log (SPEC §5.4): the header and
 * context folds over `events[0..seq]` and the messages of the surface folded over that prefix.
 */
export const requestAtLog = (log: ReadonlyArray<Event>, seq: number): RequestSnapshot | SeqNotContiguous => {
  if (!Number.isSafeInteger(seq) || seq < 0 || seq >= log.length) {
    return new SeqNotContiguous({
      rule: "L10",
      seq,
      expected: log.length - 1,
      actual: seq,
      detail: log.length === 0 ? "the log is empty" : `a seq in [0, ${log.length - 1}] is required`
    })
  }
  const prefix = log.slice(0, seq + 1)
  let header: RequestHeader | undefined
  let context: RequestContextType | undefined
  for (const e of prefix) {
    if (e.type === "request/header") header = canonicalHeader((e.data as { header: RequestHeader }).header)
    else if (e.type === "request/context") context = foldContext(e) ?? context
  }
  const fold = foldSurface(prefix)
  const msgs: Array<Message> = []
  for (const s of "nodes" in fold ? fold.nodes : []) {
    const m = deriveEventMessage(log[s])
    if (m !== undefined) msgs.push(m)
  }
  return deepFreeze({ header, context, messages: msgs })
}

/** Build the handle over a validated, committed log. */
const makeHandle = (init: HandleInit): Effect.Effect<SessionShape, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { header, store, tracker, validators } = init
    const id = header.id
    const log = init.events
    const lock = yield* Effect.makeSemaphore(1)
    const pubsub = yield* Effect.acquireRelease(PubSub.unbounded<Event>(), PubSub.shutdown)
    let state: "open" | "failed" | "closed" = "open"
    let failure: AppendConflict | undefined
    let snapshot: ReadonlyArray<Event> | undefined
    let latestHeader: RequestHeader | undefined
    let latestContext: RequestContextType | undefined
    // derived-message cache (SPEC §4.6)
    let derived: Array<Message> = []
    let derivedNodes = 0
    let derivedGeneration = -1

    const foldHeaders = (event: Event) => {
      if (event.type === "request/header") {
        latestHeader = Object.freeze(canonicalHeader((event.data as { header: RequestHeader }).header))
      } else if (event.type === "request/context") {
        const ctx = foldContext(event)
        if (ctx !== undefined) latestContext = ctx
      }
    }
    for (const e of log) foldHeaders(e)

    // the fiber holding the append lock: its own appends (inside `exclusive`) proceed without waiting
    let owner: FiberId.FiberId | undefined
    const withLock = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      Effect.withFiberRuntime((fiber) => {
        const me = fiber.id()
        if (owner !== undefined && Equal.equals(owner, me)) return effect
        return lock.withPermits(1)(Effect.suspend(() => {
          owner = me
          return Effect.ensuring(
            effect,
            Effect.sync(() => {
              owner = undefined
            })
          )
        }))
      })

    const checkUsable = (): SessionNotFound | AppendConflict | undefined => {
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
    }

    const noteConflict = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
      Effect.tapError(effect, (e) =>
        Effect.sync(() => {
          if (e instanceof AppendConflict) {
            state = "failed"
            failure = e
          }
        }))

    const batched = init.persistence?.mode === "batched"
      ? yield* makeWriteBehind({
        windowMs: init.persistence.windowMs ?? 200,
        storedNext: log.length,
        write: (batch) => noteConflict(store.append(id, batch, { expectedSeq: batch[0].seq })),
        isFailed: () => state === "failed",
        sessionId: id
      })
      : undefined

    /** Steps 0 and 2–8 of SPEC §3.1: everything that needs no effect. Returns the frozen event or the error. */
    const prepare = (type: unknown, data: unknown, options: AppendOptions | undefined, time: number) => {
      const unusable = checkUsable()
      if (unusable !== undefined) return unusable
      const seq = log.length
      if (typeof type !== "string") {
        return new InvalidEnvelope({ rule: "B2", seq, field: "type", detail: "type must be a string" })
      }
      const opts: Rec = isRecord(options) ? options : {}
      const surfaceOp = opts.surfaceOp
      const sourceEventSeqs = opts.sourceEventSeqs
      const ignorable = opts.ignorable
      if (ignorable !== undefined && ignorable !== true) {
        return new InvalidEnvelope({
          rule: "B6",
          seq,
          field: "ignorable",
          detail: "ignorable must be exactly true when present"
        })
      }
      const walked = walkJson(data, "/data")
      if (walked._tag === "Fail") return lossless(walked.rule, seq, walked.path, walked.detail)
      const legacy = checkLegacy(type, walked.value, seq)
      if (legacy !== undefined) return legacy
      const shape = checkTypeShape(type, walked.value, seq)
      if (shape !== undefined) return shape
      const event: Rec = { type, seq, time, data: walked.value }
      // step 6: surfaceOp (D6) before sourceEventSeqs (E1/E4); key order is restored by orderEnvelope
      if (surfaceOp !== undefined) {
        const w = walkJson(surfaceOp, "/surfaceOp")
        if (w._tag === "Fail") {
          return new SurfaceMarkerInvalid({
            rule: "D6",
            seq,
            eventType: type,
            detail: `surfaceOp is not lossless JSON (${w.detail})`
          })
        }
        event.surfaceOp = w.value
      }
      if (sourceEventSeqs !== undefined) {
        const w = walkJson(sourceEventSeqs, "/sourceEventSeqs")
        if (w._tag === "Fail") {
          const isArray = Array.isArray(sourceEventSeqs)
          return new ProvenanceInvalid({
            rule: isArray ? "E4" : "E1",
            seq,
            detail: `sourceEventSeqs ${isArray ? "has a bad element" : "is not an array"} (${w.detail})`
          })
        }
        event.sourceEventSeqs = w.value
      }
      if (ignorable === true) event.ignorable = true
      const frozen = markTrusted(orderEnvelope(event))
      const line = encodeEvent(frozen)
      if (line.length * 3 > init.maxEventBytes && utf8Length(line) > init.maxEventBytes) {
        return new InvalidEnvelope({
          rule: "B10",
          seq,
          field: "size",
          detail: `serialised event is larger than ${init.maxEventBytes} bytes`
        })
      }
      const plan = tracker.plan(frozen, seq)
      return isPlan(plan) ? frozen : plan
    }

    /** Step 11 and later: commit in memory, hand to write-behind, publish. */
    const commit = (frozen: Event): Effect.Effect<Event> => {
      log.push(frozen)
      snapshot = undefined
      tracker.catchUp()
      foldHeaders(frozen)
      for (const v of validators) v.apply(frozen)
      const published = PubSub.publish(pubsub, frozen).pipe(Effect.as(frozen))
      return batched === undefined ? published : Effect.zipRight(batched.enqueue(frozen), published)
    }

    const appendUnknown = (type: unknown, data: unknown, options?: AppendOptions): Effect.Effect<Event, AppendError> =>
      withLock(Effect.flatMap(Clock.currentTimeMillis, (time): Effect.Effect<Event, AppendError> => {
        const prepared = prepare(type, data, options, time)
        if ("_tag" in prepared) return Effect.fail(prepared)
        const seq = prepared.seq
        let effect: Effect.Effect<unknown, AppendError> = Effect.void
        // step 9: pre-commit validators; step 10: durable persistence
        for (const v of validators) effect = Effect.zipRight(effect, v.check(prepared, { logLength: seq }))
        // persist and commit as one uninterruptible step: an interruption between the store's
        // acknowledgement and the in-memory commit would leave the handle behind its store
        const persistAndCommit = batched === undefined
          ? Effect.uninterruptible(
            Effect.flatMap(noteConflict(store.append(id, [prepared], { expectedSeq: seq })), () => commit(prepared))
          )
          : commit(prepared)
        return Effect.zipRight(effect, persistAndCommit)
      }))

    const messages = Effect.sync(() => {
      const nodes = tracker.nodes
      const generation = tracker.replaceGeneration
      if (generation !== derivedGeneration) {
        derived = []
        derivedNodes = 0
        derivedGeneration = generation
      }
      for (; derivedNodes < nodes.length; derivedNodes++) {
        const m = deriveEventMessage(log[nodes[derivedNodes]])
        if (m !== undefined) derived.push(m)
      }
      return derived.slice()
    })

    const requestAt = (seq: number): Effect.Effect<RequestSnapshot, SeqNotContiguous> =>
      Effect.suspend(() => {
        const r = requestAtLog(log, seq)
        return r instanceof SeqNotContiguous ? Effect.fail(r) : Effect.succeed(r)
      })

    const flush: Effect.Effect<void, FlushError> = Effect.suspend(() => {
      const unusable = checkUsable()
      if (unusable !== undefined) return Effect.fail(unusable)
      return batched === undefined ? Effect.void : batched.flush
    })

    const close: Effect.Effect<void, FlushError> = withLock(Effect.suspend(() => {
      if (state === "closed") return Effect.void
      const drain = state === "open" && batched !== undefined ? batched.flush : Effect.void
      return drain.pipe(Effect.ensuring(Effect.sync(() => {
        state = "closed"
      })))
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
      messages,
      transcript: Effect.sync(() => Object.freeze(log.filter(isAppendSurfaceEvent))),
      requestHeader: Effect.sync(() => latestHeader),
      requestContext: Effect.sync(() => latestContext),
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
      state: Effect.sync(() => state)
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
  })

/** Construct over validated events: add the end-seed marker when required (SPEC §2.4). */
const withEndSeed = (
  events: Array<Event>,
  tracker: SurfaceTracker,
  validators: ReadonlyArray<PreCommitValidator>
): Effect.Effect<Array<Event>, InvariantViolation> =>
  Effect.gen(function*() {
    const last = events[events.length - 1]
    if (last !== undefined && last.type === "session/end-seed") return []
    const marker = endSeedMarker(events.length, yield* Clock.currentTimeMillis)
    for (const v of validators) yield* v.check(marker, { logLength: events.length })
    events.push(marker)
    tracker.catchUp()
    for (const v of validators) v.apply(marker)
    return [marker]
  })

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
    // a failed construction registers nothing: run the store's batch pre-checks (B10 with this
    // session's cap) before `create`. What remains after registration: a store whose own cap is
    // lower, an I/O failure, or another writer materialising the id first (J14).
    const prechecked = precheckBatch(events, 0, { maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES })
    if ("_tag" in prechecked) return yield* prechecked
    const header = yield* store.create(checked)
    yield* store.append(header.id, events, { expectedSeq: 0 })
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
  })

/** The result of `inspect`: a frozen, repaired view of a stored session; nothing is written. */
export interface InspectResult {
  readonly header: SessionHeader
  readonly storedVersion: number
  readonly events: ReadonlyArray<Event>
  readonly closers: ReadonlyArray<Event>
  readonly tornTail: TornTail | undefined
}

/** Read pipeline, stored events validated as a seed (L9), then the repair closers validated on top. */
const repairLoaded = (loaded: LoadResult, extraValidators?: ReadonlyArray<ValidatorFactory>) =>
  Effect.gen(function*() {
    const { events: raw, header, upgraded } = yield* readPipeline(loaded)
    const id = header.id
    const validators = extraValidators === undefined ? [] : yield* instantiateValidators(header, extraValidators)
    const stored = yield* validateSeed(raw, { coldRead: true, validators }).pipe(Effect.mapError(wrapL9(id)))
    const repair = yield* Repair
    const closers = repair.closers(stored.events)
    const kept = stored.events.length
    const all = yield* validateSeed(closers, { coldRead: true, validators, continueFrom: stored }).pipe(
      Effect.mapError(wrapL9(id))
    )
    return { loaded, header, validators, upgraded, kept, all, closers: all.events.slice(kept) }
  })

/** The repaired in-memory view of a loaded session (SPEC §7.2 steps 2–3); never writes. */
export const inspectLoaded = (loaded: LoadResult): Effect.Effect<InspectResult, ReadError> =>
  Effect.map(repairLoaded(loaded), (r) =>
    Object.freeze({
      header: r.header,
      storedVersion: r.loaded.storedVersion,
      events: Object.freeze(r.all.events),
      closers: Object.freeze(r.closers),
      tornTail: r.loaded.tornTail
    }))

/** Cold-read a session with its repair closers, in memory only (SPEC §7.2); never writes. */
export const inspect = (id: string): Effect.Effect<InspectResult, ReadError, SessionStore> =>
  Effect.flatMap(SessionStore, (store) => Effect.flatMap(store.load(id), inspectLoaded))

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
    const r = { store, ...yield* repairLoaded(yield* store.load(id), options.validators ?? []) }
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
    const toWrite = [...r.closers, ...marker]
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
  })
