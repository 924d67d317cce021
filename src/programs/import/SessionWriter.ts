/**
 * Writing an imported session (docs/import.md "Session ids, importing again, `--force`"): whether
 * the store holds it and who wrote it, and the `SessionWriter` that checks each batch with the
 * seed pipeline (`LogCursor`) before it reaches the store. Internal to the importers.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import { SessionExists, type SessionLogError } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { checkSeedRecord, type SeedError } from "../../services/Seed.js"
import { applyPlan, isPlan, planSurface } from "../../services/SurfaceManager.js"
import { SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"
import { errorReport } from "../Verify.js"
import type { BuildCounts } from "./LogBuilder.js"
import { IMPORT_END, IMPORT_ORIGIN, KnownIds, type SessionReport } from "./TranscriptImport.js"
import { isObject } from "./SourceLines.js"

/** A session this import may write: new, replaced (`--force`), already imported, or refused. */
type Mode = "new" | "replace" | "unchanged" | "refused"

const BATCH_EVENTS = 4_096

/**
 * What the store holds under an id this import would write: a session written otherwise
 * (`foreign`), one an import finished (`complete`: `import/origin` first, `import/end` last), one
 * an import finished and something appended to since (`continued`: a person resumed it), or one
 * an import began and did not finish (`incomplete`: interrupted, or a write that failed).
 *
 * @since 0.2.0
 * @category models
 */
export type ImportState = "foreign" | "complete" | "continued" | "incomplete"

/**
 * The `ImportState` of the stored session `id`, by a streamed read (memory bounded by a chunk).
 *
 * @since 0.2.0
 * @category utils
 */
export const importState = (store: SessionStoreShape, id: string) =>
  Effect.suspend(() => {
    let first: unknown
    let last: unknown
    let ended = false
    return store.loadEach(id, {
      onEvents: (events) =>
        Effect.sync(() => {
          for (const e of events) {
            if (first === undefined) first = e
            if (isObject(e) && e.type === IMPORT_END) ended = true
            last = e
          }
        })
    }).pipe(Effect.map((): ImportState =>
      !isObject(first) || first.type !== IMPORT_ORIGIN
        ? "foreign"
        : !ended
        ? "incomplete"
        : isObject(last) && last.type === IMPORT_END
        ? "complete"
        : "continued"
    ))
  })

/**
 * The seed pipeline (SPEC §3.2) over a session being imported, one batch at a time: each event's
 * envelope, shape and surface plan. Unlike the stores' streamed reads it keeps no tool result
 * (an import never rewrites one, G1–G3), so memory holds the surface's seqs only, whatever the
 * transcript's length.
 *
 * @since 0.2.0
 * @category models
 */
export class LogCursor {
  /**
   * The surface nodes so far.
   *
   * @since 0.2.0
   */
  readonly nodes: Array<number> = []
  /**
   * How many events were accepted.
   *
   * @since 0.2.0
   */
  count = 0
  /**
   * The first rejection, after which no event is accepted.
   *
   * @since 0.2.0
   */
  error: SeedError | undefined

  /**
   * Check the next events; the accepted ones (none after a rejection).
   *
   * @since 0.2.0
   */
  push(events: ReadonlyArray<Event>): ReadonlyArray<Event> {
    const accepted: Array<Event> = []
    for (let k = 0; k < events.length && this.error === undefined; k++) {
      const i = this.count
      const checked = checkSeedRecord(events[k], i, true)
      if ("_tag" in checked) {
        this.error = checked
        break
      }
      const plan = planSurface(this.nodes, checked, i, () => undefined)
      if (!isPlan(plan)) {
        this.error = plan
        break
      }
      applyPlan(this.nodes, plan, i)
      accepted.push(checked)
      this.count++
    }
    return accepted
  }
}

/**
 * Writes one session: validates every batch as a seed (the log is checked before it is stored),
 * appends new sessions in batches, collects a `--force` replacement for one `replaceLog`, and
 * writes nothing for a session imported before or refused.
 *
 * @since 0.2.0
 * @category models
 */
export class SessionWriter {
  private readonly cursor = new LogCursor()
  private pending: Array<Event> = []
  private readonly all: Array<Event> = []
  private stored = 0
  private created = false
  private closed = false
  /**
   * The first failure of this session, if any.
   *
   * @since 0.2.0
   */
  error: SessionLogError | undefined

  constructor(
    readonly store: SessionStoreShape,
    readonly header: SessionHeader,
    readonly mode: Mode,
    readonly refusal?: SessionLogError
  ) {
    this.error = refusal
  }

