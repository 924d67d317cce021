/**
 * Packed chunk rows (SPEC Appendix A, §7.4.2, L4): the writer's packing rules and caps, the
 * reader's strict decoding, malformed rows as committed-region corruption (L4) or a torn tail
 * that drops the whole row, layout-blind reads of packed, unpacked and mixed files, the
 * `packChunks` store option (on by default; cached seq, Session round trip) and the CLI.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import { execFile } from "node:child_process"
import * as nodePath from "node:path"
import { layerJsonlStore, readJsonlFile, toJsonlText } from "../../src/layers/jsonl/JsonlStore.js"
import { migrateSession } from "../../src/programs/Migrate.js"
import { verifyLoaded } from "../../src/programs/Verify.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import {
  decodeStorageRecord,
  encodePackedRow,
  type PackedRow,
  packChunkRuns,
  type StorageRecord
} from "../../src/schema/PackedChunks.js"
import { SessionHeaderInvalid } from "../../src/schema/Errors.js"
import { type SessionHeader, validateSessionHeader } from "../../src/schema/SessionHeader.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { anyValidLog, appendOptions, asEvents } from "../arbitraries.js"
import { fixture, line, turnEnd, turnStart, userMessage, writeRaw } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)
const enc = new TextEncoder()
const rule = (e: unknown) => (e as { rule?: string }).rule

// ---------------------------------------------------------------------------------------------
// Builders

type Rec = Record<string, unknown>

const chunkEvent = (seq: number, time: number, chunk: Rec, turn = 1, step = 1): Event =>
  ({ type: "assistant/chunk", seq, time, data: { turn, step, chunk } }) as unknown as Event
const text = (index: number, t: string): Rec => ({ type: "text-delta", index, text: t })
const reasoning = (index: number, t: string): Rec => ({ type: "reasoning-delta", index, text: t })
const toolDelta = (index: number, id: string, args: string, name?: string): Rec =>
  name === undefined
    ? { type: "tool-call-delta", index, id, argumentsDelta: args }
    : { type: "tool-call-delta", index, id, name, argumentsDelta: args }

const ev = (type: string, seq: number, data: unknown, extra: Rec = {}): Event =>
  ({ type, seq, time: 1_000 + seq * 10, data, ...extra }) as unknown as Event

/**
 * A valid one-turn log whose assistant answer streams a reasoning run (with a negative time gap),
 * a text run, a named tool-call delta followed by unnamed ones, and a short text run.
 */
const turnLog = (): Array<Event> => {
  const events: Array<Event> = [
    ev("turn/start", 0, { turn: 1 }),
    ev("step/start", 1, { turn: 1, step: 1 }),
    ev("user/message", 2, { id: "u1", role: "user", content: [{ type: "text", text: "list the files" }], source: { kind: "user" } }, {
      surfaceOp: "append"
    }),
    ev("request/header", 3, { header: { config: { provider: "p", model: "m" }, system: "be brief" }, reason: "initial" })
  ]
  const chunks: Array<[number, Rec]> = [
    [2_000, reasoning(0, "think")],
    [2_010, reasoning(0, "ing ")],
    [2_005, reasoning(0, "hard")],
    [2_020, text(1, "Look")],
    [2_021, text(1, "ing ")],
    [2_021, text(1, "at ")],
    [2_030, text(1, "the ")],
    [2_031, text(1, "files \u00e9\u{1F600}")],
    [2_040, toolDelta(2, "c1", "{\"pa", "ls")],
    [2_041, toolDelta(2, "c1", "th\":")],
    [2_042, toolDelta(2, "c1", "\".\"")],
    [2_043, toolDelta(2, "c1", "}")],
    [2_050, text(3, "ok")],
    [2_051, text(3, ".")]
  ]
  const first = events.length
  chunks.forEach(([time, chunk], k) => events.push(chunkEvent(first + k, time, chunk)))
  const seqs = chunks.map((_, k) => first + k)
  let seq = first + chunks.length
  events.push(
    ev("assistant/message", seq++, {
      turn: 1,
      step: 1,
      message: {
        id: "a1",
        role: "assistant",
        content: [
          { type: "reasoning", text: "thinking hard" },
          { type: "text", text: "Looking at the files \u00e9\u{1F600}" },
          { type: "tool-call", id: "c1", name: "ls", arguments: "{\"path\":\".\"}" },
          { type: "text", text: "ok." }
        ],
        source: { kind: "model", provider: "p", model: "m" }
      }
    }, { sourceEventSeqs: seqs, surfaceOp: "append" })
  )
  const callSeq = seq
  events.push(ev("tool/call", seq++, { turn: 1, step: 1, callId: "c1", name: "ls", arguments: "{\"path\":\".\"}" }))
  events.push(
    ev("tool/result", seq++, {
      turn: 1,
      step: 1,
      message: {
        id: "r1",
        role: "user",
        content: [{ type: "tool-result", toolCallId: "c1", content: [{ type: "text", text: "a b c" }] }],
        source: { kind: "tool", callId: "c1" }
      }
    }, { sourceEventSeqs: [callSeq], surfaceOp: "append" })
  )
  events.push(ev("step/end", seq++, { turn: 1, step: 1 }))
  events.push(ev("turn/end", seq++, { turn: 1, reason: { kind: "completed" } }))
  return events
}

