/**
 * The PostgreSQL schema of the SQL store (SPEC §7.6, S10): the canonical tables with BIGINT
 * counters, a BOOLEAN `ignorable` and JSON as TEXT (never jsonb), the singleton meta row in place
 * of SQLite's pragmas, and the ownership check of the open: under `pg_advisory_xact_lock`, an
 * empty schema is pristine, ours has the meta row and exactly the canonical catalogue, anything
 * else is refused with nothing modified.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import { StoreSchemaMismatch } from "../../../schema/Errors.js"
import type { Ownership } from "../Dialect.js"

/**
 * The schema version in the meta row (docs/formats.md "SQL schema version 2"); version 1 is migrated by a
 * writing open and read as it is by a read-only one; any other is refused (bump-and-reject).
 */
export const SCHEMA_VERSION = 2

/** The application named in the meta row. */
export const APPLICATION = "effect-session-log"

/** The canonical tables of version 2 in creation order: `event_rows` references `sessions`. */
export const CANONICAL_SCHEMA: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "sessions",
    sql: `CREATE TABLE sessions (
  id               TEXT    NOT NULL PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       BIGINT  NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      BIGINT,
  origin           TEXT,
  delegation_depth BIGINT,
  agent_preset     TEXT,
  next_seq         BIGINT  NOT NULL,
  revision         BIGINT  NOT NULL
)`
  },
  {
    name: "event_rows",
    sql: `CREATE TABLE event_rows (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               BIGINT  NOT NULL,
  members           INTEGER NOT NULL CHECK (members >= 1),
  type              TEXT    NOT NULL,
  time              BIGINT  NOT NULL,
  data              TEXT,
  data_z            BYTEA,
  source_event_seqs BYTEA,
  surface_op        TEXT,
  ignorable         BOOLEAN CHECK (ignorable),
  CHECK ((data IS NULL) <> (data_z IS NULL)),
  PRIMARY KEY (session_id, seq)
)`
  },
  {
    name: "session_backups",
    sql: `CREATE TABLE session_backups (
  id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  session_id TEXT    NOT NULL,
  taken_at   BIGINT  NOT NULL,
  reason     TEXT    NOT NULL,
  content    TEXT    NOT NULL
)`
  },
  {
    name: "session_log_meta",
    sql: `CREATE TABLE session_log_meta (
  application    TEXT    NOT NULL,
  schema_version INTEGER NOT NULL
)`
  }
]

/** What the catalogue shows of the tables both versions share (`catalogue` below). */
const SHARED_CATALOGUE = [
  "relation session_backups r",
  "relation session_backups_pkey i",
  "relation sessions_pkey i",
  "relation session_backups_id_seq S",
  "relation session_log_meta r",
  "relation sessions r",
  "column session_backups.id bigint not null identity a",
  "column session_backups.session_id text not null",
  "column session_backups.taken_at bigint not null",
  "column session_backups.reason text not null",
  "column session_backups.content text not null",
  "column session_log_meta.application text not null",
  "column session_log_meta.schema_version integer not null",
  "column sessions.id text not null",
  "column sessions.version integer not null",
  "column sessions.created_at bigint not null",
  "column sessions.cwd text null",
  "column sessions.parent_session text null",
  "column sessions.seed_length bigint null",
  "column sessions.origin text null",
  "column sessions.delegation_depth bigint null",
  "column sessions.agent_preset text null",
  "column sessions.next_seq bigint not null",
  "column sessions.revision bigint not null",
  "constraint session_backups p PRIMARY KEY (id)",
  "constraint sessions p PRIMARY KEY (id)"
]

/**
 * What the catalogue shows of the canonical schema of each version in the current schema: every
 * relation (indexes included: an extra index is another schema), every column (type, NOT NULL,
 * identity) and every key or check constraint.
 */
const CANONICAL_CATALOGUE: Record<1 | 2, ReadonlyArray<string>> = {
  1: [
    ...SHARED_CATALOGUE,
    "relation events r",
    "relation events_pkey i",
    "column events.session_id text not null",
    "column events.seq bigint not null",
    "column events.type text not null",
    "column events.time bigint not null",
    "column events.data text not null",
    "column events.source_event_seqs text null",
    "column events.surface_op text null",
    "column events.ignorable boolean null",
    "constraint events c CHECK (ignorable)",
    "constraint events f FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE",
    "constraint events p PRIMARY KEY (session_id, seq)"
  ],
  2: [
    ...SHARED_CATALOGUE,
    "relation event_rows r",
    "relation event_rows_pkey i",
    "column event_rows.session_id text not null",
    "column event_rows.seq bigint not null",
    "column event_rows.members integer not null",
    "column event_rows.type text not null",
    "column event_rows.time bigint not null",
    "column event_rows.data text null",
    "column event_rows.data_z bytea null",
    "column event_rows.source_event_seqs bytea null",
    "column event_rows.surface_op text null",
    "column event_rows.ignorable boolean null",
    "constraint event_rows c CHECK ((members >= 1))",
    "constraint event_rows c CHECK (ignorable)",
    "constraint event_rows c CHECK (((data IS NULL) <> (data_z IS NULL)))",
    "constraint event_rows f FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE",
    "constraint event_rows p PRIMARY KEY (session_id, seq)"
  ]
}

