/**
 * The PostgreSQL backend beyond the shared contract (SPEC §7.6, S10; §13 "PostgreSQL backend"):
 * the open (schema creation under the advisory lock, foreign databases refused and untouched),
 * the database deciding between writers (23505 → AppendConflict / SessionExists), driver failures
 * as StoreFailure (statement and lock timeouts, a terminated connection), and the column types.
 * Waits are on conditions the server reports (a backend blocked by our lock), never on time.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "@effect/sql/SqlClient"
import {
  APPLICATION,
  CANONICAL_SCHEMA,
  displayLocation,
  hasSchema,
  makePostgresStore,
  postgresDialect,
  SCHEMA_VERSION
} from "../../src/layers/sql/postgres/PostgresStore.js"
import { makeSqlStore } from "../../src/layers/sql/SqlStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { snapshot } from "../helpers/postgres.js"
import { blockedBy, describePg, freshUrl, freshUrlWith, PG_V1_DDL, query, rawClient } from "./helpers.js"

const ev = (seq: number, data: unknown = { n: seq }, time = 1_000 + seq) =>
  ({ type: "test/plugin", seq, time, data, ignorable: true }) as unknown as Event

const header = (id: string, createdAt = 5) => ({ version: 1, id, createdAt })

/** Events as their JSONL lines. */
const lines = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

/** A store on `url` with `count` events in session `id`. */
const seeded = (url: string, id: string, count: number) =>
  Effect.gen(function*() {
    const store = yield* makePostgresStore({ url })
    yield* store.create(header(id))
    if (count > 0) yield* store.append(id, Array.from({ length: count }, (_, i) => ev(i)), { expectedSeq: 0 })
    return store
  })

const openError = (url: string) => Effect.flip(Effect.scoped(makePostgresStore({ url })))

const V1_META = `INSERT INTO session_log_meta VALUES ('${APPLICATION}', 1)`