const sessionHeader = (id: string): SessionHeader => {
  const h = validateSessionHeader({ version: 1, id, createdAt: 5 })
  if (h instanceof SessionHeaderInvalid) throw new Error(h.message)
  return h
}

/** The stored line of one storage record. */
const recordLine = (r: StorageRecord): string => r._tag === "Packed" ? encodePackedRow(r.row) : encodeEvent(r.event)

/** A session file whose events are stored as the given records (for `packChunkRuns` with options). */
const recordsText = (h: SessionHeader, records: ReadonlyArray<StorageRecord>): string =>
  toJsonlText(h, []) + records.map((r) => recordLine(r) + "\n").join("")

/** Decode a sequence of records as a reader does; the member events, or the first defect. */
const decodeAll = (records: ReadonlyArray<StorageRecord>) => {
  const out: Array<unknown> = []
  for (const r of records) {
    const d = decodeStorageRecord(JSON.parse(recordLine(r)), out.length)
    if (d._tag === "Defect") return d
    out.push(...d.events)
  }
  return out
}

const shapeOf = (records: ReadonlyArray<StorageRecord>) =>
  records.map((r) => r._tag === "Packed" ? `${r.row.type}:${r.members}` : "v")

// ---------------------------------------------------------------------------------------------
// Writer

