/**
 * A session's stored log, read back through a store of its own (read-only): it validates as a
 * seed (Verify.verifyStored), and its turns are, in order, the expected prompts (the user
 * message ids) with their turn/end reasons, one turn after the other.
 */
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as PostgresStore from "../../src/layers/sql/postgres/PostgresStore.js"
import * as Verify from "../../src/programs/Verify.js"
import { SessionStore } from "../../src/services/SessionStore.js"

export const verifyStored = (url: string, id: string, expected: ReadonlyArray<readonly [string, string]>) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const loaded = yield* store.load(id)
    const turns: Array<[string, string]> = []
    let open = false
    let current = ""
    for (const e of loaded.events as ReadonlyArray<{ readonly type: string; readonly data: unknown }>) {
      const data = e.data as any
      if (e.type === "turn/start") {
        assert.isFalse(open, `${id}: a turn started inside another`)
        open = true
        current = ""
      } else if (e.type === "user/message") current = data.id
      else if (e.type === "turn/end") {
        open = false
        turns.push([current, data.reason.kind])
      }
    }
    assert.deepStrictEqual(turns, expected.map(([a, b]) => [a, b]))
    const report = yield* Verify.verifySession(id)
    assert.isTrue(report.ok, JSON.stringify(report))
  }).pipe(Effect.scoped, Effect.provide(PostgresStore.layer({ url, readOnly: true })), Effect.orDie)
