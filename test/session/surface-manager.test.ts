/**
 * The surface is a service again (SPEC §4.1, issue 29): the session layers take the SurfaceManager
 * of the context for every session they build (create, fromSeed, open, fork) and plan and fold the
 * session's surface through the tracker it hands out; without one, the default applies and nobody
 * has to provide it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as MemoryStore from "../../src/layers/memory/MemoryStore.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import type { Event } from "../../src/schema/Events.js"
import * as SurfaceManager from "../../src/services/SurfaceManager.js"
import { userMessage as user } from "../helpers/events.js"


/** The default surface, recording which logs it was asked to track and how far each was read. */
const recording = () => {
  const tracked: Array<{ readonly log: ReadonlyArray<unknown>; readonly tracker: SurfaceManager.SurfaceTracker }> = []
  const layer = Layer.succeed(SurfaceManager.SurfaceManager, {
    ...SurfaceManager.live,
    track: (log, baseSeq) => {
      const tracker = SurfaceManager.live.track(log, baseSeq)
      tracked.push({ log, tracker })
      return tracker
    }
  })
  return { tracked, layer }
}

describe("SurfaceManager service (SPEC §4.1)", () => {
  it.scoped("create, open, fromSeed and fork each take the provided SurfaceManager; the session's surface is its tracker's", () => {
    const { tracked, layer } = recording()
    return Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "surface-a" })
      yield* s.append("user/message", user("m1", "one"), { surfaceOp: "append" })
      yield* s.append("user/message", user("m2", "two"), { surfaceOp: "append" })
      assert.strictEqual(tracked.length, 1)
      // the tracker handed out is the one the session's surface reads
      assert.deepStrictEqual([...tracked[0]!.tracker.nodes], [...(yield* s.surface.nodes)])
      assert.deepStrictEqual([...tracked[0]!.tracker.nodes], [0, 1])

      yield* SessionLive.open("surface-a")
      assert.strictEqual(tracked.length, 2)
      yield* SessionLive.fork("surface-a", { childId: "surface-b" })
      assert.isAtLeast(tracked.length, 3)
      const seeded = yield* SessionLive.fromSeed({ header: { version: 1, id: "surface-c", createdAt: 1 }, seed: [] })
      yield* seeded.append("user/message", user("m3", "three"), { surfaceOp: "append" })
      // fromSeed's session: the tracker of its log holds the one message (after the end-seed marker)
      const last = tracked.at(-1)!
      const message = (yield* seeded.events).find((e) => e.type === "user/message")!
      assert.strictEqual(last.log.length, (yield* seeded.events).length)
      assert.deepStrictEqual([...last.tracker.nodes], [message.seq])
    }).pipe(Effect.provide(Layer.merge(MemoryStore.layer(), layer)))
  })

  it.scoped("without a SurfaceManager in the context the default surface applies", () =>
    Effect.gen(function*() {
      const s = yield* SessionLive.create({ id: "surface-default" })
      yield* s.append("user/message", user("m1", "one"), { surfaceOp: "append" })
      assert.deepStrictEqual([...(yield* s.surface.nodes)], [0])
      const folded = SurfaceManager.live.fold(yield* s.events)
      assert.isFalse("_tag" in folded)
      if (!("_tag" in folded)) assert.deepStrictEqual([...folded.nodes], [0])
    }).pipe(Effect.provide(MemoryStore.layer())))

  it.effect("a committed event the surface rejects is a tagged defect of the Effect that read the surface, not a thrown Error", () =>
    Effect.gen(function*() {
      // a log no session would commit: its second event replaces a seq that is not on the surface (F1)
      const log = [
        { type: "turn/start", seq: 0, time: 0, data: { turn: 1 } },
        { type: "user/message", seq: 1, time: 0, data: user("m2", "two"), surfaceOp: { op: "replace", start: 0, end: 0 }, sourceEventSeqs: [0] }
      ] as unknown as ReadonlyArray<Event>
      const tracker = SurfaceManager.live.track(log)
      const exit = yield* Effect.exit(Effect.sync(() => tracker.nodes))
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      const defect = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.dieOption(exit.cause)) : undefined
      assert.instanceOf(defect, SurfaceManager.SurfaceInvariantBroken)
      const broken = defect as SurfaceManager.SurfaceInvariantBroken
      assert.deepStrictEqual([broken._tag, broken.seq, broken.error.rule], ["SurfaceInvariantBroken", 1, "F1"])
      assert.match(broken.message, /^surface catch-up met an invalid committed event at seq 1: /)
    }))
})
