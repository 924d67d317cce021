/**
 * The migration of a version-1 database of the SQL store to version 2 (README "SQL schema version
 * 2"), inside the open's write transaction: `event_rows` is created, every `events` row is copied
 * into it as one row (its payload compressed when long, its provenance in the compact BLOB; the
 * column text as stored, so a defective row stays exactly as defective), and `events` is dropped;
 * the dialect then stamps version 2. Atomic: an interrupted migration leaves version 1.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import { EVENT_TABLE } from "./SqlEventRows.js"
import { encodePayload, encodeProvenance } from "./SqlPayload.js"

/** Rows copied per statement. */
const PAGE_ROWS = 1_000

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

const parsedOrUndefined = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/** The version-2 row of a version-1 row, its column text kept exactly. */
const version2Row = (r: V1Row) => {
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

/** What the migration needs of a dialect (`SqlDialect` has it; not imported: SqlDialect imports this module). */
export interface MigrationDialect {
  readonly name: string
  /** The canonical tables of version 2 (`event_rows` among them). */
  readonly tables: ReadonlyArray<{ readonly name: string; readonly sql: string }>
}

/** Create `event_rows`, copy every `events` row into it in (session_id, seq) order, drop `events`. */
export const migrateToVersion2 = (dialect: MigrationDialect): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = dialect.tables.find((t) => t.name === EVENT_TABLE[2])
    if (table === undefined) return yield* Effect.dieMessage(`SqlMigrate: the ${dialect.name} dialect has no ${EVENT_TABLE[2]} table`)
    yield* sql.unsafe(table.sql)
    let after: V1Row | undefined
    for (;;) {
      const page: ReadonlyArray<V1Row> = after === undefined
        ? yield* sql<V1Row>`SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable
                            FROM events ORDER BY session_id, seq LIMIT ${PAGE_ROWS}`
        : yield* sql<V1Row>`SELECT session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable
                            FROM events WHERE session_id > ${after.session_id} OR (session_id = ${after.session_id} AND seq > ${after.seq})
                            ORDER BY session_id, seq LIMIT ${PAGE_ROWS}`
      if (page.length === 0) break
      yield* sql`INSERT INTO event_rows ${sql.insert(page.map(version2Row))}`
      if (page.length < PAGE_ROWS) break
      after = page[page.length - 1]
    }
    yield* sql`DROP TABLE events`
  })
