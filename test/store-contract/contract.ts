/**
 * The one SessionStore contract suite (SPEC §7.1; §13 "Store contract, all backends"),
 * parameterised by layer: every backend runs exactly these cases, each on a fresh, empty store.
 * Durable backends add cases that need a second store instance over the same location and two
 * OS processes (`child-append.ts`) racing on one session.
 */
import * as Command from "@effect/platform/Command"
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { encodeJson, type Json } from "../../src/schema/Json.js"
import { headerRecord, type SessionHeader } from "../../src/schema/SessionHeader.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { anyValidLog, asEvents } from "../arbitraries.js"
import * as Seed from "../../src/services/Seed.js"
import * as NodeFs from "node:fs"
import * as NodeOs from "node:os"
import * as NodePath from "node:path"
import { bundleScript, repo } from "../helpers/processes.js"
import { runs } from "../suites.js"

// ---------------------------------------------------------------------------------------------
// Backends

/** What a durable backend adds: fresh locations, and a store instance over an existing one. */
export interface DurableBackend {
  /** The backend argument of `child-append.ts`. */
  readonly kind: "jsonl" | "sqlite" | "postgres"
  /** A fresh, empty location (a directory, a database file, a PostgreSQL URL), removed when the scope closes. */
  readonly location: Effect.Effect<string, unknown, Scope.Scope>
  /** A new store instance over `location` (each provide builds a new instance). */
  readonly layerAt: (location: string) => Layer.Layer<SessionStore, unknown>
}

/** Options of the contract suite. */
export interface ContractOptions {
  readonly durable?: DurableBackend
  /** Runs of each property (default 20). */
  readonly numRuns?: number
}

// ---------------------------------------------------------------------------------------------
// Event builders (plain objects in §1.1 key order; not marked trusted, so the store walks them)

type Rec = Record<string, unknown>

/** A JSON object built with defineProperty, so a `"__proto__"` key stays an own data key. */
const objectOf = (entries: ReadonlyArray<readonly [string, unknown]>): Rec => {
  const o: Rec = {}
  for (const [k, v] of entries) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true })
  return o
}

/** A session header record. */
export const headerFor = (id: string, createdAt = 0, extra: Rec = {}): Rec => ({ version: 1, id, createdAt, ...extra })

/** An ignorable plugin event (K8): accepted on every read path. */
export const pluginEvent = (seq: number, data: unknown = { n: seq }, time = 1_000 + seq): Event =>
  ({ type: "test/plugin", seq, time, data, ignorable: true }) as unknown as Event

/** A contiguous run of plugin events starting at `from`. */
export const pluginEvents = (from: number, count: number, tag = "p"): Array<Event> =>
  Array.from({ length: count }, (_, k) => pluginEvent(from + k, { tag, n: from + k }))

const textBlock = (text: string) => ({ type: "text", text })

/** One step of a random log; `buildLog` turns steps into valid events. */
export type LogStep =
  | { readonly _tag: "turnStart" }
  | { readonly _tag: "turnEnd"; readonly kind: string }
  | { readonly _tag: "user"; readonly text: string }
  | { readonly _tag: "context"; readonly text: string; readonly meta: Json | undefined }
  | { readonly _tag: "assistant"; readonly chunks: ReadonlyArray<string>; readonly usage: boolean }
  | { readonly _tag: "tool"; readonly name: string; readonly args: string; readonly output: string; readonly error: boolean }
  | { readonly _tag: "plugin"; readonly data: Json }
  | { readonly _tag: "todo"; readonly content: string; readonly status: "pending" | "in_progress" | "completed" }
  | { readonly _tag: "replace"; readonly from: number; readonly span: number; readonly text: string }

/**
 * Build a valid log (SPEC §3.2: every event passes the seed pipeline) from steps: turns, user and
 * context messages, streamed assistant messages citing their chunks, tool call/result pairs,
 * plugin noise, todos and surface replacements citing what they shadow.
 */
export const buildLog = (steps: ReadonlyArray<LogStep>, t0 = 1_700_000_000_000): Array<Event> => {
  const events: Array<Rec> = []
  const nodes: Array<number> = []
  let turn = 0
  let open = false
  const push = (type: string, data: unknown, extra: Rec = {}): number => {
    const seq = events.length
    const e: Rec = { type, seq, time: t0 + seq * 7, data }
    if (extra.sourceEventSeqs !== undefined) e.sourceEventSeqs = extra.sourceEventSeqs
    if (extra.surfaceOp !== undefined) e.surfaceOp = extra.surfaceOp
    if (extra.ignorable !== undefined) e.ignorable = extra.ignorable
    events.push(e)
    return seq
  }
  const ts = () => ({ turn: Math.max(turn, 1), step: 1 })
  for (const step of steps) {
    switch (step._tag) {
      case "turnStart": {
        if (open) push("turn/end", { turn, reason: { kind: "completed" } })
        turn++
        open = true
        push("turn/start", { turn })
        break
      }
      case "turnEnd": {
        if (open) push("turn/end", { turn, reason: { kind: step.kind } })
        open = false
        break
      }
      case "user": {
        const seq = events.length
        nodes.push(push("user/message", {
          id: `u${seq}`,
          role: "user",
          content: [textBlock(step.text)],
          source: { kind: "user" }
        }, { surfaceOp: "append" }))
        break
      }
      case "context": {
        const seq = events.length
        const data: Rec = { id: `c${seq}`, role: "user", content: [textBlock(step.text)], source: { kind: "plugin" } }
        if (step.meta !== undefined) data.meta = step.meta
        nodes.push(push("context/message", data, { surfaceOp: "append" }))
        break
      }
      case "assistant": {
        const chunkSeqs = step.chunks.map((text) => push("assistant/chunk", { ...ts(), chunk: { type: "text-delta", text } }))
        const seq = events.length
        const data: Rec = {
          ...ts(),
          message: {
            id: `a${seq}`,
            role: "assistant",
            content: step.chunks.length === 0 ? [] : [textBlock(step.chunks.join(""))],
            source: { kind: "model", provider: "test", model: "m-1" }
          }
        }
        if (step.usage) data.usage = { inputTokens: seq, outputTokens: step.chunks.length }
        nodes.push(push("assistant/message", data, { sourceEventSeqs: chunkSeqs, surfaceOp: "append" }))
        break
      }
      case "tool": {
        const callId = `call-${events.length}`
        const callSeq = push("tool/call", { ...ts(), callId, name: step.name, arguments: step.args })
        const seq = events.length
        const data: Rec = {
          ...ts(),
          message: {
            id: `r${seq}`,
            role: "user",
            content: [{ type: "tool-result", toolCallId: callId, content: [textBlock(step.output)] }],
            source: { kind: "tool", callId }
          }
        }
        if (step.error) data.error = { name: "ToolError", code: "FAILED" }
        nodes.push(push("tool/result", data, { sourceEventSeqs: [callSeq], surfaceOp: "append" }))
        break
      }
      case "plugin": {
        push("test/plugin", step.data, { ignorable: true })
        break
      }
      case "todo": {
        push("todo/write", { todos: [{ content: step.content, status: step.status }] })
        break
      }
      case "replace": {
        if (nodes.length === 0) break
        const i = step.from % nodes.length
        const j = Math.min(nodes.length - 1, i + step.span)
        const shadowed = nodes.slice(i, j + 1)
        const seq = events.length
        push("user/message", {
          id: `s${seq}`,
          role: "user",
          content: [textBlock(step.text)],
          source: { kind: "plugin", plugin: "compact" }
        }, {
          sourceEventSeqs: [...shadowed].sort((a, b) => a - b),
          surfaceOp: { op: "replace", start: nodes[i], end: nodes[j] }
        })
        nodes.splice(i, j - i + 1, seq)
        break
      }
    }
  }
  return events as unknown as Array<Event>
}

/** Strings with escapes, non-ASCII, astral and lone-surrogate code units, NUL and newlines. */
export const textArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", maxLength: 8 }) },
  { weight: 1, arbitrary: fc.constantFrom("\"quoted\"\n\\", "\u0000\u001f\u2028", "\ud800", "é🙂", "__proto__", "") }
)

