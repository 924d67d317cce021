/**
 * Where the web app's data comes from: the viewer's JSON API (with the token of the page's URL),
 * or the events inlined in an exported HTML file, answered by the same pure functions the server
 * uses (`Views`). Both answer the same questions in the same shapes.
 *
 * @since 0.2.0
 */
import * as Data from "effect/Data"
import type { Event } from "../../../schema/Events.js"
import { foldSurface } from "../../../services/SurfaceManager.js"
import type { SessionSummary, TimelinePage } from "../ViewData.js"
import type { LoadProblem, TornTailNote } from "../ViewIndex.js"
import {
  type Provenance,
  provenanceOf,
  relatedRows,
  type TimelineRow,
  timelineRows,
  type TimeTravel,
  timeTravel
} from "../Views.js"

/**
 * The questions the app asks.
 *
 * @since 0.2.0
 * @category models
 */
export interface Source {
  /** The sessions, with the progress of the indexes still being built (`indexing`). */
  readonly sessions: () => Promise<ReadonlyArray<SessionSummary>>
  /** The sessions listed last, their indexes as they are now (the progress of those being built). */
  readonly progress?: () => Promise<ReadonlyArray<SessionSummary>>
  readonly page: (id: string, offset: number, limit: number) => Promise<TimelinePage>
  readonly at: (id: string, seq: number) => Promise<{ readonly at: TimeTravel | null; readonly problem: LoadProblem | null }>
  readonly provenance: (id: string, seq: number) => Promise<{
    readonly provenance: Provenance | null
    readonly related: ReadonlyArray<TimelineRow>
  }>
  readonly head: (id: string) => Promise<{ readonly count: number }>
  /** Whether the data can change (a live store, not an export). */
  readonly live: boolean
  /**
   * Call `onCount` with the session's event count now and each time the log grows (the server's
   * follow, as server-sent events); the returned function stops it. A stream the server refuses
   * (401/403: the token missing or wrong) is closed, not retried, and `onRefused` is called.
   * Absent: poll `head`.
   */
  readonly watch?: (
    id: string,
    onCount: (count: number) => void,
    onRefused: (refusal: ApiRefused) => void
  ) => () => void
}

/**
 * A refusal of the API (the token missing or wrong: 401).
 *
 * @since 0.2.0
 * @category models
 */
export class ApiRefused extends Data.TaggedError("ApiRefused")<{ readonly status: number; readonly detail: string }> {}

/**
 * The viewer's JSON API, with `token` sent on every request.
 *
 * @since 0.2.0
 * @category constructors
 */
export const httpSource = (token: string): Source => {
  const get = async (path: string): Promise<any> => {
    const res = await fetch(path, { headers: { "x-session-log-token": token } })
    const body = await res.json()
    if (res.status === 401 || res.status === 403 || res.status === 400 || res.status >= 500) {
      throw new ApiRefused({ status: res.status, detail: String(body.detail ?? body.error) })
    }
    return body
  }
  const enc = encodeURIComponent
  return {
    // wait=0: what is indexed so far, with the progress of the indexes still being built
    sessions: () => get("/api/sessions?wait=0").then((b) => b.sessions),
    progress: () => get("/api/sessions?wait=0&reread=0").then((b) => b.sessions),
    page: (id, offset, limit) => get(`/api/sessions/${enc(id)}/events?offset=${offset}&limit=${limit}&wait=0`),
    at: (id, seq) => get(`/api/sessions/${enc(id)}/at/${seq}`),
    provenance: (id, seq) => get(`/api/sessions/${enc(id)}/provenance/${seq}`),
    head: (id) => get(`/api/sessions/${enc(id)}/head`),
    live: true,
    ...(typeof EventSource === "undefined" ? {} : {
      watch: (id: string, onCount: (count: number) => void, onRefused: (refusal: ApiRefused) => void) => {
        // EventSource sends no headers: the token goes in the query (same origin, no referrer)
        const events = new EventSource(`/api/sessions/${enc(id)}/live?token=${enc(token)}`)
        let stopped = false
        const stop = () => {
          stopped = true
          events.close()
        }
        events.onmessage = (m) => {
          const count = (JSON.parse(String(m.data)) as { count?: unknown }).count
          if (typeof count === "number") onCount(count)
        }
        // an EventSource sees no status: on an error, ask the API why (a refusal stops it for
        // good; anything else is left to the EventSource's own reconnection)
        events.onerror = () => {
          if (stopped) return
          void get(`/api/sessions/${enc(id)}/head`).then(
            () => undefined,
            (e: unknown) => {
              if (stopped || !(e instanceof ApiRefused) || (e.status !== 401 && e.status !== 403)) return
              stop()
              onRefused(e)
            }
          )
        }
        return stop
      }
    })
  }
}

/**
 * One session's validated events held by the page (an exported HTML file).
 *
 * @since 0.2.0
 * @category constructors
 */
export const inlineSource = (
  summary: SessionSummary,
  events: ReadonlyArray<Event>,
  tornTail: TornTailNote | null
): Source => {
  const fold = foldSurface(events)
  const replacements = "nodes" in fold ? fold.replacements : []
  return {
    sessions: () => Promise.resolve([summary]),
    page: (id, offset, limit) =>
      Promise.resolve({
        id,
        total: events.length,
        offset,
        rows: timelineRows(events.slice(offset, offset + limit)),
        problem: summary.problem,
        tornTail
      }),
    at: (_id, seq) => Promise.resolve({ at: timeTravel(events, seq) ?? null, problem: summary.problem }),
    provenance: (_id, seq) => {
      const event = events[seq]
      if (event === undefined) return Promise.resolve({ provenance: null, related: [] })
      const provenance = provenanceOf(replacements, event)
      return Promise.resolve({ provenance, related: relatedRows(provenance, (s) => events[s]) })
    },
    head: () => Promise.resolve({ count: events.length }),
    live: false
  }
}
