/**
 * SPEC §5.3–§5.4 property: random sequences of model requests (header changes, context changes,
 * declared series), surface replacements, ordinary appends and reopens (`SessionLive.open` = a new
 * loop instance) produce exactly the snapshots R1–R8 prescribe, as computed by an independent
 * model; and `requestAt(seq)` after a cold reopen from JSONL and SQLite equals what the live
 * handle gave for every seq (and, at every request, the request the model says is in force).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Path from "@effect/platform/Path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import type * as Scope from "effect/Scope"
import { layer as snapshotterLayer } from "../../src/layers/session/HeaderSnapshotterLive.js"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodeJson, type Json } from "../../src/schema/Json.js"
import type { RequestContext, RequestHeader } from "../../src/schema/RequestHeader.js"
import { HeaderSnapshotter } from "../../src/services/HeaderSnapshotter.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { runs } from "../suites.js"

// ---------------------------------------------------------------------------------------------
// Arbitraries: a small value space, so equal and non-canonical-but-equal headers recur often

const TOOL_A = { name: "a", description: "tool a", parameters: { type: "object" } }
const TOOL_B = { name: "b", description: "tool b", parameters: { type: "object", properties: {} } }

const headerArb: fc.Arbitrary<RequestHeader> = fc.record({
  provider: fc.constantFrom("p", "q"),
  model: fc.constantFrom("m", "n"),
  maxTokens: fc.constantFrom(undefined, 64),
  marker: fc.boolean(),
  stop: fc.constantFrom(undefined, [], ["x"]),
  system: fc.constantFrom(undefined, "", "sys"),
  tools: fc.constantFrom(undefined, [], [TOOL_A], [TOOL_A, TOOL_B], [TOOL_B, TOOL_A]),
  emptyMarkers: fc.boolean()
}).map((r) => {
  const config: Record<string, unknown> = { provider: r.provider, model: r.model }
  if (r.maxTokens !== undefined) config.maxTokens = r.maxTokens
  if (r.stop !== undefined) config.stop = r.stop
  const h: Record<string, unknown> = { config }
  if (r.maxTokens !== undefined && r.marker) h.adapterDefaults = { maxTokens: true }
  else if (r.emptyMarkers) h.adapterDefaults = {}
  if (r.system !== undefined) h.system = r.system
  if (r.tools !== undefined) h.tools = r.tools
  return h as unknown as RequestHeader
})

const contextArb: fc.Arbitrary<RequestContext | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.record({ provider: fc.constantFrom("p", "q"), model: fc.constant("m"), window: fc.constantFrom(undefined, 100, 200) })
    .map((r) => r.window === undefined ? { provider: r.provider, model: r.model } : { provider: r.provider, model: r.model, contextWindow: r.window })
)

/** The same header with non-canonical noise that §5.1 removes (system "", tools [], adapterDefaults {}). */
const noisy = (h: RequestHeader): RequestHeader => {
  const out: Record<string, unknown> = { ...h }
  if (h.system === undefined) out.system = ""
  if (h.tools === undefined) out.tools = []
  if (h.adapterDefaults === undefined) out.adapterDefaults = {}
  return out as unknown as RequestHeader
}

type Command =
  | { readonly _tag: "request"; readonly pick: number; readonly noisy: boolean; readonly context: RequestContext | undefined; readonly newSeries: boolean }
  | { readonly _tag: "replace"; readonly pick: number }
  | { readonly _tag: "append"; readonly logOnly: boolean }
  | { readonly _tag: "reopen" }

const commandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({ pick: fc.nat(5), noisy: fc.boolean(), context: contextArb, newSeries: fc.boolean() })
      .map((r) => ({ _tag: "request" as const, ...r }))
  },
  { weight: 2, arbitrary: fc.nat(20).map((pick) => ({ _tag: "replace" as const, pick })) },
  { weight: 2, arbitrary: fc.boolean().map((logOnly) => ({ _tag: "append" as const, logOnly })) },
  { weight: 1, arbitrary: fc.constant({ _tag: "reopen" as const }) }
)

/** A small pool of headers per run (so unchanged headers recur) and the commands over it. */
const scenarioArb = fc.record({
  pool: fc.array(headerArb, { minLength: 1, maxLength: 3 }),
  commands: fc.array(commandArb, { minLength: 1, maxLength: 25 })
})