/** The key of the advisory lock of the open (with a second key from the schema's name): "ESLG". */
const LOCK_KEY = 0x45534c47

// ---------------------------------------------------------------------------------------------
// Ownership (S10)

/** The catalogue lines of the current schema, in the order of CANONICAL_CATALOGUE. */
const catalogue = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ readonly line: string }>`
    SELECT 'relation ' || c.relname || ' ' || c.relkind::text AS line, 1 AS part, c.relname AS name, 0 AS pos
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S', 'i', 'I')
    UNION ALL
    SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           || CASE WHEN a.attnotnull THEN ' not null' ELSE ' null' END
           || CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END, 2, c.relname, a.attnum
      FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'constraint ' || c.relname || ' ' || k.contype::text || ' ' || pg_get_constraintdef(k.oid), 3, c.relname, 0
      FROM pg_catalog.pg_constraint k JOIN pg_catalog.pg_class c ON c.oid = k.conrelid
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = current_schema() AND k.contype IN ('p', 'u', 'f', 'c', 'x', 't')
    ORDER BY part, name, pos, line`
  return rows.map((r) => r.line)
})

const EXPECTED = `application=${APPLICATION}, schema_version=1 or ${SCHEMA_VERSION}`

const mismatch = (found: string, expected = EXPECTED) => new StoreSchemaMismatch({ rule: "S10", found, expected })

/** S10 verdict on the meta rows (a `SELECT *`: the table may be another application's): the version found. */
const metaVerdict = (rows: ReadonlyArray<Record<string, unknown>>): StoreSchemaMismatch | 1 | 2 => {
  const row = rows[0]
  if (rows.length === 1 && row.application === APPLICATION && (row.schema_version === 1 || row.schema_version === 2)) {
    return row.schema_version
  }
  const shown = rows.slice(0, 3).map((r) => JSON.stringify(r)).join(", ")
  return mismatch(`${rows.length} session_log_meta rows${rows.length === 0 ? "" : `: ${shown}`}`)
}

/** S10 verdict on the catalogue of an owned schema: exactly the canonical objects of its version. */
const catalogueVerdict = (lines: ReadonlyArray<string>, version: 1 | 2): StoreSchemaMismatch | undefined => {
  const canonical = CANONICAL_CATALOGUE[version]
  const found = new Set(lines)
  const wanted = new Set(canonical)
  const differences = [
    ...lines.filter((line) => !wanted.has(line)).map((line) => `${line} (extra)`),
    ...canonical.filter((line) => !found.has(line)).map((line) => `${line} (missing)`)
  ]
  return differences.length === 0
    ? undefined
    : mismatch(`schema objects: ${differences.join(", ")}`, `the canonical schema of version ${version}`)
}

/**
 * Under the open's advisory lock (held to COMMIT): an empty schema is pristine; one with our meta
 * row and exactly the canonical objects is ours; anything else is refused (S10).
 */
export const ownership = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`SELECT pg_advisory_xact_lock(${LOCK_KEY}, hashtext(coalesce(current_schema(), '')))`
  const lines = yield* catalogue
  if (lines.length === 0) return "pristine" as Ownership
  if (!lines.includes("relation session_log_meta r")) {
    const relations = lines.filter((line) => line.startsWith("relation ")).map((line) => line.split(" ")[1])
    return mismatch(`no session_log_meta table; relations: ${relations.join(", ")}`) as Ownership
  }
  const meta = yield* sql<Record<string, unknown>>`SELECT * FROM session_log_meta`
  const version = metaVerdict(meta)
  if (typeof version !== "number") return version as Ownership
  return (catalogueVerdict(lines, version) ?? (version === 1 ? "older" : "owned")) as Ownership
})

/** Marks a schema as ours, of the current version, in the transaction that created or migrated its tables. */
export const stamp = (created: boolean) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    created
      ? sql`INSERT INTO session_log_meta (application, schema_version) VALUES (${APPLICATION}, ${SCHEMA_VERSION})`
      : sql`UPDATE session_log_meta SET schema_version = ${SCHEMA_VERSION}`)
