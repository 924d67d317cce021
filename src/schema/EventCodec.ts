/**
 * Event serialisation in the fixed key order of SPEC §1.1. Pure: the serialised line of an event
 * the append pipeline built travels with it (`PreparedEvent`), so nothing here remembers events.
 */
import type { Event } from "./Events.js"
import { encodeJson, type Json } from "./Json.js"

/** The envelope keys in §1.1 order. */
const ENVELOPE_ORDER: ReadonlyArray<string> = ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"]

/**
 * True when `r` is a frozen record whose own keys are envelope keys in §1.1 order with no
 * `undefined` value, i.e. `orderEnvelope(r)` would rebuild an equal record with the same key
 * order (so a frozen, ordered record can stand for it).
 */
export const isOrderedEnvelope = (r: Record<string, unknown>): boolean => {
  if (!Object.isFrozen(r)) return false
  const keys = Object.keys(r)
  // one cursor over the §1.1 order: each key must come later in it than the one before
  let at = 0
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]
    while (at < ENVELOPE_ORDER.length && ENVELOPE_ORDER[at] !== key) at++
    if (at === ENVELOPE_ORDER.length || r[key] === undefined) return false
    at++
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
