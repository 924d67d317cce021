/**
 * A session's stored log, read back through a store of its own (read-only): it validates
 * (`Verify.verifySession`), no turn starts inside another, and its turns are returned in order as
 * [user message id, turn/end reason].
 */
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as PostgresStore from "../../src/layers/sql/postgres/PostgresStore.js"
import * as Verify from "../../src/programs/Verify.js"
import { SessionStore } from "../../src/services/SessionStore.js"

export const storedTurns = (url: string, id: string) =>
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
    const report = yield* Verify.verifySession(id)
    assert.isTrue(report.ok, `${id}: ${JSON.stringify(report)}`)
    return turns
  }).pipe(Effect.scoped, Effect.provide(PostgresStore.layer({ url, readOnly: true })), Effect.orDie)

/** `storedTurns`, expected to be exactly `expected`. */
export const verifyStored = (url: string, id: string, expected: ReadonlyArray<readonly [string, string]>) =>
  Effect.map(storedTurns(url, id), (turns) => assert.deepStrictEqual(turns, expected.map(([a, b]) => [a, b])))

/** The prompt ids of the completed turns, in order (`<promptId>#<n>` counted as `<promptId>`). */
export const completedPrompts = (url: string, id: string) =>
  Effect.map(storedTurns(url, id), (turns) => turns.filter(([, end]) => end === "completed").map(([p]) => p.replace(/#\d+$/, "")))

/** A session's stored events (read-only, in this process); none before the session exists. */
export const storedEvents = (url: string, id: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    return (yield* store.load(id)).events as ReadonlyArray<unknown>
  }).pipe(
    Effect.catchTag("SessionNotFound", () => Effect.succeed([] as ReadonlyArray<unknown>)),
    Effect.scoped,
    Effect.provide(PostgresStore.layer({ url, readOnly: true })),
    Effect.orDie
  )

/** Every event in `before` is still stored, unchanged, at its seq. */
export const keptEvents = (url: string, id: string, before: ReadonlyArray<unknown>) =>
  Effect.map(storedEvents(url, id), (after) => assert.deepStrictEqual(after.slice(0, before.length), before, `${id}: an event stored before was lost or changed`))
