/**
 * Shared helpers of the rule-by-rule acceptance tests (SPEC §3.4, §13): an observable-state
 * snapshot of a session and its stored copy, an "unchanged" assertion, builders of valid event
 * payloads and seed records, and the three rejection harnesses (append, seed, store batch).
 */
import { assert } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { AppendOptions, Event } from "../../src/schema/Events.js"
import { encodeJson, type Json } from "../../src/schema/Json.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"

type Rec = Record<string, unknown>

/** Everything a user can observe of a session handle and of its stored copy. */
export interface Snapshot {
  readonly events: ReadonlyArray<string>
  readonly nodes: ReadonlyArray<number>
  readonly replaceGeneration: number
  readonly messages: string
  readonly transcript: ReadonlyArray<number>
  readonly requestHeader: string
  readonly requestContext: string
  readonly stored: string
  readonly listed: ReadonlyArray<string>
}

const json = (v: unknown): string => (v === undefined ? "<none>" : encodeJson(v as Json))

/** The memory store's `load` result for `id` as text (or the error tag and rule). */
export const storedText = (id: string): Effect.Effect<string, never, SessionStore> =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    return yield* store.load(id).pipe(
      Effect.map((r) =>
        json({
          header: r.header,
          storedVersion: r.storedVersion,
          events: (r.events as ReadonlyArray<Event>).map((e) => encodeEvent(e)),
          tornTail: r.tornTail ?? null,
          revision: r.revision
        })
      ),
      Effect.catchAll((e) => Effect.succeed(`error ${e._tag} ${"rule" in e ? String(e.rule) : ""}`))
    )
  })

/** Ids of the materialised sessions of the store. */
export const listedIds = Effect.gen(function*() {
  const store = yield* SessionStore
  const list = yield* Effect.orDie(store.list())
  return list.map((h) => h.id)
})

/** Capture events, surface, derived messages, transcript, request folds and the stored copy. */
export const snapshot = (session: Session.SessionShape): Effect.Effect<Snapshot, never, SessionStore> =>
  Effect.gen(function*() {
    const events = yield* session.events
    return {
      events: events.map((e) => encodeEvent(e)),
      nodes: [...(yield* session.surface.nodes)],
      replaceGeneration: yield* session.surface.replaceGeneration,
      messages: json(yield* session.messages),
      transcript: (yield* session.transcript).map((e) => e.seq),
      requestHeader: json(yield* session.requestHeader),
      requestContext: json(yield* session.requestContext),
      stored: yield* storedText(session.id),
      listed: yield* listedIds
    }
  })

/** Assert that nothing observable changed between two snapshots. */
export const assertUnchanged = (before: Snapshot, after: Snapshot): void => {
  assert.deepStrictEqual(after, before)
}

/** The data fields of a tagged error (everything but the stack and message getter). */
export const fieldsOf = (e: unknown): Rec => ({ ...(e as Rec) })

/** Expected fields of an error: `_tag` and `rule` always, plus whatever the row defines. */
export interface Expected {
  readonly _tag: string
  readonly rule: string
  readonly [key: string]: unknown
}

/** Assert the error has exactly the expected values for every expected key. */
export const assertError = (error: unknown, expected: Expected): void => {
  const fields = fieldsOf(error)
  for (const key of Object.keys(expected)) {
    assert.deepStrictEqual(fields[key], expected[key], `error field "${key}" of ${JSON.stringify(fields)}`)
  }
  // a human message naming the rule
  assert.include(String((error as { message: unknown }).message), expected.rule)
}

let counter = 0
/** A unique session id for this test file run. */
export const uid = (prefix = "s"): string => `${prefix}-${++counter}`

// ---------------------------------------------------------------------------------------------
// Builders of valid payloads

export const text = (t: string) => ({ type: "text", text: t })

/** `user/message` data (a user-role message). */
export const userMsg = (id: string, t: string = id): Rec => ({
  id,
  role: "user",
  content: [text(t)],
  source: { kind: "user" }
})

/** `context/message` data with `meta` and an extra key (both hidden from the model). */
export const contextMsg = (id: string, t: string = id): Rec => ({
  id,
  role: "user",
  content: [text(t)],
  source: { kind: "plugin", plugin: "ctx" },
  meta: { hidden: true },
  extra: "also hidden"
})

