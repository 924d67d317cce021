/**
 * JSONL read path (SPEC §7.4.4, §8.2 step 1): torn tails (L1, L3) and their repair by
 * SessionLive.open, committed-region defects (L2), header rules (L5, K4, K5, K6, J15), identity
 * (L6), over-long lines (L7), lossless failures of committed records (L9) and chunked streaming.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { layerJsonlStore, makeJsonlStore, readJsonlFile } from "../../src/layers/jsonl/JsonlStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { bytes, fileText, fixture, header, line, turn, turnEnd, turnStart, userMessage, writeRaw } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)
const enc = new TextEncoder()
const rule = (e: unknown) => (e as { rule?: string }).rule

/** Write `content` as the stored file of `id` (root created). */
const stored = (id: string, content: string | Uint8Array, options: Parameters<typeof fixture>[0] = {}) =>
  Effect.gen(function*() {
    const f = yield* fixture(options)
    yield* f.fs.makeDirectory(f.root, { recursive: true })
    yield* writeRaw(f.fs, f.fileOf(id), content)
    return f
  })

const prefixText = fileText("t", [turnStart(0), userMessage(1)])

const tornCases: ReadonlyArray<{
  readonly name: string
  readonly tail: Uint8Array
  readonly reason: string
}> = [
  { name: "a final record without trailing newline", tail: enc.encode(JSON.stringify(turnEnd(2))), reason: "fragment" },
  { name: "a partial record", tail: enc.encode("{\"partial"), reason: "fragment" },
  {
    name: "a cut multi-byte character",
    tail: bytes(JSON.stringify(userMessage(2, "caf")).slice(0, 60), [0xc3]),
    reason: "fragment"
  },
  { name: "a run of NUL bytes", tail: new Uint8Array(64), reason: "fragment" },
  { name: "a terminated line of invalid UTF-8", tail: bytes("{\"type\":\"x\"", [0xff, 0xfe], "}\n"), reason: "unparsable" },
  { name: "a terminated unparsable line", tail: enc.encode("{\"type\":\n"), reason: "unparsable" },
  { name: "a terminated non-object", tail: enc.encode("[1,2]\n"), reason: "not-object" },
  { name: "a seq gap", tail: enc.encode(line(turnEnd(5))), reason: "seq-gap" }
]

