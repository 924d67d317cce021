/**
 * Resume with crash repair (SPEC §6 "where repair runs", §7.2 `SessionLive.open`/`inspect`, L8) on
 * memory, JSONL and SQLite: the torn tail is truncated, closers and the end-seed marker are
 * persisted, reopening writes nothing, `inspect` shows the same without writing, and a writer
 * that appends between open's read and its repair makes open fail and write nothing further.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { toJsonlText } from "../../src/layers/jsonl/JsonlStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { crashingTurn, scriptedTurn } from "../crash/script.js"
import { REPAIR_TEXT_NOT_STARTED, REPAIR_TEXT_OUTCOME_UNKNOWN } from "../../src/services/Repair.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { type Backend, type BackendName, makeBackend, platform } from "../crash/backends.js"
import * as Seed from "../../src/services/Seed.js"

const enc = new TextEncoder()

/** A closed scripted turn, then a turn that dies inside its first (recorded) tool call. */
const crashedSession = (id: string) =>
  Effect.scoped(Effect.gen(function*() {
    const s = yield* SessionLive.create({ id })
    yield* Effect.gen(function*() {
      yield* scriptedTurn(1, "List the files.", [
        { text: "Looking.", calls: [{ name: "list_files", args: { dir: "." }, result: "a.ts b.ts" }] },
        { text: "Two files." }
      ], "initial")
      yield* Effect.catchAllDefect(crashingTurn(2, Effect.dieMessage("killed in the tool body")), () => Effect.void)
    }).pipe(Effect.provideService(Session.Session, s))
    return yield* s.events
  }))

/** Run `effect` with `store` as the SessionStore. */
const on = (store: SessionStoreShape) => Effect.provideService(SessionStore, store)

const encodeAll = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

/** Append raw bytes to a JSONL session file (a torn final record). */
const tear = (b: Backend, id: string, fragment: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const file = b.location(id)
    const before = yield* fs.readFile(file)
    const bytes = new Uint8Array(before.length + enc.encode(fragment).length)
    bytes.set(before)
    bytes.set(enc.encode(fragment), before.length)
    yield* fs.writeFile(file, bytes)
  })

const TORN = `{"type":"tool/result","seq":99,"time":1,"data":{"turn":2,"step":1,"message":{"id":"x","role":"us`