/** `assistant/message` data. */
export const assistantData = (id: string, content: ReadonlyArray<unknown> = [text(id)], turn = 1, step = 1): Rec => ({
  turn,
  step,
  message: { id, role: "assistant", content, source: { kind: "model", provider: "p", model: "m" } }
})

/** `tool/result` data answering `callId`. */
export const toolResultData = (
  callId: string,
  id: string,
  inner: ReadonlyArray<unknown> = [text("out")],
  extra: Rec = {}
): Rec => ({
  turn: 1,
  step: 1,
  message: {
    id,
    role: "user",
    content: [{ type: "tool-result", toolCallId: callId, content: inner }],
    source: { kind: "tool", callId }
  },
  ...extra
})

/** `tool/call` data. */
export const toolCallData = (callId: string): Rec => ({ turn: 1, step: 1, callId, name: "read", arguments: "{}" })

/** `request/header` data. */
export const requestHeaderData = (reason = "initial", header: Rec = { config: { provider: "p", model: "m" } }): Rec => ({
  header,
  reason
})

/** One step of a scenario: an append as (type, data, options). */
export type Step = readonly [type: string, data: unknown, options?: AppendOptions]

export const APPEND = { surfaceOp: "append" } as const
export const replace = (start: number, end: number, sourceEventSeqs?: ReadonlyArray<number>): AppendOptions =>
  sourceEventSeqs === undefined
    ? { surfaceOp: { op: "replace", start, end } }
    : { surfaceOp: { op: "replace", start, end }, sourceEventSeqs }

export const user = (id: string): Step => ["user/message", userMsg(id), APPEND]
export const todo: Step = ["todo/write", { todos: [] }]

/** The seed record of a step at `seq` (time 0, the TestClock's time). */
export const record = (step: Step, seq: number): Rec => {
  const [type, data, options] = step
  const r: Rec = { type, seq, time: 0, data }
  if (options?.sourceEventSeqs !== undefined) r.sourceEventSeqs = options.sourceEventSeqs
  if (options?.surfaceOp !== undefined) r.surfaceOp = options.surfaceOp
  if (options?.ignorable !== undefined) r.ignorable = options.ignorable
  return r
}

/** Seed records of steps, seq = index. */
export const records = (steps: ReadonlyArray<Step>): Array<Rec> => steps.map((s, i) => record(s, i))

/** Records as the event type for the pure fold. */
export const asEvents = (rs: ReadonlyArray<Rec>): ReadonlyArray<Event> => rs as unknown as ReadonlyArray<Event>

/** A valid session header for `id`. */
export const headerFor = (id: string): Rec => ({ version: 1, id, createdAt: 0 })

// ---------------------------------------------------------------------------------------------
// Harnesses

/** A fresh session (scoped) with the given steps appended. */
export const sessionWith = (steps: ReadonlyArray<Step>, id: string = uid()) =>
  Effect.gen(function*() {
    const s = yield* SessionLive.create({ id })
    for (const [type, data, options] of steps) yield* s.appendUnknown(type, data, options)
    return s
  })

/**
 * Append a bad candidate and assert the exact error, that nothing observable changed, and that
 * the next valid append gets the seq the rejected one would have had. Returns the error.
 */
export const rejectsAtAppend = (
  session: Session.SessionShape,
  candidate: Step,
  expected: Expected
) =>
  Effect.gen(function*() {
    const before = yield* snapshot(session)
    // the feed: the first event published from here on must be the next valid append
    const feed = yield* session.changes(before.events.length).pipe(Stream.take(1), Stream.runCollect, Effect.fork)
    yield* Effect.yieldNow()
    const error = yield* Effect.flip(session.appendUnknown(candidate[0], candidate[1], candidate[2]))
    assertError(error, expected)
    assertUnchanged(before, yield* snapshot(session))
    const next = yield* session.append("todo/write", { todos: [] })
    assert.strictEqual(next.seq, before.events.length)
    const published = Chunk.toReadonlyArray(yield* Fiber.join(feed))
    assert.deepStrictEqual(published.map((e) => encodeEvent(e)), [encodeEvent(next)])
    return error
  })

/** A session with `prefix` appended, then `rejectsAtAppend(candidate)`. */
export const rejectsAfter = (prefix: ReadonlyArray<Step>, candidate: Step, expected: Expected) =>
  Effect.gen(function*() {
    const s = yield* sessionWith(prefix)
    return yield* rejectsAtAppend(s, candidate, expected)
  })

