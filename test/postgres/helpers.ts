/**
 * Effect-side helpers of the PostgreSQL tests: `describePg` runs a block only where a server is
 * available (else it is skipped under a name that says why; SESSION_LOG_REQUIRE_PG=1 fails
 * instead), `freshUrl` is a new empty schema of the shared server for one test, dropped after it.
 */
import { describe } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import pg from "pg"
import { availability, createSchema, dropSchema, sharedServer, withSettings } from "../helpers/postgres.js"

const available = availability()

if (!available.ok && process.env.SESSION_LOG_REQUIRE_PG === "1") {
  throw new Error(`SESSION_LOG_REQUIRE_PG=1 but the PostgreSQL tests cannot run: ${available.reason}`)
}

/** `describe` where PostgreSQL is available; elsewhere a skipped block whose name gives the reason. */
export const describePg = (name: string, body: () => void): void => {
  if (available.ok) describe(name, body)
  else describe.skip(`${name} [SKIPPED: ${available.reason}]`, body)
}

/** The shared server's URL and its superuser's. */
export const server = Effect.promise(sharedServer)

/**
 * A fresh, empty schema of the shared server for this scope: the URL that uses it, with more
 * server settings for its connections if given (`{ statement_timeout: "200" }`).
 */
export const freshUrlWith = (settings: Record<string, string>): Effect.Effect<string, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { url } = yield* server
    const made = yield* Effect.acquireRelease(
      Effect.promise(() => createSchema(url)),
      ({ schema }) => Effect.promise(() => dropSchema(url, schema))
    )
    return withSettings(made.url, settings)
  })

/** A fresh, empty schema of the shared server for this scope: the URL that uses it. */
export const freshUrl: Effect.Effect<string, never, Scope.Scope> = freshUrlWith({})

/** A raw `pg` connection for this scope (to set up and inspect what the store cannot be asked). */
export const rawClient = (url: string): Effect.Effect<pg.Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      // a server going away is the point of some tests: the error reaches the next query
      client.on("error", () => undefined)
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )

/** A query on a raw connection; its rows. */
export const query = <R extends Record<string, unknown> = Record<string, unknown>>(
  client: pg.Client,
  text: string,
  values: ReadonlyArray<unknown> = []
): Effect.Effect<Array<R>> => Effect.promise(() => client.query<R>(text, values as Array<unknown>).then((r) => r.rows))

/**
 * The backends waiting for a lock `blocker` holds, once there is one: polls pg_stat_activity
 * (waits on a condition, not for a time). Inside the blocker's transaction the activity view is a
 * snapshot taken at its first read, so each poll discards it first.
 */
export const blockedBy = (blocker: pg.Client): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function*() {
    const [{ pid }] = yield* query<{ pid: number }>(blocker, "SELECT pg_backend_pid() AS pid")
    const blocked = query(blocker, "SELECT pg_stat_clear_snapshot()").pipe(
      Effect.zipRight(query<{ pid: number }>(blocker, "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", [pid])),
      Effect.map((rows) => rows.map((r) => r.pid))
    )
    return yield* blocked.pipe(
      Effect.tap((pids) => (pids.length === 0 ? Effect.sleep("20 millis") : Effect.void)),
      Effect.repeat({ until: (pids) => pids.length > 0 })
    )
  })

/** The version-1 schema of SPEC §7.6, as the version-1 build created it (in creation order). */
export const PG_V1_DDL = [
  `CREATE TABLE sessions (
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
)`,
  `CREATE TABLE events (
  session_id        TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               BIGINT  NOT NULL,
  type              TEXT    NOT NULL,
  time              BIGINT  NOT NULL,
  data              TEXT    NOT NULL,
  source_event_seqs TEXT,
  surface_op        TEXT,
  ignorable         BOOLEAN CHECK (ignorable),
  PRIMARY KEY (session_id, seq)
)`,
  `CREATE TABLE session_backups (
  id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  session_id TEXT    NOT NULL,
  taken_at   BIGINT  NOT NULL,
  reason     TEXT    NOT NULL,
  content    TEXT    NOT NULL
)`,
  `CREATE TABLE session_log_meta (
  application    TEXT    NOT NULL,
  schema_version INTEGER NOT NULL
)`
]

/** A session of a version-1 database (test/sqlite/rows.ts `V1Session`, restated to keep this module light). */
export interface PgV1Session {
  readonly id: string
  readonly createdAt: number
  readonly cwd: string | null
  readonly delegationDepth: number | null
  readonly nextSeq: number
  readonly revision: number
  readonly rows: ReadonlyArray<{
    readonly seq: number
    readonly type: string
    readonly time: number
    readonly data: string
    readonly source_event_seqs: string | null
    readonly surface_op: string | null
    readonly ignorable: boolean
  }>
}

/**
 * A version-1 database in the schema of `client` as the version-1 build wrote it: the tables, the
 * meta row (schema_version 1), the sessions and their rows (JSON columns as text), one backup row.
 */
export const createV1Postgres = (
  client: pg.Client,
  sessions: ReadonlyArray<PgV1Session>,
  backup: { readonly session_id: string; readonly taken_at: number; readonly reason: string; readonly content: string }
): Effect.Effect<void> =>
  Effect.promise(async () => {
    await client.query("BEGIN")
    for (const ddl of PG_V1_DDL) await client.query(ddl)
    await client.query("INSERT INTO session_log_meta (application, schema_version) VALUES ('effect-session-log', 1)")
    for (const s of sessions) {
      await client.query(
        `INSERT INTO sessions (id, version, created_at, cwd, delegation_depth, next_seq, revision) VALUES ($1, 1, $2, $3, $4, $5, $6)`,
        [s.id, s.createdAt, s.cwd, s.delegationDepth, s.nextSeq, s.revision]
      )
      // in chunks of 1,000 rows (8 parameters each)
      for (let at = 0; at < s.rows.length; at += 1_000) {
        const chunk = s.rows.slice(at, at + 1_000)
        const values: Array<unknown> = []
        const tuples = chunk.map((r, i) => {
          values.push(s.id, r.seq, r.type, r.time, r.data, r.source_event_seqs, r.surface_op, r.ignorable ? true : null)
          return `(${Array.from({ length: 8 }, (_, k) => `$${i * 8 + k + 1}`).join(", ")})`
        })
        await client.query(
          `INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op, ignorable) VALUES ${tuples.join(", ")}`,
          values
        )
      }
    }
    await client.query(
      "INSERT INTO session_backups (session_id, taken_at, reason, content) VALUES ($1, $2, $3, $4)",
      [backup.session_id, backup.taken_at, backup.reason, backup.content]
    )
    await client.query("COMMIT")
  })
