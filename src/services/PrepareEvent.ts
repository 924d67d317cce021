/**
 * The one append pipeline's effect-free head (SPEC §3.1 steps 2–7) and what the stores receive
 * (§7.1): an append request — type, data, surface intent or log-only options — checked (B2, B6,
 * A1–A9, I7, I8, K10, I, H, D6, E1, E4, B10) and built into a `PreparedEvent`: the frozen event in
 * §1.1 key order with its serialised line. A store takes prepared events as they are (it checks
 * only what it alone can know: the expected seq, its own size cap); plain events handed to a store
 * by other callers are prepared by `prepareBatch`, which runs the same checks.
 *
 * @since 0.1.0
 */
import {
  AppendConflict,
  InvalidEnvelope,
  type LegacyFormRefused,
  type MessageShapeInvalid,
  type NotLosslessJson,
  ProvenanceInvalid,
  type RequestHeaderInvalid,
  SurfaceMarkerInvalid,
  type UnknownEventType
} from "../schema/Errors.js"
import { encodeEvent } from "../schema/EventCodec.js"
import type { AppendOptions, Event } from "../schema/Events.js"
import { encodeJson, type Json, utf8Length, walkJson } from "../schema/Json.js"
import {
  checkEnvelope,
  checkLegacy,
  checkRecordKind,
  checkTypeShape,
  checkVocabulary,
  isRecord,
  notLossless
} from "../schema/Validation.js"

declare const PreparedBrand: unique symbol

/**
 * An event built by the append or seed pipeline: frozen, keys in §1.1 order, every rule of the
 * pipeline checked, with its JSON text (`line`, one JSONL line without the newline). Only this
 * module makes them, so a store can trust one without checking it again.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreparedEvent {
  readonly event: Event
  readonly line: string
  readonly [PreparedBrand]: true
}

class Prepared {
  constructor(readonly event: Event, readonly line: string) {}
}

const prepared = (event: Event, line: string): PreparedEvent => new Prepared(event, line) as unknown as PreparedEvent

/**
 * True for an event prepared by this module (a plain object of the same shape is not one).
 *
 * @since 0.1.0
 * @category guards
 */
export const isPreparedEvent = (u: unknown): u is PreparedEvent => {
  try {
    return u instanceof Prepared
  } catch {
    // a Proxy whose getPrototypeOf trap throws is no prepared event (its checks refuse it, A12)
    return false
  }
}

/**
 * The event of a batch element handed to `SessionStore.append` (prepared or plain).
 *
 * @since 0.1.0
 * @category utils
 */
export const eventOf = (item: Event | PreparedEvent): Event => isPreparedEvent(item) ? item.event : item

/** B10: the serialised event is over `maxEventBytes` (UTF-8 bytes; measured only when it could be). */
const oversize = (line: string, seq: number, maxEventBytes: number): InvalidEnvelope | undefined =>
  line.length * 3 > maxEventBytes && utf8Length(line) > maxEventBytes
    ? new InvalidEnvelope({
      rule: "B10",
      seq,
      field: "size",
      detail: `serialised event is larger than ${maxEventBytes} bytes`
    })
    : undefined

/**
 * What steps 2–7 can reject.
 *
 * @since 0.1.0
 * @category errors
 */
export type PrepareError =
  | UnknownEventType
  | InvalidEnvelope
  | NotLosslessJson
  | LegacyFormRefused
  | RequestHeaderInvalid
  | MessageShapeInvalid
  | SurfaceMarkerInvalid
  | ProvenanceInvalid

type Rec = Record<string, unknown>

/**
 * Steps 2–7 for the event that would get `seq` at `time`: the prepared event, or the first
 * failure. Pure apart from freezing what it builds; the caller's values are never kept.
 *
 * @since 0.1.0
 * @category utils
 */
