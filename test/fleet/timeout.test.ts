/**
 * A prompt with no runner alive (issue 34): `Fleet.promptStream` through a client-only `Sharding`
 * on a fresh PostgreSQL database where no runner ever started fails with `FleetUnavailable` after
 * its timeout (naming the session, the prompt and the time waited) instead of waiting forever.
 * What happens to that prompt once a runner starts is in test/fleet/stream.test.ts (test:slow).
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { layerClient } from "../../src/layers/fleet/FleetRunner.js"
import * as PostgresStore from "../../src/layers/sql/postgres/PostgresStore.js"
import * as Fleet from "../../src/programs/fleet/Fleet.js"
import { describePg } from "../postgres/helpers.js"
import { freshDatabase } from "./helpers.js"

describePg("Fleet.promptStream with no runner alive", () => {
  it.live("fails with FleetUnavailable after its timeout", () =>
    Effect.gen(function*() {
      const url = yield* Effect.promise(freshDatabase)
      const client = yield* Layer.build(Layer.merge(layerClient({ url }), PostgresStore.layer({ url })))
      const updates: Array<Fleet.PromptUpdate> = []
      const exit = yield* Fleet.promptStream("nobody", new Fleet.PromptRequest({ promptId: "q1", text: "anyone?" }), { timeoutMs: 300 }).pipe(
        Stream.runForEach((u) => Effect.sync(() => updates.push(u))),
        Effect.provide(client),
        Effect.exit
      )
      assert(Exit.isFailure(exit))
      const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert(error instanceof Fleet.FleetUnavailable, String(exit.cause))
      assert.deepStrictEqual([error.sessionId, error.promptId, error.timeoutMs], ["nobody", "q1", 300])
      assert.match(error.message, /no runner of the fleet started prompt q1 of session nobody within 300 ms/)
      assert.deepStrictEqual(updates, [])
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
