/**
 * The viewer's reads over a `SessionStore` (docs/viewer.md "The JSON API"): the sessions with their
 * verify status, one page of a session's timeline, time travel at a seq, provenance, and the live
 * count of a session. Each session is indexed once per server (`ViewIndex`, at most `maxIndexes`
 * at a time) and the index follows the store as the log grows; a page reads the log only up to
 * its end, the last page comes from the index's tail. A log that fails to load reports its rule,
 * seq and line with what loads of it. Never writes.
 *
 * @since 0.2.0
 */
import * as Chunk from "effect/Chunk"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as PubSub from "effect/PubSub"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type { StoreFailure } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import type { SessionStoreShape } from "../../services/SessionStore.js"
import {
  fillIndex,
  type LoadProblem,
  readNamed,
  readRange,
  readSeqs,
  readSpan,
  SessionIndex,
  type TornTailNote
} from "./ViewIndex.js"
import {
  type Provenance,
  relatedRows,
  type TimelineRow,
  timelineRows,
  type TimeTravel,
  timeTravel,
  timeTravelFrom
} from "./Views.js"


/**
 * A session of the list: its header, its size, last activity and verify status.
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionSummary {
  readonly id: string
  readonly createdAt: number
  readonly parentSession: string | null
  readonly events: number
  readonly lastActivity: number
  /** The first user message's text, clipped (what people search for). */
  readonly preview: string
  readonly problem: LoadProblem | null
  readonly tornTail: TornTailNote | null
  /**
   * True while the session's index is being built (answers that do not wait for it: `wait:
   * false`): `events` is how many it indexed so far, `problem` and `tornTail` are not known yet.
   */
  readonly indexing?: boolean
}

/**
 * One page of a session's timeline.
 *
 * @since 0.2.0
 * @category models
 */
export interface TimelinePage {
  readonly id: string
  /** Events that load (validated); the page is `[offset, offset + limit)` of them. */
  readonly total: number
  readonly offset: number
  readonly rows: ReadonlyArray<TimelineRow>
  readonly problem: LoadProblem | null
  readonly tornTail: TornTailNote | null
  /**
   * True while the session's index is being built (`wait: false`): `total` is how many events it
   * indexed so far, and a tool row whose partner is not indexed yet is not paired yet.
   */
  readonly indexing?: boolean
}

/**
 * The largest page the API hands out.
 *
 * @since 0.2.0
 * @category constants
 */
export const MAX_PAGE = 2_000

/**
 * How many sessions' indexes a server keeps; the least recently used is dropped first and rebuilt
 * when asked again.
 *
 * @since 0.2.0
 * @category constants
 */
export const MAX_INDEXES = 64

/**
 * How many sessions open in the viewer a server follows (each follower costs a store watcher:
 * SQLite's polls); the least recently used is dropped first.
 *
 * @since 0.2.0
 * @category constants
 */
export const MAX_FOLLOWED = 8

/**
 * How many sessions' indexes are built at a time (each build is one streamed read of the log).
 *
 * @since 0.2.0
 * @category constants
 */
export const BUILDS_AT_ONCE = 2

/**
 * How many events an index being built must have taken before the list without waiting shows
 * its progress: a session up to this size is listed with its index complete.
 *
 * @since 0.2.0
 * @category constants
 */
export const LISTED_AFTER = 10_000

/**
 * How a read of the viewer treats a session whose index is being built: `wait` (the default)
 * answers once the index is complete; `wait: false` answers with what is indexed so far (the
 * first page, the sessions list with the events indexed so far: the first open of a long
 * session; the list waits for an index until it is complete or has taken `LISTED_AFTER`
 * events, or is queued behind builds past that). `reread: false` keeps the list from reading
 * again the sessions nobody follows (what the app asks while it shows the progress of indexes):
 * it lists the sessions of the last listing and reports their indexes as they are.
 *
 * @since 0.2.0
 * @category models
 */
export interface Progress {
  readonly wait?: boolean
  readonly reread?: boolean
}

/**
 * Options of the viewer's reads.
 *
 * @since 0.2.0
 * @category models
 */
export interface ViewDataOptions {
  /** How many sessions' indexes to keep (default `MAX_INDEXES`). */
  readonly maxIndexes?: number
  /** How many sessions open in the viewer are followed (default `MAX_FOLLOWED`). */
  readonly maxFollowed?: number
  /** How many of a session's last events its index keeps (default `ViewIndex.TAIL`; 0: none). */
  readonly tail?: number
}