/** Lossless JSON values (no -0, NaN or ±Infinity), with `"__proto__"` keys as data. */
export const jsonArb: fc.Arbitrary<Json> = fc.letrec<{ json: Json }>((tie) => ({
  json: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0)),
    textArb,
    fc.array(tie("json"), { maxLength: 4 }),
    fc.array(fc.tuple(fc.oneof(textArb, fc.constant("__proto__")), tie("json")), { maxLength: 4 }).map(
      (entries) => objectOf(entries) as Json
    )
  )
})).json

/** One random log step. */
export const stepArb: fc.Arbitrary<LogStep> = fc.oneof(
  fc.constant({ _tag: "turnStart" as const }),
  fc.constantFrom("completed", "error", "interrupted").map((kind) => ({ _tag: "turnEnd" as const, kind })),
  textArb.map((text) => ({ _tag: "user" as const, text })),
  fc.tuple(textArb, fc.option(jsonArb, { nil: undefined })).map(([text, meta]) => ({
    _tag: "context" as const,
    text,
    meta
  })),
  fc.tuple(fc.array(textArb, { maxLength: 3 }), fc.boolean()).map(([chunks, usage]) => ({
    _tag: "assistant" as const,
    chunks,
    usage
  })),
  fc.tuple(textArb, textArb, textArb, fc.boolean()).map(([name, args, output, error]) => ({
    _tag: "tool" as const,
    name,
    args,
    output,
    error
  })),
  jsonArb.map((data) => ({ _tag: "plugin" as const, data })),
  fc.tuple(textArb, fc.constantFrom("pending" as const, "in_progress" as const, "completed" as const)).map((
    [content, status]
  ) => ({ _tag: "todo" as const, content, status })),
  fc.tuple(fc.nat(20), fc.nat(2), textArb).map(([from, span, text]) => ({ _tag: "replace" as const, from, span, text }))
)

/** A random valid log: this file's exotic-text logs, or the shared agent-shaped generator's. */
export const validLogArb: fc.Arbitrary<ReadonlyArray<Event>> = fc.oneof(
  fc.array(stepArb, { maxLength: 24 }).map((steps) => buildLog(steps)),
  anyValidLog.map((built) => asEvents(built.events))
)

/** Split `events` into consecutive non-empty batches of the given sizes (the rest is one batch). */
export const partition = <A>(events: ReadonlyArray<A>, sizes: ReadonlyArray<number>): Array<Array<A>> => {
  const out: Array<Array<A>> = []
  let at = 0
  for (const size of sizes) {
    if (at >= events.length) break
    out.push(events.slice(at, at + size))
    at += size
  }
  if (at < events.length) out.push(events.slice(at))
  return out
}

/** `events` followed by a run of `count` text deltas of one block (packed rows where the backend packs). */
const withDeltas = (events: ReadonlyArray<Event>, count: number): Array<Event> => {
  const time = events.length === 0 ? 1_000 : (events[events.length - 1] as { readonly time: number }).time
  return [
    ...events,
    ...Array.from({ length: count }, (_, k) =>
      ({
        type: "assistant/chunk",
        seq: events.length + k,
        time: time + k,
        data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: `d${k}` } }
      }) as unknown as Event)
  ]
}

/** The `fromSeq`s a readFrom check tries on a log of `n` events: all of 0 … n + 1 up to 30, else the ends and a stride. */
const fromSeqsOf = (n: number): Array<number> => {
  if (n + 2 <= 30) return Array.from({ length: n + 2 }, (_, k) => k)
  const step = Math.ceil(n / 20)
  const ks = new Set<number>([0, 1, 2, n - 2, n - 1, n, n + 1, n + 100])
  for (let k = 3; k < n; k += step) ks.add(k)
  return [...ks].sort((a, b) => a - b)
}

// ---------------------------------------------------------------------------------------------
// Observation helpers

/** The JSON text of each record exactly as loaded (own-key order; no re-ordering). */
export const linesOf = (records: ReadonlyArray<unknown>): Array<string> => records.map((r) => encodeJson(r as Json))

/** The JSONL header text of a header. */
const headerLine = (h: SessionHeader): string => encodeJson(headerRecord(h) as Json)

/** What a user can observe of one session through `load`. */
const observe = (id: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const r = yield* store.load(id)
    return {
      header: headerLine(r.header),
      lines: linesOf(r.events),
      revision: r.revision,
      tornTail: r.tornTail
    }
  })

const uniqueIds = (() => {
  let n = 0
  return (prefix: string) => `${prefix}-${++n}`
})()

/** Register `id` and append `count` plugin events in one batch. */
const seeded = (id: string, count: number, createdAt = 0) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    yield* store.create(headerFor(id, createdAt))
    if (count > 0) yield* store.append(id, pluginEvents(0, count), { expectedSeq: 0 })
  })

/** Events whose element `k` breaks one append pre-check; with the error each must give. */
type Breakage = "A1" | "B6" | "K10" | "I8" | "I7" | "C6"
const breakages: ReadonlyArray<Breakage> = ["A1", "B6", "K10", "I8", "I7", "C6"]

const brokenBatch = (from: number, size: number, k: number, how: Breakage): Array<Event> =>
  pluginEvents(from, size, "bad").map((e, i) => {
    if (i !== k) return e
    const seq = from + i
    switch (how) {
      case "A1":
        return { ...e, data: { ok: 1, big: BigInt(7) } } as unknown as Event
      case "B6":
        return { ...e, ignorable: false } as unknown as Event
      case "K10":
        return { type: "mode/set", seq, time: e.time, data: { mode: "plan" } } as unknown as Event
      case "I8":
        return { type: "request/header-delta", seq, time: e.time, data: {} } as unknown as Event
      case "I7":
        return {
          type: "request/header",
          seq,
          time: e.time,
          data: { header: { config: { provider: "p", model: "m" } }, reason: "fallback" }
        } as unknown as Event
      case "C6":
        return { ...e, seq: seq + 1 } as unknown as Event
    }
  })

const expectBreakage = (error: { readonly _tag: string } & Rec, how: Breakage, seq: number, expectedSeq: number) => {
  switch (how) {
    case "A1":
      assert.strictEqual(error._tag, "NotLosslessJson")
      assert.strictEqual(error.rule, "A1")
      assert.strictEqual(error.path, "/data/big")
      assert.strictEqual(error.seq, seq)
      return
    case "B6":
      assert.strictEqual(error._tag, "InvalidEnvelope")
      assert.strictEqual(error.rule, "B6")
      assert.strictEqual(error.field, "ignorable")
      assert.strictEqual(error.seq, seq)
      return
    case "K10":
      assert.strictEqual(error._tag, "LegacyFormRefused")
      assert.strictEqual(error.rule, "K10")
      assert.strictEqual(error.form, "mode/set")
      assert.strictEqual(error.seq, seq)
      return
    case "I8":
    case "I7":
      assert.strictEqual(error._tag, "RequestHeaderInvalid")
      assert.strictEqual(error.rule, how)
      assert.strictEqual(error.seq, seq)
      return
    case "C6":
      assert.strictEqual(error._tag, "AppendConflict")
      assert.strictEqual(error.rule, "C6")
      assert.strictEqual(error.expectedSeq, expectedSeq)
      return
  }
}

// ---------------------------------------------------------------------------------------------
// The suite

/**
 * Register the contract suite for one backend. `makeLayer` builds a fresh, empty store; it is
 * called once per test (once per run for properties).
 */
