/**
 * The Session constructors (SPEC §2, §3.2, §7.2, §11.1) over any `SessionStore`: `create`,
 * `fromSeed`, `open` (resume with crash repair) and `fork`, and their layers. Each builds and
 * validates the log, then hands it to the handle (`Handle`: the append pipeline, lock,
 * folds, feed and write-behind). `follow` watches a session another process writes.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { SessionExists, SessionHeaderInvalid, type StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES, SESSION_FORMAT_VERSION } from "../../schema/Format.js"
import { validateSessionHeader } from "../../schema/SessionHeader.js"
import { isRecord } from "../../schema/Validation.js"
import { type ForkPoint, type PlanError, planFork, reject } from "../../services/Fork.js"
import { nextId } from "../../services/IdGenerator.js"
import { prepareValidated } from "../../services/PrepareEvent.js"
import { repairLoaded } from "../../services/Resume.js"
import { checkSeedRecord, instantiateValidators, type SeedError, validateSeed, withEndSeed, wrapL9 } from "../../services/Seed.js"
import { type AppendError, Session, type SessionShape, type ValidatorFactory } from "../../services/Session.js"
import { type FollowError, type FollowOptions, type ReadError, SessionStore } from "../../services/SessionStore.js"
import * as SurfaceManager from "../../services/SurfaceManager.js"
import { makeHandle, type PersistenceOptions } from "./Handle.js"

/** How appends reach the store (re-exported from the handle module). */
export type {
  /**
   * How appends reach the store.
   *
   * @since 0.1.0
   * @category models
   */
  PersistenceOptions
} from "./Handle.js"

interface CommonOptions {
  readonly persistence?: PersistenceOptions
  /** Extra pre-commit validators (the `Invariants` layer's, when provided, runs first). */
  readonly validators?: ReadonlyArray<ValidatorFactory>
  /** B10 cap on a serialised event (default 64 MiB). */
  readonly maxEventBytes?: number
}

/**
 * Options of `create`.
 *
 * @since 0.1.0
 * @category models
 */
export interface CreateOptions extends CommonOptions {
  readonly id?: string
  /** Header fields; `version`, `id` and `createdAt` default to 1, the id and Clock now. */
  readonly header?: Record<string, unknown>
}

/**
 * Options of `fromSeed`.
 *
 * @since 0.1.0
 * @category models
 */
export interface FromSeedOptions extends CommonOptions {
  readonly header: unknown
  readonly seed: unknown
}

/**
 * Options of `open`.
 *
 * @since 0.1.0
 * @category models
 */
export interface OpenOptions extends CommonOptions {}

/**
 * Errors of `create`.
 *
 * @since 0.1.0
 * @category errors
 */
export type CreateError = SessionHeaderInvalid | SessionExists | StoreFailure

/**
 * Errors of `fromSeed`.
 *
 * @since 0.1.0
 * @category errors
 */
export type FromSeedError = SeedError | SessionHeaderInvalid | SessionExists | AppendError

/**
 * Errors of `open`.
 *
 * @since 0.1.0
 * @category errors
 */
export type OpenError = ReadError | AppendError

/**
 * Options of `fork`: where, the child's id, and the child handle's options.
 *
 * @since 0.1.0
 * @category models
 */
export interface ForkOptions extends ForkPoint, CommonOptions {}

/**
 * Errors of `fork`.
 *
 * @since 0.1.0
 * @category errors
 */
export type ForkError = PlanError | Exclude<FromSeedError, SessionExists>



/**
 * Create a fresh session: registers the header lazily; nothing is written before the first append.
 * A scoped handle (closed, and flushed when batched, with the scope).
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { MemoryStore, SessionLive } from "effect-session-log"
 *
 * const program = Effect.gen(function*() {
 *   const session = yield* SessionLive.create({ id: "demo" })
 *   yield* session.append("turn/start", { turn: 1 })
 *   return yield* session.events
 * })
 * program.pipe(Effect.scoped, Effect.provide(MemoryStore.layer()), Effect.runPromise)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
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
      tracker: (yield* SurfaceManager.SurfaceManager).track(events),
      firstLiveSeq: 0,
      validators,
      maxEventBytes: options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES,
      persistence: options.persistence
    })
  }).pipe(Effect.withSpan("Session.create"))

/**
 * A new session whose initial log is the validated seed (SPEC §3.2) plus the end-seed marker,
 * written by one atomic first append.
 *
 * @since 0.1.0
 * @category constructors
 */
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
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import { SessionLive, SqliteStore } from "effect-session-log"
 *
 * // after a crash: the torn tail is removed and the open turn closed before the handle is returned
 * const messages = Effect.gen(function*() {
 *   const session = yield* SessionLive.open("build-4711")
 *   return yield* session.messages
 * })
 * // run it with Effect.runPromise(main)
 * export const main = messages.pipe(Effect.scoped, Effect.provide(SqliteStore.layer({ filename: "sessions.db" })))
 * ```
 *
 * @since 0.1.0
 * @category constructors
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
 *
 * @since 0.1.0
 * @category constructors
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

/**
 * A layer providing a freshly created session (`create`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerCreate = (options: CreateOptions = {}): Layer.Layer<Session, CreateError, SessionStore> =>
  Layer.scoped(Session, create(options))

/**
 * A layer providing a resumed session (`open`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerOpen = (id: string, options: OpenOptions = {}): Layer.Layer<Session, OpenError, SessionStore> =>
  Layer.scoped(Session, open(id, options))

/** Cold-read a session with its repair closers, in memory only (SPEC §7.2); never writes. */
export {
  /**
   * Cold-read a session with its repair closers, in memory only (SPEC §7.2); never writes.
   *
   * @since 0.1.0
   * @category utils
   */
  inspect,
  /**
   * The repaired in-memory view of a loaded session (SPEC §7.2 steps 2–3); never writes.
   *
   * @since 0.1.0
   * @category utils
   */
  inspectLoaded,
  /**
   * The result of `inspect`: a frozen, repaired view of a stored session; nothing is written.
   *
   * @since 0.1.0
   * @category models
   */
  type InspectResult
} from "../../services/Resume.js"

/**
 * Follow a session this process does not write (docs/follow.md): its committed events from
 * `fromSeq` (default 0), then each one any process commits, as `SessionStore.follow` delivers
 * them, each through the per-record checks of the seed pipeline (a stored event that fails them
 * fails the stream with L9 `StoreCorrupt`). The handle's own commits are `Session.changes`.
 *
 * @example
 * ```ts
 * import * as Effect from "effect/Effect"
 * import * as Stream from "effect/Stream"
 * import { SessionLive } from "effect-session-log"
 *
 * const printTurns = SessionLive.follow("my-session").pipe(
 *   Stream.filter((event) => event.type === "turn/end"),
 *   Stream.runForEach((event) => Effect.log(event.data))
 * )
 * ```
 *
 * @since 0.2.0
 * @category constructors
 */
export const follow = (id: string, options?: FollowOptions): Stream.Stream<Event, FollowError, SessionStore> =>
  Stream.unwrap(Effect.map(SessionStore, (store) => {
    const fromSeq = options?.fromSeq ?? 0
    return store.follow(id, options).pipe(
      Stream.zipWithIndex,
      Stream.mapEffect(([raw, index]) => {
        const checked = checkSeedRecord(raw, fromSeq + index, true)
        return "_tag" in checked ? Effect.fail(wrapL9(id)(checked)) : Effect.succeed(checked)
      })
    )
  }))