describe("Appendix A packChunkRuns (writer)", () => {
  it("packs runs of >= 3 exact delta chunks into rows in Appendix A key order; the rest stays verbatim", () => {
    const records = packChunkRuns(turnLog())
    assert.deepStrictEqual(shapeOf(records), [
      "v", "v", "v", "v",
      "reasoning-chunks:3",
      "text-chunks:5",
      "v", // the named tool-call delta: name presence differs from the rest
      "tool-call-chunks:3",
      "v", "v", // a run of two stays verbatim
      "v", "v", "v", "v", "v"
    ])
    const rows = records.filter((r) => r._tag === "Packed").map((r) => encodePackedRow(r.row))
    assert.deepStrictEqual(rows, [
      "{\"type\":\"reasoning-chunks\",\"seq0\":4,\"time0\":2000,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[10,-5],\"texts\":[\"think\",\"ing \",\"hard\"]}}",
      "{\"type\":\"text-chunks\",\"seq0\":7,\"time0\":2020,\"data\":{\"turn\":1,\"step\":1,\"index\":1,\"dt\":[1,0,9,1],\"texts\":[\"Look\",\"ing \",\"at \",\"the \",\"files \u00e9\u{1F600}\"]}}",
      "{\"type\":\"tool-call-chunks\",\"seq0\":13,\"time0\":2041,\"data\":{\"turn\":1,\"step\":1,\"index\":2,\"id\":\"c1\",\"dt\":[1,1],\"args\":[\"th\\\":\",\"\\\".\\\"\",\"}\"]}}"
    ])
  })

  it("a named tool-call run keeps its name on the row", () => {
    const events = [0, 1, 2].map((k) => chunkEvent(k, 5, toolDelta(0, "c9", `a${k}`, "grep")))
    const [r] = packChunkRuns(events)
    assert.strictEqual(r._tag, "Packed")
    assert.strictEqual(
      encodePackedRow((r as { row: PackedRow }).row),
      "{\"type\":\"tool-call-chunks\",\"seq0\":0,\"time0\":5,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"id\":\"c9\",\"name\":\"grep\",\"dt\":[0,0],\"args\":[\"a0\",\"a1\",\"a2\"]}}"
    )
  })

  /** Three packable text chunks, then a fourth that differs as described. */
  const breaks: ReadonlyArray<{ readonly name: string; readonly fourth: Event; readonly shape: ReadonlyArray<string> }> = [
    { name: "continues", fourth: chunkEvent(3, 13, text(0, "d")), shape: ["text-chunks:4"] },
    { name: "seq + 2", fourth: chunkEvent(4, 13, text(0, "d")), shape: ["text-chunks:3", "v"] },
    { name: "another kind", fourth: chunkEvent(3, 13, reasoning(0, "d")), shape: ["text-chunks:3", "v"] },
    { name: "another turn", fourth: chunkEvent(3, 13, text(0, "d"), 2), shape: ["text-chunks:3", "v"] },
    { name: "another step", fourth: chunkEvent(3, 13, text(0, "d"), 1, 2), shape: ["text-chunks:3", "v"] },
    { name: "another index", fourth: chunkEvent(3, 13, text(1, "d")), shape: ["text-chunks:3", "v"] },
    {
      name: "a time gap beyond safe integers",
      fourth: chunkEvent(3, Number.MAX_SAFE_INTEGER, text(0, "d")),
      shape: ["text-chunks:3", "v"]
    }
  ]
  for (const b of breaks) {
    it(`run continuation: ${b.name}`, () => {
      const events = [chunkEvent(0, -10, text(0, "a")), chunkEvent(1, -9, text(0, "b")), chunkEvent(2, -8, text(0, "c")), b.fourth]
      assert.deepStrictEqual(shapeOf(packChunkRuns(events)), b.shape)
    })
  }

  it("tool-call runs need the same id and the same name presence and value", () => {
    const base = (k: number) => chunkEvent(k, 10, toolDelta(0, "c1", "x", "ls"))
    const cases: ReadonlyArray<[Event, ReadonlyArray<string>]> = [
      [chunkEvent(3, 10, toolDelta(0, "c1", "x", "ls")), ["tool-call-chunks:4"]],
      [chunkEvent(3, 10, toolDelta(0, "c2", "x", "ls")), ["tool-call-chunks:3", "v"]],
      [chunkEvent(3, 10, toolDelta(0, "c1", "x", "cat")), ["tool-call-chunks:3", "v"]],
      [chunkEvent(3, 10, toolDelta(0, "c1", "x")), ["tool-call-chunks:3", "v"]]
    ]
    for (const [fourth, shape] of cases) {
      assert.deepStrictEqual(shapeOf(packChunkRuns([base(0), base(1), base(2), fourth])), shape)
    }
  })

  it("only the entire exact shape packs: anything else stays verbatim (never lost)", () => {
    const good = (k: number) => ({ type: "assistant/chunk", seq: k, time: 10, data: { turn: 1, step: 1, chunk: text(0, "t") } })
    const variants: ReadonlyArray<[string, Rec]> = [
      ["an extra envelope key", { ...good(1), ignorable: true }],
      ["envelope keys out of order", { seq: 1, type: "assistant/chunk", time: 10, data: good(1).data }],
      ["data keys out of order", { ...good(1), data: { step: 1, turn: 1, chunk: text(0, "t") } }],
      ["an extra data key", { ...good(1), data: { turn: 1, step: 1, chunk: text(0, "t"), x: 1 } }],
      ["chunk keys out of order", { ...good(1), data: { turn: 1, step: 1, chunk: { type: "text-delta", text: "t", index: 0 } } }],
      ["an extra chunk key", { ...good(1), data: { turn: 1, step: 1, chunk: { ...text(0, "t"), extra: 1 } } }],
      ["a chunk without index", { ...good(1), data: { turn: 1, step: 1, chunk: { type: "text-delta", text: "t" } } }],
      ["a fractional index", { ...good(1), data: { turn: 1, step: 1, chunk: text(0.5, "t") } }],
      ["a non-string text", { ...good(1), data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text: 5 } } }],
      ["a string turn", { ...good(1), data: { turn: "1", step: 1, chunk: text(0, "t") } }],
      ["another chunk type", { ...good(1), data: { turn: 1, step: 1, chunk: { type: "text-start", index: 0, text: "t" } } }],
      ["a fractional time", { ...good(1), time: 10.5 }],
      ["a tool delta with a numeric id", {
        ...good(1),
        data: { turn: 1, step: 1, chunk: { type: "tool-call-delta", index: 0, id: 1, argumentsDelta: "" } }
      }]
    ]
    for (const [name, middle] of variants) {
      const records = packChunkRuns([good(0), middle, good(2), good(3), good(4)] as unknown as Array<Event>)
      assert.deepStrictEqual(shapeOf(records), ["v", "v", "text-chunks:3"], name)
      assert.strictEqual((records[1] as { event: unknown }).event, middle, name)
    }
  })

  it("caps: at most maxMembers members and maxRowBytes bytes per row", () => {
    const events = Array.from({ length: 10 }, (_, k) => chunkEvent(k, 100 + k, text(0, "ab")))
    assert.deepStrictEqual(shapeOf(packChunkRuns(events, { maxMembers: 4 })), [
      "text-chunks:4",
      "text-chunks:4",
      "v",
      "v"
    ])
    assert.deepStrictEqual(shapeOf(packChunkRuns(events)), ["text-chunks:10"])
    const whole = packChunkRuns(events.slice(0, 5))
    const bytes = encodePackedRow((whole[0] as { row: PackedRow }).row).length
    assert.deepStrictEqual(shapeOf(packChunkRuns(events.slice(0, 5), { maxRowBytes: bytes })), ["text-chunks:5"])
    assert.deepStrictEqual(shapeOf(packChunkRuns(events.slice(0, 5), { maxRowBytes: bytes - 1 })), [
      "text-chunks:4",
      "v"
    ])
  })

  it.prop(
    "Appendix A: packing then decoding reproduces every event byte for byte; rows respect the caps",
    [anyValidLog, fc.integer({ min: 1, max: 8 }), fc.integer({ min: 150, max: 600 })],
    ([log, maxMembers, maxRowBytes]) => {
      const events = asEvents(log.events)
      for (const options of [{}, { maxMembers, maxRowBytes }]) {
        const records = packChunkRuns(events, options)
        const decoded = decodeAll(records)
        assert.isTrue(Array.isArray(decoded))
        assert.deepStrictEqual((decoded as Array<Event>).map(encodeEvent), events.map(encodeEvent))
        for (const r of records) {
          if (r._tag !== "Packed") continue
          assert.isAtLeast(r.members, 3)
          if ("maxMembers" in options) {
            assert.isAtMost(r.members, maxMembers)
            assert.isAtMost(enc.encode(encodePackedRow(r.row)).length, maxRowBytes)
          }
        }
      }
    },
    { fastCheck: { numRuns: 60 } }
  )
})

// ---------------------------------------------------------------------------------------------
// Reader

const textRow = (seq0: number, over: Rec = {}, data: Rec = {}): Rec => ({
  type: "text-chunks",
  seq0,
  time0: 500,
  data: { turn: 1, step: 1, index: 0, dt: [3, -2], texts: ["a", "b", "c"], ...data },
  ...over
})
const toolRow = (seq0: number, data: Rec = {}): Rec => ({
  type: "tool-call-chunks",
  seq0,
  time0: 500,
  data: { turn: 1, step: 1, index: 2, id: "c1", name: "ls", dt: [1, 1], args: ["{", "}", ""], ...data }
})
const omit = (r: Rec, key: string): Rec => Object.fromEntries(Object.entries(r).filter(([k]) => k !== key))
const omitData = (r: Rec, key: string): Rec => ({ ...r, data: omit(r.data as Rec, key) })

