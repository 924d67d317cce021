/**
 * The migration of a version-1 database of the SQL store to version 2 (docs/formats.md "SQL schema
 * version 2"), inside the open's write transaction: `event_rows` is created, the `events` rows are copied
 * into it page by page, and `events` is dropped; the dialect then stamps version 2. A store that
 * packs chunks writes each session's runs of good delta chunks as packed rows (SPEC Appendix A)
 * through the append's row builder (`pushEventRows`); every other row is copied as one row, its
 * column text kept exactly (payload compressed when long, provenance in the compact BLOB), so a
 * defective row stays exactly as defective. Atomic: an interrupted migration leaves version 1.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type { Event } from "../../schema/Events.js"
import { EVENT_INSERT_COLUMNS, EVENT_TABLE, isEventRow, pushEventRows, rowToEvents } from "./EventRows.js"
import { encodePayload, encodeProvenance } from "./ColumnEncoding.js"

/** Rows read, and written, per statement. */
const PAGE_ROWS = 1_000

/**
 * A run of chunk events waiting to be packed is written once it holds this many events or UTF-16
 * units of payload text: memory stays bounded whatever a session holds (a longer run is cut there).
 */
const PENDING_EVENTS = 4_096
const PENDING_TEXT = 4 * 1_048_576

interface V1Row {
  readonly session_id: string
  readonly seq: number | bigint
  readonly type: string
  readonly time: number | bigint
  readonly data: string
  readonly source_event_seqs: string | null
  readonly surface_op: string | null
  readonly ignorable: unknown
}

/** A row to insert: EVENT_INSERT_COLUMNS as keys, in that order. */
type Version2Row = Record<typeof EVENT_INSERT_COLUMNS[number], unknown>

const parsedOrUndefined = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** The version-2 row of a version-1 row, its column text kept exactly. */
const version2Row = (r: V1Row): Version2Row => {
  const [data, dataZ] = encodePayload(String(r.data))
  return {
    session_id: r.session_id,
    seq: r.seq,
    members: 1,
    type: r.type,
    time: r.time,
    data,
    data_z: dataZ,
    source_event_seqs: r.source_event_seqs === null
      ? null
      : encodeProvenance(parsedOrUndefined(r.source_event_seqs), r.source_event_seqs),
    surface_op: r.surface_op,
    ignorable: r.ignorable
  }
}

/** What the migration needs of a dialect (`Dialect` has it; not imported: Dialect imports this module). */
export interface MigrationDialect {
  readonly name: string
  /** The canonical tables of version 2 (`event_rows` among them). */
  readonly tables: ReadonlyArray<{ readonly name: string; readonly sql: string }>
}

/**
 * The rows of the migration, fed the version-1 rows in (session_id, seq) order. With `pack`, each
 * session's rows are decoded as a load decodes them (`rowToEvents`, from seq 0) up to its first
 * defect; its good `assistant/chunk` events are held, and each stretch of them between other rows
 * goes through `pushEventRows` (runs of ≥ 3 packed, the rest one row each), which is what an
 * append of that stretch writes. They read back as the same events. From the first defect on
 * (and with `pack` off) every row is copied as it is: a packed row never spans a defect, so the
 * load's verdict on the session (torn tail, L2 before a turn/end) is the same row's.
 */
class Rows {
  /** Rows ready to insert, in order. */
  out: Array<Version2Row> = []
  private session: string | undefined
  private expected = 0
  private decoding = false
  private pending: Array<Event> = []
  private pendingText = 0
  private readonly decoded: Array<Event> = []

  constructor(private readonly pack: boolean, private readonly location: string) {}

  feed(r: V1Row): void {
    if (r.session_id !== this.session) {
      this.flush()
      this.session = r.session_id
      this.expected = 0
      this.decoding = this.pack
    }
    if (this.decoding) {
      this.decoded.length = 0
      const row: unknown = [r.seq, 1, r.type, r.time, r.data, null, r.source_event_seqs, r.surface_op, r.ignorable]
      const verdict = isEventRow(row) ? rowToEvents(row, this.expected, this.location, this.decoded) : "unparsable"
      if (typeof verdict === "number") {
        this.expected += verdict
        if (this.decoded.length === 1 && this.decoded[0].type === "assistant/chunk") {
          this.pending.push(this.decoded[0])
          this.pendingText += String(r.data).length
          if (this.pending.length >= PENDING_EVENTS || this.pendingText >= PENDING_TEXT) this.flush()
          return
        }
      } else {
        // the first defect: this row and the session's later rows are copied as they are
        this.decoding = false
      }
    }
    this.flush()
    this.out.push(version2Row(r))
  }

  /** Write the held chunk events as an append of them would. */
  flush(): void {
    if (this.pending.length === 0 || this.session === undefined) return
    const params: Array<unknown> = []
    const rows = pushEventRows(params, this.session, this.pending, undefined, true)
    const width = EVENT_INSERT_COLUMNS.length
    for (let i = 0; i < rows; i++) {
      const row: Record<string, unknown> = {}
      for (let k = 0; k < width; k++) row[EVENT_INSERT_COLUMNS[k]] = params[i * width + k]
      this.out.push(row as Version2Row)
    }
    this.pending = []
    this.pendingText = 0
  }
}

/**
 * Create `event_rows`, write every `events` row into it in (session_id, seq) order (chunk runs
 * packed when `pack`), drop `events`.
 */
export const migrateToVersion2 = (
  dialect: MigrationDialect,
  pack: boolean
): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = dialect.tables.find((t) => t.name === EVENT_TABLE[2])
    if (table === undefined) return yield* Effect.dieMessage(`SqlMigrate: the ${dialect.name} dialect has no ${EVENT_TABLE[2]} table`)
    yield* sql.unsafe(table.sql)
    const rows = new Rows(pack, `${dialect.name} migration`)
    const write = Effect.suspend(() => {
      const out = rows.out
      rows.out = []
      return Effect.forEach(
        Array.from({ length: Math.ceil(out.length / PAGE_ROWS) }, (_, k) => out.slice(k * PAGE_ROWS, (k + 1) * PAGE_ROWS)),
        (slice) => sql`INSERT INTO event_rows ${sql.insert(slice)}`,
        { discard: true }
      )
    })
    let after: V1Row | undefined
    for (;;) {
      const page: ReadonlyArray<V1Row> = after === undefined
        ? yield* sql<V1Row>`SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable
                            FROM events ORDER BY session_id, seq LIMIT ${PAGE_ROWS}`
        : yield* sql<V1Row>`SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable
                            FROM events WHERE session_id > ${after.session_id} OR (session_id = ${after.session_id} AND seq > ${after.seq})
                            ORDER BY session_id, seq LIMIT ${PAGE_ROWS}`
      for (const r of page) rows.feed(r)
      if (page.length < PAGE_ROWS) break
      yield* write
      after = page[page.length - 1]
    }
    rows.flush()
    yield* write
    yield* sql`DROP TABLE events`
  })
