/**
 * SPEC §8.3 normalisation 6 as a property: a v0 log with the reference design's own log-only
 * events interleaved anywhere (any of the 29 types, any JSON data, no `surfaceOp`) upgrades to a
 * log whose derived messages and every rebuilt request (`requestAt`, §5.4) equal those of the same
 * log without them; each interleaved event comes out marked `ignorable: true`, data unchanged.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "effect/FastCheck"
import type { Event } from "../../src/schema/Events.js"
import { REFERENCE_LOG_ONLY_TYPES, upgradeV0 } from "../../src/schema/FormatV0.js"
import type { SessionHeader } from "../../src/schema/SessionHeader.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import { validateSeed } from "../../src/services/Seed.js"
import { anyValidLog, type Insertion, insertLogOnly, type LogEvent } from "../arbitraries.js"
import { runs } from "../suites.js"

const header = { version: 0, id: "v0-prop", createdAt: 1, delegationDepth: 0 } as unknown as SessionHeader

/** Reference log-only events to interleave. */
const referenceInsertion: fc.Arbitrary<Insertion> = fc.record({
  at: fc.nat(),
  type: fc.constantFrom(...REFERENCE_LOG_ONLY_TYPES),
  data: fc.jsonValue({ maxDepth: 3 }),
  ignorable: fc.constant(false)
})

/** Upgrade as a v0 log and validate as a seed: the v1 events a cold read yields. */
const upgradeAndValidate = (events: ReadonlyArray<LogEvent>): ReadonlyArray<Event> => {
  // a v0 log is raw JSON text: what the edge sees is the parsed copy
  const raw = JSON.parse(JSON.stringify(events)) as ReadonlyArray<unknown>
  const upgraded = upgradeV0("v0-prop", header, raw)
  if ("_tag" in upgraded) throw new Error(`the edge refused the log: ${upgraded.message}`)
  return Effect.runSync(validateSeed(upgraded.events, { coldRead: true })).events
}

describe("property: §8.3 normalisation 6", () => {
  it.prop(
    "interleaved reference log-only events change no derived message and no rebuilt request",
    [anyValidLog, fc.array(referenceInsertion, { minLength: 1, maxLength: 8 })],
    ([log, inserts]) => {
      const base = upgradeAndValidate(log.events)
      const { events: mixed, remap } = insertLogOnly(log.events, inserts)
      const upgraded = upgradeAndValidate(mixed)
      assert.strictEqual(upgraded.length, base.length + inserts.length)
      const baseSeqs = new Set(log.events.map((e) => remap(e.seq)))
      for (const e of upgraded) {
        if (baseSeqs.has(e.seq)) continue
        assert.isTrue(REFERENCE_LOG_ONLY_TYPES.has(e.type))
        assert.strictEqual(e.ignorable, true)
        assert.deepStrictEqual(e.data, mixed[e.seq].data)
      }
      // every request: at a base event the same as without the insertions; at an inserted event
      // the same as at the base event before it (or the empty request before the first)
      let previous = -1
      for (let seq = 0; seq < upgraded.length; seq++) {
        const isBase = baseSeqs.has(seq)
        if (isBase) previous++
        const got = requestAtLog(upgraded, seq)
        const want = previous < 0 ? { header: undefined, context: undefined, messages: [] } : requestAtLog(base, previous)
        assert.deepStrictEqual(got, want, `request at seq ${seq}`)
      }
    },
    { fastCheck: { numRuns: runs(60) } }
  )
})