/** Malformed packed rows at expected seq 2 (Appendix A strict decoding). */
const malformedRows: ReadonlyArray<{ readonly name: string; readonly row: Rec; readonly reason: string }> = [
  { name: "an extra row key", row: textRow(2, { seq: 2 }), reason: "unparsable" },
  // issue 18: a reader's memory stays bounded by the writer's cap (a member is ~5 bytes on disk)
  {
    name: "1,025 members (more than a row may hold)",
    row: textRow(2, {}, { texts: Array(1_025).fill("a"), dt: Array(1_024).fill(0) }),
    reason: "unparsable"
  },
  { name: "a missing time0", row: omit(textRow(2), "time0"), reason: "unparsable" },
  { name: "an extra payload key", row: textRow(2, {}, { chunk: {} }), reason: "unparsable" },
  { name: "a missing payload key (index)", row: omitData(textRow(2), "index"), reason: "unparsable" },
  { name: "args in a text row", row: omitData(textRow(2, {}, { args: ["a", "b", "c"] }), "texts"), reason: "unparsable" },
  { name: "texts in a tool-call row", row: omitData(toolRow(2, { texts: ["{", "}", ""] }), "args"), reason: "unparsable" },
  { name: "a tool-call row without id", row: omitData(toolRow(2), "id"), reason: "unparsable" },
  { name: "a tool-call row with an extra key", row: toolRow(2, { callId: "c1" }), reason: "unparsable" },
  { name: "a non-string id", row: toolRow(2, { id: 7 }), reason: "unparsable" },
  { name: "a null name", row: toolRow(2, { name: null }), reason: "unparsable" },
  { name: "data not an object", row: textRow(2, { data: [1] }), reason: "unparsable" },
  { name: "empty texts", row: textRow(2, {}, { dt: [], texts: [] }), reason: "unparsable" },
  { name: "empty args", row: toolRow(2, { dt: [], args: [] }), reason: "unparsable" },
  { name: "texts not an array", row: textRow(2, {}, { dt: [], texts: "abc" }), reason: "unparsable" },
  { name: "a non-string text", row: textRow(2, {}, { texts: ["a", 1, "c"] }), reason: "unparsable" },
  { name: "dt one too long", row: textRow(2, {}, { dt: [1, 1, 1] }), reason: "unparsable" },
  { name: "dt one too short", row: textRow(2, {}, { dt: [1] }), reason: "unparsable" },
  { name: "dt not an array", row: textRow(2, {}, { dt: 1 }), reason: "unparsable" },
  { name: "a fractional dt element", row: textRow(2, {}, { dt: [1.5, 1] }), reason: "unparsable" },
  { name: "a dt element beyond safe integers", row: textRow(2, {}, { dt: [2 ** 53, 1] }), reason: "unparsable" },
  { name: "a string time0", row: textRow(2, { time0: "500" }), reason: "unparsable" },
  { name: "a time0 beyond safe integers", row: textRow(2, { time0: 2 ** 53 }), reason: "unparsable" },
  {
    name: "a reconstructed time beyond safe integers",
    row: textRow(2, { time0: Number.MAX_SAFE_INTEGER - 1 }, { dt: [1, 1] }),
    reason: "unparsable"
  },
  { name: "a fractional turn", row: textRow(2, {}, { turn: 1.5 }), reason: "unparsable" },
  { name: "a string step", row: textRow(2, {}, { step: "1" }), reason: "unparsable" },
  { name: "a null index", row: textRow(2, {}, { index: null }), reason: "unparsable" },
  { name: "a fractional seq0", row: textRow(2.5), reason: "unparsable" },
  { name: "seq0 ahead of the expected seq", row: textRow(3), reason: "seq-gap" },
  { name: "seq0 behind the expected seq", row: textRow(1), reason: "seq-gap" }
]