/**
 * The viewer's reads over one store.
 *
 * @since 0.2.0
 * @category models
 */
export interface ViewData {
  readonly listSessions: (progress?: Progress) => Effect.Effect<ReadonlyArray<SessionSummary>, StoreFailure>
  /**
   * The timeline rows of events `[offset, offset + limit)` (limit at most `MAX_PAGE`); with
   * `wait: false`, once the index has reached the page's end (or is complete).
   */
  readonly timelinePage: (id: string, offset: number, limit: number, progress?: Progress) => Effect.Effect<TimelinePage>
  /** Time travel at `seq` (null when the log does not reach it), once the index has reached `seq`. */
  readonly timeTravelAt: (id: string, seq: number) => Effect.Effect<{
    readonly at: TimeTravel | null
    readonly problem: LoadProblem | null
  }>
  /** Provenance of `seq` both ways, with the events it names as timeline rows. */
  readonly provenanceAt: (id: string, seq: number) => Effect.Effect<{
    readonly provenance: Provenance | null
    readonly related: ReadonlyArray<TimelineRow>
    readonly problem: LoadProblem | null
  }>
  /** The number of events of a session that load. */
  readonly headOf: (id: string, progress?: Progress) => Effect.Effect<{
    readonly id: string
    readonly count: number
    readonly problem: LoadProblem | null
    readonly indexing: boolean
  }>
  /**
   * The session's count now, then each time the log grows (from the store's follow); ends when
   * the index is dropped (a replaced log, or more sessions indexed than kept).
   */
  readonly live: (id: string) => Stream.Stream<number>
  /** The index of a session (built if needed): what the reads answer from. */
  readonly index: (id: string) => Effect.Effect<SessionIndex>
}

interface Entry {
  readonly index: SessionIndex
  /** The build (interrupted when the entry is dropped), and whether it still runs. */
  builder: Fiber.RuntimeFiber<void> | undefined
  building: boolean
  /** Whether the build waits for its turn (`BUILDS_AT_ONCE` others run). */
  queued: boolean
  readonly changes: PubSub.PubSub<number>
  follower: Fiber.RuntimeFiber<void> | undefined
  /** The live streams of the session now open: it is followed while there is one. */
  watchers: number
}

/** A turn of the event loop (a macrotask: pending I/O, such as the server's responses, runs first). */
const yieldToIo = Effect.async<void>((resume) => {
  const timer = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(timer))
})

/** A tool row's pairing from the index (across pages), other rows as they are. */
const paired = (index: SessionIndex, rows: ReadonlyArray<TimelineRow>): Array<TimelineRow> =>
  rows.map((r) => r.type === "tool/call" || r.type === "tool/result" ? { ...r, pairedSeq: index.pairs.get(r.seq) ?? null } : r)

