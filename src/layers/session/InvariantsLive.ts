/**
 * The optional invariants validator (SPEC §11.4, V1–V22): turn and step nesting and numbering,
 * tool-call pairing within a step, and compaction-bracket and prune rules. Each rule is checked
 * before commit (a veto) and the state advances after commit; seeds replay through the same rules.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { InvariantViolation } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import { isRecord } from "../../schema/Validation.js"
import { Invariants } from "../../services/Invariants.js"
import type { PreCommitValidator, ValidatorFactory } from "../../services/Session.js"

type Rec = Record<string, unknown>
const isSafeNonNegInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0

interface Bracket {
  readonly compactionId: unknown
  readonly sourceCommandId: unknown
  readonly turn: number | null
  summaries: number
}

interface State {
  lastSeq: number
  lastTurn: number
  openTurn: number | undefined
  lastStep: number
  openStep: number | undefined
  pending: Map<string, number>
  /** calls of this turn whose step ended unanswered (V8) */
  expired: Set<string>
  bracket: Bracket | undefined
  pruneTarget: { readonly start: unknown; readonly end: unknown } | undefined
}

const replaceOf = (e: Event): { readonly start: number; readonly end: number } | undefined =>
  typeof e.surfaceOp === "object" ? e.surfaceOp : undefined

/** Check one candidate against the state; returns the violated rule and why, or undefined. */
const violation = (st: State, e: Event): readonly [string, string] | undefined => {
  if (e.seq !== st.lastSeq + 1) return ["V1", `seq ${e.seq} does not follow ${st.lastSeq}`]
  const d: Rec = isRecord(e.data) ? e.data : {}
  if (st.pruneTarget !== undefined) {
    const r = replaceOf(e)
    if (e.type !== "tool/result" || r === undefined || r.start !== st.pruneTarget.start || r.end !== st.pruneTarget.end) {
      return ["V22", "compaction/prune must be immediately followed by the tool/result replacement of its range"]
    }
  }
  const inStep = () =>
    st.openTurn !== undefined && d.turn === st.openTurn && st.openStep !== undefined && d.step === st.openStep
  switch (e.type) {
    case "turn/start":
      if (st.bracket !== undefined) return ["V14", "turn/start crosses a live compaction bracket"]
      if (st.openTurn !== undefined) return ["V2", `turn ${st.openTurn} is still open`]
      if (d.turn !== st.lastTurn + 1) return ["V2", `expected turn ${st.lastTurn + 1}, got ${String(d.turn)}`]
      return undefined
    case "turn/end":
      if (st.bracket !== undefined) return ["V14", "turn/end crosses a live compaction bracket"]
      if (st.openTurn === undefined || d.turn !== st.openTurn) return ["V3", `turn/end does not name the open turn`]
      if (st.openStep !== undefined) return ["V3", `step ${st.openStep} is still open`]
      return undefined
    case "step/start":
      if (st.openTurn === undefined || d.turn !== st.openTurn) return ["V4", "step/start does not name the open turn"]
      if (st.openStep !== undefined) return ["V4", `step ${st.openStep} is still open`]
      if (d.step !== st.lastStep + 1) return ["V4", `expected step ${st.lastStep + 1}, got ${String(d.step)}`]
      return undefined
    case "step/end":
    case "assistant/chunk":
    case "assistant/message":
    case "tool/call":
      return inStep() ? undefined : ["V5", `${e.type} does not name the open turn and step`]
    case "tool/result": {
      if (replaceOf(e) !== undefined) {
        return st.openTurn === undefined ? ["V9", "a replacement tool/result needs an open turn"] : undefined
      }
      const error = isRecord(d.error) ? d.error : undefined
      if (error?.code === "TOOL_NOT_STARTED") return undefined
      if (!inStep()) return ["V7", "tool/result does not name the open step"]
      const message = isRecord(d.message) ? d.message : {}
      const callId = isRecord(message.source) ? message.source.callId : undefined
      if (typeof callId === "string" && !st.pending.has(callId) && st.expired.has(callId)) {
        return ["V8", `call ${callId} was cleared when its step ended`]
      }
      if (typeof callId !== "string" || st.pending.get(callId) !== st.openStep) {
        return ["V7", `tool/result answers no pending call of step ${st.openStep}`]
      }
      return undefined
    }
    case "todo/write":
    case "request/header":
    case "request/context":
      return st.openTurn === undefined ? ["V10", `${e.type} outside an open turn`] : undefined
    case "compaction/start": {
      if (st.bracket !== undefined) return ["V15", "a compaction bracket is already open"]
      if (d.turn === null) return st.openTurn === undefined ? undefined : ["V13", "a standalone bracket inside a turn"]
      return d.turn === st.openTurn && st.openTurn !== undefined
        ? undefined
        : ["V12", `a bracket for turn ${String(d.turn)} outside that open turn`]
    }
    case "compaction/summary":
    case "compaction/end": {
      const b = st.bracket
      if (b === undefined || d.compactionId !== b.compactionId || d.sourceCommandId !== b.sourceCommandId) {
        return ["V15", `${e.type} does not match the open compaction/start`]
      }
      if (e.type === "compaction/summary") {
        if (b.summaries > 0) return ["V16", "a second compaction/summary in one bracket"]
        return shadowRules(d)
      }
      if (d.error === undefined && b.summaries === 0) return ["V19", "a successful compaction/end without a summary"]
      return undefined
    }
    case "compaction/prune":
      return shadowRules(d)
    case "user/message": {
      const source = isRecord(d.source) ? d.source : {}
      if (replaceOf(e) !== undefined && source.kind === "plugin" && source.plugin === "compact") {
        if (st.bracket === undefined || source.compactionId !== st.bracket.compactionId) {
          return ["V20", "a checkpoint replacement does not name the open compaction"]
        }
      }
      return undefined
    }
    default:
      return undefined
  }
}