describe("JsonlStore torn tails (L1, L3)", () => {
  for (const c of tornCases) {
    it.scoped(`L1/L3: ${c.name} is a torn tail; load never mutates; SessionLive.open truncates and repairs`, () =>
      Effect.gen(function*() {
        const content = bytes(prefixText, c.tail)
        const { fs, fileOf, root, store } = yield* stored("t", content)
        const loaded = yield* store.load("t")
        assert.strictEqual(loaded.events.length, 2)
        assert.deepStrictEqual(loaded.tornTail, {
          fromSeq: 2,
          reason: c.reason as "fragment",
          position: enc.encode(prefixText).length
        })
        assert.deepStrictEqual(yield* fs.readFile(fileOf("t")), content)
        // L1: a store append onto a torn tail fails
        const append = yield* Effect.flip(store.append("t", [turnEnd(2)], { expectedSeq: 2 }))
        assert.strictEqual(append._tag, "AppendConflict")
        assert.strictEqual(rule(append), "L1")
        assert.deepStrictEqual(yield* fs.readFile(fileOf("t")), content)
        // inspect never writes either
        yield* SessionLive.inspect("t").pipe(Effect.provide(layerJsonlStore({ root })))
        assert.deepStrictEqual(yield* fs.readFile(fileOf("t")), content)
        // SessionLive.open truncates the torn tail and appends the closers
        const events = yield* Effect.scoped(Effect.flatMap(SessionLive.open("t"), (s) => s.events)).pipe(
          Effect.provide(layerJsonlStore({ root }))
        )
        const after = yield* fs.readFileString(fileOf("t"))
        assert.isTrue(after.startsWith(prefixText))
        assert.strictEqual(after, prefixText + events.slice(2).map((e) => encodeEvent(e) + "\n").join(""))
        const reloaded = yield* store.load("t")
        assert.isUndefined(reloaded.tornTail)
        assert.strictEqual(reloaded.events.length, events.length)
      }).pipe(provide))
  }

  it.scoped("L8: truncateTornTail with a stale revision or another torn point is AppendConflict and changes nothing", () =>
    Effect.gen(function*() {
      const content = bytes(prefixText, "{\"partial")
      const { fs, fileOf, store } = yield* stored("t", content)
      const loaded = yield* store.load("t")
      const torn = loaded.tornTail!
      const stale = yield* Effect.flip(store.truncateTornTail("t", torn, { revision: "0:0" }))
      assert.strictEqual(rule(stale), "L8")
      const moved = yield* Effect.flip(
        store.truncateTornTail("t", { ...torn, position: torn.position - 1 }, { revision: loaded.revision })
      )
      assert.strictEqual(rule(moved), "L8")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("t")), content)
      yield* store.truncateTornTail("t", torn, { revision: loaded.revision })
      assert.strictEqual(yield* fs.readFileString(fileOf("t")), prefixText)
      // the store's state follows: the next append continues at seq 2
      yield* store.append("t", [turnEnd(2)], { expectedSeq: 2 })
      assert.strictEqual((yield* store.load("t")).events.length, 3)
    }).pipe(provide))

  it.scoped("L2: a defect followed by a later turn/end is StoreCorrupt naming file and line; nothing modified", () =>
    Effect.gen(function*() {
      const content = prefixText + "garbage\n" + line(turnEnd(2)) + line(turnStart(3, 2))
      const { fs, fileOf, root, store } = yield* stored("t", content)
      const err = yield* Effect.flip(store.load("t"))
      assert.strictEqual(err._tag, "StoreCorrupt")
      assert.strictEqual(rule(err), "L2")
      assert.strictEqual((err as { line?: number }).line, 4)
      assert.strictEqual((err as { location?: string }).location, fileOf("t"))
      const open = yield* Effect.flip(Effect.scoped(SessionLive.open("t")).pipe(Effect.provide(layerJsonlStore({ root }))))
      assert.strictEqual(rule(open), "L2")
      const append = yield* Effect.flip(store.append("t", [turnEnd(2)], { expectedSeq: 2 }))
      assert.strictEqual(rule(append), "L2")
      assert.strictEqual(yield* fs.readFileString(fileOf("t")), content)
    }).pipe(provide))

  it.scoped("L2: a seq gap before a later turn/end (even an unterminated one) is corruption", () =>
    Effect.gen(function*() {
      const content = prefixText + line(turnStart(7)) + JSON.stringify(turnEnd(8))
      const { store } = yield* stored("t", content)
      const err = yield* Effect.flip(store.load("t"))
      assert.strictEqual(rule(err), "L2")
      assert.strictEqual((err as { line?: number }).line, 4)
    }).pipe(provide))

  it.scoped("L3: a defect followed by later non-turn/end records is a torn tail from the defect", () =>
    Effect.gen(function*() {
      const content = prefixText + "garbage\n" + line(userMessage(3))
      const { store } = yield* stored("t", content)
      const loaded = yield* store.load("t")
      assert.strictEqual(loaded.tornTail?.reason, "unparsable")
      assert.strictEqual(loaded.tornTail?.position, enc.encode(prefixText).length)
    }).pipe(provide))

  it.scoped("L9: a committed-looking record that fails the lossless walk is StoreCorrupt", () =>
    Effect.gen(function*() {
      const content = prefixText + "{\"type\":\"turn/end\",\"seq\":2,\"time\":1,\"data\":{\"turn\":1,\"x\":-0,\"reason\":{\"kind\":\"completed\"}}}\n"
      const { store } = yield* stored("t", content)
      const err = yield* Effect.flip(store.load("t"))
      assert.strictEqual(err._tag, "StoreCorrupt")
      assert.strictEqual(rule(err), "L9")
      assert.strictEqual((err as { seq?: number }).seq, 2)
    }).pipe(provide))
})

