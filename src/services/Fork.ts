/**
 * Fork planning (SPEC §11.1, M1–M9): the child header and seed for a fork of a source session (an
 * open handle or a stored id) at a closed-turn boundary. The checks run in the order of §11.1 and
 * read only; `SessionLive.fork` then writes the child in one first append (M10).
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { AppendConflict, ForkRejected, SessionNotFound, type StoreFailure } from "../schema/Errors.js"
import { SESSION_FORMAT_VERSION } from "../schema/Format.js"
import type { SessionHeader } from "../schema/SessionHeader.js"
import { isRecord } from "../schema/Validation.js"
import { nextId } from "./IdGenerator.js"
import { type SeedError, validateSeed, wrapL9 } from "./Seed.js"
import type { FlushError, SessionShape } from "./Session.js"
import { type ReadError, readPipeline, SessionStore } from "./SessionStore.js"

/**
 * Where to fork and what to call the child.
 *
 * @since 0.1.0
 * @category models
 */
export interface ForkPoint {
  /** Seq of the last inherited event (default: the source's last event). */
  readonly at?: number
  /** Id of the child (default: a generated one). */
  readonly childId?: string
}

/**
 * Errors of planning a fork.
 *
 * @since 0.1.0
 * @category errors
 */
export type PlanError = ForkRejected | ReadError | FlushError | SeedError | StoreFailure

/**
 * A planned fork: the child's header (not yet validated) and seed.
 *
 * @since 0.1.0
 * @category models
 */
export interface ForkPlan {
  readonly header: Record<string, unknown>
  readonly seed: ReadonlyArray<unknown>
}

type Rec = Record<string, unknown>

/**
 * A `ForkRejected` with its rule and code.
 *
 * @since 0.1.0
 * @category utils
 */
export const reject = (rule: string, code: ForkRejected["code"], detail: string) => new ForkRejected({ rule, code, detail })

/** M1: is `id` registered in, or stored by, the current store? (Only a missing id is free.) */
const childExists = (id: string): Effect.Effect<boolean, StoreFailure, SessionStore> =>
  Effect.flatMap(SessionStore, (store) =>
    store.load(id).pipe(
      Effect.as(true),
      Effect.catchAll((e) =>
        e._tag === "SessionNotFound"
          ? Effect.succeed(false)
          : e._tag === "StoreFailure"
          ? Effect.fail(e)
          // a stored artifact that cannot be read (corrupt, newer format, ...) still occupies the id
          : Effect.succeed(true)
      )
    ))

interface Source {
  readonly header: SessionHeader
  readonly events: ReadonlyArray<unknown>
  /** Events from a cold read are validated as stored events (L9) before they seed the child. */
  readonly coldRead: boolean
}

/** M2, M3: the events of an open handle (flushed first) or of a stored id (read pipeline, no repair). */
const resolveSource = (
  source: SessionShape | string
): Effect.Effect<Source, ForkRejected | ReadError | FlushError, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    if (typeof source === "string") {
      const loaded = yield* store.load(source).pipe(
        Effect.mapError((e) =>
          e instanceof SessionNotFound
            ? reject("M2", "SESSION_NOT_FOUND", `no session "${source}" is stored or registered`)
            : e
        )
      )
      const { events, header } = yield* readPipeline(loaded)
      return { header, events, coldRead: true }
    }
    const handle = source
    const state = yield* handle.state
    if (state === "closed") return yield* reject("M2", "SESSION_NOT_FOUND", `the handle of "${handle.id}" is closed`)
    if (state === "failed") {
      return yield* reject("M3", "SESSION_NOT_LIVE", `the handle of "${handle.id}" failed after an append conflict`)
    }
    // under the append lock: flush (a child never holds events its parent could still lose), snapshot, compare
    return yield* handle.exclusive(Effect.gen(function*() {
      yield* handle.flush.pipe(
        Effect.mapError((e) =>
          e instanceof AppendConflict
            ? reject("M3", "SESSION_NOT_LIVE", `the handle of "${handle.id}" failed: ${e.message}`)
            : e instanceof SessionNotFound && e.rule === "N10"
            ? reject("M2", "SESSION_NOT_FOUND", `the handle of "${handle.id}" is closed`)
            : e
        )
      )
      const events = yield* handle.events
      const stored = yield* store.load(handle.id).pipe(
        Effect.mapError((e) =>
          e instanceof SessionNotFound
            ? reject("M2", "SESSION_NOT_FOUND", `no session "${handle.id}" is stored or registered`)
            : e
        )
      )
      if (stored.events.length > events.length) {
        return yield* reject(
          "M3",
          "SESSION_NOT_LIVE",
          `the handle of "${handle.id}" is stale: the store holds ${stored.events.length} events, the handle ${events.length}`
        )
      }
      return { header: handle.header, events, coldRead: false }
    }))
  })