// ---------------------------------------------------------------------------------------------
// The independent model of §5.1–§5.3

/** A key that two headers share exactly when §5.2 calls them equal. */
const equalityKey = (h: RequestHeader): string => {
  const c = h.config
  return JSON.stringify([
    c.provider,
    c.model,
    c.reasoningEffort ?? null,
    c.temperature ?? null,
    c.maxTokens ?? null,
    c.stop === undefined ? "<absent>" : c.stop,
    h.adapterDefaults?.reasoningEffort === true,
    h.adapterDefaults?.maxTokens === true,
    typeof h.system === "string" && h.system !== "" ? h.system : null,
    (h.tools ?? []).map((t) => JSON.stringify(t))
  ])
}

/** The canonical snapshot as the model expects it in the log. */
const expectedCanonical = (h: RequestHeader): Record<string, unknown> => {
  const out: Record<string, unknown> = { config: h.config }
  if (h.adapterDefaults?.maxTokens === true || h.adapterDefaults?.reasoningEffort === true) out.adapterDefaults = h.adapterDefaults
  if (typeof h.system === "string" && h.system !== "") out.system = h.system
  if (h.tools !== undefined && h.tools.length > 0) out.tools = h.tools
  return out
}

interface Model {
  latest: RequestHeader | undefined
  context: RequestContext | undefined
  replacedSinceHeader: boolean
  firstOfInstance: boolean
  snapshots: Array<{ header: unknown; reason: string }>
}

/** What the model says `record` appends (as [type, data] pairs), updating the model. */
const step = (
  m: Model,
  cmd: { readonly header: RequestHeader; readonly context: RequestContext | undefined; readonly newSeries: boolean }
): Array<readonly [string, unknown]> => {
  const out: Array<readonly [string, unknown]> = []
  let reason: string | undefined
  if (m.firstOfInstance) reason = m.latest === undefined ? "initial" : "resume"
  else if (m.latest === undefined || equalityKey(m.latest) !== equalityKey(cmd.header)) reason = "change"
  else if (cmd.newSeries || m.replacedSinceHeader) reason = "series"
  if (reason !== undefined) {
    const data = { header: expectedCanonical(cmd.header), reason }
    out.push(["request/header", data])
    m.snapshots.push(data)
    m.latest = cmd.header
    m.replacedSinceHeader = false
  }
  m.firstOfInstance = false
  const c = cmd.context
  if (
    c !== undefined &&
    (m.context === undefined || m.context.provider !== c.provider || m.context.model !== c.model ||
      m.context.contextWindow !== c.contextWindow)
  ) {
    out.push(["request/context", c])
    m.context = c
  }
  return out
}

const json = (v: unknown) => encodeJson(v as Json)

// ---------------------------------------------------------------------------------------------
// The run

interface Backend {
  readonly name: string
  /** A fresh store and a way to open another instance over the same storage (a cold reopen). */
  readonly make: Effect.Effect<
    { readonly store: SessionStoreShape; readonly reopen: Effect.Effect<SessionStoreShape, unknown, Scope.Scope> },
    unknown,
    Scope.Scope | FileSystem.FileSystem | Path.Path
  >
  readonly runs: number
}

const BACKENDS: ReadonlyArray<Backend> = [
  {
    name: "memory",
    runs: runs(60),
    make: Effect.map(makeMemoryStore(), (store) => ({ store, reopen: Effect.succeed(store) }))
  },
  {
    name: "JSONL",
    runs: runs(15),
    make: Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = path.join(yield* fs.makeTempDirectoryScoped(), "store")
      const store = yield* makeJsonlStore({ root })
      const reopen = makeJsonlStore({ root }).pipe(
        Effect.provideService(FileSystem.FileSystem, fs),
        Effect.provideService(Path.Path, path)
      )
      return { store, reopen }
    })
  },
  {
    name: "SQLite",
    runs: runs(15),
    make: Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const filename = path.join(yield* fs.makeTempDirectoryScoped(), "s.db")
      const store = yield* makeSqliteStore({ filename })
      return { store, reopen: makeSqliteStore({ filename }) }
    })
  }
]

let counter = 0