describe("Appendix A decodeStorageRecord (reader)", () => {
  it("reconstructs members with Appendix A key orders; negative time gaps are allowed", () => {
    const d = decodeStorageRecord(textRow(2), 2)
    assert.strictEqual(d._tag, "Members")
    const events = (d as { events: ReadonlyArray<Event> }).events
    assert.deepStrictEqual(events.map(encodeEvent), [
      "{\"type\":\"assistant/chunk\",\"seq\":2,\"time\":500,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"a\"}}}",
      "{\"type\":\"assistant/chunk\",\"seq\":3,\"time\":503,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"b\"}}}",
      "{\"type\":\"assistant/chunk\",\"seq\":4,\"time\":501,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"text-delta\",\"index\":0,\"text\":\"c\"}}}"
    ])
    const tool = decodeStorageRecord(toolRow(0), 0) as { events: ReadonlyArray<Event> }
    assert.strictEqual(
      encodeEvent(tool.events[2]),
      "{\"type\":\"assistant/chunk\",\"seq\":2,\"time\":502,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"tool-call-delta\",\"index\":2,\"id\":\"c1\",\"name\":\"ls\",\"argumentsDelta\":\"\"}}}"
    )
    const unnamed = decodeStorageRecord(omitData(toolRow(0), "name"), 0) as { events: ReadonlyArray<Event> }
    assert.strictEqual(
      encodeEvent(unnamed.events[0]),
      "{\"type\":\"assistant/chunk\",\"seq\":0,\"time\":500,\"data\":{\"turn\":1,\"step\":1,\"chunk\":{\"type\":\"tool-call-delta\",\"index\":2,\"id\":\"c1\",\"argumentsDelta\":\"{\"}}}"
    )
    // a reasoning row of one member; row keys in any order
    const one = decodeStorageRecord({ data: { texts: ["r"], dt: [], index: 0, step: 2, turn: 3 }, time0: 9, seq0: 7, type: "reasoning-chunks" }, 7)
    assert.deepStrictEqual((one as { events: ReadonlyArray<Event> }).events.map(encodeEvent), [
      "{\"type\":\"assistant/chunk\",\"seq\":7,\"time\":9,\"data\":{\"turn\":3,\"step\":2,\"chunk\":{\"type\":\"reasoning-delta\",\"index\":0,\"text\":\"r\"}}}"
    ])
  })

  it("a non-packed record is one event at the expected seq, or a seq gap", () => {
    const e = { type: "turn/start", seq: 4, time: 1, data: { turn: 1 } }
    assert.deepStrictEqual(decodeStorageRecord(e, 4), { _tag: "Members", events: [e] })
    assert.strictEqual((decodeStorageRecord(e, 5) as { reason: string }).reason, "seq-gap")
    assert.strictEqual((decodeStorageRecord([e], 4) as { reason: string }).reason, "not-object")
  })

  for (const c of malformedRows) {
    it(`Appendix A strict decoding: ${c.name} is a defect`, () => {
      const d = decodeStorageRecord(JSON.parse(JSON.stringify(c.row)), 2)
      assert.strictEqual(d._tag, "Defect")
      assert.isTrue((d as { packed: boolean }).packed)
      assert.strictEqual((d as { reason: string }).reason, c.reason === "seq-gap" ? "seq-gap" : "malformed")
    })
  }
})

// ---------------------------------------------------------------------------------------------
// L4 on stored files

/** Write `content` as the stored file of `id` (root created). */
const stored = (id: string, content: string | Uint8Array) =>
  Effect.gen(function*() {
    const f = yield* fixture()
    yield* f.fs.makeDirectory(f.root, { recursive: true })
    yield* writeRaw(f.fs, f.fileOf(id), content)
    return f
  })

const prefix = (id: string) => toJsonlText(sessionHeader(id), [turnStart(0), userMessage(1)])

describe("L4: malformed packed rows", () => {
  for (const c of malformedRows) {
    it.scoped(`L4: ${c.name} before a later turn/end is StoreCorrupt naming file and line; nothing modified`, () =>
      Effect.gen(function*() {
        const content = prefix("t") + line(c.row) + line(turnEnd(5))
        const { fileOf, fs, store } = yield* stored("t", content)
        const err = yield* Effect.flip(store.load("t"))
        assert.strictEqual(err._tag, "StoreCorrupt")
        assert.strictEqual(rule(err), "L4")
        assert.strictEqual((err as { line?: number }).line, 4)
        assert.strictEqual((err as { location?: string }).location, fileOf("t"))
        const direct = yield* Effect.flip(readJsonlFile(fileOf("t")))
        assert.strictEqual(rule(direct), "L4")
        const append = yield* Effect.flip(store.append("t", [turnEnd(2)], { expectedSeq: 2 }))
        assert.strictEqual(rule(append), "L4")
        assert.strictEqual(yield* fs.readFileString(fileOf("t")), content)
      }).pipe(provide))

    it.scoped(`L4: ${c.name} after the last turn/end is a torn tail dropping the whole row`, () =>
      Effect.gen(function*() {
        const content = prefix("t") + line(c.row) + line(userMessage(5))
        const { fileOf, fs, store } = yield* stored("t", content)
        const loaded = yield* store.load("t")
        assert.strictEqual(loaded.events.length, 2)
        assert.deepStrictEqual(loaded.tornTail, {
          fromSeq: 2,
          reason: c.reason as "unparsable",
          position: enc.encode(prefix("t")).length
        })
        assert.strictEqual(yield* fs.readFileString(fileOf("t")), content)
      }).pipe(provide))
  }

  it.scoped("L4: a row of exactly 1,024 members (the writer's cap) loads as 1,024 events", () =>
    Effect.gen(function*() {
      const row = textRow(2, {}, { texts: Array(1_024).fill("a"), dt: Array(1_023).fill(1) })
      const { store } = yield* stored("t", prefix("t") + line(row) + line(turnEnd(1_026)))
      const loaded = yield* store.load("t")
      assert.strictEqual(loaded.events.length, 2 + 1_024 + 1)
      assert.isUndefined(loaded.tornTail)
    }).pipe(provide))

  it.scoped("L4: a row after a valid packed row is checked against the members' next seq", () =>
    Effect.gen(function*() {
      // the first row holds seqs 2..4: a second row must start at 5, not 3
      const good = prefix("t") + line(textRow(2))
      const { store } = yield* stored("t", good + line(textRow(3)) + line(turnEnd(9)))
      const err = yield* Effect.flip(store.load("t"))
      assert.strictEqual(rule(err), "L4")
      assert.strictEqual((err as { line?: number }).line, 5)
      const next = yield* stored("u", prefix("u") + line(textRow(2)) + line(textRow(5)) + line(turnEnd(8)))
      const loaded = yield* next.store.load("u")
      assert.strictEqual(loaded.events.length, 9)
      assert.isUndefined(loaded.tornTail)
    }).pipe(provide))

  it.scoped("L1: an unterminated final packed row is a fragment torn tail", () =>
    Effect.gen(function*() {
      const { store } = yield* stored("t", prefix("t") + JSON.stringify(textRow(2)))
      const loaded = yield* store.load("t")
      assert.strictEqual(loaded.events.length, 2)
      assert.strictEqual(loaded.tornTail?.reason, "fragment")
    }).pipe(provide))

  it.scoped("L9: a well-formed packed row holding -0 fails the lossless walk", () =>
    Effect.gen(function*() {
      const row = JSON.stringify(textRow(2)).replace("\"dt\":[3,-2]", "\"dt\":[-0,-2]")
      const { store } = yield* stored("t", prefix("t") + row + "\n")
      const err = yield* Effect.flip(store.load("t"))
      assert.strictEqual(err._tag, "StoreCorrupt")
      assert.strictEqual(rule(err), "L9")
    }).pipe(provide))
})