export const storeContract = (
  name: string,
  makeLayer: () => Layer.Layer<SessionStore, unknown, Scope.Scope>,
  options: ContractOptions = {}
): void => {
  // a third of the runs in npm test, all of them in test:slow (test/suites.ts `runs`)
  const numRuns = runs(options.numRuns ?? 20)
  const durable = options.durable
  const fresh = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.provide(self, makeLayer())

  describe(`SessionStore contract: ${name}`, () => {
    // ------------------------------------------------------------------ fidelity

    it.scoped.prop(
      "§7.1 fidelity: random valid logs under random batch partitions load back as the same JSON text, as on the memory store",
      { log: validLogArb, sizes: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 8 }) },
      ({ log, sizes }) =>
        Effect.gen(function*() {
          // the generator builds valid logs: the seed pipeline accepts them
          yield* Seed.validateSeed(log)
          const store = yield* SessionStore
          const reference = yield* makeMemoryStore()
          const id = uniqueIds("fidelity")
          const header = headerFor(id, 42, { cwd: "/work", delegationDepth: 0, agentPreset: "p" })
          yield* store.create(header)
          yield* reference.create(header)
          const batches = partition(log, sizes)
          let next = 0
          for (const batch of batches) {
            yield* store.append(id, batch, { expectedSeq: next })
            yield* reference.append(id, batch, { expectedSeq: next })
            next += batch.length
          }
          const expected = log.map(encodeEvent)
          const loaded = yield* store.load(id)
          const ref = yield* reference.load(id)
          assert.deepStrictEqual(linesOf(loaded.events), expected)
          assert.deepStrictEqual(linesOf(loaded.events), linesOf(ref.events))
          assert.strictEqual(headerLine(loaded.header), headerLine(ref.header))
          assert.strictEqual(loaded.tornTail, undefined)
          assert.strictEqual(loaded.storedVersion, 1)
          assert.deepStrictEqual(linesOf(yield* store.readFrom(id, 0)), expected)
          // §7.1 the streamed read hands over the same events, in order, and reports what load does
          const chunks: Array<ReadonlyArray<unknown>> = []
          const headers: Array<unknown> = []
          const summary = yield* store.loadEach(id, {
            onHeader: (h, version) => Effect.sync(() => void headers.push([headerLine(h), version])),
            onEvents: (events) => Effect.sync(() => void chunks.push(events))
          })
          assert.deepStrictEqual(linesOf(chunks.flat()), expected)
          assert.isTrue(chunks.every((c) => c.length > 0), "no empty chunk is handed over")
          assert.deepStrictEqual(headers, [[headerLine(loaded.header), 1]])
          const { events: _, ...rest } = loaded
          assert.deepStrictEqual({ ...summary, header: headerLine(summary.header) }, { ...rest, header: headerLine(rest.header), count: log.length })
          if (log.length > 0) {
            const from = Math.floor(log.length / 2)
            assert.deepStrictEqual(linesOf(yield* store.readFrom(id, from)), expected.slice(from))
          }
        }).pipe(fresh),
      { fastCheck: { numRuns } }
    )

    it.scoped("§7.1 fidelity: `__proto__` keys, lone surrogates and deep nesting round-trip", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("exotic")
        yield* store.create(headerFor(id))
        let deep: unknown = "bottom"
        for (let i = 0; i < 2_000; i++) deep = i % 2 === 0 ? [deep] : { d: deep }
        const data = objectOf([["__proto__", { polluted: true }], ["s", "\ud800x\udfff\u0000\n"], ["deep", deep]])
        const event = pluginEvent(0, data)
        yield* store.append(id, [event], { expectedSeq: 0 })
        const loaded = yield* store.load(id)
        assert.deepStrictEqual(linesOf(loaded.events), [encodeEvent(event)])
        const back = (loaded.events[0] as Rec).data as Rec
        assert.isTrue(Object.prototype.hasOwnProperty.call(back, "__proto__"))
        assert.strictEqual(Object.getPrototypeOf(back), Object.prototype)
        assert.strictEqual(({} as Rec).polluted, undefined)
      }).pipe(fresh))

    // ------------------------------------------------------------------ registration

    it.scoped("§7.1 lazy registration: create writes nothing; load of a registered id is its header and []", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("lazy")
        const header = yield* store.create(headerFor(id, 5, { parentSession: "parent", seedLength: 0, origin: "subagent" }))
        assert.deepStrictEqual(yield* store.list(), [])
        const loaded = yield* store.load(id)
        assert.strictEqual(headerLine(loaded.header), headerLine(header))
        assert.deepStrictEqual(loaded.events, [])
        assert.strictEqual(loaded.tornTail, undefined)
        assert.deepStrictEqual(yield* store.readFrom(id, 0), [])
        const streamed = yield* store.loadEach(id, { onEvents: () => Effect.dieMessage("a registered session has no events") })
        assert.strictEqual(streamed.count, 0)
        assert.strictEqual(headerLine(streamed.header), headerLine(header))
      }).pipe(fresh))

    it.scoped("§7.1 the first append materialises header and batch; list shows materialised sessions only", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const a = uniqueIds("mat")
        const b = uniqueIds("mat")
        const header = yield* store.create(headerFor(a, 9, { cwd: "C:\\work", delegationDepth: 2 }))
        yield* store.create(headerFor(b, 1))
        const batch = pluginEvents(0, 3)
        yield* store.append(a, batch, { expectedSeq: 0 })
        const listed = yield* store.list()
        assert.deepStrictEqual(listed.map(headerLine), [headerLine(header)])
        const loaded = yield* observe(a)
        assert.strictEqual(loaded.header, headerLine(header))
        assert.deepStrictEqual(loaded.lines, batch.map(encodeEvent))
      }).pipe(fresh))

    it.scoped("§7.1 list is sorted by (createdAt, id) and keeps every header field", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const specs: ReadonlyArray<readonly [string, number, Rec]> = [
          ["list-b", 5, {}],
          ["list-z", 1, { cwd: "/z" }],
          ["list-a", 5, { delegationDepth: 0 }],
          ["list-m", 3, { origin: "subagent", parentSession: "list-z", seedLength: 4, agentPreset: "x" }],
          ["list-0", 5, {}]
        ]
        const headers = new Map<string, SessionHeader>()
        for (const [id, createdAt, extra] of specs) {
          headers.set(id, yield* store.create(headerFor(id, createdAt, extra)))
          if (id !== "list-0") yield* store.append(id, [pluginEvent(0)], { expectedSeq: 0 })
        }
        const listed = yield* store.list()
        assert.deepStrictEqual(listed.map((h) => h.id), ["list-z", "list-m", "list-a", "list-b"])
        assert.deepStrictEqual(listed.map(headerLine), listed.map((h) => headerLine(headers.get(h.id)!)))
      }).pipe(fresh))

    it.scoped.prop(
      "listEntries: each materialised session's header with its last event's seq and time, as list sorts them (a new instance too)",
      { log: validLogArb, sizes: fc.array(fc.integer({ min: 1, max: 6 }), { maxLength: 8 }), other: fc.integer({ min: 1, max: 5 }) },
      ({ log, other, sizes }) =>
        Effect.gen(function*() {
          const location = durable === undefined ? undefined : yield* durable.location
          const layer = durable === undefined || location === undefined ? makeLayer() : durable.layerAt(location)
          const check = Effect.gen(function*() {
            const store = yield* SessionStore
            const entries = yield* store.listEntries()
            assert.deepStrictEqual(entries.map((e) => headerLine(e.header)), (yield* store.list()).map(headerLine))
            return entries.map((e) => [e.header.id, e.last] as const)
          })
          const { a, b, listed } = yield* Effect.gen(function*() {
            const store = yield* SessionStore
            const a = uniqueIds("entries")
            const b = uniqueIds("entries")
            const registered = uniqueIds("entries")
            yield* store.create(headerFor(a, 7))
            yield* store.create(headerFor(b, 3))
            yield* store.create(headerFor(registered, 1))
            let next = 0
            for (const batch of partition(log, sizes)) {
              yield* store.append(a, batch, { expectedSeq: next })
              next += batch.length
            }
            yield* store.append(b, pluginEvents(0, other), { expectedSeq: 0 })
            return { a, b, listed: yield* check }
          }).pipe(Effect.provide(layer))
          const lastA = log.at(-1)
          const expected: Array<readonly [string, { readonly seq: number; readonly time: number } | undefined]> = [
            [b, { seq: other - 1, time: 1_000 + other - 1 }],
            ...(lastA === undefined ? [] : [[a, { seq: lastA.seq, time: lastA.time }] as const])
          ]
          assert.deepStrictEqual(listed, expected)
          // from storage alone: another instance over the same location lists the same
          if (location !== undefined && durable !== undefined) {
            assert.deepStrictEqual(yield* Effect.provide(check, durable.layerAt(location)), expected)
          }
        }).pipe(Effect.scoped),
      // a fresh location per run (a PostgreSQL schema costs about a second): few runs
      { fastCheck: { numRuns: Math.min(numRuns, durable === undefined ? 4 : 2) } }
    )

    it.scoped("discard removes a whole session at its revision; at a stale one it is L8 and the log stays", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const gone = uniqueIds("discard")
        const kept = uniqueIds("discard")
        for (const id of [gone, kept]) {
          yield* store.create(headerFor(id, 1))
          yield* store.append(id, pluginEvents(0, 3), { expectedSeq: 0 })
        }
        const stale = (yield* store.load(kept)).revision
        yield* store.append(kept, pluginEvents(3, 2), { expectedSeq: 3 })
        const before = yield* observe(kept)
        const refused = yield* Effect.flip(store.discard(kept, { revision: stale }))
        assert.strictEqual(refused._tag, "AppendConflict")
        assert.strictEqual((refused as { rule?: string }).rule, "L8")
        assert.deepStrictEqual(yield* observe(kept), before)
        yield* store.discard(gone, { revision: (yield* store.load(gone)).revision })
        assert.deepStrictEqual((yield* store.list()).map((h) => h.id), [kept])
        assert.strictEqual((yield* Effect.flip(store.load(gone)))._tag, "SessionNotFound")
        // the id is free again
        yield* store.create(headerFor(gone, 2))
        yield* store.append(gone, pluginEvents(0, 1), { expectedSeq: 0 })
        assert.strictEqual((yield* store.load(gone)).events.length, 1)
      }).pipe(fresh))

    it.scoped("J14 create rejects an id registered in this store, and one already stored", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const registered = uniqueIds("j14")
        const stored = uniqueIds("j14")
        yield* store.create(headerFor(registered, 1))
        yield* seeded(stored, 2)
        for (const id of [registered, stored]) {
          const e = yield* Effect.flip(store.create(headerFor(id, 7)))
          assert.strictEqual(e._tag, "SessionExists")
          assert.strictEqual(e.rule, "J14")
          assert.strictEqual((e as { sessionId?: string }).sessionId, id)
        }
        // the first registration stands
        assert.strictEqual((yield* store.load(registered)).header.createdAt, 1)
        assert.strictEqual((yield* observe(stored)).lines.length, 2)
      }).pipe(fresh))

    it.scoped("J13 a rejected create registers nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("j13")
        const e = yield* Effect.flip(store.create(headerFor(id, 1.5)))
        assert.strictEqual(e._tag, "SessionHeaderInvalid")
        assert.strictEqual(e.rule, "J4")
        const nf = yield* Effect.flip(store.load(id))
        assert.strictEqual(nf._tag, "SessionNotFound")
        yield* store.create(headerFor(id, 2))
      }).pipe(fresh))

    // ------------------------------------------------------------------ atomic batches

    for (const how of breakages) {
      it.scoped(`§7.1 atomic batch: an element failing ${how} stores nothing (stored session)`, () =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const id = uniqueIds(`atomic-${how}`)
          yield* seeded(id, 2)
          const before = yield* observe(id)
          const e = yield* Effect.flip(store.append(id, brokenBatch(2, 4, 2, how), { expectedSeq: 2 }))
          expectBreakage(e as unknown as { _tag: string } & Rec, how, 4, 2)
          assert.deepStrictEqual(yield* observe(id), before)
          // the next valid append gets the seq the rejected batch would have had
          yield* store.append(id, pluginEvents(2, 4), { expectedSeq: 2 })
          assert.strictEqual((yield* observe(id)).lines.length, 6)
        }).pipe(fresh))
    }

    it.scoped("§7.1 atomic batch: a bad first batch materialises nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("atomic-first")
        const header = yield* store.create(headerFor(id, 3))
        for (const how of breakages) {
          const e = yield* Effect.flip(store.append(id, brokenBatch(0, 3, 1, how), { expectedSeq: 0 }))
          expectBreakage(e as unknown as { _tag: string } & Rec, how, 1, 0)
          assert.deepStrictEqual(yield* store.list(), [])
          const loaded = yield* store.load(id)
          assert.deepStrictEqual(loaded.events, [])
          assert.strictEqual(headerLine(loaded.header), headerLine(header))
        }
        yield* store.append(id, pluginEvents(0, 3), { expectedSeq: 0 })
        assert.deepStrictEqual((yield* store.list()).map((h) => h.id), [id])
      }).pipe(fresh))

    // ------------------------------------------------------------------ expected seq

    it.scoped("C5 an expectedSeq beyond the stored next seq is AppendConflict and writes nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("c5")
        yield* seeded(id, 3)
        const before = yield* observe(id)
        const e = yield* Effect.flip(store.append(id, pluginEvents(5, 2), { expectedSeq: 5 }))
        assert.strictEqual(e._tag, "AppendConflict")
        assert.strictEqual(e.rule, "C5")
        assert.strictEqual((e as { expectedSeq?: number }).expectedSeq, 5)
        assert.strictEqual((e as { storedSeq?: number }).storedSeq, 3)
        assert.deepStrictEqual(yield* observe(id), before)
        // also on the first append of a registered session
        const fresh2 = uniqueIds("c5")
        yield* store.create(headerFor(fresh2))
        const e2 = yield* Effect.flip(store.append(fresh2, pluginEvents(1, 1), { expectedSeq: 1 }))
        assert.strictEqual(e2._tag, "AppendConflict")
        assert.strictEqual(e2.rule, "C5")
        assert.strictEqual((e2 as { storedSeq?: number }).storedSeq, 0)
        assert.deepStrictEqual(yield* store.list().pipe(Effect.map((l) => l.map((h) => h.id))), [id])
      }).pipe(fresh))

    it.scoped("C7 an expectedSeq below the stored next seq is AppendConflict and writes nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("c7")
        yield* seeded(id, 3)
        const before = yield* observe(id)
        for (const expectedSeq of [0, 2]) {
          const e = yield* Effect.flip(store.append(id, pluginEvents(expectedSeq, 2, "stale"), { expectedSeq }))
          assert.strictEqual(e._tag, "AppendConflict")
          assert.strictEqual(e.rule, "C7")
          assert.strictEqual((e as { expectedSeq?: number }).expectedSeq, expectedSeq)
          assert.strictEqual((e as { storedSeq?: number }).storedSeq, 3)
        }
        assert.deepStrictEqual(yield* observe(id), before)
      }).pipe(fresh))

    it.scoped("C6 a batch not contiguous from expectedSeq (first seq, gap, repeat) is AppendConflict", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("c6")
        yield* seeded(id, 2)
        const before = yield* observe(id)
        const batches: ReadonlyArray<ReadonlyArray<Event>> = [
          [pluginEvent(3)],
          [pluginEvent(2), pluginEvent(4)],
          [pluginEvent(2), pluginEvent(2)],
          [pluginEvent(1), pluginEvent(2)]
        ]
        for (const batch of batches) {
          const e = yield* Effect.flip(store.append(id, batch, { expectedSeq: 2 }))
          assert.strictEqual(e._tag, "AppendConflict")
          assert.strictEqual(e.rule, "C6")
          assert.strictEqual((e as { expectedSeq?: number }).expectedSeq, 2)
        }
        assert.deepStrictEqual(yield* observe(id), before)
      }).pipe(fresh))

    it.scoped("§7.1 an empty batch is a no-op, even for an unknown id or a wrong expectedSeq", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("empty")
        yield* store.append(uniqueIds("unknown"), [], { expectedSeq: 0 })
        yield* store.append(uniqueIds("unknown"), [], { expectedSeq: -4 })
        const registered = uniqueIds("empty")
        yield* store.create(headerFor(registered))
        yield* store.append(registered, [], { expectedSeq: 0 })
        assert.deepStrictEqual(yield* store.list(), [])
        yield* seeded(id, 2)
        const before = yield* observe(id)
        yield* store.append(id, [], { expectedSeq: 0 })
        yield* store.append(id, [], { expectedSeq: 99 })
        assert.deepStrictEqual(yield* observe(id), before)
        assert.deepStrictEqual((yield* store.list()).map((h) => h.id), [id])
      }).pipe(fresh))

    // ------------------------------------------------------------------ reads

    it.scoped("L10 readFrom: negative or fractional fromSeq is SeqNotContiguous; at or past the end is []", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("l10")
        yield* seeded(id, 4)
        for (const fromSeq of [-1, 0.5, -0.5, Number.NaN, 2.25]) {
          const e = yield* Effect.flip(store.readFrom(id, fromSeq))
          assert.strictEqual(e._tag, "SeqNotContiguous")
          assert.strictEqual(e.rule, "L10")
        }
        assert.deepStrictEqual(yield* store.readFrom(id, 4), [])
        assert.deepStrictEqual(yield* store.readFrom(id, 1_000), [])
        assert.deepStrictEqual(linesOf(yield* store.readFrom(id, 1)), pluginEvents(0, 4).slice(1).map(encodeEvent))
        assert.deepStrictEqual(linesOf(yield* store.readFrom(id, 3)), [encodeEvent(pluginEvents(0, 4)[3])])
      }).pipe(fresh))

    it.scoped.prop(
      "§7.1 readFrom(id, k) is load's events from k for every k: random logs with runs of deltas (packed rows), after each append and after replaceLog",
      {
        log: validLogArb,
        deltas: fc.nat(7),
        sizes: fc.array(fc.integer({ min: 1, max: 12 }), { maxLength: 4 }),
        replaced: fc.nat(6)
      },
      ({ deltas, log, replaced, sizes }) =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const id = uniqueIds("read-from")
          yield* store.create(headerFor(id))
          // readFrom first (the first read of the store instance, or the one after a replaceLog, is
          // whole; later ones may seek), then load: every k agrees with load's events sliced at k
          const agree = (expected: ReadonlyArray<Event>) =>
            Effect.gen(function*() {
              const lines = expected.map(encodeEvent)
              const ks = fromSeqsOf(lines.length)
              const read: Array<Array<string>> = []
              for (const k of ks) read.push(linesOf(yield* store.readFrom(id, k)))
              const loaded = linesOf((yield* store.load(id)).events)
              assert.deepStrictEqual(loaded, lines)
              ks.forEach((k, i) => assert.deepStrictEqual(read[i], loaded.slice(k), `readFrom(${k})`))
            })
          const all = withDeltas(log, deltas)
          let next = 0
          for (const batch of partition(all, sizes)) {
            yield* store.append(id, batch, { expectedSeq: next })
            next += batch.length
            yield* agree(all.slice(0, next))
          }
          if (next === 0) return
          const replacement = withDeltas(pluginEvents(0, replaced, "replaced"), deltas)
          const before = yield* store.load(id)
          yield* store.replaceLog(id, before.header, replacement, { revision: before.revision, backup: "test" })
          yield* agree(replacement)
          const more = pluginEvent(replacement.length)
          yield* store.append(id, [more], { expectedSeq: replacement.length })
          yield* agree([...replacement, more])
        }).pipe(fresh),
      // 2 runs in npm test on each of six backends (about 2 s between them), 6 in test:slow
      { fastCheck: { numRuns: runs(6, 2) } }
    )

    it.scoped.prop(
      "§7.1 loadEach from k stopped at t hands over load's events [k, t): random logs with packed rows, random from/to, before and after a whole read, after replaceLog",
      {
        log: validLogArb,
        deltas: fc.nat(7),
        sizes: fc.array(fc.integer({ min: 1, max: 12 }), { maxLength: 4 }),
        cuts: fc.array(fc.tuple(fc.nat(40), fc.option(fc.nat(20))), { minLength: 1, maxLength: 6 }),
        replaced: fc.nat(6)
      },
      ({ cuts, deltas, log, replaced, sizes }) =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const id = uniqueIds("load-each-from")
          yield* store.create(headerFor(id))
          // from k, stopped by the sink once it holds the events before t (t absent: to the end)
          const readCut = (k: number, width: number | undefined) =>
            Effect.gen(function*() {
              const got: Array<unknown> = []
              const wanted = width === undefined ? Infinity : width
              const read = yield* Effect.either(store.loadEach(id, {
                onEvents: (events) =>
                  Effect.suspend(() => {
                    for (const e of events) {
                      if (got.length >= wanted) return Effect.fail("stop" as const)
                      got.push(e)
                    }
                    return got.length >= wanted ? Effect.fail("stop" as const) : Effect.void
                  })
              }, { fromSeq: k }))
              if (read._tag === "Left") assert.strictEqual(read.left, "stop")
              return { lines: linesOf(got), count: read._tag === "Right" ? read.right.count : undefined }
            })
          const agree = (expected: ReadonlyArray<Event>) =>
            Effect.gen(function*() {
              const lines = expected.map(encodeEvent)
              // before this state's whole read (may read from the start), then after it (may seek)
              const before: Array<{ readonly lines: Array<string>; readonly count: number | undefined }> = []
              for (const [k, w] of cuts) before.push(yield* readCut(k, w ?? undefined))
              const loaded = linesOf((yield* store.load(id)).events)
              assert.deepStrictEqual(loaded, lines)
              const after: typeof before = []
              for (const [k, w] of cuts) after.push(yield* readCut(k, w ?? undefined))
              cuts.forEach(([k, w], i) => {
                const width = w ?? undefined
                const slice = loaded.slice(k, width === undefined ? undefined : k + width)
                for (const r of [before[i], after[i]]) {
                  assert.deepStrictEqual(r.lines, slice, `loadEach from ${k} width ${width}`)
                  if (r.count !== undefined) assert.strictEqual(r.count, loaded.length)
                }
              })
            })
          const all = withDeltas(log, deltas)
          let next = 0
          for (const batch of partition(all, sizes)) {
            yield* store.append(id, batch, { expectedSeq: next })
            next += batch.length
            yield* agree(all.slice(0, next))
          }
          if (next === 0) return
          const replacement = withDeltas(pluginEvents(0, replaced, "replaced"), deltas)
          const current = yield* store.load(id)
          yield* store.replaceLog(id, current.header, replacement, { revision: current.revision, backup: "test" })
          yield* agree(replacement)
        }).pipe(fresh),
      // 2 runs in npm test on each backend, 6 in test:slow
      { fastCheck: { numRuns: runs(6, 2) } }
    )

    it.scoped("L10 loadEach: a negative or fractional fromSeq is SeqNotContiguous; at or past the end hands over nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("l10-each")
        yield* seeded(id, 4)
        const sink = { onEvents: () => Effect.void }
        for (const fromSeq of [-1, 0.5, Number.NaN]) {
          const e = yield* Effect.flip(store.loadEach(id, sink, { fromSeq }))
          assert.strictEqual(e._tag, "SeqNotContiguous")
          assert.strictEqual((e as { rule?: string }).rule, "L10")
        }
        yield* store.load(id)
        for (const fromSeq of [4, 1_000]) {
          const got: Array<unknown> = []
          const summary = yield* store.loadEach(id, { onEvents: (e) => Effect.sync(() => void got.push(...e)) }, { fromSeq })
          assert.deepStrictEqual(got, [])
          assert.strictEqual(summary.count, 4)
        }
      }).pipe(fresh))

    it.scoped("§7.1 a streamed read stops at the first failure of its sink, and changes nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("sinkfail")
        yield* store.create(headerFor(id))
        yield* store.append(id, pluginEvents(0, 3), { expectedSeq: 0 })
        const before = yield* store.load(id)
        const failed = yield* Effect.flip(store.loadEach(id, { onEvents: () => Effect.fail("stop" as const) }))
        assert.strictEqual(failed, "stop")
        const after = yield* store.load(id)
        assert.strictEqual(after.revision, before.revision)
        assert.deepStrictEqual(linesOf(after.events), linesOf(before.events))
        const missing = yield* Effect.flip(store.loadEach(uniqueIds("none"), { onEvents: () => Effect.void }))
        assert.strictEqual(missing._tag, "SessionNotFound")
      }).pipe(fresh))

    it.scoped("L11 append, load and readFrom of an id neither stored nor registered are SessionNotFound", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("l11")
        const results = [
          yield* Effect.flip(store.append(id, [pluginEvent(0)], { expectedSeq: 0 })),
          yield* Effect.flip(store.load(id)),
          yield* Effect.flip(store.readFrom(id, 0))
        ]
        for (const e of results) {
          assert.strictEqual(e._tag, "SessionNotFound")
          assert.strictEqual(e.rule, "L11")
          assert.strictEqual((e as { sessionId?: string }).sessionId, id)
        }
        assert.deepStrictEqual(yield* store.list(), [])
      }).pipe(fresh))

    // ------------------------------------------------------------------ revisions

    it.scoped("L8 replaceLog with a stale revision is AppendConflict and changes nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("l8-replace")
        yield* seeded(id, 2)
        const stale = (yield* store.load(id)).revision
        yield* store.append(id, [pluginEvent(2)], { expectedSeq: 2 })
        const before = yield* observe(id)
        assert.notStrictEqual(before.revision, stale)
        const header = (yield* store.load(id)).header
        const e = yield* Effect.flip(
          store.replaceLog(id, header, pluginEvents(0, 1, "replaced"), { revision: stale, backup: "test" })
        )
        assert.strictEqual(e._tag, "AppendConflict")
        assert.strictEqual(e.rule, "L8")
        assert.deepStrictEqual(yield* observe(id), before)
      }).pipe(fresh))

    it.scoped("§7.1 replaceLog at the current revision replaces header and events and changes the revision", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("replace")
        yield* seeded(id, 3, 10)
        const loaded = yield* store.load(id)
        const header = { ...loaded.header, agentPreset: "upgraded" } as SessionHeader
        const replacement = pluginEvents(0, 2, "replaced")
        yield* store.replaceLog(id, header, replacement, { revision: loaded.revision, backup: "test" })
        const after = yield* observe(id)
        assert.deepStrictEqual(after.lines, replacement.map(encodeEvent))
        assert.strictEqual(after.header, headerLine(header))
        assert.notStrictEqual(after.revision, loaded.revision)
        yield* store.append(id, [pluginEvent(2)], { expectedSeq: 2 })
        assert.strictEqual((yield* observe(id)).lines.length, 3)
      }).pipe(fresh))

    it.scoped("L8 truncateTornTail with a stale revision, or without a torn tail, is AppendConflict and changes nothing", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("l8-torn")
        yield* seeded(id, 2)
        const stale = (yield* store.load(id)).revision
        yield* store.append(id, [pluginEvent(2)], { expectedSeq: 2 })
        const before = yield* observe(id)
        const torn = { fromSeq: 2, reason: "fragment" as const, position: 10 }
        for (const revision of [stale, before.revision]) {
          const e = yield* Effect.flip(store.truncateTornTail(id, torn, { revision }))
          assert.strictEqual(e._tag, "AppendConflict")
          assert.strictEqual(e.rule, "L8")
          assert.deepStrictEqual(yield* observe(id), before)
        }
      }).pipe(fresh))

    it.scoped("L8 load and readFrom never change the revision", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("l8-read")
        yield* seeded(id, 3)
        const first = yield* observe(id)
        yield* store.readFrom(id, 1)
        yield* store.list()
        assert.deepStrictEqual(yield* observe(id), first)
        yield* store.append(id, [pluginEvent(3)], { expectedSeq: 3 })
        assert.notStrictEqual((yield* observe(id)).revision, first.revision)
      }).pipe(fresh))

    // ------------------------------------------------------------------ sessions over the store

    it.scoped("N11 two handles on one session: exactly one append wins, the other fails the handle", () =>
      Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uniqueIds("n11")
        yield* store.create(headerFor(id))
        const closedTurn = buildLog([{ _tag: "turnStart" }, { _tag: "user", text: "hi" }, { _tag: "turnEnd", kind: "completed" }])
        yield* store.append(id, closedTurn, { expectedSeq: 0 })
        const a = yield* SessionLive.open(id)
        const b = yield* SessionLive.open(id)
        const length = (yield* a.events).length
        assert.strictEqual((yield* b.events).length, length)
        const [ra, rb] = yield* Effect.all([
          Effect.either(a.append("todo/write", { todos: [{ content: "a", status: "pending" }] })),
          Effect.either(b.append("todo/write", { todos: [{ content: "b", status: "pending" }] }))
        ], { concurrency: "unbounded" })
        const wins = [ra, rb].filter((r) => r._tag === "Right")
        assert.strictEqual(wins.length, 1)
        const [winner, loser, lost] = ra._tag === "Right" ? [a, b, rb] : [b, a, ra]
        assert.strictEqual(lost._tag, "Left")
        const conflict = lost._tag === "Left" ? lost.left : undefined
        assert.strictEqual(conflict?._tag, "AppendConflict")
        assert.strictEqual(conflict?.rule, "C7")
        const { expectedSeq, storedSeq } = conflict as unknown as { expectedSeq: number; storedSeq: number }
        assert.strictEqual(expectedSeq, length)
        assert.strictEqual(storedSeq, length + 1)
        assert.strictEqual(yield* loser.state, "failed")
        // the loser's memory is unchanged; the store holds the winner's event only
        assert.strictEqual((yield* loser.events).length, length)
        const stored = yield* observe(id)
        assert.deepStrictEqual(stored.lines, (yield* winner.events).map(encodeEvent))
        // N11: every later append fails with the same expectedSeq/storedSeq, writing nothing
        const again = yield* Effect.flip(loser.append("todo/write", { todos: [{ content: "c", status: "pending" }] }))
        assert.strictEqual(again._tag, "AppendConflict")
        assert.strictEqual((again as { expectedSeq?: number }).expectedSeq, expectedSeq)
        assert.strictEqual((again as { storedSeq?: number }).storedSeq, storedSeq)
        assert.deepStrictEqual(yield* observe(id), stored)
        // the winner goes on
        yield* winner.append("todo/write", { todos: [{ content: "d", status: "completed" }] })
        assert.strictEqual((yield* observe(id)).lines.length, length + 2)
      }).pipe(fresh))

    it.scoped("F8 a rejected Session append leaves the store unchanged; the next one takes its seq", () =>
      Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: uniqueIds("f8") })
        yield* s.append("turn/start", { turn: 1 })
        yield* s.append("user/message", {
          id: "u1",
          role: "user",
          content: [{ type: "text", text: "hi" }],
          source: { kind: "user" }
        }, { surfaceOp: "append" })
        const before = yield* observe(s.id)
        const rejections = [
          yield* Effect.flip(s.appendUnknown("test/plugin", { big: BigInt(1) }, { ignorable: true })),
          yield* Effect.flip(s.appendUnknown("mode/set", {})),
          yield* Effect.flip(s.appendUnknown("user/message", { id: "u2", role: "user", content: [], source: { kind: "user" } })),
          yield* Effect.flip(s.appendUnknown("user/message", { id: "u2", role: "user", content: [], source: { kind: "user" } }, {
            surfaceOp: { op: "replace", start: 0, end: 0 },
            sourceEventSeqs: [0]
          }))
        ]
        assert.deepStrictEqual(rejections.map((e) => e.rule), ["A1", "K10", "D3", "F1"])
        assert.deepStrictEqual(yield* observe(s.id), before)
        const next = yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
        assert.strictEqual(next.seq, 2)
        assert.deepStrictEqual((yield* observe(s.id)).lines, (yield* s.events).map(encodeEvent))
      }).pipe(fresh))

    it.scoped("§7.2 a session round-trips through the store: inspect and open see what was appended", () =>
      Effect.gen(function*() {
        const id = uniqueIds("resume")
        const written = yield* Effect.scoped(Effect.gen(function*() {
          const s = yield* SessionLive.create({ id, header: { cwd: "/tmp/x" } })
          yield* s.append("turn/start", { turn: 1 })
          yield* s.append("user/message", {
            id: "u1",
            role: "user",
            content: [{ type: "text", text: "hello" }],
            source: { kind: "user" }
          }, { surfaceOp: "append" })
          yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
          return (yield* s.events).map(encodeEvent)
        }))
        const inspected = yield* SessionLive.inspect(id)
        assert.deepStrictEqual(inspected.events.map(encodeEvent), written)
        assert.deepStrictEqual(inspected.closers, [])
        const reopened = yield* SessionLive.open(id)
        const events = yield* reopened.events
        assert.deepStrictEqual(events.slice(0, written.length).map(encodeEvent), written)
        assert.strictEqual(events[written.length]?.type, "session/end-seed")
        assert.deepStrictEqual((yield* observe(id)).lines, events.map(encodeEvent))
      }).pipe(fresh))

    // ------------------------------------------------------------------ model-based

    it.scoped.prop(
      "§13 model-based: append, invalid append, stale append, readFrom and reload keep the store in step with a model",
      { commands: commandsArb(durable !== undefined) },
      ({ commands }) =>
        Effect.gen(function*() {
          const location = durable === undefined ? undefined : yield* durable.location
          const layer = durable === undefined || location === undefined ? makeLayer() : durable.layerAt(location)
          yield* Effect.gen(function*() {
            const store = yield* SessionStore
            // fc.asyncModelRun drives promises: commands run their effects on this test's runtime
            const runtime = yield* Effect.runtime<never>()
            const scope = yield* Effect.scope
            const id = uniqueIds("model")
            const header = yield* store.create(headerFor(id, 11))
            const real: Real = {
              id,
              header: headerLine(header),
              store,
              run: (effect) => Runtime.runPromise(runtime)(effect),
              reopen: durable === undefined || location === undefined
                ? undefined
                : Layer.buildWithScope(durable.layerAt(location), scope).pipe(
                  Effect.map((ctx) => Context.get(ctx, SessionStore)),
                  Effect.orDie
                )
            }
            yield* Effect.promise(() => fc.asyncModelRun(() => ({ model: { lines: [] }, real }), commands))
          }).pipe(Effect.provide(layer))
        }),
      { fastCheck: { numRuns } }
    )

    // ------------------------------------------------------------------ durable backends

    if (durable !== undefined) {
      describeDurable(durable)
    }
  })
}