describe("JsonlStore header rules", () => {
  const corruptCases: ReadonlyArray<readonly [string, string, string]> = [
    ["L5", "an empty file", ""],
    ["L5", "a header line that is not JSON", "{\"type\":\"session\",\n"],
    ["L5", "a first line that is not a session record", line(turnStart(0))],
    ["L5", "a header without a newline", JSON.stringify({ type: "session", ...header("h") })],
    ["L5", "a header preceded by a byte-order mark", "\ufeff" + line({ type: "session", ...header("h") })],
    ["K5", "a first line that is JSON but not an object (42)", "42\n" + line(turnStart(0))],
    ["K5", "a first line that is an array", "[1]\n"]
  ]
  for (const [id, name, content] of corruptCases) {
    it.scoped(`${id}: ${name} is StoreCorrupt`, () =>
      Effect.gen(function*() {
        const { store } = yield* stored("h", content)
        const err = yield* Effect.flip(store.load("h"))
        assert.strictEqual(err._tag, "StoreCorrupt")
        assert.strictEqual(rule(err), id)
      }).pipe(provide))
  }

  it.scoped("K4: version 7 with an alien rest is refused as K1 (newer) before any shape check; -1 as K2", () =>
    Effect.gen(function*() {
      const content = line({ version: 7, id: "h", type: "alien", frobs: [1, 2, 3] }) + "%%% alien body %%%\n\u0000"
      const { fileOf, store } = yield* stored("h", content)
      const err = yield* Effect.flip(store.load("h"))
      assert.strictEqual(err._tag, "FormatUnsupported")
      assert.strictEqual(rule(err), "K1")
      assert.strictEqual((err as { direction?: string }).direction, "newer")
      assert.strictEqual((err as { found?: unknown }).found, 7)
      assert.strictEqual((err as { location?: string }).location, fileOf("h"))
      // even without a newline and with an unknown key
      const { store: s2 } = yield* stored("h", JSON.stringify({ version: 2, bogus: true }))
      assert.strictEqual((yield* Effect.flip(s2.load("h")))._tag, "FormatUnsupported")
      // negative versions are older (no upgrade path)
      const { store: s3 } = yield* stored("h", line({ type: "session", version: -1, id: "h", createdAt: 0 }))
      const older = yield* Effect.flip(s3.load("h"))
      assert.strictEqual((older as { direction?: string }).direction, "older")
      assert.strictEqual(rule(older), "K2")
    }).pipe(provide))

  it.scoped("K6: a K4 refusal of a header whose id is not a string names the stringified id", () =>
    Effect.gen(function*() {
      const { store } = yield* stored("h", line({ type: "session", version: 9, id: 42 }))
      const err = yield* Effect.flip(store.load("h"))
      assert.strictEqual(err._tag, "FormatUnsupported")
      assert.strictEqual((err as { sessionId?: string }).sessionId, "42")
      assert.match(err.message, /"42"/)
    }).pipe(provide))

  it.scoped("K3 input: a version-0 header loads with storedVersion 0 (upgraded later by the pipeline)", () =>
    Effect.gen(function*() {
      const { store } = yield* stored("h", fileText("h", [turnStart(0)], { version: 0, delegationDepth: 0 }))
      const loaded = yield* store.load("h")
      assert.strictEqual(loaded.storedVersion, 0)
      assert.strictEqual(loaded.events.length, 1)
    }).pipe(provide))

  const j15: ReadonlyArray<readonly [string, Record<string, unknown>]> = [
    ["J9", { delegationDepth: "1" }],
    ["J9", { delegationDepth: 1.5 }],
    ["J9", { delegationDepth: -1 }],
    ["J4", { createdAt: 1.5 }],
    ["J4", { createdAt: -3 }],
    ["J4", { createdAt: Number.MAX_SAFE_INTEGER + 2 }],
    ["J8", { origin: "fork" }],
    ["J10", { agentPreset: 3 }],
    ["J16", { sandboxMode: "x" }],
    ["J16", { approvalPolicy: "x" }],
    ["J16", { extra: 1 }]
  ]
  for (const [id, fields] of j15) {
    it.scoped(`J15/${id}: header line ${JSON.stringify(fields)} is SessionHeaderInvalid`, () =>
      Effect.gen(function*() {
        const { store } = yield* stored("h", fileText("h", [], fields))
        const err = yield* Effect.flip(store.load("h"))
        assert.strictEqual(err._tag, "SessionHeaderInvalid")
        assert.strictEqual(rule(err), id)
      }).pipe(provide))
  }

  it.scoped("J15/J11: -0 in createdAt or delegationDepth is SessionHeaderInvalid J11; a missing delegationDepth is valid", () =>
    Effect.gen(function*() {
      for (const field of ["createdAt", "delegationDepth"]) {
        const text = `{"type":"session","version":1,"id":"h","createdAt":5,"${field}":-0}\n`.replace(
          "\"createdAt\":5,\"createdAt\"",
          "\"createdAt\""
        )
        const { store } = yield* stored("h", text)
        const err = yield* Effect.flip(store.load("h"))
        assert.strictEqual(err._tag, "SessionHeaderInvalid")
        assert.strictEqual(rule(err), "J11")
      }
      const { store } = yield* stored("h", fileText("h", []))
      assert.strictEqual((yield* store.load("h")).header.delegationDepth, undefined)
    }).pipe(provide))

  it.scoped("L6: a renamed file (header id differs) is SessionNotFound; readJsonlFile reads it by path", () =>
    Effect.gen(function*() {
      const content = fileText("a", [turnStart(0)])
      const { fileOf, store } = yield* stored("b", content)
      const err = yield* Effect.flip(store.load("b"))
      assert.strictEqual(err._tag, "SessionNotFound")
      assert.strictEqual(rule(err), "L6")
      const direct = yield* readJsonlFile(fileOf("b"))
      assert.strictEqual(direct.header.id, "a")
      assert.strictEqual(direct.events.length, 1)
      const expected = yield* Effect.flip(readJsonlFile(fileOf("b"), { expectedId: "b" }))
      assert.strictEqual(rule(expected), "L6")
      assert.deepStrictEqual(yield* store.list(), [])
      const missing = yield* Effect.flip(readJsonlFile(fileOf("nope")))
      assert.strictEqual(missing._tag, "StoreFailure")
    }).pipe(provide))

  it.scoped("L11: load of an unknown id is SessionNotFound", () =>
    Effect.gen(function*() {
      const { store } = yield* fixture()
      const err = yield* Effect.flip(store.load("ghost"))
      assert.strictEqual(rule(err), "L11")
    }).pipe(provide))
})

