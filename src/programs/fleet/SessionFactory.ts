/**
 * How the `AgentSession` entity gets its sessions: the persistence mode, the `SessionFactory` Tag
 * and its layer over the constructors the edge passes (`SessionLive.create`/`open`). Internal to
 * the fleet: `Fleet` re-exports it.
 *
 * @since 0.2.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { AppendError, SessionShape } from "../../services/Session.js"
import { type CreateError, type ReadError, SessionStore } from "../../services/SessionStore.js"

/**
 * How a session's appends reach its store (`SessionLive`'s `persistence` option).
 *
 * @since 0.2.0
 * @category models
 */
export type Persistence = { readonly mode: "durable" } | { readonly mode: "batched"; readonly windowMs?: number }

/**
 * How the entity opens (with crash repair) and creates sessions; handles live in the given scope.
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionFactoryShape {
  readonly create: (id: string, persistence: Persistence) => Effect.Effect<SessionShape, CreateError, Scope.Scope>
  readonly open: (id: string, persistence: Persistence) => Effect.Effect<SessionShape, ReadError | AppendError, Scope.Scope>
}

/**
 * The entity's session constructors (the edge provides them from `SessionLive`).
 *
 * @since 0.2.0
 * @category services
 */
export class SessionFactory extends Context.Tag("effect-session-log/fleet/SessionFactory")<
  SessionFactory,
  SessionFactoryShape
>() {}

/**
 * Session constructors over the current `SessionStore` (pass `SessionLive.create` and `SessionLive.open`).
 *
 * @since 0.2.0
 * @category models
 */
export interface SessionConstructors {
  readonly create: (
    options: { readonly id: string; readonly persistence?: Persistence }
  ) => Effect.Effect<SessionShape, CreateError, SessionStore | Scope.Scope>
  readonly open: (
    id: string,
    options?: { readonly persistence?: Persistence }
  ) => Effect.Effect<SessionShape, ReadError | AppendError, SessionStore | Scope.Scope>
}

/**
 * The factory from session constructors, over the provided store.
 *
 * @since 0.2.0
 * @category layers
 */
export const layerSessionFactory = (constructors: SessionConstructors): Layer.Layer<SessionFactory, never, SessionStore> =>
  Layer.effect(
    SessionFactory,
    Effect.map(SessionStore, (store) => ({
      create: (id, persistence) => Effect.provideService(constructors.create({ id, persistence }), SessionStore, store),
      open: (id, persistence) => Effect.provideService(constructors.open(id, { persistence }), SessionStore, store)
    }))
  )