// ---------------------------------------------------------------------------------------------
// Layout-blind reads

/** Unpacked, fully packed and mixed texts of one log. */
const layouts = (h: SessionHeader, events: ReadonlyArray<Event>, split: number, maxMembers: number) => {
  const unpacked = toJsonlText(h, events)
  const packed = toJsonlText(h, events, { packChunks: true })
  const mixed = recordsText(h, [
    ...packChunkRuns(events.slice(0, split), { maxMembers }),
    ...events.slice(split).map((event): StorageRecord => ({ _tag: "Verbatim", event }))
  ])
  return { unpacked, packed, mixed }
}

describe("Appendix A: readers are layout-blind", () => {
  it.scoped("packed, unpacked and mixed files load to identical events and re-export to the unpacked bytes", () =>
    Effect.gen(function*() {
      const events = turnLog()
      const h = sessionHeader("t")
      const { mixed, packed, unpacked } = layouts(h, events, 10, 3)
      assert.isTrue(packed.includes("\"type\":\"text-chunks\""))
      assert.isTrue(mixed.includes("\"type\":\"reasoning-chunks\""))
      assert.isFalse(unpacked.includes("-chunks"))
      assert.isBelow(packed.length, unpacked.length)
      const f = yield* fixture()
      yield* f.fs.makeDirectory(f.root, { recursive: true })
      const expected = events.map(encodeEvent)
      for (const text of [unpacked, packed, mixed]) {
        yield* writeRaw(f.fs, f.fileOf("t"), text)
        const loaded = yield* f.store.load("t")
        assert.isUndefined(loaded.tornTail)
        assert.deepStrictEqual((loaded.events as Array<Event>).map(encodeEvent), expected)
        assert.strictEqual(toJsonlText(loaded.header, loaded.events as Array<Event>), unpacked)
        const direct = yield* readJsonlFile(f.fileOf("t"))
        assert.deepStrictEqual(direct.events, loaded.events)
        // the stored events are valid as a seed, whatever the layout
        const report = yield* verifyLoaded(loaded)
        assert.deepStrictEqual(report.ok && report.events, events.length)
      }
    }).pipe(provide))

  it.scoped.prop(
    "Appendix A: random valid logs in every layout load to the same events and re-export unpacked",
    [anyValidLog, fc.nat(), fc.integer({ min: 3, max: 6 })],
    ([log, splitSeed, maxMembers]) =>
      Effect.gen(function*() {
        const events = asEvents(log.events)
        const h = sessionHeader("p")
        const { mixed, packed, unpacked } = layouts(h, events, splitSeed % (events.length + 1), maxMembers)
        const f = yield* fixture()
        yield* f.fs.makeDirectory(f.root, { recursive: true })
        for (const text of [unpacked, packed, mixed]) {
          yield* writeRaw(f.fs, f.fileOf("p"), text)
          const loaded = yield* f.store.load("p")
          assert.isUndefined(loaded.tornTail)
          assert.strictEqual(toJsonlText(loaded.header, loaded.events as Array<Event>), unpacked)
        }
      }).pipe(provide),
    { fastCheck: { numRuns: 25 } }
  )
})

// ---------------------------------------------------------------------------------------------
// The packChunks store option

const chunkBatch = (from: number, count: number, index = 0): Array<Event> =>
  Array.from({ length: count }, (_, k) => chunkEvent(from + k, 3_000 + k, text(index, `t${from + k}`)))

