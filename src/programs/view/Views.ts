/**
 * What the viewer shows, as pure functions over events (docs/viewer.md): timeline rows (runs of
 * streamed chunks folded into the text they assembled, tool calls paired with their results),
 * time travel (the surface, derived messages and exact request in force at a seq, from the same
 * core as `surface`, `messages` and `request --at`) and provenance both ways. The server and the
 * exported HTML page both answer with these.
 *
 * @since 0.2.0
 */
import type { Event } from "../../schema/Events.js"
import type { Message } from "../../schema/Messages.js"
import { deepFreeze } from "../../schema/Json.js"
import { canonicalHeader, type RequestHeader, requestMessages } from "../../schema/RequestHeader.js"
import { requestAtLog } from "../../services/RequestAt.js"
import { deriveMessages, foldSurface, type Replacement } from "../../services/SurfaceManager.js"

/**
 * One row of the timeline: one event, or a run of `assistant/chunk` events of one step folded
 * into the text they assembled (`seq` .. `lastSeq`).
 *
 * @since 0.2.0
 * @category models
 */
export interface TimelineRow {
  readonly seq: number
  readonly lastSeq: number
  readonly time: number
  readonly type: string
  readonly turn: number | null
  readonly step: number | null
  /** The row's text: a message's text, the assembled chunk text, a tool call's name and arguments. */
  readonly text: string
  /** `append`, `replace a..b`, or empty for an event off the surface. */
  readonly surface: string
  /** Ignorable and log-only events (no surface operation) are shown dimmed. */
  readonly dim: boolean
  /** A closer written by `repair` (a turn ended as interrupted). */
  readonly closer: boolean
  /** Token usage of a step (from its usage chunk). */
  readonly usage: { readonly inputTokens?: number; readonly outputTokens?: number } | null
  /** The seq of the tool call a result answers, or of the result a call got (within the page). */
  readonly pairedSeq: number | null
}

type Rec = Record<string, unknown>

const isRec = (u: unknown): u is Rec => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The plain text of a message's content (tool calls and results marked).
 *
 * @since 0.2.0
 * @category utils
 */
export const contentText = (content: unknown): string =>
  Array.isArray(content)
    ? content.map((b) => {
      if (!isRec(b)) return ""
      switch (b.type) {
        case "text":
        case "reasoning":
          return String(b.text)
        case "tool-call":
          return `→ ${String(b.name)}(${String(b.arguments)})`
        case "tool-result":
          return `← ${contentText(b.content)}`
        default:
          return `[${String(b.type)}]`
      }
    }).join("\n")
    : ""

const surfaceLabel = (e: Event): string =>
  e.surfaceOp === undefined ? "" : e.surfaceOp === "append" ? "append" : `replace ${e.surfaceOp.start}..${e.surfaceOp.end}`

/** The text of one event's row. */
const eventText = (e: Event): string => {
  const d = e.data as unknown
  if (!isRec(d)) return ""
  switch (e.type) {
    case "user/message":
    case "context/message":
      return contentText(d.content)
    case "assistant/message":
    case "tool/result":
      return isRec(d.message) ? contentText(d.message.content) : ""
    case "tool/call":
      return `${String(d.name)}(${String(d.arguments)})`
    case "turn/start":
    case "step/start":
    case "step/end":
      return `turn ${String(d.turn)}${d.step === undefined ? "" : ` step ${String(d.step)}`}`
    case "turn/end":
      return `turn ${String(d.turn)} ${isRec(d.reason) ? String(d.reason.kind) : ""}`
    case "request/header": {
      const h = isRec(d.header) ? d.header : {}
      const cfg = isRec(h.config) ? h.config : {}
      return `${String(d.reason)}: ${String(cfg.provider)}/${String(cfg.model)}`
    }
    case "compaction/summary":
      return contentText(d.summary)
    case "compaction/prune":
      return `pruned ${Array.isArray(d.shadowedSeqs) ? d.shadowedSeqs.join(", ") : ""}`
    default:
      return ""
  }
}

