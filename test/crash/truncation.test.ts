/**
 * Exhaustive truncation (SPEC §7.4.4 L1–L3, §6, §7.2): a realistic JSONL log whose last three
 * lines are a multi-byte UTF-8 assistant message, an ASCII tool/call and a tool/result above
 * 512 KiB, cut at every byte offset of those lines (sampled inside the large one). Every cut
 * loads as the valid prefix of complete lines with the rest reported as a torn tail — never an
 * untyped failure, never a lost committed turn — and `SessionLive.open` repairs it to exactly
 * prefix ++ closers ++ end-seed, which a second open leaves byte for byte. The same log in the
 * compressed layout (one frame per durable append) is cut at every byte offset of its last
 * three frames: every cut loads as the complete frames' events, the torn frame reported from its
 * first byte, and repairs the same way.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { makeJsonlStore, toJsonlText } from "../../src/layers/jsonl/JsonlStore.js"
import { FRAME_HEADER_BYTES, MAGIC, parseFrameHeader } from "../../src/layers/jsonl/FrameEncoding.js"
import { scriptedTurn } from "./script.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { closers } from "../../src/services/Repair.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { platform } from "./backends.js"
import { textContent as text } from "../helpers/events.js"
import { SLOW_SUITE } from "../suites.js"

const HUGE = `${"日本語のログ🎉 ".repeat(20_000)}${"ascii padding ".repeat(10_000)}é`

/**
 * Like HUGE but incompressible (a seeded pseudo-random mix of ASCII and multi-byte characters):
 * its compressed frame spans many read chunks.
 */
const NOISE = (() => {
  let x = 0x2545f491
  const alphabet = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 éß日本🎉"]
  let out = ""
  for (let i = 0; i < 400_000; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out += alphabet[(x >>> 0) % alphabet.length]
  }
  return out
})()

/** Turn 1 complete; turn 2 dies after its tool result: the last three lines are the ones to cut. */
const writeLog = (s: Session.SessionShape, huge = HUGE) =>
  Effect.gen(function*() {
    yield* scriptedTurn(1, "Summarise the repo — naïve façade ✓", [
      { text: "Reading.", calls: [{ name: "read_file", args: { path: "README.md" }, result: "# Titel — Überblick 🎉" }] },
      { text: "Done: 完了." }
    ], "initial").pipe(Effect.provideService(Session.Session, s))
    yield* s.append("turn/start", { turn: 2 })
    yield* s.append("step/start", { turn: 2, step: 1 })
    yield* s.append("user/message", {
      id: "prompt-2",
      role: "user",
      content: text("Now dump the log") as never,
      source: { kind: "user" }
    }, { surfaceOp: "append" })
    yield* s.append("assistant/message", {
      turn: 2,
      step: 1,
      message: {
        id: "msg-2-1",
        role: "assistant",
        content: [
          ...text("Je vais lire le journal — ログを読みます 🎉 ✓ ß∑≈"),
          { type: "tool-call", id: "call-big", name: "read_file", arguments: "{\"path\":\"app.log\"}" }
        ] as never,
        source: { kind: "model", provider: "scripted", model: "demo-model" }
      }
    }, { surfaceOp: "append" })
    const call = yield* s.append("tool/call", { turn: 2, step: 1, callId: "call-big", name: "read_file", arguments: "{\"path\":\"app.log\"}" })
    yield* s.append("tool/result", {
      turn: 2,
      step: 1,
      message: {
        id: "result-call-big",
        role: "user",
        content: [{ type: "tool-result", toolCallId: "call-big", content: text(huge) as never }],
        source: { kind: "tool", callId: "call-big" }
      }
    }, { surfaceOp: "append", sourceEventSeqs: [call.seq] })
    return yield* s.events
  })

/** Offsets to cut at inside [start, end): all of them, or a sample for the large line. */
const offsets = (start: number, end: number, sample: boolean): Array<number> => {
  if (!sample) return Array.from({ length: end - start }, (_, i) => start + i)
  const out = new Set<number>()
  for (let i = 0; i < 16; i++) {
    out.add(start + i)
    out.add(end - 1 - i)
  }
  // every byte of a few multi-byte characters, and an even spread through the line
  for (let at = start + 1000; at < end; at += 39_989) {
    for (let k = 0; k < 4; k++) out.add(at + k)
  }
  for (const at of [start + 512 * 1024 - 1, start + 512 * 1024, start + 512 * 1024 + 1]) out.add(at)
  return [...out].filter((o) => o >= start && o < end).sort((a, b) => a - b)
}

