/**
 * Identifier generation as a service (session, message and compaction ids), so tests are
 * deterministic. A `Context.Reference`: random UUIDs unless a layer provides another generator.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"

/**
 * The IdGenerator shape.
 *
 * @since 0.1.0
 * @category models
 */
export interface IdGeneratorShape {
  readonly next: Effect.Effect<string>
}

/**
 * Generates ids; defaults to random v4 UUIDs.
 *
 * @since 0.1.0
 * @category models
 */
export class IdGenerator extends Context.Reference<IdGenerator>()("effect-session-log/IdGenerator", {
  defaultValue: (): IdGeneratorShape => ({ next: Effect.sync(() => randomUUID()) })
}) {}

/**
 * A deterministic generator: `<prefix>1`, `<prefix>2`, ... (per layer build).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerCounter = (prefix = "id-"): Layer.Layer<IdGenerator> =>
  Layer.sync(IdGenerator, () => {
    let n = 0
    return { next: Effect.sync(() => `${prefix}${++n}`) }
  })

/**
 * The next id from the current generator.
 *
 * @since 0.1.0
 * @category accessors
 */
export const nextId: Effect.Effect<string> = Effect.flatMap(IdGenerator, (g) => g.next)