const num = (u: unknown): number | null => typeof u === "number" ? u : null

/**
 * The timeline rows of consecutive events (a page of the log): chunk runs folded, tool calls and
 * results paired when both are in the page.
 *
 * @since 0.2.0
 * @category utils
 */
export const timelineRows = (events: ReadonlyArray<Event>): Array<TimelineRow> => {
  const rows: Array<TimelineRow> = []
  const callRows = new Map<string, number>()
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    const d = isRec(e.data) ? e.data : {}
    const base = {
      seq: e.seq,
      lastSeq: e.seq,
      time: e.time,
      type: e.type,
      turn: num(d.turn),
      step: num(d.step),
      surface: surfaceLabel(e),
      dim: e.ignorable === true || e.surfaceOp === undefined,
      closer: e.type === "turn/end" && isRec(d.reason) && d.reason.kind === "interrupted",
      usage: null as TimelineRow["usage"],
      pairedSeq: null as number | null
    }
    if (e.type === "assistant/chunk") {
      // a run of chunks of one step: the text they assembled, and the step's usage
      let text = ""
      let usage: TimelineRow["usage"] = null
      let j = i
      for (; j < events.length && events[j].type === "assistant/chunk"; j++) {
        const dj = isRec(events[j].data) ? (events[j].data as Rec) : {}
        if (dj.turn !== d.turn || dj.step !== d.step) break
        const c = isRec(dj.chunk) ? dj.chunk : {}
        if (c.type === "text-delta" || c.type === "reasoning-delta") text += String(c.text ?? "")
        else if (c.type === "tool-call-delta") text += String(c.argumentsDelta ?? "")
        else if (c.type === "usage" && isRec(c.usage)) usage = c.usage as TimelineRow["usage"]
      }
      rows.push({ ...base, lastSeq: events[j - 1].seq, text, usage })
      i = j - 1
      continue
    }
    if (e.type === "tool/call" && typeof d.callId === "string") callRows.set(d.callId, rows.length)
    let pairedSeq: number | null = null
    if (e.type === "tool/result" && isRec(d.message) && Array.isArray(d.message.content)) {
      const block = d.message.content[0]
      const callId = isRec(block) ? block.toolCallId : undefined
      const at = typeof callId === "string" ? callRows.get(callId) : undefined
      if (at !== undefined) {
        pairedSeq = rows[at].seq
        rows[at] = { ...rows[at], pairedSeq: e.seq }
      }
    }
    rows.push({ ...base, text: eventText(e), pairedSeq })
  }
  return rows
}

/**
 * What was in force at a seq: the surface (with its replacement history), the derived messages
 * (`session-log messages` of the prefix), the exact request (`session-log request --at`), and the
 * request header before the latest one with the latest one's reason.
 *
 * @since 0.2.0
 * @category models
 */
export interface TimeTravel {
  readonly seq: number
  readonly surface: { readonly nodes: ReadonlyArray<number>; readonly replacements: ReadonlyArray<Replacement> }
  readonly messages: ReadonlyArray<Message>
  readonly request: { readonly header: RequestHeader | null; readonly messages: ReadonlyArray<Message> }
  /** The seq of the request header in force, its reason, and the header it followed. */
  readonly headerSeq: number | null
  readonly headerReason: string | null
  readonly previousHeader: RequestHeader | null
}

/**
 * Time travel over the prefix `events[0..seq]` of a validated log (`events` may hold more).
 * Undefined for a seq outside it.
 *
 * @since 0.2.0
 * @category utils
 */
