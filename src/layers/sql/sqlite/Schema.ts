/**
 * The SQLite schema of the SQL store (SPEC §7.5, S1–S4; docs/formats.md "SQL schema version 2"):
 * the canonical STRICT tables of versions 1 and 2, the ownership check of an open (application_id,
 * user_version and the canonical schema objects compared as normalised SQL; bump-and-reject, a
 * foreign file is never modified) and the stamp written in the transaction that creates or
 * migrates the schema. The PostgreSQL counterpart is `postgres/Schema.ts`.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqlSchema from "@effect/sql/SqlSchema"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { StoreSchemaMismatch } from "../../../schema/Errors.js"
import type { Ownership } from "../Dialect.js"

/**
 * The schema version stamped into `user_version` (docs/formats.md "SQL schema version 2"); version 1 (SPEC
 * §7.5) is migrated by a writing open and read as it is by a read-only one; any other is refused
 * (bump-and-reject).
 */
export const SCHEMA_VERSION = 2

/** The `application_id` of a session-log database ("ESLG"). */
export const APPLICATION_ID = 0x45534c47

const SESSIONS_TABLE = {
  name: "sessions",
  sql: `CREATE TABLE sessions (
  id               TEXT    NOT NULL PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  next_seq         INTEGER NOT NULL,
  revision         INTEGER NOT NULL
) STRICT`
}

const BACKUPS_TABLE = {
  name: "session_backups",
  sql: `CREATE TABLE session_backups (
  id         INTEGER PRIMARY KEY,
  session_id TEXT    NOT NULL,
  taken_at   INTEGER NOT NULL,
  reason     TEXT    NOT NULL,
  content    TEXT    NOT NULL
) STRICT`
}

/** The canonical schema objects of version 2, in `sqlite_schema` name order. */
export const CANONICAL_SCHEMA: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "event_rows",
    sql: `CREATE TABLE event_rows (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  members           INTEGER NOT NULL CHECK (members >= 1),
  type              TEXT    NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT,
  data_z            BLOB,
  source_event_seqs BLOB,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  CHECK ((data IS NULL) <> (data_z IS NULL)),
  PRIMARY KEY (session_id, seq)
) STRICT`
  },
  BACKUPS_TABLE,
  SESSIONS_TABLE
]

/** The canonical schema objects of version 1 (SPEC §7.5), in `sqlite_schema` name order. */
export const CANONICAL_SCHEMA_V1: ReadonlyArray<{ readonly name: string; readonly sql: string }> = [
  {
    name: "events",
    sql: `CREATE TABLE events (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT    NOT NULL,
  time              INTEGER NOT NULL,
  data              TEXT    NOT NULL,
  source_event_seqs TEXT,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable = 1),
  PRIMARY KEY (session_id, seq)
) STRICT`
  },
  BACKUPS_TABLE,
  SESSIONS_TABLE
]

/** Creation order: `event_rows` references `sessions`. */
export const CREATION_ORDER = [SESSIONS_TABLE, CANONICAL_SCHEMA[0], BACKUPS_TABLE]

// ---------------------------------------------------------------------------------------------
// Ownership (S1–S4)

/** A user object of `sqlite_schema`. */
const SchemaObject = Schema.Struct({
  type: Schema.String,
  name: Schema.String,
  tbl_name: Schema.String,
  sql: Schema.NullOr(Schema.String)
})
type SchemaObject = typeof SchemaObject.Type

/** Whitespace-normalised SQL text for the schema comparison (S3). */
const normaliseSql = (text: string): string =>
  text.replace(/\s+/g, " ").replace(/ ?([(),]) ?/g, "$1").replace(/;$/, "").trim()

const hex = (n: number): string => "0x" + (n >>> 0).toString(16).padStart(8, "0")

const EXPECTED_IDS = `user_version=1 or ${SCHEMA_VERSION}, application_id=${hex(APPLICATION_ID)}`

export const mismatch = (rule: string, found: string, expected = EXPECTED_IDS) => new StoreSchemaMismatch({ rule, found, expected })

/** S1–S3 verdict on what the file holds. */
const ownershipOf = (userVersion: number, applicationId: number, objects: ReadonlyArray<SchemaObject>): Ownership => {
  const found = `user_version=${userVersion}, application_id=${hex(applicationId)}, ${objects.length} schema objects`
  if (userVersion !== 0 && userVersion !== 1 && userVersion !== SCHEMA_VERSION) return mismatch("S1", found)
  if (applicationId !== 0 && applicationId !== APPLICATION_ID) return mismatch("S2", found)
  if (userVersion === 0 && applicationId === 0 && objects.length === 0) return "pristine"
  if (applicationId === 0) return mismatch("S2", found)
  if (userVersion === 0) return mismatch("S1", found)
  const differences: Array<string> = []
  const schema = userVersion === 1 ? CANONICAL_SCHEMA_V1 : CANONICAL_SCHEMA
  const canonical = new Map(schema.map((o) => [o.name, normaliseSql(o.sql)]))
  for (const o of objects) {
    const want = canonical.get(o.name)
    if (o.type !== "table" || want === undefined) differences.push(`${o.type} ${o.name} (extra)`)
    else if (o.tbl_name !== o.name || o.sql === null || normaliseSql(o.sql) !== want) {
      differences.push(`table ${o.name} (differs)`)
    }
    canonical.delete(o.name)
  }
  for (const name of canonical.keys()) differences.push(`table ${name} (missing)`)
  if (differences.length > 0) {
    return mismatch("S3", `schema objects: ${differences.join(", ")}`, `the canonical schema of version ${userVersion}`)
  }
  return userVersion === 1 ? "older" : "owned"
}

export const pragmaNumber = (name: "trusted_schema" | "user_version" | "application_id" | "synchronous" | "data_version") =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<Record<string, unknown>>`PRAGMA ${sql.literal(name)}`.pipe(
      Effect.flatMap((rows) => Schema.decodeUnknown(Schema.Struct({ [name]: Schema.Number }))(rows[0])),
      Effect.map((row) => row[name] as number)
    ))

export const ownership = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const readSchemaObjects = SqlSchema.findAll({
    Request: Schema.Void,
    Result: SchemaObject,
    execute: () =>
      sql`SELECT type, name, tbl_name, sql FROM sqlite_schema
          WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name`
  })
  const userVersion = yield* pragmaNumber("user_version")
  const applicationId = yield* pragmaNumber("application_id")
  return ownershipOf(userVersion, applicationId, yield* readSchemaObjects(undefined))
})

// S4: set in the transaction that created (or migrated) the schema
export const stamp = () =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`PRAGMA application_id = ${sql.literal(String(APPLICATION_ID))}`
    yield* sql`PRAGMA user_version = ${sql.literal(String(SCHEMA_VERSION))}`
  })
