/**
 * The viewer's reads over the `SessionStore` Tag (docs/viewer.md "The JSON API"): the sessions
 * with their verify status, one page of a session's timeline, time travel at a seq, provenance.
 * Every read is a validated streamed read (`ReadEach`): a page keeps only its own events, time
 * travel only the prefix up to its seq. A log that fails to load reports its rule, seq and line
 * with what loads of it. Never writes.
 *
 * @since 0.2.0
 */
import * as Effect from "effect/Effect"
import type { Event } from "../../schema/Events.js"
import type { SessionLogError } from "../../schema/Errors.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { readEach } from "../../services/ReadEach.js"
import { SessionStore, type SessionStoreShape } from "../../services/SessionStore.js"
import { foldSurface } from "../../services/SurfaceManager.js"
import { errorReport } from "../Verify.js"
import {
  type Provenance,
  provenanceOf,
  relatedRows,
  type TimelineRow,
  timelineRows,
  type TimeTravel,
  timeTravel
} from "./Views.js"

/**
 * Why a log did not load: the rule, the seq and (JSONL) the line of the first rejection.
 *
 * @since 0.2.0
 * @category models
 */
export interface LoadProblem {
  readonly tag: string
  readonly rule: string | null
  readonly seq: number | null
  readonly line: number | null
  readonly message: string
}

const problemOf = (e: unknown): LoadProblem => {
  const tagged = typeof e === "object" && e !== null && "_tag" in e
  if (!tagged) return { tag: "Unknown", rule: null, seq: null, line: null, message: String(e) }
  const r = errorReport(e as SessionLogError)
  const lineOf = (e as { readonly line?: unknown }).line
  const line = typeof lineOf === "number" ? lineOf : null
  return { tag: r._tag, rule: r.rule, seq: r.seq, line, message: r.message }
}

/**
 * A torn tail a read left out (not an error: `repair` removes it): where it starts and, from
 * JSONL, its line.
 *
 * @since 0.2.0
 * @category models
 */
export interface TornTailNote {
  readonly fromSeq: number
  readonly reason: string
  readonly line: number | null
}

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
}

const PREVIEW_CHARS = 120

/** A validated streamed read of one session, handing on its events; failures become a problem. */
const readSession = (
  store: SessionStoreShape,
  id: string,
  onEvents: (events: ReadonlyArray<Event>) => void
) =>
  readEach((sink) => store.loadEach(id, sink), store.load(id), (events) => Effect.sync(() => onEvents(events))).pipe(
    Effect.map((r) => ({
      header: r.header as SessionHeader | undefined,
      count: r.count,
      problem: null as LoadProblem | null,
      tornTail: r.tornTail === undefined ? null : {
        fromSeq: r.tornTail.fromSeq,
        reason: r.tornTail.reason as string,
        line: r.tornTailExtent?.line ?? null
      } as TornTailNote | null
    })),
    Effect.catchAll((e) => Effect.succeed({ header: undefined, count: 0, problem: problemOf(e), tornTail: null as TornTailNote | null }))
  )

/**
 * The sessions of the store with their status (each read streamed: memory bounded by a chunk).
 *
 * @since 0.2.0
 * @category utils
 */
export const listSessions = Effect.fn("ViewData.listSessions")(function*() {
  const store = yield* SessionStore
  const headers = yield* store.list()
  return yield* Effect.forEach(headers, (h) => {
    let events = 0
    let last = h.createdAt
    let preview = ""
    return Effect.map(
      readSession(store, h.id, (chunk) => {
        for (const e of chunk) {
          events++
          if (e.time > last) last = e.time
          if (preview === "" && e.type === "user/message") {
            const content = (e.data as { content?: ReadonlyArray<{ type?: string; text?: string }> }).content ?? []
            preview = content.map((b) => b.type === "text" ? b.text ?? "" : "").join(" ").slice(0, PREVIEW_CHARS)
          }
        }
      }),
      ({ problem, tornTail }): SessionSummary => ({
        id: h.id,
        createdAt: h.createdAt,
        parentSession: h.parentSession ?? null,
        events,
        lastActivity: last,
        preview,
        problem,
        tornTail
      })
    )
  })
})

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
}

/**
 * The largest page the API hands out.
 *
 * @since 0.2.0
 * @category constants
 */
export const MAX_PAGE = 2_000

/**
 * The timeline rows of events `[offset, offset + limit)` (limit at most `MAX_PAGE`): one streamed
 * read that keeps only the page's events.
 *
 * @since 0.2.0
 * @category utils
 */
export const timelinePage = Effect.fn("ViewData.timelinePage")(function*(id: string, offset: number, limit: number) {
  const store = yield* SessionStore
  const n = Math.max(0, Math.min(limit, MAX_PAGE))
  const page: Array<Event> = []
  let seen = 0
  const { problem, tornTail } = yield* readSession(store, id, (chunk) => {
    for (const e of chunk) {
      if (seen >= offset && seen < offset + n) page.push(e)
      seen++
    }
  })
  return { id, total: seen, offset, rows: timelineRows(page), problem, tornTail } satisfies TimelinePage
})

/**
 * Time travel at `seq` (undefined when the log does not reach it): one streamed read keeping the
 * prefix up to `seq`.
 *
 * @since 0.2.0
 * @category utils
 */
export const timeTravelAt = Effect.fn("ViewData.timeTravelAt")(function*(id: string, seq: number) {
  const store = yield* SessionStore
  const prefix: Array<Event> = []
  const { problem } = yield* readSession(store, id, (chunk) => {
    for (const e of chunk) if (e.seq <= seq) prefix.push(e)
  })
  return { at: timeTravel(prefix, seq) ?? null, problem } as { readonly at: TimeTravel | null; readonly problem: LoadProblem | null }
})

/**
 * Provenance of `seq` both ways, with the events it names (the replaced span's shadowed events,
 * the replacing events), each as a timeline row.
 *
 * @since 0.2.0
 * @category utils
 */
export const provenanceAt = Effect.fn("ViewData.provenanceAt")(function*(id: string, seq: number) {
  const store = yield* SessionStore
  const events: Array<Event> = []
  const { problem } = yield* readSession(store, id, (chunk) => void events.push(...chunk))
  const fold = foldSurface(events)
  if (!("nodes" in fold) || seq < 0 || seq >= events.length) {
    return { provenance: null, related: [], problem } as {
      readonly provenance: Provenance | null
      readonly related: ReadonlyArray<TimelineRow>
      readonly problem: LoadProblem | null
    }
  }
  const provenance = provenanceOf(fold.replacements, events[seq])
  return { provenance, related: relatedRows(provenance, (s) => events[s]), problem }
})

/**
 * The number of events of a session that load (what live polling compares).
 *
 * @since 0.2.0
 * @category utils
 */
export const headOf = Effect.fn("ViewData.headOf")(function*(id: string) {
  const store = yield* SessionStore
  const { count, problem } = yield* readSession(store, id, () => undefined)
  return { id, count, problem }
})