export const timeTravel = (events: ReadonlyArray<Event>, seq: number): TimeTravel | undefined => {
  const snap = requestAtLog(events, seq)
  if ("_tag" in snap) return undefined
  const prefix = events.slice(0, seq + 1)
  const fold = foldSurface(prefix)
  const surface = "nodes" in fold ? fold : { nodes: [], replacements: [] }
  let headerSeq: number | null = null
  let previousSeq: number | null = null
  for (const e of prefix) {
    if (e.type !== "request/header") continue
    previousSeq = headerSeq
    headerSeq = e.seq
  }
  const data = (s: number | null) => s === null ? undefined : (events[s].data as Rec)
  return {
    seq,
    surface,
    messages: deriveMessages(surface.nodes, (s) => events[s]),
    request: { header: snap.header ?? null, messages: snap.messages },
    headerSeq,
    headerReason: headerSeq === null ? null : String(data(headerSeq)?.reason),
    previousHeader: previousSeq === null ? null : (data(previousSeq)?.header as RequestHeader)
  }
}

/**
 * Time travel at `seq` from what an index knows without the prefix (`ViewIndex.surfaceAt`,
 * `headersAt`): the surface and replacement history at `seq`, the seqs of the header in force and
 * of the one before it, and `eventAt` answering for those seqs and the surface's nodes. The same
 * answer as `timeTravel` over the prefix: the request is built as `requestAtLog` builds it (the
 * canonical header, its message prefix, then the surface's messages).
 *
 * @since 0.2.0
 * @category utils
 */
export const timeTravelFrom = (
  seq: number,
  surface: { readonly nodes: ReadonlyArray<number>; readonly replacements: ReadonlyArray<Replacement> },
  headers: { readonly headerSeq: number | null; readonly previousSeq: number | null },
  eventAt: (seq: number) => Event | undefined
): TimeTravel => {
  const data = (s: number | null) => s === null ? undefined : (eventAt(s)?.data as Rec | undefined)
  const messages = deriveMessages(surface.nodes, eventAt)
  const inForce = data(headers.headerSeq)?.header as RequestHeader | undefined
  const header = inForce === undefined ? undefined : Object.freeze(canonicalHeader(inForce))
  const request = deepFreeze({ header, messages: requestMessages(header, messages) })
  return {
    seq,
    surface: { nodes: [...surface.nodes], replacements: [...surface.replacements] },
    messages,
    request: { header: request.header ?? null, messages: request.messages },
    headerSeq: headers.headerSeq,
    headerReason: headers.headerSeq === null ? null : String(data(headers.headerSeq)?.reason),
    previousHeader: headers.previousSeq === null ? null : (data(headers.previousSeq)?.header as RequestHeader)
  }
}

/**
 * Provenance of one event, both ways: the replacement it made (the span it replaced and every
 * event it shadowed: "what this summary is made of"), and the replacements that shadowed it.
 *
 * @since 0.2.0
 * @category models
 */
export interface Provenance {
  readonly seq: number
  readonly replaced: Replacement | null
  readonly shadowedBy: ReadonlyArray<Replacement>
  /** `sourceEventSeqs` the event names (a summary's sources). */
  readonly sources: ReadonlyArray<number>
}

/**
 * The provenance of `seq` in the replacement history of a whole validated log.
 *
 * @since 0.2.0
 * @category utils
 */
export const provenanceOf = (
  replacements: ReadonlyArray<Replacement>,
  event: Event
): Provenance => ({
  seq: event.seq,
  replaced: replacements.find((r) => r.seq === event.seq) ?? null,
  shadowedBy: replacements.filter((r) => r.shadowedSeqs.includes(event.seq)),
  sources: Array.isArray(event.sourceEventSeqs) ? event.sourceEventSeqs : []
})

/**
 * The events a provenance names (what a replacement shadowed, the replacements that shadowed the
 * event, its sources), each as a timeline row, in seq order.
 *
 * @since 0.2.0
 * @category utils
 */
export const relatedRows = (provenance: Provenance, eventAt: (seq: number) => Event | undefined): Array<TimelineRow> => {
  const seqs = new Set<number>([
    ...(provenance.replaced?.shadowedSeqs ?? []),
    ...provenance.shadowedBy.map((r) => r.seq),
    ...provenance.sources
  ])
  return [...seqs].sort((a, b) => a - b).flatMap((s) => {
    const e = eventAt(s)
    return e === undefined ? [] : timelineRows([e])
  })
}