describePg("PostgresStore", () => {
  // ------------------------------------------------------------------ open

  it.scoped("§7.6 an empty schema gets the tables (SQL schema version 2) and one meta row; a second open accepts it", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      assert.isFalse(yield* hasSchema({ url }))
      yield* Effect.scoped(makePostgresStore({ url }))
      assert.isTrue(yield* hasSchema({ url }))
      const raw = yield* rawClient(url)
      assert.deepStrictEqual(yield* query(raw, "SELECT * FROM session_log_meta"), [
        { application: APPLICATION, schema_version: SCHEMA_VERSION }
      ])
      const tables = yield* query<{ table_name: string }>(
        raw,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
      )
      assert.deepStrictEqual(tables.map((t) => t.table_name), ["event_rows", "session_backups", "session_log_meta", "sessions"])
      const before = yield* Effect.promise(() => snapshot(url))
      yield* Effect.scoped(makePostgresStore({ url }))
      assert.strictEqual(yield* Effect.promise(() => snapshot(url)), before)
    }))

  it.scoped("§7.6 concurrent first opens of an empty schema: the advisory lock lets one create it, all succeed", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      yield* Effect.all(Array.from({ length: 6 }, () => Effect.scoped(makePostgresStore({ url }))), {
        concurrency: "unbounded"
      })
      const raw = yield* rawClient(url)
      assert.strictEqual((yield* query(raw, "SELECT * FROM session_log_meta")).length, 1)
    }))

  const foreign: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["a meta row of another application", [
      "CREATE TABLE session_log_meta (application TEXT NOT NULL, schema_version INTEGER NOT NULL)",
      "INSERT INTO session_log_meta VALUES ('another-app', 1)"
    ]],
    ["a meta row of another schema version", [
      "CREATE TABLE session_log_meta (application TEXT NOT NULL, schema_version INTEGER NOT NULL)",
      `INSERT INTO session_log_meta VALUES ('${APPLICATION}', ${SCHEMA_VERSION + 1})`
    ]],
    ["two meta rows", [
      "CREATE TABLE session_log_meta (application TEXT NOT NULL, schema_version INTEGER NOT NULL)",
      `INSERT INTO session_log_meta VALUES ('${APPLICATION}', ${SCHEMA_VERSION}), ('${APPLICATION}', ${SCHEMA_VERSION})`
    ]],
    ["a meta table with other columns", ["CREATE TABLE session_log_meta (x INTEGER)", "INSERT INTO session_log_meta VALUES (7)"]],
    ["another application's tables and no meta table", [
      "CREATE TABLE sessions (id INTEGER PRIMARY KEY, owner TEXT)",
      "INSERT INTO sessions VALUES (1, 'someone')"
    ]]
  ]
  for (const [what, statements] of foreign) {
    it.scoped(`S10 ${what} is refused with StoreSchemaMismatch and nothing is modified`, () =>
      Effect.gen(function*() {
        const url = yield* freshUrl
        const raw = yield* rawClient(url)
        for (const statement of statements) yield* query(raw, statement)
        const before = yield* Effect.promise(() => snapshot(url))
        const error = yield* openError(url)
        assert.strictEqual(error._tag, "StoreSchemaMismatch")
        assert.strictEqual(error.rule, "S10")
        assert.strictEqual(yield* Effect.promise(() => snapshot(url)), before)
      }))
  }

  it.scoped("S10 our meta row over tables that differ from the canonical schema is refused; rows untouched", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      yield* Effect.scoped(Effect.flatMap(seeded(url, "kept", 3), () => Effect.void))
      const raw = yield* rawClient(url)
      yield* query(raw, "ALTER TABLE event_rows ADD COLUMN extra TEXT")
      const before = yield* Effect.promise(() => snapshot(url))
      const error = yield* openError(url)
      assert.strictEqual(error._tag, "StoreSchemaMismatch")
      assert.include(error._tag === "StoreSchemaMismatch" ? error.found : "", "event_rows.extra")
      assert.strictEqual(yield* Effect.promise(() => snapshot(url)), before)
    }))

  // a version-1 catalogue is migrated only when it is exactly version 1's, under a version-1 meta row
  const versionMixups: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["version 1's tables with an extra column", [...PG_V1_DDL, "ALTER TABLE events ADD COLUMN extra TEXT", V1_META]],
    ["version 1's tables with an extra index (a migration would drop it)", [...PG_V1_DDL, "CREATE INDEX events_by_type ON events (type)", V1_META]],
    ["version 2's tables with an extra index", [
      ...CANONICAL_SCHEMA.map((t) => t.sql),
      "CREATE INDEX event_rows_by_type ON event_rows (type)",
      V1_META.replace("', 1)", `', ${SCHEMA_VERSION})`)
    ]],
    ["version 1's tables without the events CHECK", [...PG_V1_DDL.map((d) => d.replace("BOOLEAN CHECK (ignorable)", "BOOLEAN")), V1_META]],
    ["version 1's tables stamped version 2", [...PG_V1_DDL, V1_META.replace("', 1)", `', ${SCHEMA_VERSION})`)]],
    ["version 2's tables stamped version 1", [...CANONICAL_SCHEMA.map((t) => t.sql), V1_META]],
    ["version 1's tables next to event_rows (a half-migrated copy)", [
      ...PG_V1_DDL,
      CANONICAL_SCHEMA.find((t) => t.name === "event_rows")!.sql,
      V1_META
    ]]
  ]
  for (const [what, statements] of versionMixups) {
    it.scoped(`S10 ${what} is refused with StoreSchemaMismatch, not migrated, and nothing is modified`, () =>
      Effect.gen(function*() {
        const url = yield* freshUrl
        const raw = yield* rawClient(url)
        for (const statement of statements) yield* query(raw, statement)
        yield* query(raw, "INSERT INTO sessions (id, version, created_at, next_seq, revision) VALUES ('kept', 1, 1, 0, 0)")
        const before = yield* Effect.promise(() => snapshot(url))
        const error = yield* openError(url)
        assert.strictEqual(error._tag, "StoreSchemaMismatch")
        assert.strictEqual(error.rule, "S10")
        assert.strictEqual(yield* Effect.promise(() => snapshot(url)), before)
        const readOnly = yield* Effect.flip(Effect.scoped(makePostgresStore({ url, readOnly: true })))
        assert.strictEqual(readOnly._tag, "StoreSchemaMismatch")
        assert.strictEqual(yield* Effect.promise(() => snapshot(url)), before)
      }))
  }

  it.scoped("§7.1 durability point: a server with synchronous_commit=off is refused on open (StoreFailure)", () =>
    Effect.gen(function*() {
      const url = yield* freshUrlWith({ synchronous_commit: "off" })
      const error = yield* openError(url)
      assert.strictEqual(error._tag, "StoreFailure")
      assert.include(error.message, "synchronous_commit")
      assert.isFalse(yield* hasSchema({ url }))
    }))

  it.scoped("a client that reads BIGINT as text (not built with clientTypes) is refused on open", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const context = yield* Layer.build(PgClient.layer({ url: Redacted.make(url) }))
      const error = yield* Effect.flip(
        makeSqlStore({ dialect: postgresDialect, location: "test" }).pipe(
          Effect.provideService(SqlClient.SqlClient, Context.get(context, SqlClient.SqlClient))
        )
      )
      assert.strictEqual(error._tag, "StoreFailure")
      assert.include(error.message, "BIGINT")
    }))

  it.scoped("an unreachable server is StoreFailure on open; the location never shows a password", () =>
    Effect.gen(function*() {
      const error = yield* openError("postgres://someone:secret@127.0.0.1:1/nowhere")
      assert.strictEqual(error._tag, "StoreFailure")
      assert.strictEqual(displayLocation("postgres://someone:secret@db.example:5433/sessions?sslmode=require"), "postgres://someone@db.example:5433/sessions")
    }))

  // ------------------------------------------------------------------ writers

  it.scoped("C7 a unique violation (23505) on (session_id, seq) is AppendConflict and writes nothing", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = yield* seeded(url, "s", 1)
      const raw = yield* rawClient(url)
      // a stray row at seq 2 behind the store's back (next_seq stays 1)
      yield* query(raw, "INSERT INTO event_rows (session_id, seq, members, type, time, data) VALUES ('s', 2, 1, 'x/y', 0, '{}')")
      const error = yield* Effect.flip(store.append("s", [ev(1), ev(2)], { expectedSeq: 1 }))
      assert.strictEqual(error._tag, "AppendConflict")
      assert.strictEqual(error.rule, "C7")
      assert.deepStrictEqual(yield* query(raw, "SELECT seq FROM event_rows WHERE session_id = 's' ORDER BY seq"), [
        { seq: "0" },
        { seq: "2" }
      ])
      assert.deepStrictEqual(yield* query(raw, "SELECT next_seq, revision FROM sessions"), [{ next_seq: "1", revision: "1" }])
    }))

  it.scopedLive("J14 the first append of a session another writer materialises meanwhile is SessionExists (23505)", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = yield* makePostgresStore({ url })
      yield* store.create(header("raced", 1))
      const blocker = yield* rawClient(url)
      yield* query(blocker, "BEGIN")
      yield* query(blocker, "INSERT INTO sessions (id, version, created_at, next_seq, revision) VALUES ('raced', 1, 9, 0, 0)")
      const append = yield* Effect.fork(Effect.flip(store.append("raced", [ev(0)], { expectedSeq: 0 })))
      // the store's INSERT waits on the uncommitted key; the other writer commits first
      yield* blockedBy(blocker)
      yield* query(blocker, "COMMIT")
      const error = yield* Fiber.join(append)
      assert.strictEqual(error._tag, "SessionExists")
      assert.strictEqual(error.rule, "J14")
      assert.strictEqual((yield* store.load("raced")).header.createdAt, 9)
      assert.deepStrictEqual((yield* store.load("raced")).events, [])
    }))

  it.scopedLive("§7.6 a writer holding the session row: the append waits, then conflicts once the other commits", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = yield* seeded(url, "s", 2)
      const blocker = yield* rawClient(url)
      yield* query(blocker, "BEGIN")
      yield* query(blocker, "UPDATE sessions SET next_seq = 3, revision = revision + 1 WHERE id = 's'")
      yield* query(
        blocker,
        "INSERT INTO event_rows (session_id, seq, members, type, time, data, ignorable) VALUES ('s', 2, 1, 'x/y', 0, '{}', true)"
      )
      const append = yield* Effect.fork(Effect.flip(store.append("s", [ev(2)], { expectedSeq: 2 })))
      yield* blockedBy(blocker)
      yield* query(blocker, "COMMIT")
      const error = yield* Fiber.join(append)
      assert.strictEqual(error._tag, "AppendConflict")
      assert.strictEqual((error as { storedSeq?: number }).storedSeq, 3)
      assert.strictEqual((yield* store.load("s")).events.length, 3)
    }))

  it.scopedLive("L8 replaceLog racing an append: it waits for the session row, sees the append and replaces nothing", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = yield* seeded(url, "s", 2)
      const loaded = yield* store.load("s")
      const blocker = yield* rawClient(url)
      yield* query(blocker, "BEGIN")
      yield* query(blocker, "UPDATE sessions SET next_seq = 3, revision = revision + 1 WHERE id = 's'")
      yield* query(
        blocker,
        "INSERT INTO event_rows (session_id, seq, members, type, time, data, ignorable) VALUES ('s', 2, 1, 'x/y', 0, '{}', true)"
      )
      const replace = yield* Effect.fork(Effect.flip(
        store.replaceLog("s", loaded.header, [ev(0)], { revision: loaded.revision, backup: "test" })
      ))
      yield* blockedBy(blocker)
      yield* query(blocker, "COMMIT")
      const error = yield* Fiber.join(replace)
      assert.strictEqual(error._tag, "AppendConflict")
      assert.strictEqual(error.rule, "L8")
      assert.strictEqual((yield* store.load("s")).events.length, 3)
      assert.deepStrictEqual(yield* query(blocker, "SELECT count(*)::int AS n FROM session_backups"), [{ n: 0 }])
    }))

  // ------------------------------------------------------------------ driver failures

  /** An append of `s` (2 events stored) that waits on a row lock another connection holds. */
  const blockedAppend = (url: string) =>
    Effect.gen(function*() {
      const store = yield* seeded(url, "s", 2)
      const blocker = yield* rawClient(url)
      yield* query(blocker, "BEGIN")
      yield* query(blocker, "SELECT * FROM sessions WHERE id = 's' FOR UPDATE")
      const append = yield* Effect.fork(Effect.flip(store.append("s", [ev(2), ev(3)], { expectedSeq: 2 })))
      return { store, blocker, append }
    })

  it.scopedLive("§7.6 a statement timeout is StoreFailure with the driver's cause; nothing is written", () =>
    Effect.gen(function*() {
      const url = yield* freshUrlWith({ statement_timeout: "300" })
      const { append, blocker, store } = yield* blockedAppend(url)
      const error = yield* Fiber.join(append)
      yield* query(blocker, "ROLLBACK")
      assert.strictEqual(error._tag, "StoreFailure")
      assert.strictEqual((error as { cause?: { code?: string } }).cause?.code, "57014")
      assert.strictEqual((yield* store.load("s")).events.length, 2)
    }))

  it.scopedLive("S6 a lock wait beyond lock_timeout is StoreFailure S6; nothing is written", () =>
    Effect.gen(function*() {
      const url = yield* freshUrlWith({ lock_timeout: "300" })
      const { append, blocker, store } = yield* blockedAppend(url)
      const error = yield* Fiber.join(append)
      yield* query(blocker, "ROLLBACK")
      assert.strictEqual(error._tag, "StoreFailure")
      assert.strictEqual(error.rule, "S6")
      assert.strictEqual((yield* store.load("s")).events.length, 2)
    }))

  it.scopedLive("§7.6 a connection lost mid-append is StoreFailure with the cause; the store recovers; nothing half-written", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const { append, blocker, store } = yield* blockedAppend(url)
      const [pid] = yield* blockedBy(blocker)
      yield* query(blocker, "SELECT pg_terminate_backend($1)", [pid])
      const error = yield* Fiber.join(append)
      yield* query(blocker, "ROLLBACK")
      assert.strictEqual(error._tag, "StoreFailure")
      assert.isDefined((error as { cause?: unknown }).cause)
      assert.strictEqual((yield* store.load("s")).events.length, 2)
      // a retry with the same expectedSeq succeeds on a new connection
      yield* store.append("s", [ev(2), ev(3)], { expectedSeq: 2 })
      assert.deepStrictEqual(lines((yield* store.load("s")).events), lines([ev(0), ev(1), ev(2), ev(3)]))
    }))

  // ------------------------------------------------------------------ columns

  it.scoped("§7.6 BIGINT columns read back as numbers; long sessions load page by page", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = yield* makePostgresStore({ url })
      const big = Number.MAX_SAFE_INTEGER
      yield* store.create({ version: 1, id: "long", createdAt: big, seedLength: 0, delegationDepth: 0 })
      // more than a page (10,000 rows) and more than one INSERT (3,276 rows of 10 columns)
      const events = Array.from({ length: 12_500 }, (_, i) => ev(i, { i }, i === 0 ? big : i))
      yield* store.append("long", events, { expectedSeq: 0 })
      const loaded = yield* store.load("long")
      assert.strictEqual(loaded.header.createdAt, big)
      assert.strictEqual(loaded.header.delegationDepth, 0)
      assert.deepStrictEqual(lines(loaded.events), lines(events))
      assert.deepStrictEqual(lines(yield* store.readFrom("long", 12_400)), lines(events.slice(12_400)))
      const raw = yield* rawClient(url)
      const [column] = yield* query(raw, "SELECT members, ignorable, data, data_z FROM event_rows WHERE session_id = 'long' AND seq = 0")
      assert.deepStrictEqual(column, { members: 1, ignorable: true, data: "{\"i\":0}", data_z: null })
    }))

  it.scoped("§7.6 S11 NUL in a TEXT column (event type, header field) is refused before writing; inside JSON it round-trips", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const store = yield* seeded(url, "s", 1)
      const badType = yield* Effect.flip(
        store.append("s", [{ ...ev(1), type: "x/\u0000" } as unknown as Event], { expectedSeq: 1 })
      )
      assert.strictEqual(badType._tag, "StoreFailure")
      assert.strictEqual((badType as { rule?: string }).rule, "S11")
      const badId = yield* Effect.flip(store.create(header("id\u0000")))
      assert.strictEqual(badId._tag, "StoreFailure")
      assert.strictEqual((badId as { rule?: string }).rule, "S11")
      yield* store.append("s", [ev(1, { "\u0000": "\u0000" })], { expectedSeq: 1 })
      assert.deepStrictEqual(lines((yield* store.load("s")).events), lines([ev(0), ev(1, { "\u0000": "\u0000" })]))
    }))
})
