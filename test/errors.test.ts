/**
 * The error catalogue as data (DESIGN.md §4): every error encodes through the one
 * `Errors.SessionLogError` Schema to plain JSON — its cause included (`Schema.Defect`: an Error
 * becomes its name and message, a nested catalogue error its own encoded form) — and decodes
 * back to an error of the same tag and rule.
 */
import { SystemError } from "@effect/platform/Error"
import { assert, describe, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import * as Errors from "../src/schema/Errors.js"

const samples: ReadonlyArray<Errors.SessionLogError> = [
  new Errors.NotLosslessJson({ rule: "A3", seq: 2, path: "/data/x", detail: "NaN" }),
  new Errors.InvalidEnvelope({ rule: "B10", seq: 4, field: "size" }),
  new Errors.SeqNotContiguous({ rule: "C1", seq: 1, expected: 1, actual: "x" }),
  new Errors.SurfaceMarkerInvalid({ rule: "D3", seq: 0, eventType: "user/message" }),
  new Errors.ProvenanceInvalid({ rule: "E4", detail: "bad element" }),
  new Errors.MessageShapeInvalid({ rule: "H1", seq: 0, eventType: "user/message", detail: "no id" }),
  new Errors.RequestHeaderInvalid({ rule: "I1", detail: "no model" }),
  new Errors.UnknownEventType({ rule: "K7", seq: 3, eventType: "x/y" }),
  new Errors.StoreCorrupt({
    rule: "L9",
    seq: 5,
    detail: "stored event failed validation",
    cause: new Errors.MessageShapeInvalid({ rule: "H2", seq: 5, eventType: "tool/result" })
  }),
  new Errors.SessionNotFound({ rule: "L11", sessionId: "s" }),
  new Errors.AppendConflict({ rule: "C7", sessionId: "s", expectedSeq: 3, storedSeq: 4 }),
  new Errors.StoreFailure({
    rule: "S7",
    method: "append",
    cause: new SystemError({ reason: "Unknown", module: "FileSystem", method: "write", description: "EIO" })
  }),
  new Errors.StoreFailure({ method: "append", cause: new Error("disk on fire") }),
  new Errors.StoreFailure({ rule: "S6", method: "append", cause: "lock timeout" })
]

describe("the error catalogue as one Schema", () => {
  it("every error, its cause included, encodes to JSON and decodes to the same tag and rule", () => {
    for (const error of samples) {
      assert.isTrue(Schema.is(Errors.SessionLogError)(error), error._tag)
      const encoded = Schema.encodeSync(Errors.SessionLogError)(error)
      const text = JSON.stringify(encoded)
      const decoded = Schema.decodeUnknownSync(Errors.SessionLogError)(JSON.parse(text))
      assert.strictEqual(decoded._tag, error._tag)
      assert.strictEqual(decoded.rule, error.rule)
      assert.strictEqual(decoded.message.split(":")[0], error.message.split(":")[0])
    }
  })

  it("an Error cause keeps its message when encoded", () => {
    const encoded = Schema.encodeSync(Errors.SessionLogError)(samples[12]) as { cause: { message: string } }
    assert.strictEqual(encoded.cause.message, "disk on fire")
  })

  it("a value that is not a catalogue error is refused", () => {
    assert.isFalse(Schema.is(Errors.SessionLogError)(new Error("plain")))
    assert.isFalse(Schema.is(Errors.SessionLogError)({ _tag: "StoreFailure" }))
  })
})