// ---------------------------------------------------------------------------------------------
// Model-based test (fc.commands)

interface Model {
  lines: Array<string>
}

interface Real {
  readonly id: string
  readonly header: string
  store: SessionStoreShape
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  /** A new store instance over the same durable location (undefined for memory). */
  readonly reopen: Effect.Effect<SessionStoreShape> | undefined
}

/** After every command: the store's view equals the model, through load and readFrom. */
const compare = async (model: Model, real: Real) => {
  const loaded = await real.run(real.store.load(real.id))
  assert.strictEqual(headerLine(loaded.header), real.header)
  assert.deepStrictEqual(linesOf(loaded.events), model.lines)
  assert.strictEqual(loaded.tornTail, undefined)
}

const payload = (tag: string, n: number): Rec => ({ tag, n, s: `é\n${n}` })

class AppendCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly size: number, readonly tag: string) {}
  check = () => true
  async run(model: Model, real: Real) {
    const from = model.lines.length
    const batch = Array.from({ length: this.size }, (_, k) => pluginEvent(from + k, payload(this.tag, k), from + k))
    await real.run(real.store.append(real.id, batch, { expectedSeq: from }))
    model.lines.push(...batch.map(encodeEvent))
    await compare(model, real)
  }
  toString = () => `append(${this.size})`
}

class InvalidAppendCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly size: number, readonly k: number, readonly how: Breakage) {}
  check = () => true
  async run(model: Model, real: Real) {
    const from = model.lines.length
    const k = this.k % this.size
    const e = await real.run(Effect.flip(real.store.append(real.id, brokenBatch(from, this.size, k, this.how), { expectedSeq: from })))
    expectBreakage(e as unknown as { _tag: string } & Rec, this.how, from + k, from)
    await compare(model, real)
  }
  toString = () => `invalidAppend(${this.how} at ${this.k % this.size} of ${this.size})`
}

class StaleAppendCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly delta: number, readonly size: number) {}
  check = (model: Readonly<Model>) => model.lines.length + this.delta >= 0
  async run(model: Model, real: Real) {
    const stored = model.lines.length
    const expectedSeq = stored + this.delta
    const e = await real.run(Effect.flip(real.store.append(real.id, pluginEvents(expectedSeq, this.size, "stale"), { expectedSeq })))
    assert.strictEqual(e._tag, "AppendConflict")
    assert.strictEqual(e.rule, this.delta > 0 ? "C5" : "C7")
    assert.strictEqual((e as { expectedSeq?: number }).expectedSeq, expectedSeq)
    assert.strictEqual((e as { storedSeq?: number }).storedSeq, stored)
    await compare(model, real)
  }
  toString = () => `staleAppend(${this.delta > 0 ? "+" : ""}${this.delta}, ${this.size})`
}

