/**
 * The seed pipeline (SPEC §3.2) and the end-seed marker (§2.4): an event array validated as the
 * initial log of a session, as the stored events of a cold read (failures are L9), or as a
 * continuation of a validated log; the pre-commit validators of a session instantiated.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import {
  InvalidEnvelope,
  type InvariantViolation,
  LegacyFormRefused,
  SeqNotContiguous,
  StoreCorrupt,
  type ValidationError
} from "../schema/Errors.js"
import { isOrderedEnvelope, orderEnvelope } from "../schema/EventCodec.js"
import type { Event } from "../schema/Events.js"
import { deepFreeze, walkJson } from "../schema/Json.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import { checkEnvelope, checkLegacy, checkRecordKind, checkTypeShape, isRecord, notLossless } from "../schema/Validation.js"
import { Invariants } from "./Invariants.js"
import type { PreCommitValidator, ValidatorFactory } from "./Session.js"
import { applyPlan, isPlan, planSurface, SurfaceManager, type SurfaceTracker } from "./SurfaceManager.js"

/**
 * Errors of seed validation.
 *
 * @since 0.1.0
 * @category errors
 */
export type SeedError = ValidationError | InvariantViolation

type Rec = Record<string, unknown>

/**
 * The per-record checks of the seed pipeline (SPEC §3.2) for record `i`: kind and walk (skipped
 * for records of a cold read, already walked), envelope, legacy guard, shapes, `seq === i`.
 * Returns the event, frozen and with keys in §1.1 order, or the rule error.
 *
 * @since 0.1.0
 * @category utils
 */
export const checkSeedRecord = (raw: unknown, i: number, coldRead: boolean): Event | ValidationError => {
  let record: Rec
  if (coldRead && isRecord(raw)) {
    record = raw
  } else {
    const kind = checkRecordKind(raw, i)
    if (kind !== undefined) return kind
    const walked = walkJson(raw)
    if (walked._tag === "Fail") return notLossless(walked.rule, i, walked.path, walked.detail)
    record = walked.value as Rec
  }
  const env = checkEnvelope(record, i)
  if (env !== undefined) return env
  const type = record.type as string
  const legacy = checkLegacy(type, record.data, i)
  if (legacy !== undefined) return legacy
  const shape = checkTypeShape(type, record.data, i)
  if (shape !== undefined) return shape
  if (record.seq !== i) {
    return new SeqNotContiguous({
      rule: "C1",
      seq: i,
      expected: i,
      actual: record.seq,
      detail: `seed record ${i} has seq ${String(record.seq)}`
    })
  }
  // records of a cold read are usually frozen and in §1.1 order already: no copy then
  // (deepFreeze stops at a frozen record too, so both branches freeze the same)
  return isOrderedEnvelope(record) ? record as unknown as Event : orderEnvelope(deepFreeze(record))
}

const isEvent = (checked: Event | ValidationError): checked is Event => !("_tag" in checked)

/**
 * The seed pipeline (SPEC §3.2) for every record, in order: `checkSeedRecord`, then surface plan
 * and apply, pre-commit validators. Returns the frozen events (keys in §1.1 order) and their tracker.
 *
 * @since 0.1.0
 * @category utils
 */
export const validateSeed = (
  seed: unknown,
  options: {
    readonly coldRead?: boolean
    readonly validators?: ReadonlyArray<PreCommitValidator>
    /** Continue a log already validated by this pipeline (the seed's indices follow it). */
    readonly continueFrom?: { readonly events: Array<Event>; readonly tracker: SurfaceTracker }
  } = {}
): Effect.Effect<{ readonly events: Array<Event>; readonly tracker: SurfaceTracker }, SeedError> =>
  Effect.gen(function*() {
    if (!Array.isArray(seed)) {
      return yield* new InvalidEnvelope({ rule: "B1", field: "", detail: "a seed must be an array of event records" })
    }
    const validators = options.validators ?? []
    const coldRead = options.coldRead === true
    const events: Array<Event> = options.continueFrom?.events ?? []
    const tracker = options.continueFrom?.tracker ?? (yield* SurfaceManager).track(events)
    const base = events.length
    const length = seed.length
    for (let k = 0; k < length; k++) {
      const i = base + k
      const event = checkSeedRecord(seed[k], i, coldRead)
      if (!isEvent(event)) return yield* event
      const plan = tracker.plan(event, i)
      if (!isPlan(plan)) return yield* plan
      for (const v of validators) yield* v.check(event, { logLength: i })
      events.push(event)
      tracker.catchUp()
      for (const v of validators) v.apply(event)
    }
    return { events, tracker }
  })

