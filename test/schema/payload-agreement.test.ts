/**
 * The declared payload Schemas (`Events.EventPayloads`) against the hand-written shape rules the
 * append and seed pipelines run (`Validation.checkTypeShape`: H1–H9, H11 for the surface-eligible
 * types, I1–I6, I9, I11 for `request/header`). SPEC checks only those fields, the Schemas type the
 * whole payload, so the property is: the Schemas never accept what a rule refuses, and every
 * value a Schema describes passes the rules — on the payloads of random valid logs (both accept),
 * of every single mutation of them and of arbitrary JSON (a rule's refusal is the Schema's too),
 * and on values generated from the Schemas themselves (the rules accept them).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Arbitrary from "effect/Arbitrary"
import * as fc from "effect/FastCheck"
import * as Schema from "effect/Schema"
import { EventPayloads, type KnownEventType, SURFACE_TYPES } from "../../src/schema/Events.js"
import { checkTypeShape } from "../../src/schema/Validation.js"
import { anyValidLog, mutation } from "../arbitraries.js"
import { runs } from "../suites.js"

const CHECKED: ReadonlyArray<KnownEventType> = [...SURFACE_TYPES, "request/header"]
const isChecked = (type: unknown): type is KnownEventType => (CHECKED as ReadonlyArray<unknown>).includes(type)

const schemaAccepts = (type: KnownEventType, data: unknown) => Schema.is(EventPayloads[type] as Schema.Schema<unknown>)(data)

const describeCase = (type: string, data: unknown) => `${type} ${JSON.stringify(data)?.slice(0, 300)}`

describe("payload Schemas and the shape rules", () => {
  it.prop("on random valid logs both accept every payload", [anyValidLog], ([log]) => {
    for (const e of log.events) {
      if (!isChecked(e.type)) continue
      assert.isUndefined(checkTypeShape(e.type, e.data, e.seq), describeCase(e.type, e.data))
      assert.isTrue(schemaAccepts(e.type, e.data), describeCase(e.type, e.data))
    }
  }, { fastCheck: { numRuns: runs(100) } })

  it.prop("a payload a rule refuses (single mutations of valid logs) is refused by its Schema", [mutation], ([m]) => {
    for (const e of m.events as ReadonlyArray<{ readonly type: unknown; readonly data: unknown }>) {
      if (typeof e !== "object" || e === null || !isChecked(e.type)) continue
      if (checkTypeShape(e.type, e.data, 0) !== undefined) {
        assert.isFalse(schemaAccepts(e.type, e.data), describeCase(e.type, e.data))
      }
    }
  }, { fastCheck: { numRuns: runs(300) } })

  it.prop(
    "a payload a rule refuses (arbitrary JSON) is refused by its Schema",
    [fc.constantFrom(...CHECKED), fc.jsonValue({ maxDepth: 4 })],
    ([type, data]) => {
      if (checkTypeShape(type, data, 0) !== undefined) assert.isFalse(schemaAccepts(type, data), describeCase(type, data))
    },
    { fastCheck: { numRuns: runs(500) } }
  )

  it.prop(
    "I11 a messagePrefix a rule refuses (arbitrary JSON elements) is refused by the request/header Schema",
    [fc.array(fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.record({
        id: fc.oneof(fc.string(), fc.jsonValue({ maxDepth: 1 })),
        role: fc.constantFrom("system", "user", "assistant", "tool", 1),
        content: fc.oneof(fc.array(fc.jsonValue({ maxDepth: 2 })), fc.jsonValue({ maxDepth: 1 })),
        source: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 1 })), fc.jsonValue({ maxDepth: 1 }))
      }, { requiredKeys: [] })
    ), { maxLength: 3 })],
    ([prefix]) => {
      const data = { header: { config: { provider: "p", model: "m" }, messagePrefix: prefix }, reason: "initial" }
      if (checkTypeShape("request/header", data, 0) !== undefined) {
        assert.isFalse(schemaAccepts("request/header", data), describeCase("request/header", data))
      }
    },
    { fastCheck: { numRuns: runs(500) } }
  )

  for (const type of CHECKED) {
    it.prop(
      `every ${type} payload its Schema describes passes the rules`,
      [Arbitrary.make(EventPayloads[type] as Schema.Schema<unknown>)],
      ([generated]) => {
        // the pipeline sees only lossless JSON (the walk refuses an undefined value, A-rules):
        // an optional field the generator set to undefined is absent there
        const data: unknown = JSON.parse(JSON.stringify(generated))
        const refused = checkTypeShape(type, data, 0)
        assert.isUndefined(refused, `${describeCase(type, data)}: ${refused?.message}`)
      },
      { fastCheck: { numRuns: runs(200) } }
    )
  }
})
