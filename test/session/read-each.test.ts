/**
 * The streamed read pipeline (`ReadEach`, SPEC §8.2 + §3.2 over `SessionStore.loadEach`): for any
 * log, valid or broken in one place, with or without a torn tail, and however its events are cut
 * into chunks, the streamed verification reports exactly what a whole read followed by
 * `readPipeline` and `validateSeed` reports (the same count and surface, or the same first
 * rejection), and hands on exactly the validated events.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { readJsonlFile, readJsonlFileEach } from "../../src/layers/jsonl/Reader.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { readEach } from "../../src/services/ReadEach.js"
import { validateSeed } from "../../src/services/Seed.js"
import { type LoadSummary, readPipeline } from "../../src/services/SessionStore.js"
import { verifyEach, verifyLoaded } from "../../src/programs/Verify.js"
import { anyValidLog, mutation } from "../arbitraries.js"
import { partition } from "../store-contract/contract.js"
import { runs } from "../suites.js"

const dir = fs.mkdtempSync(path.join(os.tmpdir(), "read-each-"))
let n = 0

/** A JSONL session file holding `events` as given (broken ones too), and an optional torn fragment. */
const writeLog = (events: ReadonlyArray<unknown>, fragment: string | undefined): string => {
  const file = path.join(dir, `log-${n++}.jsonl`)
  let text = JSON.stringify({ type: "session", version: 1, id: "s", createdAt: 0 }) + "\n"
  for (const e of events) text += (JSON.stringify(e) ?? "null") + "\n"
  if (fragment !== undefined) text += fragment
  fs.writeFileSync(file, text)
  return file
}

const logs = fc.oneof(
  anyValidLog.map((log) => log.events as ReadonlyArray<unknown>),
  mutation.map((m) => m.events as ReadonlyArray<unknown>)
)
const fragment = fc.option(fc.constantFrom("{\"type\":\"turn/st", "not json", "[1,2"), { nil: undefined })
const sizes = fc.array(fc.integer({ min: 1, max: 7 }), { maxLength: 10 })

describe("ReadEach: streamed verification equals the whole read", () => {
  it.effect.prop(
    "§8.2 §3.2 L9 for any log (valid, broken in one place, torn), verify streamed == verify of the whole read",
    { events: logs, fragment },
    ({ events, fragment }) =>
      Effect.gen(function*() {
        const file = writeLog(events, fragment)
        const whole = yield* Effect.flatMap(Effect.either(readJsonlFile(file)), (loaded) =>
          loaded._tag === "Right"
            ? verifyLoaded(loaded.right)
            : verifyEach(() => Effect.fail(loaded.left), Effect.fail(loaded.left)))
        const streamed = yield* verifyEach((sink) => readJsonlFileEach(file, sink), readJsonlFile(file))
        assert.deepStrictEqual(streamed, whole)
      }).pipe(Effect.provide(NodeFileSystem.layer)),
    { fastCheck: { numRuns: runs(150) } }
  )

  it.effect.prop(
    "§8.2 however the events are cut into chunks, the same outcome and exactly the validated events handed on",
    { events: logs, sizes },
    ({ events, sizes }) =>
      Effect.gen(function*() {
        const file = writeLog(events, undefined)
        const read = yield* Effect.either(readJsonlFile(file))
        // a file the store itself refuses (L2, L9) is the first property's case
        if (read._tag === "Left") return
        const loaded = read.right
        const { events: raw, ...rest } = loaded
        const summary: LoadSummary = { ...rest, count: raw.length }
        const handed: Array<Event> = []
        const streamed = yield* Effect.either(readEach(
          (sink) =>
            Effect.gen(function*() {
              if (sink.onHeader !== undefined) yield* sink.onHeader(loaded.header, loaded.storedVersion)
              for (const chunk of partition(raw, sizes)) yield* sink.onEvents(chunk)
              return summary
            }),
          Effect.succeed(loaded),
          (events) => Effect.sync(() => void handed.push(...events))
        ))
        const whole = yield* Effect.either(Effect.flatMap(readPipeline(loaded), ({ events }) => validateSeed(events, { coldRead: true })))
        if (whole._tag === "Right") {
          assert.strictEqual(streamed._tag, "Right", "the streamed read accepts what the whole read accepts")
          if (streamed._tag === "Right") {
            assert.strictEqual(streamed.right.count, whole.right.events.length)
            assert.deepStrictEqual(streamed.right.surface, whole.right.tracker.nodes.slice())
          }
          assert.deepStrictEqual(handed.map(encodeEvent), whole.right.events.map(encodeEvent))
        } else {
          assert.strictEqual(streamed._tag, "Left", "the streamed read refuses what the whole read refuses")
          if (streamed._tag === "Left") {
            const inner = (e: unknown) => (e as { cause?: unknown; rule?: string })
            const got = inner(streamed.left)
            // the streamed read wraps a seed rejection in L9 (as inspect does); K7 and read errors pass
            const cause = got.rule === "L9" ? got.cause : got
            assert.deepStrictEqual(
              { tag: (cause as { _tag: string })._tag, message: (cause as Error).message },
              { tag: whole.left._tag, message: whole.left.message }
            )
          }
          // the handed-on events are a valid prefix: exactly those before the first rejection
          const seq = (whole.left as { seq?: number }).seq
          if (typeof seq === "number") assert.isAtMost(handed.length, seq)
        }
      }).pipe(Effect.provide(NodeFileSystem.layer)),
    { fastCheck: { numRuns: runs(150) } }
  )
})
