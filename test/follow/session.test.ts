/**
 * `SessionLive.follow` (issue 31): a session written through a handle, durable or write-behind,
 * followed as checked `Event`s by a follower that does not write it; a write-behind handle's
 * events reach the follower once they are stored (a flush), never before.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { layer as memoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { freshStore } from "./stores.js"

const userMessage = (n: number) => ({
  id: `u${n}`,
  role: "user" as const,
  content: [{ type: "text" as const, text: `message ${n}` }],
  source: { kind: "user" as const }
})

describe("SessionLive.follow", () => {
  for (const mode of ["durable", "batched"] as const) {
    it.scopedLive(`a ${mode} handle's events, as the store holds them, checked as Events`, () =>
      Effect.gen(function*() {
        const id = `session-${mode}`
        const persistence = mode === "durable" ? { mode } as const : { mode, windowMs: 60_000 } as const
        const session = yield* SessionLive.create({ id, persistence })
        const follower = yield* Effect.fork(Stream.runCollect(Stream.take(SessionLive.follow(id), 6)))
        for (let n = 0; n < 6; n++) yield* session.append("user/message", userMessage(n), { surfaceOp: "append" })
        const store = yield* SessionStore
        if (mode === "batched") {
          // nothing is stored before the flush, so the follower cannot have it
          assert.deepStrictEqual(yield* Effect.either(store.readFrom(id, 0)).pipe(Effect.map((r) => r._tag === "Left" ? [] : r.right)), [])
          assert.isTrue(follower.unsafePoll() === null)
          yield* session.flush
        }
        const got = Chunk.toReadonlyArray(yield* Fiber.join(follower))
        assert.deepStrictEqual(got, yield* session.events)
        assert.deepStrictEqual(got.map((e) => e.seq), [0, 1, 2, 3, 4, 5])
      }).pipe(Effect.provide(memoryStore())))
  }

  it.scopedLive("on SQLite: a follower from the middle gets the rest as Events", () =>
    Effect.gen(function*() {
      const id = "session-sqlite"
      const session = yield* SessionLive.create({ id })
      for (let n = 0; n < 4; n++) yield* session.append("user/message", userMessage(n), { surfaceOp: "append" })
      const got = Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.take(SessionLive.follow(id, { fromSeq: 2 }), 2)))
      assert.deepStrictEqual(got, (yield* session.events).slice(2))
    }).pipe(Effect.provide(freshStore("sqlite"))))
})
