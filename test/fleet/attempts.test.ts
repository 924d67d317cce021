/**
 * Which attempts at a prompt the log says answered it (`Fleet.attemptsOf`, docs/fleet.md "What is
 * guaranteed"): a turn that ended `error` because a checkpoint met a transient store failure
 * (`CHECKPOINT_FAILED` of a `StoreFailure` without a rule id) carries `storeFailed` and is run
 * again; a turn that ended `error` for any other reason (a rule id, a provider failure) does not.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import * as Fleet from "../../src/programs/fleet/Fleet.js"
import { StoreFailure } from "../../src/schema/Errors.js"
import type { Event } from "../../src/schema/Events.js"

type Cause = "transient" | "ruled" | "provider" | "completed"

const endOf = (cause: Cause): unknown => {
  switch (cause) {
    case "transient":
      return { kind: "error", error: { message: new StoreFailure({ method: "append", cause: new Error("timeout") }).message, code: "CHECKPOINT_FAILED" } }
    case "ruled":
      return { kind: "error", error: { message: new StoreFailure({ method: "append", rule: "S10", cause: "x" }).message, code: "CHECKPOINT_FAILED" } }
    case "provider":
      return { kind: "error", error: { message: "store failure in the model", code: "RATE_LIMITED" } }
    case "completed":
      return { kind: "completed" }
  }
}

const logOf = (causes: ReadonlyArray<Cause>): ReadonlyArray<Event> => {
  const events: Array<unknown> = []
  causes.forEach((cause, i) => {
    const turn = i + 1
    events.push({ seq: events.length, type: "turn/start", data: { turn } })
    events.push({ seq: events.length, type: "user/message", data: { id: i === 0 ? "p" : `p#${i + 1}`, message: { content: [] } } })
    events.push({ seq: events.length, type: "turn/end", data: { turn, reason: endOf(cause) } })
  })
  return events as ReadonlyArray<Event>
}

describe("Fleet.attemptsOf: a turn a transient store failure ended is not an answer", () => {
  it.prop("storeFailed exactly on CHECKPOINT_FAILED of a StoreFailure without a rule id", [
    fc.array(fc.constantFrom<Cause>("transient", "ruled", "provider", "completed"), { minLength: 1, maxLength: 6 })
  ], ([causes]) => {
    const attempts = Fleet.attemptsOf(logOf(causes), "p")
    assert.deepStrictEqual(attempts.map((a) => a.turn), causes.map((_, i) => i + 1))
    assert.deepStrictEqual(attempts.map((a) => a.storeFailed !== undefined), causes.map((c) => c === "transient"))
    assert.deepStrictEqual(attempts.map((a) => a.end), causes.map((c) => c === "completed" ? "completed" : "error"))
  })
})
