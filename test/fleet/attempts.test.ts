/**
 * Which attempts at a prompt the log says answered it (`Fleet.attemptsOf`, docs/fleet.md "What is
 * guaranteed"): a turn that ended `error` because a checkpoint met a transient store failure
 * (`CHECKPOINT_FAILED` of a `StoreFailure` without a rule id) carries `storeFailed` and is run
 * again; a turn that ended `error` for any other reason (a rule id, a provider failure) does not.
 * The end says so structurally (its `transient` flag, set by the agent loop where the checkpoint
 * failed); an end written before the flag existed is still recognised by its message.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import { checkpointFailed } from "../../src/programs/agent/TurnContext.js"
import * as Fleet from "../../src/programs/fleet/Fleet.js"
import { AppendConflict, StoreFailure } from "../../src/schema/Errors.js"
import type { Event } from "../../src/schema/Events.js"

type Cause = "transient" | "transient-old" | "ruled" | "ruled-old" | "conflict" | "flag-false" | "provider" | "completed"

const TRANSIENT: ReadonlyArray<Cause> = ["transient", "transient-old"]

// the reason the agent loop writes for a failed checkpoint
const ended = (error: StoreFailure | AppendConflict): unknown => ({ kind: "error", error: checkpointFailed(error).failure })

const endOf = (cause: Cause): unknown => {
  switch (cause) {
    case "transient":
      return ended(new StoreFailure({ method: "append", cause: new Error("timeout") }))
    case "transient-old":
      // an end written before the `transient` flag: the message only
      return { kind: "error", error: { message: new StoreFailure({ method: "append", cause: new Error("timeout") }).message, code: "CHECKPOINT_FAILED" } }
    case "ruled":
      return ended(new StoreFailure({ method: "append", rule: "S10", cause: "x" }))
    case "ruled-old":
      return { kind: "error", error: { message: new StoreFailure({ method: "append", rule: "S10", cause: "x" }).message, code: "CHECKPOINT_FAILED" } }
    case "conflict":
      return ended(new AppendConflict({ rule: "C5", sessionId: "s", expectedSeq: 3, storedSeq: 4 }))
    case "flag-false":
      // the flag decides, not the message
      return { kind: "error", error: { message: "store failure in append: but not transient", code: "CHECKPOINT_FAILED", transient: false } }
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
  it("the agent loop flags a checkpoint's StoreFailure without a rule id as transient, and only that", () => {
    const failure = (e: StoreFailure | AppendConflict) => checkpointFailed(e).failure as Record<string, unknown>
    assert.deepStrictEqual(failure(new StoreFailure({ method: "append", cause: new Error("timeout") })), {
      message: "store failure in append: timeout",
      code: "CHECKPOINT_FAILED",
      transient: true
    })
    assert.strictEqual(failure(new StoreFailure({ method: "append", rule: "S6", cause: "busy" })).transient, false)
    assert.strictEqual(failure(new AppendConflict({ rule: "C5", sessionId: "s", expectedSeq: 3, storedSeq: 4 })).transient, false)
  })

  it.prop("storeFailed exactly on CHECKPOINT_FAILED of a StoreFailure without a rule id, flagged or (old logs) by message", [
    fc.array(fc.constantFrom<Cause>("transient", "transient-old", "ruled", "ruled-old", "conflict", "flag-false", "provider", "completed"), {
      minLength: 1,
      maxLength: 6
    })
  ], ([causes]) => {
    const attempts = Fleet.attemptsOf(logOf(causes), "p")
    assert.deepStrictEqual(attempts.map((a) => a.turn), causes.map((_, i) => i + 1))
    assert.deepStrictEqual(attempts.map((a) => a.storeFailed !== undefined), causes.map((c) => TRANSIENT.includes(c)))
    assert.deepStrictEqual(attempts.map((a) => a.end), causes.map((c) => c === "completed" ? "completed" : "error"))
  })
})