class ReadFromCommand implements fc.AsyncCommand<Model, Real> {
  constructor(readonly fromSeq: number) {}
  check = () => true
  async run(model: Model, real: Real) {
    if (!Number.isInteger(this.fromSeq) || this.fromSeq < 0) {
      const e = await real.run(Effect.flip(real.store.readFrom(real.id, this.fromSeq)))
      assert.strictEqual(e._tag, "SeqNotContiguous")
      assert.strictEqual(e.rule, "L10")
    } else {
      const events = await real.run(real.store.readFrom(real.id, this.fromSeq))
      assert.deepStrictEqual(linesOf(events), model.lines.slice(this.fromSeq))
    }
  }
  toString = () => `readFrom(${this.fromSeq})`
}

class ReloadCommand implements fc.AsyncCommand<Model, Real> {
  check = () => true
  async run(model: Model, real: Real) {
    if (real.reopen !== undefined && model.lines.length > 0) real.store = await real.run(real.reopen)
    await compare(model, real)
  }
  toString = () => "reload"
}

const commandsArb = (durable: boolean) =>
  fc.commands([
    fc.tuple(fc.integer({ min: 1, max: 4 }), fc.constantFrom("x", "y")).map(([size, tag]) => new AppendCommand(size, tag)),
    fc.tuple(fc.integer({ min: 1, max: 3 }), fc.nat(3), fc.constantFrom(...breakages)).map(([size, k, how]) =>
      new InvalidAppendCommand(size, k, how)
    ),
    fc.tuple(fc.integer({ min: -3, max: 3 }).filter((d) => d !== 0), fc.integer({ min: 1, max: 2 })).map(([d, size]) =>
      new StaleAppendCommand(d, size)
    ),
    fc.oneof(fc.integer({ min: -2, max: 16 }), fc.constantFrom(0.5, 1.5)).map((n) => new ReadFromCommand(n)),
    fc.constant(null).map(() => new ReloadCommand())
  ], { maxCommands: durable ? 14 : 20 })