describe("JsonlStore packChunks", () => {
  it.scoped("writes batches' runs as packed rows; seqs and the cached state count members, not lines", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ packChunks: true })
      const h = { version: 1, id: "s", createdAt: 5 }
      yield* f.store.create(h)
      const first = [turnStart(0), ...chunkBatch(1, 5)]
      yield* f.store.append("s", first, { expectedSeq: 0 })
      const text0 = yield* f.fs.readFileString(f.fileOf("s"))
      assert.strictEqual(text0.split("\n").length - 1, 3) // header, turn/start, one row of 5
      // the same instance (cached state) appends at seq 6, the row's members counted
      const second = chunkBatch(6, 4, 1)
      yield* f.store.append("s", second, { expectedSeq: 6 })
      // a wrong expected seq (the line count) is refused and writes nothing
      const conflict = yield* Effect.flip(f.store.append("s", [turnEnd(4)], { expectedSeq: 4 }))
      assert.strictEqual(rule(conflict), "C7")
      // another instance rescans the file and agrees
      const other = yield* f.another()
      const behind = yield* Effect.flip(other.append("s", [turnEnd(5)], { expectedSeq: 5 }))
      assert.strictEqual(rule(behind), "C7")
      yield* other.append("s", [turnEnd(10)], { expectedSeq: 10 })
      yield* f.store.append("s", [turnStart(11, 2)], { expectedSeq: 11 })
      const all = [...first, ...second, turnEnd(10), turnStart(11, 2)]
      const loaded = yield* f.store.load("s")
      assert.deepStrictEqual((loaded.events as Array<Event>).map(encodeEvent), all.map(encodeEvent))
      const textN = yield* f.fs.readFileString(f.fileOf("s"))
      assert.strictEqual(textN.split("\n").length - 1, 6)
      assert.strictEqual(toJsonlText(loaded.header, loaded.events as Array<Event>), toJsonlText(loaded.header, all))
      assert.isFalse(toJsonlText(loaded.header, loaded.events as Array<Event>).includes("-chunks"))
    }).pipe(provide))

  it.scoped("a run split over two batches is not packed across them; packChunks: false never packs, the default packs", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ packChunks: true })
      yield* f.store.create({ version: 1, id: "s", createdAt: 5 })
      yield* f.store.append("s", chunkBatch(0, 2), { expectedSeq: 0 })
      yield* f.store.append("s", chunkBatch(2, 2), { expectedSeq: 2 })
      assert.isFalse((yield* f.fs.readFileString(f.fileOf("s"))).includes("-chunks"))
      const plain = yield* fixture({ packChunks: false })
      yield* plain.store.create({ version: 1, id: "s", createdAt: 5 })
      yield* plain.store.append("s", chunkBatch(0, 6), { expectedSeq: 0 })
      assert.isFalse((yield* plain.fs.readFileString(plain.fileOf("s"))).includes("-chunks"))
      const byDefault = yield* fixture()
      yield* byDefault.store.create({ version: 1, id: "s", createdAt: 5 })
      yield* byDefault.store.append("s", chunkBatch(0, 6), { expectedSeq: 0 })
      const lines = (yield* byDefault.fs.readFileString(byDefault.fileOf("s"))).split("\n").slice(1, -1)
      assert.strictEqual(lines.length, 1)
      assert.isTrue(lines[0].startsWith("{\"type\":\"text-chunks\",\"seq0\":0,"))
    }).pipe(provide))

  it.scoped("replaceLog writes the new log packed too", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ packChunks: true })
      yield* f.store.create({ version: 1, id: "s", createdAt: 5 })
      yield* f.store.append("s", [turnStart(0)], { expectedSeq: 0 })
      const loaded = yield* f.store.load("s")
      const events = [turnStart(0), ...chunkBatch(1, 4)]
      yield* f.store.replaceLog("s", loaded.header, events, { revision: loaded.revision, backup: "b" })
      const lines = (yield* f.fs.readFileString(f.fileOf("s"))).split("\n").slice(1, -1)
      assert.strictEqual(lines.length, 2)
      assert.isTrue(lines[1].startsWith("{\"type\":\"text-chunks\",\"seq0\":1,"))
      const reloaded = yield* f.store.load("s")
      assert.deepStrictEqual((reloaded.events as Array<Event>).map(encodeEvent), events.map(encodeEvent))
      yield* f.store.append("s", [turnEnd(5)], { expectedSeq: 5 })
    }).pipe(provide))

  it.scoped("rows respect a maxLineBytes below 1 MiB", () =>
    Effect.gen(function*() {
      const f = yield* fixture({ packChunks: true, maxLineBytes: 400, maxEventBytes: 400 })
      yield* f.store.create({ version: 1, id: "s", createdAt: 5 })
      const events = Array.from({ length: 12 }, (_, k) => chunkEvent(k, 1, text(0, "x".repeat(60))))
      yield* f.store.append("s", events, { expectedSeq: 0 })
      const lines = (yield* f.fs.readFileString(f.fileOf("s"))).split("\n").slice(1, -1)
      assert.isTrue(lines.some((l) => l.includes("text-chunks")))
      for (const l of lines) assert.isAtMost(enc.encode(l).length, 400)
      const loaded = yield* f.store.load("s")
      assert.deepStrictEqual((loaded.events as Array<Event>).map(encodeEvent), events.map(encodeEvent))
    }).pipe(provide))

  it.scoped("Session round trip: a batched session's chunk runs are stored packed and reopen identically", () =>
    Effect.gen(function*() {
      const f = yield* fixture()
      const layer = layerJsonlStore({ root: f.root, packChunks: true })
      const log = turnLog()
      const written = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "r", persistence: { mode: "batched", windowMs: 1_000_000 } })
        for (const e of log) yield* s.appendUnknown(e.type, e.data, appendOptions(e))
        yield* s.flush
        return yield* s.events
      })).pipe(Effect.provide(layer))
      const file = yield* f.fs.readFileString(f.fileOf("r"))
      assert.isTrue(file.includes("\"type\":\"text-chunks\""))
      assert.isTrue(file.includes("\"type\":\"tool-call-chunks\""))
      const reopened = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open("r")
        const events = yield* s.events
        // appends continue at the member count
        yield* s.appendUnknown("turn/start", { turn: 2 })
        return events
      })).pipe(Effect.provide(layer))
      // reopening resumes: the stored events, then the session/end-seed marker (§2.4)
      assert.deepStrictEqual(reopened.slice(0, written.length).map(encodeEvent), written.map(encodeEvent))
      assert.deepStrictEqual(reopened.slice(written.length).map((e) => e.type), ["session/end-seed"])
      const loaded = yield* f.store.load("r")
      assert.strictEqual(loaded.events.length, log.length + 2)
    }).pipe(provide))
})

