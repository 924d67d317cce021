/**
 * The `AgentSession` entity in one process (issue 34): a runner (`FleetRunner.layerRunner`: a
 * real socket, the cluster's tables and the store in a fresh PostgreSQL database) serving the
 * entity's behaviour, and a client of the same `Sharding`. A prompt runs one turn and is answered
 * with its text; the same prompt id again is answered from what was stored, without a turn; the
 * prompt's message carries its id; `cancel` ends the turn in flight `aborted`; `status` and `load`
 * answer while a turn runs; every log verifies.
 */
import { assert, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { layerRunner } from "../../src/layers/fleet/FleetRunner.js"
import { behaviour, keylessFleetModel } from "../../src/programs/cli/FleetMain.js"
import * as Fleet from "../../src/programs/fleet/Fleet.js"
import { verifyStored } from "./verify.js"
import { describePg } from "../postgres/helpers.js"
import { freePort, freshDatabase } from "./helpers.js"

const fleet = Effect.gen(function*() {
  const url = yield* Effect.promise(freshDatabase)
  const port = yield* Effect.promise(freePort)
  const runner = layerRunner({ url, listen: { host: "127.0.0.1", port }, lockExpirationMs: 3_000 })
  const served = behaviour({ url, model: keylessFleetModel, route: { provider: "scripted", model: "keyless-fleet" } })
  const context = yield* Layer.build(Layer.provideMerge(served, runner))
  const client = yield* Fleet.client.pipe(Effect.provide(context))
  return { url, client, runner: `127.0.0.1:${port}` }
})

describePg("Fleet: the AgentSession entity in one process", () => {
  it.live("prompt, the same prompt again, cancel, status and load", () =>
    Effect.gen(function*() {
      const { client, runner, url } = yield* fleet
      const s = client("entity-1")
      const first = yield* s.prompt(new Fleet.PromptRequest({ promptId: "p1", text: "hello" }))
      assert.deepStrictEqual(first, {
        sessionId: "entity-1",
        promptId: "p1",
        turn: 1,
        reason: "completed",
        text: "You said: hello",
        attempt: 1,
        runner,
        replayed: false
      })
      // the same id: answered once (the stored reply), no second turn
      const again = yield* s.prompt(new Fleet.PromptRequest({ promptId: "p1", text: "hello" }))
      assert.deepStrictEqual(again, first)
      const status = yield* s.status()
      assert.deepStrictEqual({ ...status, events: 0 }, { sessionId: "entity-1", runner, events: 0, turns: 1, busy: false })

      // a slow turn, cancelled while it runs: status says busy, load answers meanwhile
      const slow = yield* Effect.fork(s.prompt(new Fleet.PromptRequest({ promptId: "p2", text: "sleep 60000 long" })))
      const transcript = yield* s.load().pipe(Effect.tap(() => Effect.sleep("20 millis")), Effect.repeat({ until: (t) => t.length === 3 }))
      assert.isTrue((yield* s.status()).busy)
      assert.deepStrictEqual(transcript.map((e) => [e.type, e.text]), [
        ["user/message", "hello"],
        ["assistant/message", "You said: hello"],
        ["user/message", "sleep 60000 long"]
      ])
      assert.isTrue(yield* s.cancel())
      const cancelled = yield* Fiber.join(slow)
      assert.strictEqual(cancelled.reason, "aborted")
      assert.strictEqual(cancelled.turn, 2)
      assert.isFalse(yield* s.cancel())

      // after a cancelled turn the session serves the next prompt
      const third = yield* s.prompt(new Fleet.PromptRequest({ promptId: "p3", text: "after" }))
      assert.deepStrictEqual([third.turn, third.reason, third.text], [3, "completed", "You said: after"])
      yield* verifyStored(url, "entity-1", [["p1", "completed"], ["p2", "aborted"], ["p3", "completed"]])
    }).pipe(Effect.scoped), { timeout: 60_000 })

  it.live("sessions prompted concurrently each get their own turns", () =>
    Effect.gen(function*() {
      const { client, url } = yield* fleet
      const ids = Array.from({ length: 6 }, (_, i) => `entity-c-${i}`)
      const gate = yield* Deferred.make<void>()
      const answers = yield* Effect.forEach(
        ids,
        (id) =>
          Deferred.await(gate).pipe(
            Effect.zipRight(Effect.forEach([1, 2], (n) => client(id).prompt(new Fleet.PromptRequest({ promptId: `${id}-${n}`, text: `${id} ${n}` })))),
            Effect.fork
          )
      )
      yield* Deferred.succeed(gate, undefined)
      const done = yield* Fiber.joinAll(answers)
      assert.deepStrictEqual(done.map((xs) => xs.map((a) => [a.turn, a.text])), ids.map((id) => [[1, `You said: ${id} 1`], [2, `You said: ${id} 2`]]))
      for (const id of ids) yield* verifyStored(url, id, [[`${id}-1`, "completed"], [`${id}-2`, "completed"]])
    }).pipe(Effect.scoped), { timeout: 60_000 })
})