// ---------------------------------------------------------------------------------------------
// Durable backends: second instances and OS processes

const describeDurable = (durable: DurableBackend) => {
  /** Run `self` over a fresh location, with the location. */
  const atFresh = <A, E, R>(self: (location: string) => Effect.Effect<A, E, R>) =>
    Effect.gen(function*() {
      const location = yield* durable.location
      return yield* self(location).pipe(Effect.provide(durable.layerAt(location)))
    })
  /** Run `self` on another store instance over `location`. */
  const other = <A, E, R>(location: string, self: Effect.Effect<A, E, R>) =>
    Effect.scoped(Effect.provide(self, durable.layerAt(location)))

  describe("durable", () => {
    it.scoped("§7.1 lazy registration: another store instance sees nothing before the first append", () =>
      atFresh((location) =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const id = uniqueIds("lazy-durable")
          yield* store.create(headerFor(id, 1))
          const seen = yield* other(location, Effect.gen(function*() {
            const s = yield* SessionStore
            return { list: yield* s.list(), load: yield* Effect.flip(s.load(id)) }
          }))
          assert.deepStrictEqual(seen.list, [])
          assert.strictEqual(seen.load._tag, "SessionNotFound")
          // and a failed first append materialises nothing either
          yield* Effect.flip(store.append(id, brokenBatch(0, 2, 1, "A1"), { expectedSeq: 0 }))
          const seen2 = yield* other(location, Effect.flatMap(SessionStore, (s) => s.list()))
          assert.deepStrictEqual(seen2, [])
        })
      ))

    it.scoped.prop(
      "§7.1 durability: a new store instance loads exactly what was appended (header and events)",
      { log: validLogArb, sizes: fc.array(fc.integer({ min: 1, max: 8 }), { maxLength: 4 }) },
      ({ log, sizes }) =>
        atFresh((location) =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const id = uniqueIds("durable")
            const header = yield* store.create(headerFor(id, 77, { seedLength: 3, parentSession: "parent-é🙂" }))
            let next = 0
            for (const batch of partition(log, sizes)) {
              yield* store.append(id, batch, { expectedSeq: next })
              next += batch.length
            }
            const seen = yield* other(location, Effect.gen(function*() {
              const s = yield* SessionStore
              return { list: yield* s.list(), loaded: yield* Effect.either(s.load(id)) }
            }))
            if (log.length === 0) {
              assert.deepStrictEqual(seen.list, [])
              return
            }
            assert.deepStrictEqual(seen.list.map(headerLine), [headerLine(header)])
            assert.strictEqual(seen.loaded._tag, "Right")
            if (seen.loaded._tag === "Right") {
              assert.strictEqual(headerLine(seen.loaded.right.header), headerLine(header))
              assert.deepStrictEqual(linesOf(seen.loaded.right.events), log.map(encodeEvent))
            }
          })
        ),
      { fastCheck: { numRuns: runs(10) } }
    )

    it.scoped("J14 create in another instance of an id stored there is SessionExists", () =>
      atFresh((location) =>
        Effect.gen(function*() {
          const id = uniqueIds("j14-durable")
          yield* seeded(id, 2)
          const e = yield* other(location, Effect.flip(Effect.flatMap(SessionStore, (s) => s.create(headerFor(id, 3)))))
          assert.strictEqual(e._tag, "SessionExists")
          assert.strictEqual(e.rule, "J14")
        })
      ))

    it.scoped("J14 two instances register one id: the second first-append does not overwrite the first", () =>
      atFresh((location) =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const id = uniqueIds("j14-race")
          yield* store.create(headerFor(id, 1))
          const result = yield* other(location, Effect.gen(function*() {
            const s = yield* SessionStore
            yield* s.create(headerFor(id, 2))
            yield* store.append(id, pluginEvents(0, 2, "first"), { expectedSeq: 0 })
            return yield* Effect.flip(s.append(id, pluginEvents(0, 3, "second"), { expectedSeq: 0 }))
          }))
          // J14 (the id is materialised by another writer) or C7 (the stored log moved on)
          assert.include(["SessionExists", "AppendConflict"], result._tag)
          const after = yield* observe(id)
          assert.strictEqual(JSON.parse(after.header).createdAt, 1)
          assert.deepStrictEqual(after.lines, pluginEvents(0, 2, "first").map(encodeEvent))
        })
      ))

    it.scoped("C7 two store instances with the same expectedSeq: exactly one wins", () =>
      atFresh((location) =>
        Effect.gen(function*() {
          const store = yield* SessionStore
          const id = uniqueIds("c7-durable")
          yield* seeded(id, 1)
          const loserError = yield* other(location, Effect.gen(function*() {
            const s = yield* SessionStore
            // both instances have read the log at next seq 1
            assert.strictEqual((yield* s.load(id)).events.length, 1)
            yield* store.append(id, pluginEvents(1, 2, "a"), { expectedSeq: 1 })
            return yield* Effect.flip(s.append(id, pluginEvents(1, 1, "b"), { expectedSeq: 1 }))
          }))
          assert.strictEqual(loserError._tag, "AppendConflict")
          assert.strictEqual(loserError.rule, "C7")
          assert.strictEqual((loserError as { storedSeq?: number }).storedSeq, 3)
          assert.deepStrictEqual((yield* observe(id)).lines, [...pluginEvents(0, 1), ...pluginEvents(1, 2, "a")].map(encodeEvent))
        })
      ))

    it.scopedLive(
      "§13 two OS processes append to one session: every acked seq appears once, reads are prefixes, the log validates",
      () =>
        atFresh((location) =>
          Effect.gen(function*() {
            const store = yield* SessionStore
            const id = uniqueIds("processes")
            const count = 25
            yield* store.create(headerFor(id))
            yield* store.append(id, [pluginEvent(0, { writer: "parent", n: 0 })], { expectedSeq: 0 })
            const reads = yield* Ref.make<Array<Array<string>>>([])
            const done = yield* Ref.make(false)
            const fs = yield* FileSystem.FileSystem
            const go = `${yield* fs.makeTempDirectoryScoped({ prefix: "store-contract-go-" })}/go`
            const started = yield* Effect.all(
              [startChild(durable.kind, location, id, count, 1, go), startChild(durable.kind, location, id, count, 1, go)],
              { concurrency: "unbounded" }
            )
            // both writers have opened their stores: release them together
            for (const child of started) yield* Deferred.await(child.ready)
            yield* fs.writeFileString(go, "go")
            const poller = yield* Effect.fork(
              Effect.gen(function*() {
                const r = yield* observe(id)
                yield* Ref.update(reads, (rs) => [...rs, r.lines])
                yield* Effect.sleep("10 millis")
                return yield* Ref.get(done)
              }).pipe(Effect.repeat({ until: (finished) => finished }))
            )
            const children = yield* Effect.all(started.map((c) => c.result), { concurrency: "unbounded" })
            yield* Ref.set(done, true)
            yield* Fiber.join(poller)
            for (const child of children) {
              assert.strictEqual(child.exitCode, 0, child.stderr)
              assert.strictEqual(child.stdout[0], "ready")
              assert.strictEqual(child.acks.length, count, child.stdout.join("\n"))
            }
            // at most one of the two first appends (both at expectedSeq 1) can win
            assert.isAtLeast(children[0].conflicts + children[1].conflicts, 1)
            const final = yield* other(location, Effect.flatMap(SessionStore, (s) => s.load(id)))
            assert.strictEqual(final.tornTail, undefined)
            assert.strictEqual(final.events.length, 1 + 2 * count)
            const acked = new Map<number, { readonly child: number; readonly n: number }>()
            children.forEach((child, c) =>
              child.acks.forEach((seq, n) => {
                assert.isFalse(acked.has(seq), `seq ${seq} acked twice`)
                acked.set(seq, { child: c, n })
              })
            )
            const writers = new Map<number, unknown>()
            for (let seq = 1; seq < final.events.length; seq++) {
              const owner = acked.get(seq)
              assert.isDefined(owner, `seq ${seq} stored but never acknowledged`)
              const e = final.events[seq] as Rec
              assert.strictEqual(e.seq, seq)
              const data = e.data as Rec
              assert.strictEqual(data.n, owner!.n)
              if (writers.has(owner!.child)) assert.strictEqual(data.writer, writers.get(owner!.child))
              else writers.set(owner!.child, data.writer)
            }
            assert.notStrictEqual(writers.get(0), writers.get(1))
            // every read is a prefix of every later read
            const all = [...(yield* Ref.get(reads)), linesOf(final.events)]
            for (let i = 1; i < all.length; i++) {
              assert.deepStrictEqual(all[i].slice(0, all[i - 1].length), all[i - 1], `read ${i} is not an extension`)
            }
            const inspected = yield* SessionLive.inspect(id)
            assert.strictEqual(inspected.events.length, 1 + 2 * count)
            assert.deepStrictEqual(inspected.closers, [])
          })
        ).pipe(Effect.provide(NodeContext.layer)),
      60_000
    )
  })
}

