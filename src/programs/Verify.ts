/**
 * Verification of stored sessions (SPEC §12): a cold read through the read pipeline, the stored
 * events validated as a seed, and a report of either the kept event count and surface or the
 * first rejection (L9 unwrapped to its innermost rule error). Reading never writes (L8).
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import { type SessionLogError, StoreCorrupt } from "../schema/Errors.js"
import { validateSeed } from "../services/Seed.js"
import { readEach } from "../services/ReadEach.js"
import {
  type EventSink,
  type LoadError,
  type LoadResult,
  type LoadSummary,
  readPipeline,
  SessionStore,
  type TornTail
} from "../services/SessionStore.js"

/**
 * The first rejection, as printed by `verify --json`.
 *
 * @since 0.1.0
 * @category models
 */
export interface ErrorReport {
  readonly _tag: string
  readonly rule: string | null
  readonly seq: number | null
  readonly message: string
}

/**
 * A verification result.
 *
 * @since 0.1.0
 * @category models
 */
export type VerifyReport =
  | {
    readonly ok: true
    readonly events: number
    readonly surface: ReadonlyArray<number>
    /** The torn tail the count leaves out (not an error, SPEC §12), when there is one. */
    readonly tornTail?: TornTailReport
  }
  | { readonly ok: false; readonly error: ErrorReport }

/**
 * A torn tail as `verify --json` reports it: where it starts and, from JSONL, what it holds.
 *
 * @since 0.1.0
 * @category models
 */
export interface TornTailReport {
  readonly fromSeq: number
  readonly reason: TornTail["reason"]
  /** The 1-based line number of its first line (JSONL). */
  readonly line?: number
  /** Complete lines in it: records a repair or rewrite would drop (JSONL). */
  readonly completeLines?: number
  readonly bytes?: number
}

const tornTailReport = (loaded: Pick<LoadResult, "tornTail" | "tornTailExtent">): TornTailReport | undefined =>
  loaded.tornTail === undefined ? undefined : {
    fromSeq: loaded.tornTail.fromSeq,
    reason: loaded.tornTail.reason,
    ...loaded.tornTailExtent
  }

/**
 * Unwrap L9 corruption to the rule error that caused it.
 *
 * @since 0.1.0
 * @category utils
 */
export const innermost = (e: SessionLogError): SessionLogError => {
  let cur: SessionLogError = e
  while (cur instanceof StoreCorrupt && cur.rule === "L9" && typeof cur.cause === "object" && cur.cause !== null &&
    "_tag" in cur.cause) {
    cur = cur.cause as SessionLogError
  }
  return cur
}

/**
 * The `{_tag, rule, seq, message}` report of an error (L9 unwrapped).
 *
 * @since 0.1.0
 * @category utils
 */
export const errorReport = (error: SessionLogError): ErrorReport => {
  const e = innermost(error)
  const rule = "rule" in e && typeof e.rule === "string" ? e.rule : null
  const seq = "seq" in e && typeof e.seq === "number" ? e.seq : null
  return { _tag: e._tag, rule, seq, message: e.message }
}

/**
 * Validate a loaded session: read pipeline, then the stored events as a seed.
 *
 * @since 0.1.0
 * @category utils
 */
export const verifyLoaded = (loaded: LoadResult): Effect.Effect<VerifyReport> =>
  Effect.gen(function*() {
    const { events } = yield* readPipeline(loaded)
    const { events: valid, tracker } = yield* validateSeed(events, { coldRead: true })
    const tornTail = tornTailReport(loaded)
    return { ok: true as const, events: valid.length, surface: tracker.nodes.slice(), ...(tornTail === undefined ? {} : { tornTail }) }
  }).pipe(
    Effect.catchAll((e) => Effect.succeed({ ok: false as const, error: errorReport(e) })),
    Effect.withSpan("Verify.verifyLoaded")
  )

/**
 * Verify a session read through `read` (a store's `loadEach`, or a file's) without holding its
 * log: the streamed read pipeline and seed validation (`ReadEach`); `reload` reads the whole log
 * for the version-0 edge. A failed read is reported like any rejection.
 *
 * @since 0.1.0
 * @category utils
 */
export const verifyEach = <E extends { readonly _tag: string }, R>(
  read: (sink: EventSink) => Effect.Effect<LoadSummary, LoadError | E, R>,
  reload: Effect.Effect<LoadResult, LoadError | E, R>
): Effect.Effect<VerifyReport, never, R> =>
  readEach(read, reload).pipe(
    Effect.map((r): VerifyReport => {
      const tornTail = tornTailReport(r)
      return { ok: true, events: r.count, surface: r.surface, ...(tornTail === undefined ? {} : { tornTail }) }
    }),
    Effect.catchAll((e) => Effect.succeed({ ok: false as const, error: errorReport(e as SessionLogError) })),
    Effect.withSpan("Verify.verifyEach")
  )

/**
 * Verify one stored session, streamed (memory bounded by the surface, not the log).
 *
 * @since 0.1.0
 * @category utils
 */
export const verifySession = (id: string): Effect.Effect<VerifyReport, never, SessionStore> =>
  Effect.flatMap(SessionStore, (store) => verifyEach((sink) => store.loadEach(id, sink), store.load(id))).pipe(
    Effect.withSpan("Verify.verifySession", { attributes: { sessionId: id } })
  )