// The store contract suite on packed files: test/store-contract/jsonl.test.ts (packing is the default).

// ---------------------------------------------------------------------------------------------
// The CLI on a packed file

const BIN = nodePath.resolve(__dirname, "../../bin/session-log.js")

const cli = (args: ReadonlyArray<string>) =>
  Effect.async<{ readonly code: number; readonly stdout: string; readonly stderr: string }>((resume) => {
    execFile(process.execPath, [BIN, ...args], { encoding: "utf8", env: { ...process.env, NO_COLOR: "1" } }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : -1
      resume(Effect.succeed({ code, stdout, stderr }))
    })
  })

describe("session-log on a packed .jsonl file", () => {
  it.scoped("verify --json reports ok with every member counted; messages match the unpacked file", () =>
    Effect.gen(function*() {
      const f = yield* fixture()
      yield* f.fs.makeDirectory(f.root, { recursive: true })
      const events = turnLog()
      const packedFile = nodePath.join(f.dir, "packed.jsonl")
      const plainFile = nodePath.join(f.dir, "plain.jsonl")
      yield* writeRaw(f.fs, packedFile, toJsonlText(sessionHeader("cli"), events, { packChunks: true }))
      yield* writeRaw(f.fs, plainFile, toJsonlText(sessionHeader("cli"), events))
      const [verify, packedMessages, plainMessages] = yield* Effect.all([
        cli(["verify", "--json", packedFile]),
        cli(["messages", "--json", packedFile]),
        cli(["messages", "--json", plainFile])
      ], { concurrency: 3 })
      assert.strictEqual(verify.code, 0, verify.stderr)
      const report = JSON.parse(verify.stdout.trim())
      assert.strictEqual(report.ok, true)
      assert.strictEqual(report.events, events.length)
      assert.strictEqual(packedMessages.code, 0, packedMessages.stderr)
      assert.strictEqual(packedMessages.stdout, plainMessages.stdout)
    }).pipe(provide), { timeout: 120_000 })
})

// ---------------------------------------------------------------------------------------------
// Upgrades keep the layout (SPEC §8.3 with Appendix A; issue 13)

describe("Appendix A: a v0 upgrade writes the store's storage layout", () => {
  const v0Text = (packChunks: boolean) => {
    const events = turnLog()
    return { events, text: toJsonlText({ ...sessionHeader("t"), version: 0 } as unknown as SessionHeader, events, { packChunks }) }
  }
  const upgradeWith = (text: string, options: { readonly packChunks?: boolean }) =>
    Effect.gen(function*() {
      const f = yield* fixture(options)
      yield* f.fs.makeDirectory(f.root, { recursive: true })
      yield* writeRaw(f.fs, f.fileOf("t"), text)
      const report = yield* migrateSession("t").pipe(Effect.provideService(SessionStore, f.store))
      assert.strictEqual(report.status, "upgraded")
      const after = new TextDecoder().decode(yield* f.fs.readFile(f.fileOf("t")))
      const loaded = yield* f.store.load("t")
      return { after, loaded }
    })

  it.scoped("K3: packed chunk rows of a v0 log stay packed in the migrated file; the events are the same", () =>
    Effect.gen(function*() {
      const { events, text } = v0Text(true)
      assert.include(text, "\"type\":\"text-chunks\"")
      const { after, loaded } = yield* upgradeWith(text, {})
      assert.include(after, "\"type\":\"text-chunks\"")
      assert.strictEqual(loaded.storedVersion, 1)
      assert.deepStrictEqual((loaded.events as Array<Event>).map(encodeEvent), events.map(encodeEvent))
      const unpacked = yield* upgradeWith(text, { packChunks: false })
      assert.notInclude(unpacked.after, "-chunks")
      assert.deepStrictEqual((unpacked.loaded.events as Array<Event>).map(encodeEvent), events.map(encodeEvent))
      assert.isBelow(after.length, unpacked.after.length)
    }).pipe(provide))

  it.scoped("K3: an unpacked v0 log is migrated packed by default, unpacked with packChunks: false", () =>
    Effect.gen(function*() {
      const { events, text } = v0Text(false)
      const unpacked = yield* upgradeWith(text, { packChunks: false })
      assert.notInclude(unpacked.after, "-chunks")
      assert.deepStrictEqual((unpacked.loaded.events as Array<Event>).map(encodeEvent), events.map(encodeEvent))
      const packed = yield* upgradeWith(text, {})
      assert.include(packed.after, "\"type\":\"text-chunks\"")
      assert.deepStrictEqual((packed.loaded.events as Array<Event>).map(encodeEvent), events.map(encodeEvent))
    }).pipe(provide))
})
