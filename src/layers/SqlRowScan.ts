/**
 * Classification of a session's `events` rows on load (SPEC §7.5 "Load", §7.4.4 step 5), fed
 * page by page: the contiguous prefix of good rows as envelopes, then no defect, a torn tail from
 * the first defective row, or `StoreCorrupt` (L2 when a later row is a `turn/end` or when
 * `sessions.next_seq` disagrees with the rows; L9 when a row does not decode).
 */
import { StoreCorrupt } from "../schema/Errors.js"
import type { Event } from "../schema/Events.js"
import type { TornTail } from "../services/SessionStore.js"
import { isEventRow, rowToEvent, undecodable } from "./SqlRows.js"

/** The verdict on a session's rows. */
export type ScanResult = StoreCorrupt | {
  readonly events: ReadonlyArray<Event>
  readonly tornTail: TornTail | undefined
  /** How many good events were classified (kept, or handed over by `drain`). */
  readonly count: number
}

/** Rows after the first defect are only looked at for their type and seq. */
export class RowScan {
  events: Array<Event> = []
  /** good events classified so far */
  good = 0
  /** rows fed so far */
  rows = 0
  /** seq of the last row fed */
  lastSeq = -1
  private stopped = false
  private defectSeq = -1
  private defectReason: TornTail["reason"] | undefined
  private laterTurnEnd = -1
  private corrupt: StoreCorrupt | undefined

  constructor(private readonly firstSeq: number, private readonly location: string) {}

  /** Hand over the events classified good since the last call (a streamed read). */
  drain(): Array<Event> {
    const out = this.events
    this.events = []
    return out
  }

  /** Classify one page of raw result rows; L9 when a row does not decode at all. */
  feed(page: ReadonlyArray<unknown>): StoreCorrupt | undefined {
    for (let i = 0; i < page.length; i++) {
      const row = page[i]
      if (!isEventRow(row)) return undecodable(this.location, row)
      if (row[0] < 0) {
        // written by something else: truncating a torn tail (seq >= fromSeq) could never remove
        // it, so it is corruption wherever it is, never a torn tail
        return new StoreCorrupt({
          rule: "L2",
          seq: row[0],
          location: this.location,
          detail: `a row with the negative seq ${row[0]}`
        })
      }
      const expected = this.firstSeq + this.rows
      this.rows++
      this.lastSeq = row[0]
      if (this.stopped) {
        if (this.defectReason !== undefined && this.laterTurnEnd === -1 && row[1] === "turn/end") this.laterTurnEnd = row[0]
        continue
      }
      const verdict = rowToEvent(row, expected, this.location)
      if (typeof verdict === "string") {
        this.stopped = true
        this.defectSeq = expected
        this.defectReason = verdict
      } else if (verdict instanceof StoreCorrupt) {
        this.stopped = true
        this.corrupt = verdict
      } else {
        this.events.push(verdict)
        this.good++
      }
    }
    return undefined
  }

  /** The verdict once every row was fed, given the session row's `next_seq`. */
  result(nextSeq: number): ScanResult {
    const lastSeq = this.rows === 0 ? -1 : this.lastSeq
    if (nextSeq !== lastSeq + 1) {
      return new StoreCorrupt({
        rule: "L2",
        location: this.location,
        detail: `sessions.next_seq is ${nextSeq} but the last stored seq is ${lastSeq}`
      })
    }
    if (this.corrupt !== undefined) return this.corrupt
    const reason = this.defectReason
    if (reason === undefined) return { events: this.events, tornTail: undefined, count: this.good }
    const at = this.defectSeq
    if (this.laterTurnEnd !== -1) {
      return new StoreCorrupt({
        rule: "L2",
        seq: at,
        location: this.location,
        detail: `defective row (${reason}) at seq ${at} before a turn/end at seq ${this.laterTurnEnd}`
      })
    }
    return { events: this.events, tornTail: { fromSeq: at, reason, position: at }, count: this.good }
  }
}