const shadowRules = (d: Rec): readonly [string, string] | undefined => {
  const seqs = d.shadowedSeqs
  const range = isRecord(d.shadowedRange) ? d.shadowedRange : {}
  if (!Array.isArray(seqs) || seqs.length === 0 || seqs[0] !== range.start || seqs[seqs.length - 1] !== range.end) {
    return ["V17", "shadowedSeqs must be non-empty and start/end at shadowedRange"]
  }
  if (!isSafeNonNegInt(d.shadowedTokenCount)) return ["V18", "shadowedTokenCount must be a non-negative safe integer"]
  return undefined
}

/** Advance the state past a committed event. */
const advance = (st: State, e: Event): void => {
  st.lastSeq = e.seq
  st.pruneTarget = undefined
  const d: Rec = isRecord(e.data) ? e.data : {}
  switch (e.type) {
    case "turn/start":
      st.openTurn = d.turn as number
      st.lastTurn = d.turn as number
      st.lastStep = 0
      st.openStep = undefined
      st.pending = new Map()
      st.expired = new Set()
      break
    case "turn/end":
      st.openTurn = undefined
      st.openStep = undefined
      st.pending = new Map()
      st.expired = new Set()
      break
    case "step/start":
      st.openStep = d.step as number
      st.lastStep = d.step as number
      break
    case "step/end":
      st.openStep = undefined
      for (const callId of st.pending.keys()) st.expired.add(callId)
      st.pending = new Map() // V8
      break
    case "tool/call":
      if (typeof d.callId === "string") st.pending.set(d.callId, d.step as number) // V6
      break
    case "tool/result": {
      const message = isRecord(d.message) ? d.message : {}
      const callId = isRecord(message.source) ? message.source.callId : undefined
      if (typeof callId === "string" && replaceOf(e) === undefined) st.pending.delete(callId)
      break
    }
    case "compaction/start":
      st.bracket = {
        compactionId: d.compactionId,
        sourceCommandId: d.sourceCommandId,
        turn: d.turn === null ? null : (d.turn as number),
        summaries: 0
      }
      break
    case "compaction/summary":
      if (st.bracket !== undefined) st.bracket.summaries++
      break
    case "compaction/end":
      st.bracket = undefined
      break
    case "compaction/prune":
      st.pruneTarget = isRecord(d.shadowedRange) ? { start: d.shadowedRange.start, end: d.shadowedRange.end } : undefined
      break
    case "session/end-seed":
      st.bracket = undefined // V21: an inherited open bracket belongs to a dead lifecycle
      break
  }
}

/**
 * A fresh invariants validator for one session.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeValidator: ValidatorFactory = () =>
  Effect.sync((): PreCommitValidator => {
    const st: State = {
      lastSeq: -1,
      lastTurn: 0,
      openTurn: undefined,
      lastStep: 0,
      openStep: undefined,
      pending: new Map(),
      expired: new Set(),
      bracket: undefined,
      pruneTarget: undefined
    }
    return {
      check: (candidate) => {
        const v = violation(st, candidate)
        return v === undefined
          ? Effect.void
          : Effect.fail(new InvariantViolation({ rule: v[0], seq: candidate.seq, detail: v[1] }))
      },
      apply: (event) => advance(st, event)
    }
  })

/**
 * Provide the invariants validator to every Session constructor.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Invariants> = Layer.succeed(Invariants, makeValidator)
