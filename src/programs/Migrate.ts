/**
 * The `migrate` program (SPEC §8.2): rewrites version-0 sessions as version 1. A v0 session is
 * read through the read pipeline (the frozen v0→v1 edge), validated as a seed, and replaced
 * atomically through `SessionStore.replaceLog`, which keeps the original as a backup. A session
 * that fails is reported and left unchanged; a current session is reported as current. A rewrite
 * never drops the complete lines of a torn tail unless asked (`dropTornTail`; L3).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { type SessionLogError, TornTailRefused } from "../schema/Errors.js"
import { SESSION_FORMAT_VERSION } from "../schema/Format.js"
import { validateSeed } from "../services/Seed.js"
import { type LoadResult, readPipeline, SessionStore } from "../services/SessionStore.js"
import { type ErrorReport, errorReport } from "./Verify.js"

/**
 * The outcome for one session.
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrateReport {
  readonly id: string
  readonly status: "upgraded" | "current" | "failed"
  /** Why the session was left unchanged (L9 unwrapped to the rule that fired). */
  readonly error?: ErrorReport
}

/**
 * The backup reason recorded by `replaceLog` for an upgrade.
 *
 * @since 0.1.0
 * @category constants
 */
export const BACKUP_REASON = "v0"

const failed = (id: string) => (e: SessionLogError): Effect.Effect<MigrateReport> =>
  Effect.succeed({ id, status: "failed", error: errorReport(e) })

/**
 * Options of `migrateSession` and `migrateStore`.
 *
 * @since 0.1.0
 * @category models
 */
export interface MigrateOptions {
  /**
   * Accept dropping the complete lines of a torn tail (L3) with the rewrite. Without it such a
   * session fails with `TornTailRefused` and is left unchanged. A torn final fragment (L1, no
   * complete line) is dropped either way; the original file is kept as the backup.
   */
  readonly dropTornTail?: boolean
}

/** L3: the complete lines of the torn tail a rewrite would drop, unless accepted. */
const tornTailLoss = (id: string, loaded: LoadResult, options: MigrateOptions): TornTailRefused | undefined => {
  const torn = loaded.tornTail
  const extent = loaded.tornTailExtent
  if (torn === undefined || extent === undefined || extent.completeLines === 0 || options.dropTornTail === true) {
    return undefined
  }
  return new TornTailRefused({
    rule: "L3",
    sessionId: id,
    seq: torn.fromSeq,
    reason: torn.reason,
    line: extent.line,
    completeLines: extent.completeLines,
    bytes: extent.bytes
  })
}

/**
 * Upgrade one stored session to the current format (idempotent).
 *
 * @since 0.1.0
 * @category accessors
 */
export const migrateSession = Effect.fn("Migrate.migrateSession")(function*(id: string, options: MigrateOptions = {}) {
  const store = yield* SessionStore
  return yield* Effect.gen(function*() {
    const loaded = yield* store.load(id)
    if (loaded.storedVersion === SESSION_FORMAT_VERSION) return { id, status: "current" } as MigrateReport
    const loss = tornTailLoss(id, loaded, options)
    if (loss !== undefined) return yield* loss
    // K1/K2 refusals, K10/K11 of the v0 edge and K7 surface here; then the result must be a valid seed
    const { header, events } = yield* readPipeline(loaded)
    const valid = yield* validateSeed(events, { coldRead: true })
    yield* store.replaceLog(id, header, valid.events, { revision: loaded.revision, backup: BACKUP_REASON })
    return { id, status: "upgraded" } as MigrateReport
  }).pipe(Effect.catchAll(failed(id)))
})

/**
 * Upgrade every materialised session of the store; one report per session, in `list` order.
 *
 * @since 0.1.0
 * @category accessors
 */
export const migrateStore = Effect.fn("Migrate.migrateStore")(function*(options: MigrateOptions = {}) {
  const store = yield* SessionStore
  const headers = yield* store.list()
  const reports: Array<MigrateReport> = []
  for (const h of headers) reports.push(yield* migrateSession(h.id, options))
  return reports as ReadonlyArray<MigrateReport>
})
