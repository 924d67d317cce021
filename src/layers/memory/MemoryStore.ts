/**
 * The in-memory SessionStore: the contract of SPEC §7.1 without durability. Registration is
 * per store instance (one `make`), appends are atomic because each runs as one synchronous
 * step (also offered to the session handle as a plain function, `syncAppender`), and `replaceLog`
 * keeps the previous content as a backup in memory.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { AppendConflict, SessionExists, SessionHeaderInvalid, SessionNotFound } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { DEFAULT_MAX_EVENT_BYTES } from "../../schema/Format.js"
import { type SessionHeader, validateSessionHeader } from "../../schema/SessionHeader.js"
import { type BatchError, type PreparedEvent, prepareBatch } from "../../services/PrepareEvent.js"
import {
  type BatchCheckOptions,
  appendPrepared,
  loadEachFromLoad,
  readFromLoad,
  SessionStore,
  type SessionStoreShape
} from "../../services/SessionStore.js"

/** Options of the memory store. */
export interface MemoryStoreOptions extends BatchCheckOptions {}

/**
 * `SessionStore.append` of a memory store as one synchronous step: the same checks, the same
 * errors (returned, not thrown), `undefined` once the events are stored.
 */
export type SyncAppend = (
  id: string,
  events: ReadonlyArray<Event | PreparedEvent>,
  expectedSeq: number
) => BatchError | AppendConflict | SessionNotFound | undefined

const syncAppenders = new WeakMap<SessionStoreShape, SyncAppend>()

/**
 * The synchronous append of a store built by `makeMemoryStore` (that very object: a wrapper or
 * any other store has none), so an uncontended session append can complete in one step.
 *
 * @since 0.1.0
 * @category utils
 */
export const syncAppender = (store: SessionStoreShape): SyncAppend | undefined => syncAppenders.get(store)

interface Stored {
  header: SessionHeader
  events: Array<Event>
  revision: number
  readonly backups: Array<{ readonly reason: string; readonly header: SessionHeader; readonly events: ReadonlyArray<Event> }>
}

/** Build a memory store.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemoryStore = (options: MemoryStoreOptions = {}): Effect.Effect<SessionStoreShape> =>
  Effect.sync(() => {
    const registered = new Map<string, SessionHeader>()
    const stored = new Map<string, Stored>()

    const conflict = (id: string, expectedSeq: number, storedSeq: number) =>
      new AppendConflict({ rule: expectedSeq > storedSeq ? "C5" : "C7", sessionId: id, expectedSeq, storedSeq })
    const notFound = (id: string) => new SessionNotFound({ rule: "L11", sessionId: id })

    /** The body of an append after the batch checks: registration, expected seq, then store. */
    const storeBatch = (id: string, events: ReadonlyArray<Event>, expectedSeq: number) => {
      const current = stored.get(id)
      if (current === undefined) {
        const header = registered.get(id)
        if (header === undefined) return notFound(id)
        if (expectedSeq !== 0) return conflict(id, expectedSeq, 0)
        stored.set(id, { header, events: events.slice(), revision: 1, backups: [] })
        return undefined
      }
      const storedSeq = current.events.length
      if (expectedSeq !== storedSeq) return conflict(id, expectedSeq, storedSeq)
      for (let i = 0; i < events.length; i++) current.events.push(events[i])
      current.revision++
      return undefined
    }

    const maxEventBytes = options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES
    const appendSync: SyncAppend = (id, events, expectedSeq) => {
      if (events.length === 0) return undefined
      const checked = prepareBatch(events, expectedSeq, maxEventBytes)
      return "_tag" in checked ? checked : storeBatch(id, checked.events, expectedSeq)
    }

    const store: SessionStoreShape = {
      create: (input) =>
        Effect.gen(function*() {
          const header = validateSessionHeader(input)
          // J13: a rejected create registers nothing
          if (header instanceof SessionHeaderInvalid) return yield* header
          if (registered.has(header.id) || stored.has(header.id)) {
            return yield* new SessionExists({ rule: "J14", sessionId: header.id })
          }
          registered.set(header.id, header)
          return header
        }),

      append: (id, events, appendOptions) =>
        appendPrepared(events, appendOptions, options, (checked, expectedSeq) =>
          Effect.suspend(() => {
            const failure = storeBatch(id, checked.events, expectedSeq)
            return failure === undefined ? Effect.void : Effect.fail(failure)
          })),

      load: (id) =>
        Effect.gen(function*() {
          const current = stored.get(id)
          if (current !== undefined) {
            return {
              header: current.header,
              storedVersion: current.header.version,
              events: current.events.slice(),
              tornTail: undefined,
              revision: String(current.revision)
            }
          }
          const header = registered.get(id)
          if (header === undefined) return yield* notFound(id)
          return { header, storedVersion: header.version, events: [], tornTail: undefined, revision: "0" }
        }),

      loadEach: (id, sink) => loadEachFromLoad(store.load)(id, sink),

      readFrom: (id, fromSeq) => readFromLoad(store.load)(id, fromSeq),

      list: () =>
        Effect.sync(() =>
          [...stored.values()].map((s) => s.header).sort((a, b) =>
            a.createdAt - b.createdAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)
          )
        ),

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
          const current = stored.get(id)
          if (current === undefined) return yield* notFound(id)
          if (String(current.revision) !== revision) {
            return yield* new AppendConflict({
              rule: "L8",
              sessionId: id,
              expectedSeq: events.length,
              storedSeq: current.events.length,
              detail: "the stored log changed since it was read"
            })
          }
          current.backups.push({ reason: backup, header: current.header, events: current.events })
          current.header = header
          current.events = [...events]
          current.revision++
        })
    }
    syncAppenders.set(store, appendSync)
    return store
  })

/**
 * A memory SessionStore layer (a fresh, empty store per build): tests and ephemeral agents.
 *
 * @example
 * ```ts
 * import * as Layer from "effect/Layer"
 * import { MemoryStore, SessionLive } from "effect-session-log"
 *
 * const session = SessionLive.layerCreate({ id: "scratch" }).pipe(Layer.provide(MemoryStore.layerMemoryStore()))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemoryStore = (options: MemoryStoreOptions = {}): Layer.Layer<SessionStore> =>
  Layer.effect(SessionStore, makeMemoryStore(options))