  /**
   * Validate and queue events; append a batch when one is full.
   *
   * @since 0.2.0
   */
  write(events: ReadonlyArray<Event>): Effect.Effect<void> {
    if (this.error !== undefined || events.length === 0) return Effect.void
    const accepted = this.cursor.push(events)
    if (this.cursor.error !== undefined) {
      this.error = this.cursor.error
      return Effect.void
    }
    if (this.mode === "replace") {
      for (const e of accepted) this.all.push(e)
      return Effect.void
    }
    if (this.mode !== "new") return Effect.void
    for (const e of accepted) this.pending.push(e)
    return this.pending.length >= BATCH_EVENTS ? this.flush() : Effect.void
  }

  /**
   * Append the queued batch.
   *
   * @since 0.2.0
   */
  private flush(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const batch = this.pending
      this.pending = []
      if (batch.length === 0 || this.error !== undefined) return Effect.void
      const at = this.stored
      this.stored += batch.length
      const create = this.created ? Effect.void : Effect.asVoid(this.store.create(this.header))
      this.created = true
      return Effect.zipRight(create, this.store.append(this.header.id, batch, { expectedSeq: at })).pipe(
        Effect.catchAll((e) => Effect.sync(() => void (this.error = e as SessionLogError)))
      )
    })
  }

  /**
   * Undo an unfinished new session (its import interrupted before `close`): discard it when it
   * holds no more events than this writer appended; otherwise, or when that fails, keep it and say so.
   *
   * @since 0.2.0
   */
  undo(): Effect.Effect<void> {
    const id = this.header.id
    if (this.mode !== "new" || !this.created || this.closed) return Effect.void
    return Effect.gen(this, function*() {
      const read = yield* this.store.loadEach(id, { onEvents: () => Effect.void })
      if (read.count > this.stored) {
        return yield* Effect.logWarning(`import interrupted: session "${id}" holds events this import did not write; it was kept`)
      }
      yield* this.store.discard(id, { revision: read.revision })
      yield* Effect.logWarning(`import interrupted: the partial session "${id}" was removed`)
    }).pipe(
      Effect.catchAll((e) => Effect.logWarning(`import interrupted: the partial session "${id}" could not be removed`, e))
    )
  }

  /**
   * Write what is left; the outcome of this session.
   *
   * @since 0.2.0
   */
  close(counts: BuildCounts): Effect.Effect<SessionReport> {
    return Effect.gen(this, function*() {
      this.closed = true
      if (this.mode === "new") yield* this.flush()
      if (this.mode === "replace" && this.error === undefined) {
        const loaded = yield* Effect.either(this.store.load(this.header.id))
        if (loaded._tag === "Left") this.error = loaded.left
        else {
          const replaced = yield* Effect.either(
            this.store.replaceLog(this.header.id, this.header, this.all, {
              revision: loaded.right.revision,
              backup: "import-force"
            })
          )
          if (replaced._tag === "Left") this.error = replaced.left
        }
      }
      const status = this.error !== undefined
        ? "refused"
        : this.mode === "replace"
        ? "replaced"
        : this.mode === "new"
        ? "imported"
        : "unchanged"
      return {
        id: this.header.id,
        ...(this.header.parentSession === undefined ? {} : { parentSession: this.header.parentSession }),
        status,
        events: this.cursor.count,
        ...counts,
        ...(this.error === undefined ? {} : { error: errorReport(this.error) })
      } satisfies SessionReport
    })
  }
}

/**
 * Open a writer for `header`: a new session, a replacement of one an import created (`force`)
 * or began and did not finish, `unchanged` when an import created it before (and when a person
 * continued it since, unless `force`, which refuses it then), refused (`SessionExists`, J14) when anything else
 * wrote it: this import never touches what it did not create.
 *
 * @since 0.2.0
 * @category constructors
 */
export const openWriter = (header: SessionHeader, existing: Set<string>, force: boolean) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    if (!existing.has(header.id)) {
      existing.add(header.id)
      const writer = new SessionWriter(store, header, "new")
      if (existing instanceof KnownIds) existing.begun.push(writer)
      return writer
    }
    const state = yield* Effect.either(importState(store, header.id))
    if (state._tag === "Left") return new SessionWriter(store, header, "refused", state.left as SessionLogError)
    // J14: never replace what this import did not write (another writer's session, or events a
    // person appended to an imported one: those stay, even with --force)
    if (state.right === "foreign" || (state.right === "continued" && force)) {
      return new SessionWriter(store, header, "refused", new SessionExists({ rule: "J14", sessionId: header.id }))
    }
    // an import that did not finish is replaced, never taken for a complete one
    return new SessionWriter(
      store,
      header,
      state.right === "incomplete" || (state.right === "complete" && force) ? "replace" : "unchanged"
    )
  })
