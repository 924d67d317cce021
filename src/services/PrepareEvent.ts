/**
 * The effect-free head of the append pipeline (SPEC §3.1 steps 2–7): an append request — type,
 * data, surface intent or log-only options — checked (B2, B6, A1–A9, I7, I8, K10, I, H, D6, E1,
 * E4, B10) and built into a frozen event in §1.1 key order with its serialised line.
 */
import {
  InvalidEnvelope,
  type LegacyFormRefused,
  type MessageShapeInvalid,
  type NotLosslessJson,
  ProvenanceInvalid,
  type RequestHeaderInvalid,
  SurfaceMarkerInvalid
} from "../schema/Errors.js"
import { encodeEvent, markTrusted, orderEnvelope } from "../schema/EventCodec.js"
import type { AppendOptions, Event } from "../schema/Events.js"
import { utf8Length, walkJson } from "../schema/Json.js"
import { checkLegacy, checkTypeShape, isRecord, notLossless } from "../schema/Validation.js"

/** An event built by the pipeline: frozen, keys in §1.1 order, with its JSON text. */
export interface PreparedEvent {
  readonly event: Event
  readonly line: string
}

/** What steps 2–7 can reject. */
export type PrepareError =
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
  const walked = walkJson(data, "/data")
  if (walked._tag === "Fail") return notLossless(walked.rule, seq, walked.path, walked.detail)
  const legacy = checkLegacy(type, walked.value, seq)
  if (legacy !== undefined) return legacy
  const shape = checkTypeShape(type, walked.value, seq)
  if (shape !== undefined) return shape
  const event: Rec = { type, seq, time, data: walked.value }
  // step 6: surfaceOp (D6) before sourceEventSeqs (E1/E4); key order is restored by orderEnvelope
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
    event.surfaceOp = w.value
  }
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
    event.sourceEventSeqs = w.value
  }
  if (ignorable === true) event.ignorable = true
  const frozen = markTrusted(orderEnvelope(event))
  const line = encodeEvent(frozen)
  const bytes = line.length * 3 > maxEventBytes ? utf8Length(line) : -1
  if (bytes > maxEventBytes) {
    return new InvalidEnvelope({
      rule: "B10",
      seq,
      field: "size",
      detail: `serialised event is larger than ${maxEventBytes} bytes`
    })
  }
  return { event: frozen, line }
}
