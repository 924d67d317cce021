/**
 * SPEC §3.4 family I at load (L), on hand-written JSONL v1 files — the rows the memory-store tests
 * of test/rules/request-header.test.ts cannot reach because store appends refuse them (I7, I8)
 * or that they check only through `SessionLive.open`: `SessionLive.inspect`, `verify` and `SessionLive.open`
 * report the rule wrapped by L9 and write nothing; `mode/set` in a v1 log is K10, unwrapped.
 * I10: a header with reasoning effort and adapter markers round-trips verbatim through JSONL and
 * SQLite reopens.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Path from "@effect/platform/Path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { verifySession } from "../../src/programs/Verify.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { assertError } from "../helpers/state.js"
import { fileText, fixture, turnStart, userMessage, writeRaw } from "../jsonl/helpers.js"

const cfg = { provider: "p", model: "m" }
const headerEvent = (seq: number, data: unknown) => ({ type: "request/header", seq, time: 1000 + seq, data })

const CASES: ReadonlyArray<readonly [string, string, unknown, string]> = [
  ["I1", "a pre-provider header", headerEvent(2, { header: { config: { model: "x" } }, reason: "initial" }), "RequestHeaderInvalid"],
  ["I2", "an empty reasoning effort", headerEvent(2, { header: { config: { ...cfg, reasoningEffort: "" } }, reason: "initial" }), "RequestHeaderInvalid"],
  ["I3", "adapterDefaults null", headerEvent(2, { header: { config: cfg, adapterDefaults: null }, reason: "initial" }), "RequestHeaderInvalid"],
  ["I4", "an unknown marker", headerEvent(2, { header: { config: { ...cfg, temperature: 1 }, adapterDefaults: { temperature: true } }, reason: "initial" }), "RequestHeaderInvalid"],
  ["I5", "a false marker", headerEvent(2, { header: { config: { ...cfg, maxTokens: 1 }, adapterDefaults: { maxTokens: false } }, reason: "initial" }), "RequestHeaderInvalid"],
  ["I6", "a marker of an absent field", headerEvent(2, { header: { config: cfg, adapterDefaults: { maxTokens: true } }, reason: "initial" }), "RequestHeaderInvalid"],
  ["I7", "reason fallback", headerEvent(2, { header: { config: cfg }, reason: "fallback" }), "RequestHeaderInvalid"],
  ["I8", "a request/header-delta event", { type: "request/header-delta", seq: 2, time: 1002, data: { base: 0 } }, "RequestHeaderInvalid"],
  ["I9", "an unknown reason", headerEvent(2, { header: { config: cfg }, reason: "retry" }), "RequestHeaderInvalid"]
]

describe("I1–I9 at load from a hand-written v1 JSONL file", () => {
  for (const [rule, name, bad, tag] of CASES) {
    it.scoped(`${rule}: ${name} at seq 2 is L9 wrapping ${rule} on inspect, verify and open; nothing is written`, () =>
      Effect.gen(function*() {
        const f = yield* fixture()
        yield* f.fs.makeDirectory(f.root, { recursive: true })
        const id = "h"
        const text = fileText(id, [turnStart(0), userMessage(1), bad])
        yield* writeRaw(f.fs, f.fileOf(id), text)
        const provideStore = Effect.provideService(SessionStore, f.store)
        // the backend read does not validate shapes
        assert.strictEqual((yield* f.store.load(id)).events.length, 3)
        const viaInspect = yield* Effect.flip(SessionLive.inspect(id).pipe(provideStore))
        assertError(viaInspect, { _tag: "StoreCorrupt", rule: "L9", seq: 2 })
        assertError((viaInspect as unknown as { cause: unknown }).cause, { _tag: tag, rule, seq: 2 })
        const viaOpen = yield* Effect.flip(Effect.scoped(SessionLive.open(id)).pipe(provideStore))
        assertError(viaOpen, { _tag: "StoreCorrupt", rule: "L9", seq: 2 })
        assertError((viaOpen as unknown as { cause: unknown }).cause, { _tag: tag, rule, seq: 2 })
        const report = yield* verifySession(id).pipe(provideStore)
        assert.deepStrictEqual(report.ok ? undefined : { ...report.error, message: "" }, {
          _tag: tag,
          rule,
          seq: 2,
          message: ""
        })
        assert.strictEqual(new TextDecoder().decode(yield* f.fs.readFile(f.fileOf(id))), text)
      }).pipe(Effect.provide(NodeContext.layer)))
  }

  it.scoped("K10: mode/set in a v1 log is LegacyFormRefused, not wrapped by L9", () =>
    Effect.gen(function*() {
      const f = yield* fixture()
      yield* f.fs.makeDirectory(f.root, { recursive: true })
      yield* writeRaw(f.fs, f.fileOf("m"), fileText("m", [turnStart(0), { type: "mode/set", seq: 1, time: 0, data: { mode: "plan" } }]))
      const e = yield* Effect.flip(Effect.scoped(SessionLive.open("m")).pipe(Effect.provideService(SessionStore, f.store)))
      assertError(e, { _tag: "LegacyFormRefused", rule: "K10", seq: 1, form: "mode/set" })
    }).pipe(Effect.provide(NodeContext.layer)))
})

describe("I10 round trip through durable backends", () => {
  const full = {
    header: {
      config: { provider: "p", model: "m", reasoningEffort: "high", maxTokens: 100, temperature: 0.25, stop: ["\n\n"] },
      adapterDefaults: { reasoningEffort: true, maxTokens: true },
      system: "sys ✓",
      tools: [{ name: "read", description: "reads", parameters: { type: "object", properties: { path: { type: "string" } } } }]
    },
    reason: "initial"
  }

  const roundTrip = (store: SessionStoreShape, reopen: Effect.Effect<SessionStoreShape, unknown, FileSystem.FileSystem | Path.Path | Scope.Scope>) =>
    Effect.gen(function*() {
      const id = "i10"
      const written = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id })
        const e = yield* s.append("request/header", full as never)
        return encodeEvent(e)
      }).pipe(Effect.provideService(SessionStore, store)))
      const again = yield* reopen
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open(id)
        const events = yield* s.events
        assert.strictEqual(encodeEvent(events[0] as Event), written)
        assert.deepStrictEqual(events[0].data, full)
        assert.deepStrictEqual(yield* s.requestHeader, full.header as never)
        assert.deepStrictEqual((yield* s.requestAt(0)).header, full.header as never)
      }).pipe(Effect.provideService(SessionStore, again)))
    })

  it.scoped("I10 through JSONL", () =>
    Effect.gen(function*() {
      const f = yield* fixture()
      yield* roundTrip(f.store, f.another())
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("I10 through SQLite", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const file = path.join(yield* fs.makeTempDirectoryScoped(), "s.db")
      yield* roundTrip(yield* makeSqliteStore({ filename: file }), makeSqliteStore({ filename: file }))
    }).pipe(Effect.provide(NodeContext.layer)))
})