/** Accept a candidate at append; returns the stored event (and checks the store holds it). */
export const acceptsAtAppend = (session: Session.SessionShape, candidate: Step) =>
  Effect.gen(function*() {
    const length = (yield* session.events).length
    const event = yield* session.appendUnknown(candidate[0], candidate[1], candidate[2])
    assert.strictEqual(event.seq, length)
    const store = yield* SessionStore
    const loaded = yield* store.load(session.id)
    assert.strictEqual(encodeEvent(loaded.events[length] as Event), encodeEvent(event))
    return event
  })

/**
 * `SessionLive.fromSeed` must fail with the exact error and write nothing: the id is neither listed
 * nor loadable (nothing registered). Returns the error.
 */
export const rejectsInSeed = (seed: unknown, expected: Expected, id: string = uid("seed")) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const listedBefore = yield* listedIds
    const error = yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: headerFor(id), seed })))
    assertError(error, expected)
    assert.deepStrictEqual(yield* listedIds, listedBefore)
    const load = yield* Effect.flip(store.load(id))
    assert.strictEqual(load._tag, "SessionNotFound")
    return error
  })

/** `SessionLive.fromSeed` accepts the seed; returns its events (seed plus end-seed marker). */
export const acceptsInSeed = (seed: unknown, id: string = uid("seed")) =>
  Effect.scoped(Effect.gen(function*() {
    const s = yield* SessionLive.fromSeed({ header: headerFor(id), seed })
    return { events: yield* s.events, nodes: [...(yield* s.surface.nodes)], stored: yield* storedText(id) }
  }))

/** The pure fold must fail; returns the error. */
export const foldError = (rs: ReadonlyArray<Rec>, baseSeq = 0): unknown => {
  const result = foldSurface(asEvents(rs), baseSeq)
  assert.isFalse("nodes" in result, "foldSurface was expected to fail")
  return result
}

/**
 * A D/E/F/G rejection: identical errors at append (after the prefix), in a seed (prefix plus the
 * candidate) and in `foldSurface`, each equal to `expected` on the expected keys.
 */
export const rejectsEverywhere = (prefix: ReadonlyArray<Step>, candidate: Step, expected: Expected) =>
  Effect.gen(function*() {
    const atAppend = yield* rejectsAfter(prefix, candidate, expected)
    const rs = records([...prefix, candidate])
    const inSeed = yield* rejectsInSeed(rs, expected)
    const inFold = foldError(rs)
    assertError(inFold, expected)
    assert.deepStrictEqual(fieldsOf(inSeed), fieldsOf(atAppend))
    assert.deepStrictEqual(fieldsOf(inFold), fieldsOf(atAppend))
    return atAppend
  })

/**
 * A candidate accepted at append, in a seed and by the fold, with the same surface. Returns the
 * appended event and the nodes.
 */
export const acceptsEverywhere = (prefix: ReadonlyArray<Step>, candidate: Step) =>
  Effect.gen(function*() {
    const s = yield* sessionWith(prefix)
    const event = yield* acceptsAtAppend(s, candidate)
    const nodes = [...(yield* s.surface.nodes)]
    const rs = records([...prefix, candidate])
    const seeded = yield* acceptsInSeed(rs)
    assert.strictEqual(encodeEvent(seeded.events[prefix.length]), encodeEvent(event))
    const fold = foldSurface(asEvents(rs))
    assert.isTrue("nodes" in fold)
    if ("nodes" in fold) assert.deepStrictEqual(fold.nodes, nodes)
    return { event, nodes, session: s }
  })

/**
 * `SessionStore.append` of one raw record onto a session with `prefix`: the exact error, storage
 * and session unchanged, and the next valid session append gets the rejected seq.
 */
export const rejectsInStoreBatch = (prefix: ReadonlyArray<Step>, bad: unknown, expected: Expected) =>
  Effect.gen(function*() {
    const s = yield* sessionWith(prefix)
    const store = yield* SessionStore
    const before = yield* snapshot(s)
    const error = yield* Effect.flip(store.append(s.id, [bad as Event], { expectedSeq: prefix.length }))
    assertError(error, expected)
    assertUnchanged(before, yield* snapshot(s))
    const next = yield* s.append("todo/write", { todos: [] })
    assert.strictEqual(next.seq, prefix.length)
    return error
  })

/** Provide a fresh memory store to a test body. */
export const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>) => effect.pipe(Effect.provide(layerMemoryStore()))