describe("exhaustive truncation of the last three lines (L1-L3)", () => {
  it.scoped("every cut loads as a valid prefix; open repairs it byte-stably", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      // on tmpfs where there is one: the test is about bytes, and fsync there costs nothing
      const shm = yield* fs.exists("/dev/shm")
      const root = yield* fs.makeTempDirectoryScoped(shm ? { directory: "/dev/shm" } : {})
      const file = `${root}/t.jsonl`
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "t", header: { cwd: "/repo" } })
        return yield* writeLog(s)
      })).pipe(Effect.provideServiceEffect(SessionStore, makeJsonlStore({ root })))
      const full = yield* fs.readFile(file)
      const lineEnds: Array<number> = []
      full.forEach((b, i) => void (b === 0x0a && lineEnds.push(i + 1)))
      // lines: header, then one per event
      assert.strictEqual(lineEnds.length, events.length + 1)
      const n = events.length
      const starts = [lineEnds[n - 3], lineEnds[n - 2], lineEnds[n - 1]]
      const hugeLength = lineEnds[n] - lineEnds[n - 1]
      assert.isAbove(hugeLength, 512 * 1024)
      assert.isTrue(full.subarray(starts[0], starts[1]).some((b) => b >= 0x80), "a multi-byte line")
      assert.isFalse(full.subarray(starts[1], starts[2]).some((b) => b >= 0x80), "an ASCII line")
      const turn1End = events.findIndex((e) => e.type === "turn/end")
      const cuts = [
        ...offsets(starts[0], starts[1], false),
        ...offsets(starts[1], starts[2], false),
        ...offsets(starts[2], lineEnds[n], true),
        lineEnds[n]
      ]
      const header = (yield* makeJsonlStore({ root }).pipe(Effect.flatMap((st) => st.load("t")))).header
      let repairs = 0
      for (const cut of cuts) {
        yield* fs.writeFile(file, full.subarray(0, cut))
        const store = yield* makeJsonlStore({ root })
        const loaded = yield* Effect.either(store.load("t"))
        if (loaded._tag === "Left") {
          // the only acceptable failure is a precise corruption report
          assert.strictEqual(loaded.left._tag, "StoreCorrupt", `cut ${cut}: ${loaded.left.message}`)
          continue
        }
        const complete = lineEnds.filter((e) => e <= cut).length - 1
        const atBoundary = lineEnds.includes(cut)
        assert.strictEqual(loaded.right.events.length, complete, `cut ${cut}`)
        assert.isAbove(complete, turn1End, `cut ${cut}: the committed turn 1 is kept`)
        assert.strictEqual(loaded.right.tornTail === undefined, atBoundary, `cut ${cut}`)
        if (!atBoundary) assert.strictEqual(loaded.right.tornTail!.fromSeq, complete)
        const prefix = events.slice(0, complete)
        assert.deepStrictEqual(loaded.right.events.map((e) => encodeEvent(e as Event)), prefix.map(encodeEvent))
        // repair, then reload: exactly prefix ++ closers ++ marker, and stable
        const repaired = yield* Effect.scoped(Effect.flatMap(SessionLive.open("t"), (h) => h.events)).pipe(
          Effect.provideService(SessionStore, store)
        )
        const expectedClosers = closers(prefix)
        assert.deepStrictEqual(
          repaired.slice(0, complete + expectedClosers.length).map(encodeEvent),
          [...prefix, ...expectedClosers].map(encodeEvent),
          `cut ${cut}`
        )
        assert.strictEqual(repaired.length, complete + expectedClosers.length + 1)
        assert.strictEqual(repaired[repaired.length - 1].type, "session/end-seed")
        const bytes = yield* fs.readFileString(file)
        assert.strictEqual(bytes, toJsonlText(header, repaired), `cut ${cut}`)
        yield* Effect.scoped(SessionLive.open("t")).pipe(Effect.provideServiceEffect(SessionStore, makeJsonlStore({ root })))
        assert.strictEqual(yield* fs.readFileString(file), bytes, `cut ${cut}: reopen is stable`)
        repairs++
      }
      assert.strictEqual(repairs, cuts.length)
      console.log(`truncation: ${cuts.length} cuts (${starts[2] - starts[0]} bytes exhaustively, ${cuts.length - (starts[2] - starts[0])} sampled in a ${hugeLength}-byte line)`)
    }).pipe(Effect.provide(platform)), 10 * 60_000)
})

/** The end offset of every frame of a compressed file. */
const frameEnds = (bytes: Uint8Array): Array<number> => {
  const ends: Array<number> = []
  let at = MAGIC.length
  while (at < bytes.length) {
    const header = parseFrameHeader(bytes.subarray(at, at + FRAME_HEADER_BYTES))
    if (header === undefined) throw new Error(`no frame at ${at}`)
    at += FRAME_HEADER_BYTES + header.payloadBytes
    ends.push(at)
  }
  return ends
}