/** M4–M7: the seed length for boundary `at` (undefined: the last event; an empty source gives 0). */
const seedLength = (events: ReadonlyArray<unknown>, at: unknown): ForkRejected | number => {
  const length = events.length
  let boundary = at
  if (boundary === undefined) {
    // M8: an empty source gives an empty child
    if (length === 0) return 0
    const last = events[length - 1]
    boundary = isRecord(last) && typeof last.seq === "number" ? last.seq : length - 1
  }
  if (typeof boundary !== "number" || !Number.isSafeInteger(boundary) || boundary < 0) {
    return reject("M4", "INVALID_BOUNDARY", `boundary ${String(boundary)} is not a non-negative safe integer`)
  }
  if (boundary >= length) {
    return reject(
      "M5",
      "INVALID_BOUNDARY",
      `boundary ${boundary} is not in the log (last seq: ${length === 0 ? "none" : length - 1})`
    )
  }
  const event = events[boundary]
  const seq = isRecord(event) ? event.seq : undefined
  if (seq !== boundary) {
    return reject("C8", "INVALID_BOUNDARY", `the event at index ${boundary} has seq ${String(seq)}`)
  }
  for (let i = boundary; i >= 0; i--) {
    const e = events[i]
    const type = isRecord(e) ? e.type : undefined
    if (type === "turn/end") break
    if (type === "turn/start") {
      return reject("M7", "OPEN_TURN", `boundary ${boundary} is inside the turn opened at seq ${i}`)
    }
  }
  return boundary + 1
}

/**
 * Plan a fork of `source` at `point.at` (SPEC §11.1 M1–M9): the child's header records
 * `parentSession`, `seedLength` and the source's `cwd`; its seed is the source's prefix up to the
 * boundary (a cold read's prefix validated as stored events, L9). Reads only.
 *
 * @since 0.1.0
 * @category utils
 */
export const planFork = (
  source: SessionShape | string,
  point: ForkPoint = {}
): Effect.Effect<ForkPlan, PlanError, SessionStore> =>
  Effect.gen(function*() {
    const { at, childId } = point
    // M1, before anything else
    if (childId !== undefined && (yield* childExists(childId))) {
      return yield* reject("M1", "SESSION_ALREADY_EXISTS", `a session "${childId}" is already registered or stored`)
    }
    const src = yield* resolveSource(source)
    const length = seedLength(src.events, at)
    if (typeof length !== "number") return yield* length
    const seed = src.events.slice(0, length)
    if (src.coldRead) {
      yield* validateSeed(seed, { coldRead: true }).pipe(Effect.mapError(wrapL9(src.header.id)))
    }
    const id = childId ?? (yield* nextId)
    const header: Rec = {
      version: SESSION_FORMAT_VERSION,
      id,
      createdAt: yield* Clock.currentTimeMillis,
      ...(src.header.cwd === undefined ? {} : { cwd: src.header.cwd }),
      parentSession: src.header.id,
      seedLength: length
    }
    return { header, seed }
  })
