/**
 * The lazy registration of SPEC §7.1 that `SessionStore.make` builds every backend's `create` and
 * reads on: the sessions `create` registered in one store instance and no append has written yet,
 * `create`'s header checks (J13) and its J14 check against them and the stored sessions, and the
 * reads of a registered session that is not written (its header and no events; L11 for an unknown
 * id). Internal: `SessionStore` re-exports what is public of it.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import { SessionExists, SessionHeaderInvalid, SessionNotFound, type StoreFailure } from "../schema/Errors.js"
import { type SessionHeader, validateSessionHeader } from "../schema/SessionHeader.js"
import type { EventSink, LoadError, LoadResult, LoadSummary } from "./StoreRead.js"

/**
 * Errors of `create`.
 *
 * @since 0.1.0
 * @category errors
 */
export type CreateError = SessionHeaderInvalid | SessionExists | StoreFailure

/**
 * The sessions `create` registered in one store instance whose first append has not written them
 * yet (SPEC §7.1 lazy registration). The backend's first append materialises a registered
 * session and then calls `materialised`.
 *
 * @since 0.2.0
 * @category models
 */
export interface Registry {
  readonly get: (id: string) => SessionHeader | undefined
  readonly register: (header: SessionHeader) => void
  readonly materialised: (id: string) => void
}

/**
 * An empty registry for one store instance.
 *
 * @since 0.2.0
 * @category constructors
 */
export const makeRegistry = (): Registry => {
  const registered = new Map<string, SessionHeader>()
  return {
    get: (id) => registered.get(id),
    register: (header) => void registered.set(header.id, header),
    materialised: (id) => void registered.delete(id)
  }
}

/**
 * `create` over a registry (SPEC §7.1): validate the header (J13: a rejected create registers
 * nothing), the backend's own `checkHeader`, then J14 against the registry and the stored
 * sessions, then register it; nothing is written.
 *
 * @since 0.2.0
 * @category constructors
 */
export const createOver = (
  registry: Registry,
  backend: {
    readonly checkHeader?: ((header: SessionHeader) => Effect.Effect<void, CreateError>) | undefined
    readonly isStored: (id: string) => Effect.Effect<boolean, StoreFailure>
  }
) =>
(input: unknown): Effect.Effect<SessionHeader, CreateError> =>
  Effect.gen(function*() {
    const header = validateSessionHeader(input)
    // J13: a rejected create registers nothing
    if (header instanceof SessionHeaderInvalid) return yield* header
    if (backend.checkHeader !== undefined) yield* backend.checkHeader(header)
    const exists = new SessionExists({ rule: "J14", sessionId: header.id })
    if (registry.get(header.id) !== undefined) return yield* exists
    // registered meanwhile by another fiber of this instance: still J14
    if ((yield* backend.isStored(header.id)) || registry.get(header.id) !== undefined) return yield* exists
    registry.register(header)
    return header
  })

/**
 * What a read of a registered session that is not written yet finds: its header, no torn tail,
 * revision `"0"` (L11 when `id` is not registered).
 *
 * @since 0.2.0
 * @category utils
 */
export const unwritten = (registry: Registry, id: string) => {
  const header = registry.get(id)
  return header === undefined
    ? Effect.fail(new SessionNotFound({ rule: "L11", sessionId: id }))
    : Effect.succeed({ header, storedVersion: header.version, tornTail: undefined, revision: "0" })
}

/**
 * `load` over a backend's read of stored sessions (`undefined` when none is stored): a registered
 * session that is not written reads as its header and no events; L11 for an unknown id.
 *
 * @since 0.2.0
 * @category utils
 */
export const loadOver = (
  registry: Registry,
  backend: { readonly load: (id: string) => Effect.Effect<LoadResult | undefined, LoadError> }
) =>
(id: string): Effect.Effect<LoadResult, LoadError> =>
  Effect.flatMap(backend.load(id), (loaded) => {
    if (loaded !== undefined) return Effect.succeed(loaded)
    if (registry.get(id) !== undefined) return Effect.map(unwritten(registry, id), (empty) => ({ ...empty, events: [] }))
    // not registered (any more): a first append may have committed since the read began, then
    // left the registry; a second read tells that apart from an unknown id (L11)
    return Effect.flatMap(backend.load(id), (again) =>
      again !== undefined
        ? Effect.succeed(again)
        : Effect.map(unwritten(registry, id), (empty) => ({ ...empty, events: [] })))
  })

/**
 * The outcome of a backend's streamed read of session `id` (`undefined` when none is stored): a
 * registered session that is not written hands `sink` its header and no events; L11 for an
 * unknown id.
 *
 * @since 0.2.0
 * @category utils
 */
export const summaryOrUnwritten = <E, R>(registry: Registry, id: string, sink: EventSink<E, R>) =>
(summary: LoadSummary | undefined): Effect.Effect<LoadSummary, SessionNotFound | E, R> =>
  summary !== undefined ? Effect.succeed(summary) : Effect.gen(function*() {
    const empty = yield* unwritten(registry, id)
    if (sink.onHeader !== undefined) yield* sink.onHeader(empty.header, empty.storedVersion)
    return { ...empty, count: 0 }
  })
