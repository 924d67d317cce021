/**
 * Event serialisation in the fixed key order of SPEC §1.1 (the last frozen event's text is kept,
 * so the size check and the store's write of one append serialise it once), and the registry of
 * events built by this library's walk: detached and deep-frozen, so no later check can differ.
 */
import type { Event } from "./Events.js"
import { encodeJson, type Json } from "./Json.js"

let lastEvent: object | undefined
let lastText = ""
const trusted = new WeakSet<object>()

/** Rebuild an envelope with its keys in §1.1 order (absent keys omitted). */
/** The envelope keys in §1.1 order. */
const ENVELOPE_ORDER: ReadonlyMap<string, number> = new Map(
  ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"].map((k, i) => [k, i])
)

/**
 * True when `r` is a frozen record whose own keys are envelope keys in §1.1 order with no
 * `undefined` value, i.e. `orderEnvelope(r)` would rebuild an equal record with the same key
 * order (so a frozen, ordered record can stand for it).
 */
export const isOrderedEnvelope = (r: Record<string, unknown>): boolean => {
  if (!Object.isFrozen(r)) return false
  let last = -1
  for (const k of Object.keys(r)) {
    const at = ENVELOPE_ORDER.get(k)
    if (at === undefined || at <= last || r[k] === undefined) return false
    last = at
  }
  return true
}

export const orderEnvelope = (r: Record<string, unknown>): Event => {
  const out: Record<string, unknown> = { type: r.type, seq: r.seq, time: r.time, data: r.data }
  if (r.sourceEventSeqs !== undefined) out.sourceEventSeqs = r.sourceEventSeqs
  if (r.surfaceOp !== undefined) out.surfaceOp = r.surfaceOp
  if (r.ignorable !== undefined) out.ignorable = r.ignorable
  return Object.freeze(out) as unknown as Event
}

/** The JSON text of an event (one JSONL line without the newline). */
export const encodeEvent = (event: Event): string => {
  if (event === lastEvent) return lastText
  // trusted events are built in §1.1 order already
  const text = encodeJson(
    (trusted.has(event) ? event : orderEnvelope(event as unknown as Record<string, unknown>)) as unknown as Json
  )
  if (Object.isFrozen(event)) {
    lastEvent = event
    lastText = text
  }
  return text
}

/** Record that `event` was built from walked, deep-frozen parts by this library. */
export const markTrusted = <E extends Event>(event: E): E => {
  trusted.add(event)
  return event
}

/** True for an event built by this library's walk (its checks cannot have changed). */
export const isTrusted = (event: unknown): boolean => typeof event === "object" && event !== null && trusted.has(event)