const suite = (name: BackendName) =>
  describe(`repair on open: ${name}`, () => {
    it.scoped("inspect shows the closers (results, step/end, turn/end) and the torn tail without writing (L8)", () =>
      Effect.gen(function*() {
        const b = yield* makeBackend(name)
        const written = yield* crashedSession("s").pipe(on(b.store))
        if (name === "jsonl") yield* tear(b, "s", TORN)
        const before = yield* b.fingerprint("s")
        const view = yield* SessionLive.inspect("s").pipe(on(b.store))
        assert.strictEqual(yield* b.fingerprint("s"), before)
        assert.deepStrictEqual(encodeAll(view.events.slice(0, written.length)), encodeAll(written))
        const n = written.length
        assert.deepStrictEqual(view.closers.map((e) => e.type), ["tool/result", "tool/result", "step/end", "turn/end"])
        const [r1, r2] = view.closers.map((e) => e.data as any)
        const callSeq = written.findIndex((e) => e.type === "tool/call" && (e.data as any).callId === "call-2-1-1")
        assert.strictEqual(r1.message.id, `interrupted-tool-result-call-2-1-1-${n}`)
        assert.strictEqual(r1.error.code, "TOOL_OUTCOME_UNKNOWN")
        assert.strictEqual(r1.message.content[0].content[0].text, REPAIR_TEXT_OUTCOME_UNKNOWN)
        assert.deepStrictEqual(view.closers[0].sourceEventSeqs, [callSeq])
        assert.strictEqual(r2.message.id, `interrupted-tool-result-call-2-1-2-${n + 1}`)
        assert.strictEqual(r2.error.code, "TOOL_NOT_STARTED")
        assert.strictEqual(r2.message.content[0].content[0].text, REPAIR_TEXT_NOT_STARTED)
        assert.isUndefined(view.closers[1].sourceEventSeqs)
        for (const c of view.closers) assert.strictEqual(c.time, written[n - 1].time)
        if (name === "jsonl") assert.deepStrictEqual(view.tornTail?.fromSeq, n)
        else assert.isUndefined(view.tornTail)
      }).pipe(Effect.provide(platform)))

    it.scoped("open truncates the torn tail and persists closers plus the end-seed marker; the log validates", () =>
      Effect.gen(function*() {
        const b = yield* makeBackend(name)
        const written = yield* crashedSession("s").pipe(on(b.store))
        if (name === "jsonl") yield* tear(b, "s", TORN)
        const view = yield* SessionLive.inspect("s").pipe(on(b.store))
        const handle = yield* SessionLive.open("s").pipe(on(b.store))
        const events = yield* handle.events
        const n = written.length
        assert.strictEqual(events.length, n + 5)
        assert.deepStrictEqual(encodeAll(events.slice(0, n + 4)), encodeAll(view.events))
        assert.strictEqual(events[n + 4].type, "session/end-seed")
        assert.strictEqual(handle.firstLiveSeq, n + 4)
        // exactly what the handle holds is stored, and nothing torn remains
        const loaded = yield* b.store.load("s")
        assert.isUndefined(loaded.tornTail)
        assert.deepStrictEqual(encodeAll(loaded.events), encodeAll(events))
        if (name === "jsonl") {
          const fs = yield* FileSystem.FileSystem
          assert.strictEqual(yield* fs.readFileString(b.location("s")), toJsonlText(handle.header, events))
        }
        // every tool call has exactly one result, and no turn is open
        const calls = events.filter((e) => e.type === "assistant/message").flatMap((e) =>
          ((e.data as any).message.content as Array<any>).filter((c) => c.type === "tool-call").map((c) => c.id)
        )
        const results = events.filter((e) => e.type === "tool/result").map((e) => (e.data as any).message.source.callId)
        assert.deepStrictEqual([...results].sort(), [...calls].sort())
        yield* Seed.validateSeed(events.map((e) => JSON.parse(encodeEvent(e))))
        // a fresh store instance reads the same log (it is durable, not just cached)
        const other = yield* b.another
        assert.deepStrictEqual(encodeAll((yield* other.load("s")).events), encodeAll(events))
      }).pipe(Effect.provide(platform)))

    it.scoped("reopening is idempotent: the second open writes nothing (bytes / rows unchanged)", () =>
      Effect.gen(function*() {
        const b = yield* makeBackend(name)
        yield* crashedSession("s").pipe(on(b.store))
        if (name === "jsonl") yield* tear(b, "s", TORN)
        const first = yield* Effect.scoped(Effect.flatMap(SessionLive.open("s").pipe(on(b.store)), (h) => h.events))
        const after = yield* b.fingerprint("s")
        const second = yield* Effect.scoped(Effect.flatMap(SessionLive.open("s").pipe(on(b.store)), (h) => h.events))
        assert.strictEqual(yield* b.fingerprint("s"), after)
        assert.deepStrictEqual(encodeAll(second), encodeAll(first))
        // a fresh instance (another process) also adds nothing
        const other = yield* b.another
        yield* Effect.scoped(SessionLive.open("s").pipe(on(other)))
        assert.strictEqual(yield* b.fingerprint("s"), after)
        const view = yield* SessionLive.inspect("s").pipe(on(b.store))
        assert.deepStrictEqual(view.closers, [])
        assert.isUndefined(view.tornTail)
      }).pipe(Effect.provide(platform)))

    it.scoped("L8 another writer appends between open's read and its repair: AppendConflict, nothing further written", () =>
      Effect.gen(function*() {
        const b = yield* makeBackend(name)
        const written = yield* crashedSession("s").pipe(on(b.store))
        const other = yield* b.another
        const n = written.length
        const intruder = { type: "todo/write", seq: n, time: 7, data: { todos: [{ content: "other", status: "pending" }] } }
        // open's store: right after `load` returns, another writer appends through its own instance
        const racing: SessionStoreShape = {
          ...b.store,
          load: (id) =>
            Effect.tap(b.store.load(id), () => Effect.orDie(other.append(id, [intruder as unknown as Event], { expectedSeq: n })))
        }
        const e = yield* Effect.flip(Effect.scoped(SessionLive.open("s").pipe(on(racing))))
        assert.strictEqual(e._tag, "AppendConflict")
        const loaded = yield* other.load("s")
        assert.deepStrictEqual(encodeAll(loaded.events), [...encodeAll(written), encodeEvent(intruder as unknown as Event)])
        // inspect now sees the open turn still open after the intruder's event and proposes closers from there
        const view = yield* SessionLive.inspect("s").pipe(on(b.store))
        assert.strictEqual(view.closers[0].seq, n + 1)
      }).pipe(Effect.provide(platform)))

    if (name === "jsonl") {
      it.scoped("L8 a concurrent open repairs the torn tail first: this open fails and writes nothing further", () =>
        Effect.gen(function*() {
          const b = yield* makeBackend(name)
          yield* crashedSession("s").pipe(on(b.store))
          yield* tear(b, "s", TORN)
          const other = yield* b.another
          let otherRepaired = ""
          const racing: SessionStoreShape = {
            ...b.store,
            load: (id) =>
              Effect.tap(b.store.load(id), () =>
                Effect.scoped(SessionLive.open(id).pipe(on(other))).pipe(
                  Effect.orDie,
                  Effect.zipRight(Effect.flatMap(b.fingerprint(id), (f) => Effect.sync(() => void (otherRepaired = f))))
                ))
          }
          const e = yield* Effect.flip(Effect.scoped(SessionLive.open("s").pipe(on(racing))))
          assert.strictEqual(e._tag, "AppendConflict")
          assert.strictEqual((e as { rule: string }).rule, "L8")
          assert.strictEqual(yield* b.fingerprint("s"), otherRepaired)
        }).pipe(Effect.provide(platform)))

      it.scoped("a torn tail after a closed turn: only truncated, no closers, then the marker", () =>
        Effect.gen(function*() {
          const b = yield* makeBackend(name)
          const written = yield* Effect.scoped(Effect.gen(function*() {
            const s = yield* SessionLive.create({ id: "s" })
            yield* scriptedTurn(1, "hi", [{ text: "hello" }], "initial").pipe(Effect.provideService(Session.Session, s))
            return yield* s.events
          })).pipe(on(b.store))
          yield* tear(b, "s", `{"type":"turn/start","seq":`)
          const h = yield* SessionLive.open("s").pipe(on(b.store))
          const events = yield* h.events
          assert.deepStrictEqual(encodeAll(events.slice(0, -1)), encodeAll(written))
          assert.deepStrictEqual(events[events.length - 1].type, "session/end-seed")
        }).pipe(Effect.provide(platform)))
    }
  })

suite("memory")
suite("jsonl")
suite("sqlite")
