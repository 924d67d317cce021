/**
 * Event serialisation in the fixed key order of SPEC §1.1. Pure: the serialised line of an event
 * the append pipeline built travels with it (`PreparedEvent`), so nothing here remembers events.
 */
import type { Event } from "./Events.js"
import { encodeJson, type Json } from "./Json.js"

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

/** Rebuild an envelope with its keys in §1.1 order (absent keys omitted), frozen. */
export const orderEnvelope = (r: Record<string, unknown>): Event => {
  const out: Record<string, unknown> = { type: r.type, seq: r.seq, time: r.time, data: r.data }
  if (r.sourceEventSeqs !== undefined) out.sourceEventSeqs = r.sourceEventSeqs
  if (r.surfaceOp !== undefined) out.surfaceOp = r.surfaceOp
  if (r.ignorable !== undefined) out.ignorable = r.ignorable
  return Object.freeze(out) as unknown as Event
}

/** The JSON text of an event (one JSONL line without the newline), keys in §1.1 order. */
export const encodeEvent = (event: Event): string => {
  const r = event as unknown as Record<string, unknown>
  return encodeJson((isOrderedEnvelope(r) ? r : orderEnvelope(r)) as unknown as Json)
}
