/**
 * The compaction lock and ownership (SPEC §9.4), read from the log: who holds the lock, which
 * turn is open, and whether one compaction's bracket is open or closed. Pure.
 */
import * as Schema from "effect/Schema"
import { type Event, EventPayloads } from "../../schema/Events.js"

const isStart = Schema.is(EventPayloads["compaction/start"])
const isEnd = Schema.is(EventPayloads["compaction/end"])
const isTurnStart = Schema.is(EventPayloads["turn/start"])
const isTurnEnd = Schema.is(EventPayloads["turn/end"])

/**
 * The compaction lock (SPEC §9.4): busy iff the newest bracket event is a `compaction/start`
 * and no `session/end-seed` is newer than it. Returns the unmatched start's seq when busy.
 *
 * @since 0.1.0
 * @category utils
 */
export const lockHolder = (events: ReadonlyArray<Event>): number | undefined => {
  let unmatched: number | undefined
  let endSeed = -1
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (endSeed === -1 && e.type === "session/end-seed") endSeed = e.seq
    if (unmatched === undefined) {
      if (e.type === "compaction/start" && isStart(e.data)) {
        unmatched = e.seq
        if (endSeed !== -1) break
        continue
      }
      if (e.type === "compaction/end" && isEnd(e.data)) return undefined
    } else if (endSeed !== -1) break
  }
  if (unmatched === undefined) return undefined
  return endSeed > unmatched ? undefined : unmatched
}

/**
 * The number of the open turn (the newest `turn/start` not followed by a `turn/end`), if any.
 *
 * @since 0.1.0
 * @category utils
 */
export const openTurn = (events: ReadonlyArray<Event>): number | undefined => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type === "turn/end" && isTurnEnd(e.data)) return undefined
    if (e.type === "turn/start" && isTurnStart(e.data)) return e.data.turn
  }
  return undefined
}

/** Whether this compaction's bracket is absent, open, or closed in the log. */
export const bracketState = (events: ReadonlyArray<Event>, compactionId: string): "absent" | "open" | "closed" => {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type === "compaction/end" && isEnd(e.data) && e.data.compactionId === compactionId) return "closed"
    if (e.type === "compaction/start" && isStart(e.data) && e.data.compactionId === compactionId) return "open"
  }
  return "absent"
}