/**
 * The viewer's reads over `store`, with the indexes and their followers living as long as the scope.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeViewData = (store: SessionStoreShape, options: ViewDataOptions = {}) =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const maxIndexes = Math.max(1, options.maxIndexes ?? MAX_INDEXES)
    const maxFollowed = Math.max(1, options.maxFollowed ?? MAX_FOLLOWED)
    const building = yield* Effect.makeSemaphore(BUILDS_AT_ONCE)
    // in use order: the least recently used first
    const entries = new Map<string, Entry>()

    const drop = (id: string, entry: Entry) =>
      Effect.suspend(() => {
        if (entries.get(id) === entry) entries.delete(id)
        return Effect.zipRight(
          Effect.forEach([entry.builder, entry.follower], (f) => f === undefined ? Effect.void : Fiber.interrupt(f), { discard: true }),
          PubSub.shutdown(entry.changes)
        )
      })

    /**
     * The next chunk a build took (the current tick completed, a new one in its place), then a
     * turn of the event loop: a store that reads synchronously (SQLite) would otherwise hold the
     * server's responses until the whole build is over.
     */
    let tick = yield* Deferred.make<void>()
    const ticked = Effect.flatMap(Deferred.make<void>(), (next) => {
      const done = tick
      tick = next
      return Deferred.succeed(done, undefined)
    })
    // the builds running now
    const running = new Set<Entry>()

    /**
     * Wait until the index of `entry` is complete or `reached` holds (a build stopped early ends
     * the wait too), looked at again after each chunk any build takes and each build's end.
     */
    const until = (entry: Entry, reached: (index: SessionIndex) => boolean) =>
      Effect.gen(function*() {
        while (!entry.index.complete && !reached(entry.index) && entry.building) {
          yield* Deferred.await(tick)
        }
        return entry.index
      })

    /**
     * What the list without waiting waits for: an index complete or past `LISTED_AFTER` events,
     * or queued behind builds that all are (long sessions: its turn may be seconds away).
     */
    const listable = (entry: Entry) => (index: SessionIndex) =>
      index.count >= LISTED_AFTER ||
      (entry.queued && running.size >= BUILDS_AT_ONCE && [...running].every((r) => r.index.count >= LISTED_AFTER))

    /** Extend the index from the store's follow; a failure (a replaced log) drops the index. */
    const follow = (id: string, entry: Entry) =>
      store.follow(id, { fromSeq: entry.index.count }).pipe(
        Stream.takeWhile(() => entry.index.problem === null),
        Stream.runForEachChunk((chunk) =>
          Effect.suspend(() => entry.index.extend(Chunk.toReadonlyArray(chunk)) || entry.index.problem !== null
            ? PubSub.publish(entry.changes, entry.index.count)
            : Effect.void
          )
        ),
        // a replaced log (L8) or a failed read: the index is dropped, rebuilt when next asked
        Effect.catchAll(() =>
          Effect.suspend(() => {
            if (entries.get(id) === entry) entries.delete(id)
            return PubSub.shutdown(entry.changes)
          })
        )
      )

    /**
     * A new entry of `id` whose index is built in the background (at most `BUILDS_AT_ONCE` at a
     * time); readers wait for what they need of it (`until`).
     */
    const build = (id: string, header: SessionHeader | undefined) =>
      Effect.gen(function*() {
        const entry: Entry = {
          index: new SessionIndex(id, header, options.tail),
          builder: undefined,
          building: true,
          queued: true,
          changes: yield* PubSub.sliding<number>(16),
          follower: undefined,
          watchers: 0
        }
        entries.set(id, entry)
        const start = Effect.sync(() => {
          entry.queued = false
          running.add(entry)
        })
        const fill = Effect.zipRight(start, fillIndex(store, entry.index, Effect.zipRight(ticked, yieldToIo))).pipe(
          building.withPermits(1),
          Effect.ensuring(Effect.suspend(() => {
            entry.building = false
            entry.queued = false
            running.delete(entry)
            // an unknown session is not kept (it may be created later)
            if (entry.index.problem?.tag === "SessionNotFound" && entries.get(id) === entry) entries.delete(id)
            return ticked
          }))
        )
        // interruptible (started from a request's fiber, stopped when the entry is dropped)
        entry.builder = yield* Effect.forkIn(Effect.interruptible(fill), scope)
        while (entries.size > maxIndexes) {
          const [oldId, oldest] = entries.entries().next().value as [string, Entry]
          yield* drop(oldId, oldest)
        }
        return entry
      })

    /** Follow a watched session (at most `maxFollowed`: the least recently used is dropped). */
    const startFollowing = (id: string, entry: Entry) =>
      Effect.gen(function*() {
        if (entry.follower !== undefined || entry.index.problem !== null || entries.get(id) !== entry) return
        // interruptible: started from an acquire (uninterruptible), stopped when nobody watches
        entry.follower = yield* Effect.forkIn(Effect.interruptible(follow(id, entry)), scope)
        const followed = [...entries].filter(([, e]) => e.follower !== undefined)
        for (const [oldId, old] of followed.slice(0, Math.max(0, followed.length - maxFollowed))) yield* drop(oldId, old)
      })

    /** Stop following a session nobody watches (its index stays, as of its last event). */
    const stopFollowing = (entry: Entry) =>
      Effect.suspend(() => {
        const fiber = entry.follower
        entry.follower = undefined
        return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
      })

    /**
     * The entry of `id`, built if needed and last in the use order. The list (`open: false`)
     * reads a session nobody follows again (it may have grown); a session open in the viewer is
     * served from its index.
     */
    const entryOf = (id: string, options: { readonly header?: SessionHeader; readonly open: boolean; readonly reread?: boolean }) =>
      Effect.gen(function*() {
        const cached = entries.get(id)
        const keep = cached !== undefined &&
          (options.open || cached.follower !== undefined || !cached.index.complete || options.reread === false)
        if (keep) {
          entries.delete(id)
          entries.set(id, cached)
          return cached
        }
        if (cached !== undefined) yield* drop(id, cached)
        return yield* build(id, options.header)
      })

    /** The index of `id` once it is complete, or (`wait: false`) once `reached` holds of it. */
    const indexOf = (
      id: string,
      reached: (index: SessionIndex) => boolean = () => false
    ): Effect.Effect<SessionIndex> => Effect.flatMap(entryOf(id, { open: true }), (entry) => until(entry, reached))

    /** The events `[from, to)` of an index: from its tail, or read up to `to`. */
    const eventsOf = (index: SessionIndex, from: number, to: number) =>
      Effect.suspend(() => {
        const held = index.fromTail(from, to)
        if (held !== undefined) return Effect.succeed(held)
        // indexed events: only their records, from `from`; else (or when that cannot answer) read up to `to`
        if (to > index.count) return readRange(store, index.id, from, to)
        return Effect.flatMap(
          readSpan(store, index.id, from, to),
          (read): Effect.Effect<ReadonlyArray<Event>> => read !== undefined ? Effect.succeed(read) : readRange(store, index.id, from, to)
        )
      })

    /**
     * Time travel from the index's numbers (the surface's operations, the headers' seqs): only
     * the events the answer names are read (from the tail when it holds them), each checked
     * against what the index recorded of it; `undefined` when they do not match or cannot be read.
     */
    const timeTravelOfIndex = (index: SessionIndex, seq: number) =>
      Effect.gen(function*() {
        const surface = index.surfaceAt(seq)
        const headers = index.headersAt(seq)
        const named = new Set(surface.nodes)
        if (headers.headerSeq !== null) named.add(headers.headerSeq)
        if (headers.previousSeq !== null) named.add(headers.previousSeq)
        const held = new Map<number, Event>()
        const first = index.count - index.tail.length
        for (const s of named) if (s >= first) held.set(s, index.tail[s - first])
        const wanted = new Set([...named].filter((s) => !held.has(s)))
        const read = yield* readNamed(store, index.id, wanted)
        if (read === undefined) return undefined
        for (const [s, e] of read) held.set(s, e)
        const matches = (s: number, check: (e: Event) => boolean) => {
          const e = held.get(s)
          return e !== undefined && e.seq === s && check(e)
        }
        for (const s of surface.nodes) {
          const r = index.replacementOf(s)
          const ok = matches(s, (e) =>
            r === undefined
              ? e.surfaceOp === "append"
              : typeof e.surfaceOp === "object" && e.surfaceOp.start === r.start && e.surfaceOp.end === r.end)
          if (!ok) return undefined
        }
        for (const s of [headers.headerSeq, headers.previousSeq]) {
          if (s !== null && !matches(s, (e) => e.type === "request/header")) return undefined
        }
        return timeTravelFrom(seq, surface, headers, (s) => held.get(s))
      })

    let listed: ReadonlyArray<SessionHeader> | undefined
    const listSessions = (progress: Progress = {}) =>
      Effect.gen(function*() {
        // `reread: false` lists the sessions of the last listing again (a store whose one connection
        // a build holds, SQLite's, would make a new listing wait for the build)
        const headers = progress.reread === false && listed !== undefined ? listed : yield* store.list()
        listed = headers
        // without waiting: every build started at once (when they all fit among the kept indexes,
        // else one after the other as with waiting: a build started would push out one not done)
        const noWait = progress.wait === false && headers.length <= maxIndexes
        const reread = progress.reread !== false
        const started = noWait
          ? yield* Effect.forEach(headers, (h) => entryOf(h.id, { header: h, open: false, reread }))
          : []
        return yield* Effect.forEach(headers, (h, i) =>
          Effect.gen(function*() {
            const entry = noWait ? started[i] : yield* entryOf(h.id, { header: h, open: false, reread })
            const index = yield* until(entry, noWait ? listable(entry) : () => false)
            const indexing = !index.complete
            return {
              id: h.id,
              createdAt: h.createdAt,
              parentSession: h.parentSession ?? null,
              events: index.count,
              lastActivity: Math.max(h.createdAt, index.lastActivity),
              preview: index.preview,
              problem: index.problem,
              tornTail: index.tornTail,
              indexing
            } satisfies SessionSummary
          }))
      }).pipe(Effect.withSpan("ViewData.listSessions"))

    const timelinePage = (id: string, offset: number, limit: number, progress: Progress = {}) =>
      Effect.gen(function*() {
        const end = offset + Math.max(0, Math.min(limit, MAX_PAGE))
        const index = yield* indexOf(id, (index) => progress.wait === false && index.count >= end)
        const total = index.count
        const from = Math.min(offset, total)
        const to = Math.min(end, total)
        const events = yield* eventsOf(index, from, to)
        return {
          id,
          total,
          offset,
          rows: paired(index, timelineRows(events)),
          problem: index.problem,
          tornTail: index.tornTail,
          indexing: !index.complete
        } satisfies TimelinePage
      }).pipe(Effect.withSpan("ViewData.timelinePage", { attributes: { sessionId: id, offset, limit } }))

    const timeTravelAt = (id: string, seq: number) =>
      Effect.gen(function*() {
        // what the index knows up to seq is final once it has indexed seq
        const index = yield* indexOf(id, (index) => index.count > seq)
        if (seq < 0 || seq >= index.count) return { at: null, problem: index.problem }
        const fromIndex = yield* timeTravelOfIndex(index, seq)
        if (fromIndex !== undefined) return { at: fromIndex, problem: index.problem }
        // what the index cannot answer (a version-0 log, a log changed under it): the prefix's fold
        const prefix = index.fromTail(0, seq + 1) ?? (yield* readRange(store, index.id, 0, seq + 1))
        return { at: timeTravel(prefix, seq) ?? null, problem: index.problem }
      }).pipe(Effect.withSpan("ViewData.timeTravelAt", { attributes: { sessionId: id, seq } }))

    const provenanceAt = (id: string, seq: number) =>
      Effect.gen(function*() {
        const index = yield* indexOf(id)
        if (seq < 0 || seq >= index.count) return { provenance: null, related: [], problem: index.problem }
        const replaced = index.replacementOf(seq) ?? null
        const provenance: Provenance = {
          seq,
          replaced,
          shadowedBy: index.replacementsShadowing(seq),
          sources: index.sources.get(seq) ?? []
        }
        const named = new Set<number>([
          ...(replaced?.shadowedSeqs ?? []),
          ...provenance.shadowedBy.map((r) => r.seq),
          ...provenance.sources
        ])
        // the named seqs are indexed: only their records, from the smallest (else a read up to the largest)
        const events: Map<number, Event> = (yield* readNamed(store, id, named)) ?? (yield* readSeqs(store, id, named))
        return { provenance, related: paired(index, relatedRows(provenance, (s) => events.get(s))), problem: index.problem }
      }).pipe(Effect.withSpan("ViewData.provenanceAt", { attributes: { sessionId: id, seq } }))

    const headOf = (id: string, progress: Progress = {}) =>
      Effect.map(
        indexOf(id, () => progress.wait === false),
        (index) => ({ id, count: index.count, problem: index.problem, indexing: !index.complete })
      )

    const live = (id: string): Stream.Stream<number> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const entry = yield* entryOf(id, { open: true })
        yield* until(entry, () => false)
        if (entries.get(id) !== entry) return Stream.make(entry.index.count)
        const changes = yield* PubSub.subscribe(entry.changes)
        // followed while watched: the follower starts after the subscription, from the index's count
        yield* Effect.acquireRelease(
          Effect.suspend(() => {
            entry.watchers++
            return startFollowing(id, entry)
          }),
          () =>
            Effect.suspend(() => {
              entry.watchers--
              return entry.watchers === 0 ? stopFollowing(entry) : Effect.void
            })
        )
        return Stream.concat(Stream.make(entry.index.count), Stream.fromQueue(changes))
      }))

    yield* Scope.addFinalizer(
      scope,
      Effect.suspend(() => Effect.forEach([...entries], ([id, entry]) => drop(id, entry), { discard: true }))
    )

    return {
      listSessions,
      timelinePage,
      timeTravelAt,
      provenanceAt,
      headOf,
      live,
      index: indexOf
    } satisfies ViewData
  })