interface ChildResult {
  readonly exitCode: number
  readonly acks: ReadonlyArray<number>
  readonly conflicts: number
  readonly stdout: ReadonlyArray<string>
  readonly stderr: string
}

/**
 * `child-append.ts` bundled once per test process (esbuild, CommonJS: the native addons resolve
 * through NODE_PATH), so each child starts in a fraction of tsx's time; removed at exit.
 */
let childBundle: string | undefined
const childScript = (): string => {
  if (childBundle === undefined) {
    const dir = NodeFs.mkdtempSync(NodePath.join(NodeOs.tmpdir(), "store-contract-child-"))
    process.once("exit", () => NodeFs.rmSync(dir, { recursive: true, force: true }))
    childBundle = bundleScript("test/store-contract/child-append.ts", NodePath.join(dir, "child-append.cjs"))
  }
  return childBundle
}

/**
 * Start `child-append.ts` (the same as `npx tsx test/store-contract/child-append.ts ...`, bundled)
 * with a go barrier; `ready` completes when it has opened its store, `result` when it has exited.
 */
const startChild = (kind: string, location: string, id: string, count: number, startSeq: number, go: string) =>
  Effect.gen(function*() {
    const proc = yield* Command.start(
      Command.make(process.execPath, childScript(), kind, location, id, String(count), String(startSeq)).pipe(
        Command.env({ STORE_CONTRACT_GO: go, NODE_PATH: NodePath.join(repo, "node_modules") })
      )
    )
    const ready = yield* Deferred.make<void>()
    const stdout = proc.stdout.pipe(
      Stream.decodeText(),
      Stream.splitLines,
      Stream.tap((line) => line === "ready" ? Deferred.succeed(ready, undefined) : Effect.void),
      Stream.runCollect,
      Effect.map(Chunk.toReadonlyArray)
    )
    const stderr = proc.stderr.pipe(Stream.decodeText(), Stream.runFold("", (a, b) => a + b))
    const output = yield* Effect.fork(Effect.all([stdout, stderr, proc.exitCode], { concurrency: "unbounded" }))
    // a child that dies before `ready` must not hang the test
    yield* Effect.fork(Effect.zipRight(Fiber.await(output), Deferred.succeed(ready, undefined)))
    const result = Effect.map(Fiber.join(output), ([lines, err, exitCode]): ChildResult => {
      const acks: Array<number> = []
      let conflicts = 0
      for (const line of lines) {
        const [word, seq] = line.split(" ")
        if (word === "ack") acks.push(Number(seq))
        else if (word === "conflict") conflicts++
      }
      return { exitCode: Number(exitCode), acks, conflicts, stdout: lines, stderr: err }
    })
    return { ready, result }
  }).pipe(Effect.provide(NodeContext.layer))
