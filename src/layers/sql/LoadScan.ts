/**
 * Classification of a session's event rows on load (SPEC §7.5 "Load", §7.4.4 step 5), fed page
 * by page: the contiguous prefix of good rows as envelopes (a packed row's members in order), then
 * no defect, a torn tail from the first defective row, or `StoreCorrupt` (L2 when a later row is a
 * `turn/end` or when `sessions.next_seq` disagrees with the rows, L4 for a malformed packed row
 * there; L9 when a row does not decode).
 */
import { StoreCorrupt } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { TornTail } from "../../services/SessionStore.js"
import { isEventRow, PackedDefect, rowEnd, type RowDefect, rowToEvents, undecodable } from "./EventRows.js"

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
  /** the seq after the last row fed (its last member's seq + 1) */
  end = 0
  private stopped = false
  private defectSeq = -1
  private defectReason: RowDefect | undefined
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
      const expected = this.rows === 0 ? this.firstSeq : this.end
      this.rows++
      this.end = rowEnd(row)
      if (this.stopped) {
        if (this.defectReason !== undefined && this.laterTurnEnd === -1 && row[2] === "turn/end") this.laterTurnEnd = row[0]
        continue
      }
      const verdict = rowToEvents(row, expected, this.location, this.events)
      if (typeof verdict === "number") {
        this.good += verdict
      } else if (verdict instanceof StoreCorrupt) {
        this.stopped = true
        this.corrupt = verdict
      } else {
        this.stopped = true
        this.defectSeq = expected
        this.defectReason = verdict
      }
    }
    return undefined
  }

  /** The verdict once every row was fed, given the session row's `next_seq`. */
  result(nextSeq: number): ScanResult {
    const end = this.rows === 0 ? this.firstSeq : this.end
    if (nextSeq !== end) {
      return new StoreCorrupt({
        rule: "L2",
        location: this.location,
        detail: `sessions.next_seq is ${nextSeq} but the last stored seq is ${end - 1}`
      })
    }
    if (this.corrupt !== undefined) return this.corrupt
    const reason = this.defectReason
    if (reason === undefined) return { events: this.events, tornTail: undefined, count: this.good }
    const at = this.defectSeq
    const packed = reason instanceof PackedDefect
    if (this.laterTurnEnd !== -1) {
      return new StoreCorrupt({
        rule: packed ? "L4" : "L2",
        seq: at,
        location: this.location,
        detail: `defective row (${packed ? reason.detail : reason}) at seq ${at} before a turn/end at seq ${this.laterTurnEnd}`
      })
    }
    return {
      events: this.events,
      tornTail: { fromSeq: at, reason: packed ? reason.reason : reason, position: at },
      count: this.good
    }
  }
}