describe("exhaustive truncation of the last three frames of a compressed file (L1-L3)", () => {
  const cutFrames = (huge: string, sample: boolean) =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const shm = yield* fs.exists("/dev/shm")
      const root = yield* fs.makeTempDirectoryScoped(shm ? { directory: "/dev/shm" } : {})
      const file = `${root}/t.jsonlz`
      const events = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "t", header: { cwd: "/repo" } })
        return yield* writeLog(s, huge)
      })).pipe(Effect.provideServiceEffect(SessionStore, makeJsonlStore({ root, compress: true })))
      const full = yield* fs.readFile(file)
      const ends = frameEnds(full)
      // frames: the header, then one per durable append (one event each)
      assert.strictEqual(ends.length, events.length + 1)
      const n = events.length
      const turn1End = events.findIndex((e) => e.type === "turn/end")
      const cuts = [
        ...offsets(ends[n - 3], ends[n - 2], false),
        ...offsets(ends[n - 2], ends[n - 1], false),
        ...offsets(ends[n - 1], ends[n], sample),
        ends[n]
      ]
      let repairs = 0
      for (const cut of cuts) {
        yield* fs.writeFile(file, full.subarray(0, cut))
        const store = yield* makeJsonlStore({ root })
        const loaded = yield* Effect.either(store.load("t"))
        if (loaded._tag === "Left") {
          assert.strictEqual(loaded.left._tag, "StoreCorrupt", `cut ${cut}: ${loaded.left.message}`)
          continue
        }
        const complete = ends.filter((e) => e <= cut).length - 1
        const atBoundary = ends.includes(cut)
        assert.strictEqual(loaded.right.events.length, complete, `cut ${cut}`)
        assert.isAbove(complete, turn1End, `cut ${cut}: the committed turn 1 is kept`)
        assert.strictEqual(loaded.right.tornTail === undefined, atBoundary, `cut ${cut}`)
        if (!atBoundary) {
          assert.deepStrictEqual(loaded.right.tornTail, { fromSeq: complete, reason: "fragment", position: ends[complete] })
        }
        const prefix = events.slice(0, complete)
        assert.deepStrictEqual(loaded.right.events.map((e) => encodeEvent(e as Event)), prefix.map(encodeEvent))
        const repaired = yield* Effect.scoped(Effect.flatMap(SessionLive.open("t"), (h) => h.events)).pipe(
          Effect.provideService(SessionStore, store)
        )
        const expectedClosers = closers(prefix)
        assert.deepStrictEqual(
          repaired.map(encodeEvent).slice(0, complete + expectedClosers.length),
          [...prefix, ...expectedClosers].map(encodeEvent),
          `cut ${cut}`
        )
        assert.strictEqual(repaired.length, complete + expectedClosers.length + 1)
        assert.strictEqual(repaired[repaired.length - 1].type, "session/end-seed")
        const bytes = yield* fs.readFile(file)
        // the repair kept the complete frames byte for byte and appended one frame
        assert.deepStrictEqual(bytes.subarray(0, ends[complete]), full.subarray(0, ends[complete]), `cut ${cut}`)
        const reloaded = yield* (yield* makeJsonlStore({ root })).load("t")
        assert.deepStrictEqual(reloaded.events.map((e) => encodeEvent(e as Event)), repaired.map(encodeEvent))
        yield* Effect.scoped(SessionLive.open("t")).pipe(Effect.provideServiceEffect(SessionStore, makeJsonlStore({ root })))
        assert.deepStrictEqual(yield* fs.readFile(file), bytes, `cut ${cut}: reopen is stable`)
        repairs++
      }
      assert.strictEqual(repairs, cuts.length)
      const last = `a ${ends[n] - ends[n - 1]}-byte last frame for a ${Buffer.byteLength(encodeEvent(events[n - 1]))}-byte line`
      console.log(`truncation (compressed): ${cuts.length} cuts (${sample ? "sampled in" : "every byte of"} ${last})`)
    })

  // the last frame (about 4 KB of deflate for the 600 KB line): every byte in test:slow; in npm test
  // its header's bytes, the first and last 16 of its payload and a spread through it (`offsets`)
  it.scoped("L1 L3 every cut of the last three frames loads as the complete frames' events; open repairs it byte-stably", () =>
    cutFrames(HUGE, !SLOW_SUITE).pipe(Effect.provide(platform)), 10 * 60_000)

  it.scoped("L1 L3 the same with an incompressible last frame over many read chunks (cuts sampled inside it)", () =>
    cutFrames(NOISE, true).pipe(Effect.provide(platform)), 10 * 60_000)
})