describe("JsonlStore line framing", () => {
  const small = { maxLineBytes: 256, maxEventBytes: 200 }

  it.scoped("L7: a newline-terminated line longer than maxLineBytes is StoreCorrupt wherever it is", () =>
    Effect.gen(function*() {
      const long = line(userMessage(2, "x".repeat(400)))
      const content = prefixText + long + line(turnEnd(3))
      const { store } = yield* stored("t", content, small)
      const err = yield* Effect.flip(store.load("t"))
      assert.strictEqual(err._tag, "StoreCorrupt")
      assert.strictEqual(rule(err), "L7")
      assert.strictEqual((err as { line?: number }).line, 4)
      // also after a defect
      const { store: s2 } = yield* stored("t", prefixText + "junk\n" + long, small)
      assert.strictEqual(rule(yield* Effect.flip(s2.load("t"))), "L7")
    }).pipe(provide))

  it.scoped("L1: an over-long final fragment is a torn tail", () =>
    Effect.gen(function*() {
      const content = prefixText + JSON.stringify(userMessage(2, "y".repeat(400)))
      const { store } = yield* stored("t", content, small)
      const loaded = yield* store.load("t")
      assert.deepStrictEqual(loaded.tornTail, { fromSeq: 2, reason: "fragment", position: enc.encode(prefixText).length })
    }).pipe(provide))

  it.scoped("B10/L7: an append larger than maxEventBytes is rejected before any I/O", () =>
    Effect.gen(function*() {
      const { fs, root, store } = yield* fixture(small)
      yield* store.create(header("t"))
      const err = yield* Effect.flip(store.append("t", [userMessage(0, "z".repeat(300))], { expectedSeq: 0 }))
      assert.strictEqual(rule(err), "B10")
      assert.isFalse(yield* fs.exists(root))
    }).pipe(provide))

  it.scoped("streaming: lines spanning many 64 KiB chunks, multi-byte text and CRLF whitespace read back exactly", () =>
    Effect.gen(function*() {
      const events: Array<Event> = []
      events.push(turnStart(0))
      for (let i = 1; i <= 40; i++) events.push(userMessage(i, "é✓𝄞".repeat(1000 + i * 37)))
      events.push(turnEnd(41))
      const { fs, fileOf, store } = yield* fixture()
      yield* store.create(header("big"))
      yield* store.append("big", events, { expectedSeq: 0 })
      const size = Number((yield* fs.stat(fileOf("big"))).size)
      assert.isAbove(size, 5 * 65_536)
      const loaded = yield* store.load("big")
      assert.deepStrictEqual(loaded.events.map((e) => encodeEvent(e as Event)), events.map(encodeEvent))
      // readers accept JSON whitespace around a line's value, a trailing \r included
      const crlf = fileText("c", []).replace("\n", " \r\n") + " " + JSON.stringify(turnStart(0)) + "\r\n"
      const { store: s2 } = yield* stored("c", crlf)
      const c = yield* s2.load("c")
      assert.strictEqual(c.events.length, 1)
      assert.isUndefined(c.tornTail)
    }).pipe(provide))

  it.scoped("fidelity: loaded records keep §1.1 key order; records with extra keys are returned unchanged for validation", () =>
    Effect.gen(function*() {
      const shuffled = "{\"data\":{\"turn\":1},\"seq\":0,\"type\":\"turn/start\",\"time\":3}\n"
      const extra = "{\"type\":\"turn/end\",\"seq\":1,\"time\":3,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"completed\"}},\"bogus\":1}\n"
      const { root, store } = yield* stored("k", fileText("k", []) + shuffled + extra)
      const loaded = yield* store.load("k")
      assert.deepStrictEqual(Object.keys(loaded.events[0] as object), ["type", "seq", "time", "data"])
      assert.deepStrictEqual(Object.keys(loaded.events[1] as object), ["type", "seq", "time", "data", "bogus"])
      // the pipeline then rejects the extra key as corruption (L9 wrapping B1)
      const err = yield* Effect.flip(SessionLive.inspect("k").pipe(Effect.provide(layerJsonlStore({ root }))))
      assert.strictEqual(rule(err), "L9")
    }).pipe(provide))

  it.scoped("readFrom goes through the read pipeline (L10 for a bad fromSeq)", () =>
    Effect.gen(function*() {
      const { root } = yield* stored("r", fileText("r", turn(0)))
      const result = yield* Effect.flatMap(SessionStore, (s) =>
        Effect.all([s.readFrom("r", 1), Effect.flip(s.readFrom("r", -1)), s.readFrom("r", 9)])).pipe(
          Effect.provide(layerJsonlStore({ root }))
        )
      assert.deepStrictEqual(result[0].map((e) => (e as Event).seq), [1, 2])
      assert.strictEqual(rule(result[1]), "L10")
      assert.deepStrictEqual(result[2], [])
    }).pipe(provide))
})