/**
 * The seed pipeline of a cold read fed one chunk at a time (a streamed `verify`, `show`, `export`,
 * `import`), without validators: it keeps the surface and, of the events on it, only the
 * `tool/result`s a rewrite is checked against (G2, G3), never the log. The first rejection is
 * kept in `error`; later chunks are ignored.
 *
 * @since 0.1.0
 * @category models
 */
export class SeedCursor {
  /**
   * The surface nodes so far.
   *
   * @since 0.1.0
   */
  readonly nodes: Array<number> = []
  /**
   * How many events were accepted.
   *
   * @since 0.1.0
   */
  count = 0
  /**
   * The first rejection, after which no record is accepted.
   *
   * @since 0.1.0
   */
  error: SeedError | undefined
  private readonly toolResults = new Map<number, Event>()
  private readonly eventAt = (seq: number): Event | undefined => this.toolResults.get(seq)

  /**
   * Check the next records; the accepted events (or none after a rejection).
   *
   * @since 0.1.0
   */
  push(records: ReadonlyArray<unknown>): ReadonlyArray<Event> {
    const accepted: Array<Event> = []
    for (let k = 0; k < records.length && this.error === undefined; k++) {
      const i = this.count
      const event = checkSeedRecord(records[k], i, true)
      if (!isEvent(event)) {
        this.error = event
        break
      }
      const plan = planSurface(this.nodes, event, i, this.eventAt)
      if (!isPlan(plan)) {
        this.error = plan
        break
      }
      if (plan._tag === "Replace") for (const seq of plan.shadowed) this.toolResults.delete(seq)
      if (plan._tag !== "None" && event.type === "tool/result") this.toolResults.set(i, event)
      applyPlan(this.nodes, plan, i)
      accepted.push(event)
      this.count++
    }
    return accepted
  }
}

/**
 * L9: a validation failure of stored events is corruption wrapping its cause (K10 stays unwrapped).
 *
 * @since 0.1.0
 * @category utils
 */
export const wrapL9 = (sessionId: string) => <E extends SeedError>(e: E): StoreCorrupt | LegacyFormRefused => {
  if (e instanceof LegacyFormRefused) return e
  return new StoreCorrupt({
    rule: "L9",
    ...(e.seq === undefined ? {} : { seq: e.seq }),
    location: `session ${sessionId}`,
    detail: `stored event failed validation: ${e.message}`,
    cause: e
  })
}

/**
 * The session's pre-commit validators: the `Invariants` layer's first (when provided), then `extra`.
 *
 * @since 0.1.0
 * @category utils
 */
export const instantiateValidators = (
  header: SessionHeader,
  extra: ReadonlyArray<ValidatorFactory> | undefined
): Effect.Effect<Array<PreCommitValidator>> =>
  Effect.gen(function*() {
    const out: Array<PreCommitValidator> = []
    const inv = yield* Effect.serviceOption(Invariants)
    if (Option.isSome(inv)) out.push(yield* inv.value(header))
    for (const f of extra ?? []) out.push(yield* f(header))
    return out
  })

/**
 * The `session/end-seed` marker at `seq` (SPEC §2.4).
 *
 * @since 0.1.0
 * @category utils
 */
export const endSeedMarker = (seq: number, time: number): Event =>
  Object.freeze({ type: "session/end-seed", seq, time, data: Object.freeze({}) }) as Event

/**
 * Construct over validated events: add the end-seed marker when required (SPEC §2.4).
 *
 * @since 0.1.0
 * @category utils
 */
export const withEndSeed = (
  events: Array<Event>,
  tracker: SurfaceTracker,
  validators: ReadonlyArray<PreCommitValidator>
): Effect.Effect<Array<Event>, InvariantViolation> =>
  Effect.gen(function*() {
    const last = events[events.length - 1]
    if (last !== undefined && last.type === "session/end-seed") return []
    const marker = endSeedMarker(events.length, yield* Clock.currentTimeMillis)
    for (const v of validators) yield* v.check(marker, { logLength: events.length })
    events.push(marker)
    tracker.catchUp()
    for (const v of validators) v.apply(marker)
    return [marker]
  })