describe("R1–R8 property against an independent model", () => {
  for (const backend of BACKENDS) {
    it.scoped.prop(
      `${backend.name}: random requests, replacements, series, reopens and appends write exactly the prescribed snapshots; requestAt survives a cold reopen`,
      [scenarioArb],
      ([{ commands, pool }]) =>
        Effect.gen(function*() {
          const snap = yield* HeaderSnapshotter
          const { reopen, store } = yield* backend.make
          const id = `prop-${++counter}`
          const m: Model = { latest: undefined, context: undefined, replacedSinceHeader: false, firstOfInstance: true, snapshots: [] }
          const withStore = Effect.provideService(SessionStore, store)
          let session = yield* SessionLive.create({ id }).pipe(withStore)
          let msg = 0
          /** requestAt on the live handle, per seq, as JSON (filled as the log grows). */
          const live: Array<string> = []
          const captureLive = Effect.gen(function*() {
            const events = yield* session.events
            for (let seq = live.length; seq < events.length; seq++) live.push(json(yield* session.requestAt(seq)))
          })
          for (const cmd of commands) {
            switch (cmd._tag) {
              case "request": {
                const base = pool[cmd.pick % pool.length]
                const header = cmd.noisy ? noisy(base) : base
                const firstOfInstance = m.firstOfInstance
                const expected = step(m, { header, context: cmd.context, newSeries: cmd.newSeries })
                const written = yield* snap.record(session, { header, firstOfInstance, ...planExtras(cmd) })
                assert.deepStrictEqual(written.map((e) => [e.type, json(e.data)]), expected.map(([t, d]) => [t, json(d)]))
                // the request dispatched now: the model's latest header and context, the handle's messages
                const events = yield* session.events
                const at = yield* session.requestAt(events.length - 1)
                assert.strictEqual(json(at.header), json(m.latest === undefined ? undefined : expectedCanonical(m.latest)))
                assert.strictEqual(json(at.context), json(m.context))
                assert.strictEqual(json(at.messages), json(yield* session.messages))
                break
              }
              case "replace": {
                const nodes = yield* session.surface.nodes
                if (nodes.length === 0) break
                const target = nodes[cmd.pick % nodes.length]
                yield* session.appendUnknown("user/message", {
                  id: `sum-${++msg}`,
                  role: "user",
                  content: [{ type: "text", text: "summary" }],
                  source: { kind: "plugin", plugin: "compact" }
                }, { surfaceOp: { op: "replace", start: target, end: target }, sourceEventSeqs: [target] })
                m.replacedSinceHeader = true
                break
              }
              case "append": {
                if (cmd.logOnly) yield* session.append("todo/write", { todos: [] })
                else {
                  yield* session.appendUnknown("user/message", {
                    id: `u-${++msg}`,
                    role: "user",
                    content: [{ type: "text", text: `message ${msg}` }],
                    source: { kind: "user" }
                  }, { surfaceOp: "append" })
                }
                break
              }
              case "reopen": {
                yield* captureLive
                yield* session.close
                session = yield* SessionLive.open(id).pipe(withStore)
                m.firstOfInstance = true
                break
              }
            }
            yield* captureLive
          }
          // exactly the prescribed snapshots, in order
          const events = yield* session.events
          assert.deepStrictEqual(
            events.filter((e) => e.type === "request/header").map((e) => json(e.data)),
            m.snapshots.map(json)
          )
          yield* session.close
          // nothing was ever written: the id is registered only in the first store instance (lazy create)
          if (live.length === 0) return
          // a cold reopen from another store instance: requestAt equals the live handle's at every seq
          const cold = yield* reopen
          const reopened = yield* SessionLive.open(id).pipe(Effect.provideService(SessionStore, cold))
          const reEvents = yield* reopened.events
          assert.isAtLeast(reEvents.length, live.length)
          for (let seq = 0; seq < live.length; seq++) {
            assert.strictEqual(json(yield* reopened.requestAt(seq)), live[seq], `requestAt(${seq})`)
          }
        }).pipe(Effect.provide(snapshotterLayer), Effect.provide(NodeContext.layer)),
      { fastCheck: { numRuns: backend.runs } }
    )
  }
})

/** The optional plan fields of a request command. */
const planExtras = (cmd: Extract<Command, { _tag: "request" }>) => ({
  ...(cmd.context === undefined ? {} : { context: cmd.context }),
  ...(cmd.newSeries ? { newSeries: true } : {})
})