describe("JsonlStore read consistency (§7.4.4 step 6)", () => {
  /** A store whose path `stat` reports another file identity for the first `changes` calls. */
  const flakyStat = (root: string, changes: { n: number }) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const wrapped: FileSystem.FileSystem = {
        ...fs,
        stat: (p) =>
          Effect.map(fs.stat(p), (info) => {
            if (!p.endsWith(".jsonl") || changes.n <= 0) return info
            changes.n--
            return { ...info, ino: Option.some(Option.getOrElse(info.ino, () => 0) + 1) }
          })
      }
      return yield* makeJsonlStore({ root }).pipe(
        Effect.provideService(FileSystem.FileSystem, wrapped),
        Effect.provideService(Path.Path, path)
      )
    })

  it.scoped("a file replaced during the read is read again; one that keeps changing is StoreFailure", () =>
    Effect.gen(function*() {
      const { root } = yield* stored("r", fileText("r", turn(0)))
      const once = { n: 1 }
      const loaded = yield* (yield* flakyStat(root, once)).load("r")
      assert.strictEqual(loaded.events.length, 3)
      assert.strictEqual(once.n, 0)
      const err = yield* Effect.flip((yield* flakyStat(root, { n: 1_000 })).load("r"))
      assert.strictEqual(err._tag, "StoreFailure")
    }).pipe(provide))
})