export const prepareEvent = (
  type: unknown,
  data: unknown,
  options: AppendOptions | undefined,
  at: { readonly seq: number; readonly time: number; readonly maxEventBytes: number }
): PreparedEvent | PrepareError => {
  const { maxEventBytes, seq, time } = at
  if (typeof type !== "string") {
    return new InvalidEnvelope({ rule: "B2", seq, field: "type", detail: "type must be a string" })
  }
  const opts: Rec = isRecord(options) ? options : {}
  const surfaceOp = opts.surfaceOp
  const sourceEventSeqs = opts.sourceEventSeqs
  const ignorable = opts.ignorable
  if (ignorable !== undefined && ignorable !== true) {
    return new InvalidEnvelope({
      rule: "B6",
      seq,
      field: "ignorable",
      detail: "ignorable must be exactly true when present"
    })
  }
  const unknown = checkVocabulary(type, ignorable, seq, "K9")
  if (unknown !== undefined) return unknown
  const walked = walkJson(data, "/data")
  if (walked._tag === "Fail") return notLossless(walked.rule, seq, walked.path, walked.detail)
  const legacy = checkLegacy(type, walked.value, seq)
  if (legacy !== undefined) return legacy
  const shape = checkTypeShape(type, walked.value, seq)
  if (shape !== undefined) return shape
  // step 6: surfaceOp (D6) before sourceEventSeqs (E1/E4)
  let op: Json | undefined
  if (surfaceOp !== undefined) {
    const w = walkJson(surfaceOp, "/surfaceOp")
    if (w._tag === "Fail") {
      return new SurfaceMarkerInvalid({
        rule: "D6",
        seq,
        eventType: type,
        detail: `surfaceOp is not lossless JSON (${w.detail})`
      })
    }
    op = w.value
  }
  let cited: Json | undefined
  if (sourceEventSeqs !== undefined) {
    const w = walkJson(sourceEventSeqs, "/sourceEventSeqs")
    if (w._tag === "Fail") {
      const isArray = Array.isArray(sourceEventSeqs)
      return new ProvenanceInvalid({
        rule: isArray ? "E4" : "E1",
        seq,
        detail: `sourceEventSeqs ${isArray ? "has a bad element" : "is not an array"} (${w.detail})`
      })
    }
    cited = w.value
  }
  // step 7: the one retained object of the event, built in §1.1 key order
  const event: Rec = { type, seq, time, data: walked.value }
  if (cited !== undefined) event.sourceEventSeqs = cited
  if (op !== undefined) event.surfaceOp = op
  if (ignorable === true) event.ignorable = true
  const frozen = Object.freeze(event) as unknown as Event
  const line = encodeJson(frozen as unknown as Json)
  return oversize(line, seq, maxEventBytes) ?? prepared(frozen, line)
}

/**
 * Events the seed pipeline validated (SPEC §3.2: a fork's or a seed's initial log, repair
 * closers, the end-seed marker), serialised for a store with the B10 size check. The events must
 * come from `validateSeed` or be built by this library; anything else goes through `prepareBatch`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const prepareValidated = (
  events: ReadonlyArray<Event>,
  maxEventBytes: number
): ReadonlyArray<PreparedEvent> | InvalidEnvelope => {
  const out: Array<PreparedEvent> = []
  for (const event of events) {
    const line = encodeEvent(event)
    const big = oversize(line, event.seq, maxEventBytes)
    if (big !== undefined) return big
    out.push(prepared(event, line))
  }
  return out
}

/**
 * What `prepareBatch` can reject.
 *
 * @since 0.1.0
 * @category errors
 */
export type BatchError =
  | NotLosslessJson
  | InvalidEnvelope
  | RequestHeaderInvalid
  | LegacyFormRefused
  | UnknownEventType
  | AppendConflict

/**
 * A batch ready for a store: the events and their lines, index for index.
 *
 * @since 0.1.0
 * @category models
 */
export interface PreparedBatch {
  readonly events: ReadonlyArray<Event>
  readonly lines: ReadonlyArray<string>
}

/**
 * The checks of `SessionStore.append` (SPEC §7.1) before any concurrency control. A prepared
 * event is taken as it is: only the store's own size cap (B10) and its place in the batch are
 * checked. A plain event gets the whole check: the lossless walk (A1–A9), the envelope (B1–B6),
 * B10, the legacy guard (I8, I7, K10), the vocabulary (K9). Then contiguity from `expectedSeq`
 * (C6). Returns the
 * first error, or the events with their serialised lines.
 *
 * @since 0.1.0
 * @category constructors
 */
export const prepareBatch = (
  events: ReadonlyArray<Event | PreparedEvent>,
  expectedSeq: number,
  maxEventBytes: number
): PreparedBatch | BatchError => {
  const lines: Array<string> = []
  const out: Array<Event> = []
  for (let k = 0; k < events.length; k++) {
    const item = events[k]
    const seq = expectedSeq + k
    let event: Event
    let line: string
    if (isPreparedEvent(item)) {
      event = item.event
      line = item.line
      const big = oversize(line, seq, maxEventBytes)
      if (big !== undefined) return big
    } else {
      const kind = checkRecordKind(item, seq)
      if (kind !== undefined) return kind
      const walked = walkJson(item)
      if (walked._tag === "Fail") return notLossless(walked.rule, seq, walked.path, walked.detail)
      const env = checkEnvelope(walked.value as Record<string, unknown>, seq)
      if (env !== undefined) return env
      event = walked.value as unknown as Event
      line = encodeEvent(event)
      const big = oversize(line, seq, maxEventBytes)
      if (big !== undefined) return big
      const legacy = checkLegacy(event.type, event.data, seq)
      if (legacy !== undefined) return legacy
      const unknown = checkVocabulary(event.type, event.ignorable, seq, "K9")
      if (unknown !== undefined) return unknown
    }
    if (event.seq !== seq) {
      return new AppendConflict({
        rule: "C6",
        expectedSeq,
        storedSeq: expectedSeq,
        detail: `batch is not contiguous from ${expectedSeq}: element ${k} has seq ${event.seq}`
      })
    }
    lines.push(line)
    out.push(event)
  }
  return { lines, events: out }
}
