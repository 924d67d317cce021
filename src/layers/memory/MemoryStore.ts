/**
 * The in-memory SessionStore: the contract of SPEC §7.1 without durability, built with
 * `SessionStore.make`. Registration is per store instance (one `make`), appends are atomic because
 * each runs as one synchronous step (also offered to the session handle as `appendSync`), and
 * `replaceLog` keeps the previous content as a backup in memory. Followers of a session are woken
 * by each append and replacement of this instance (docs/follow.md "Mechanisms").
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { AppendConflict, SessionNotFound } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import {
  type BatchCheckOptions,
  lastOf,
  make as makeSessionStore,
  makeRegistry,
  SessionStore,
  type SessionStoreShape,
  syncAppendOf
} from "../../services/SessionStore.js"

/**
 * Options of the memory store.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryStoreOptions extends BatchCheckOptions {}

/**
 * The synchronous append of a store built by `make` (`SessionStore.syncAppendOf`).
 *
 * @deprecated since 0.2.0: the path is the store's optional `appendSync` member; use `SessionStore.syncAppendOf`.
 * @since 0.1.0
 * @category utils
 */
export const syncAppender = syncAppendOf

interface Stored {
  header: SessionHeader
  events: Array<Event>
  revision: number
  readonly backups: Array<{ readonly reason: string; readonly header: SessionHeader; readonly events: ReadonlyArray<Event> }>
}

/**
 * Build a memory store.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: MemoryStoreOptions = {}): Effect.Effect<SessionStoreShape> =>
  Effect.sync(() => {
    const registry = makeRegistry()
    const stored = new Map<string, Stored>()
    // the wake-up callbacks of each session's watcher (one per session: `SessionStore.make` shares it)
    const listeners = new Map<string, Set<() => void>>()
    const changed = (id: string) => {
      const each = listeners.get(id)
      if (each !== undefined) for (const wake of each) wake()
    }
    const wakeups = (id: string): Stream.Stream<void> =>
      Stream.asyncScoped<void>((emit) =>
        Effect.acquireRelease(
          Effect.sync(() => {
            const wake = () => void emit.single(undefined)
            const set = listeners.get(id) ?? new Set()
            listeners.set(id, set.add(wake))
            wake()
            return wake
          }),
          (wake) =>
            Effect.sync(() => {
              const set = listeners.get(id)
              set?.delete(wake)
              if (set?.size === 0) listeners.delete(id)
            })
        ), { bufferSize: 1, strategy: "sliding" })

    const conflict = (id: string, expectedSeq: number, storedSeq: number) =>
      new AppendConflict({ rule: expectedSeq > storedSeq ? "C5" : "C7", sessionId: id, expectedSeq, storedSeq })
    const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })
    /** The stored session if it is still at `revision` (L11, L8; the conflict names `expectedSeq`). */
    const atRevision = (id: string, revision: string, expectedSeq: number) =>
      Effect.suspend((): Effect.Effect<Stored, SessionNotFound | AppendConflict> => {
        const current = stored.get(id)
        if (current === undefined) return Effect.fail(notFound(id))
        return String(current.revision) === revision ? Effect.succeed(current) : Effect.fail(
          new AppendConflict({
            rule: "L8",
            sessionId: id,
            expectedSeq,
            storedSeq: current.events.length,
            detail: "the stored log changed since it was read"
          })
        )
      })

    /** The body of an append after the batch checks: registration, expected seq, then store. */
    const storeBatch = (id: string, events: ReadonlyArray<Event>, expectedSeq: number) => {
      const current = stored.get(id)
      if (current === undefined) {
        const header = registry.get(id)
        if (header === undefined) return notFound(id)
        if (expectedSeq !== 0) return conflict(id, expectedSeq, 0)
        stored.set(id, { header, events: events.slice(), revision: 1, backups: [] })
        registry.materialised(id)
        changed(id)
        return undefined
      }
      const storedSeq = current.events.length
      if (expectedSeq !== storedSeq) return conflict(id, expectedSeq, storedSeq)
      for (let i = 0; i < events.length; i++) current.events.push(events[i])
      current.revision++
      changed(id)
      return undefined
    }

    return makeSessionStore({
      name: "MemoryStore",
      registry,
      ...(options.maxEventBytes === undefined ? {} : { maxEventBytes: options.maxEventBytes }),
      isStored: (id) => Effect.sync(() => stored.has(id)),
      appendBatch: (id, batch, expectedSeq) =>
        Effect.suspend(() => {
          const failure = storeBatch(id, batch.events, expectedSeq)
          return failure === undefined ? Effect.void : Effect.fail(failure)
        }),
      appendBatchSync: (id, batch, expectedSeq) => storeBatch(id, batch.events, expectedSeq),
      load: (id) =>
        Effect.sync(() => {
          const current = stored.get(id)
          return current === undefined ? undefined : {
            header: current.header,
            storedVersion: current.header.version,
            events: current.events.slice(),
            tornTail: undefined,
            revision: String(current.revision)
          }
        }),
      list: () => Effect.sync(() => [...stored.values()].map((s) => s.header)),
      listEntries: () => Effect.sync(() => [...stored.values()].map((s) => ({ header: s.header, last: lastOf(s.events) }))),
      wakeups,

      truncateTornTail: (id, tornTail, { revision }) =>
        Effect.gen(function*() {
          const current = stored.get(id)
          if (current === undefined) return yield* notFound(id)
          // memory never has a torn tail: any request is against a log that changed (L8)
          return yield* new AppendConflict({
            rule: "L8",
            sessionId: id,
            expectedSeq: tornTail.fromSeq,
            storedSeq: current.events.length,
            detail: `no torn tail at revision ${revision}`
          })
        }),

      replaceLog: (id, header, events, { backup, revision }) =>
        Effect.gen(function*() {
          const current = yield* atRevision(id, revision, events.length)
          current.backups.push({ reason: backup, header: current.header, events: current.events })
          current.header = header
          current.events = [...events]
          current.revision++
          changed(id)
        }),

      discard: (id, { revision }) =>
        Effect.gen(function*() {
          yield* atRevision(id, revision, 0)
          stored.delete(id)
          changed(id)
        })
    })
  })

/**
 * A memory SessionStore layer (a fresh, empty store per build): tests and ephemeral agents.
 *
 * @example
 * ```ts
 * import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
 * import { MemoryStore, SessionLive } from "effect-session-log"
 *
 * const session = SessionLive.layerCreate({ id: "scratch" }).pipe(Layer.provide(MemoryStore.layer()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: MemoryStoreOptions = {}): Layer.Layer<SessionStore> =>
  Layer.effect(SessionStore, make(options))

/**
 * `make` under its earlier name.
 *
 * @deprecated since 0.2.0: use `MemoryStore.make`.
 * @since 0.1.0
 * @category constructors
 */
export const makeMemoryStore = make

/**
 * `layer` under its earlier name.
 *
 * @deprecated since 0.2.0: use `MemoryStore.layer`.
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryStore = layer
