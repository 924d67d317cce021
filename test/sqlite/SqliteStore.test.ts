import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as fc from "effect/FastCheck"
import * as Layer from "effect/Layer"
import * as Str from "effect/String"
import { createRequire } from "node:module"
import {
  APPLICATION_ID,
  CANONICAL_SCHEMA,
  CANONICAL_SCHEMA_V1,
  layerSqliteStore,
  makeSqliteStore,
  openDatabase,
  SCHEMA_VERSION,
  sqliteDialect
} from "../../src/layers/sql/sqlite/SqliteStore.js"
import { makeSqlStore } from "../../src/layers/sql/SqlStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { anyValidLog, asEvents } from "../arbitraries.js"
import { partition } from "../store-contract/contract.js"
import { eventRow, expectedRows, type StoredRow, sqliteRows } from "./rows.js"

// ---------------------------------------------------------------------------------------------
// helpers: a raw better-sqlite3 connection to set up and inspect files behind the store's back

interface RawStatement {
  all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
  get(...params: ReadonlyArray<unknown>): Record<string, unknown> | undefined
  run(...params: ReadonlyArray<unknown>): unknown
}
interface RawDb {
  pragma(source: string, options?: { simple: boolean }): unknown
  exec(source: string): void
  prepare(source: string): RawStatement
  close(): void
}
const require = createRequire(import.meta.url)
const Database = require("better-sqlite3") as new(filename: string) => RawDb

const withRaw = <A>(file: string, f: (db: RawDb) => A) =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Database(file)),
    (db) => Effect.sync(() => f(db)),
    (db) => Effect.sync(() => db.close())
  )

const tempFile = (name = "store.db") =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const dir = yield* fs.makeTempDirectoryScoped()
    return path.join(dir, name)
  })

const ev = (seq: number, type = "turn/start", data: unknown = { turn: seq }, extra: Record<string, unknown> = {}) =>
  ({ type, seq, time: 1000 + seq, data, ...extra }) as unknown as Event

const turnEnd = (seq: number) => ev(seq, "turn/end", { turn: 1, reason: { kind: "completed" } })

const header = (id: string, createdAt = 5, extra: Record<string, unknown> = {}) => ({
  version: 1,
  id,
  createdAt,
  ...extra
})

/** The canonical schema objects of a version in creation order (the event table references `sessions`). */
const canonicalOf = (version: 1 | 2) => {
  const objects = version === 1 ? CANONICAL_SCHEMA_V1 : CANONICAL_SCHEMA
  return ["sessions", version === 1 ? "events" : "event_rows", "session_backups"].map((name) =>
    objects.find((o) => o.name === name)!
  )
}

/**
 * A database created behind the store's back: the canonical schema of `version` (default the
 * current one, 2), then `mutate`, the ids of that version, then `extra`.
 */
const rawCanonical = (
  file: string,
  mutate: (sql: string, name: string) => string = (s) => s,
  extra = "",
  version: 1 | 2 = 2
) =>
  withRaw(file, (db) => {
    for (const o of canonicalOf(version)) db.exec(mutate(o.sql, o.name))
    db.pragma(`application_id = ${APPLICATION_ID}`)
    db.pragma(`user_version = ${version}`)
    if (extra !== "") db.exec(extra)
  })

/** The user schema objects of a file and its stamps. */
const schemaOf = (file: string) =>
  withRaw(file, (db) => ({
    userVersion: db.pragma("user_version", { simple: true }),
    applicationId: db.pragma("application_id", { simple: true }),
    objects: db.prepare("SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite%' ORDER BY name").all()
  }))

const V2_OBJECTS = [
  { type: "table", name: "event_rows" },
  { type: "table", name: "session_backups" },
  { type: "table", name: "sessions" }
]

const storeOn = (file: string, busyTimeoutMs?: number) =>
  makeSqliteStore(busyTimeoutMs === undefined ? { filename: file } : { filename: file, busyTimeoutMs })

const encoded = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

// ---------------------------------------------------------------------------------------------


/** A turn start, a user message with `text`, and a replacing summary of it; returns the log. */
const appendSample = (s: Session.SessionShape, text: string) =>
  Effect.gen(function*() {
    yield* s.append("turn/start", { turn: 1 })
    yield* s.append("user/message", {
      id: "u1",
      role: "user",
      content: [{ type: "text", text }],
      source: { kind: "user" }
    }, { surfaceOp: "append" })
    yield* s.append("user/message", {
      id: "u2",
      role: "user",
      content: [{ type: "text", text: "summary" }],
      source: { kind: "plugin", plugin: "compact" }
    }, { surfaceOp: { op: "replace", start: 1, end: 1 }, sourceEventSeqs: [1] })
    return yield* s.events
  })

describe("SqliteStore", () => {
  it.scoped("SessionLive.create / append / open round trip on a file", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const layer = layerSqliteStore({ filename: file })
      const written = yield* Effect.scoped(
        Effect.gen(function*() {
          const s = yield* SessionLive.create({ id: "round-trip", header: { cwd: "/tmp/x", delegationDepth: 0 } })
          return yield* appendSample(s, "hi \u0000 'quoted' \"double\" \\ ✓ 🙂")
        }).pipe(Effect.provide(layer))
      )
      // a second, independent store instance (fresh connection) reads it back
      const reopened = yield* Effect.scoped(
        Effect.gen(function*() {
          const s = yield* SessionLive.open("round-trip")
          return { events: yield* s.events, header: s.header, nodes: yield* s.surface.nodes }
        }).pipe(Effect.provide(layerSqliteStore({ filename: file })))
      )
      assert.deepStrictEqual(encoded(reopened.events.slice(0, written.length)), encoded(written))
      assert.deepStrictEqual(reopened.header, { version: 1, id: "round-trip", createdAt: 0, cwd: "/tmp/x", delegationDepth: 0 })
      assert.deepStrictEqual(reopened.nodes, [2])
      // the string marker is stored as the 8 characters "append", absent columns as NULL; the
      // provenance [1] as the runs BLOB: tag 0, then (gap 1 from seq 0, run length 1 - 1)
      const rows = yield* withRaw(file, (db) =>
        db.prepare("SELECT seq, members, data, data_z, source_event_seqs, surface_op, ignorable FROM event_rows ORDER BY seq").all()
      )
      assert.isAtLeast(rows.length, written.length)
      assert.strictEqual(rows[0].surface_op, null)
      assert.strictEqual(rows[0].source_event_seqs, null)
      assert.strictEqual(rows[0].ignorable, null)
      assert.strictEqual(rows[0].data, "{\"turn\":1}")
      assert.strictEqual(rows[0].data_z, null)
      assert.strictEqual(rows[1].surface_op, "\"append\"")
      assert.strictEqual(rows[2].surface_op, "{\"op\":\"replace\",\"start\":1,\"end\":1}")
      assert.deepStrictEqual(rows[2].source_event_seqs, Buffer.from([0, 1, 0]))
      assert.deepStrictEqual(rows.map((r) => r.members), rows.map(() => 1))
      const sessionRow = yield* withRaw(file, (db) => db.prepare("SELECT * FROM sessions").get())
      assert.strictEqual(sessionRow?.delegation_depth, 0)
      assert.strictEqual(sessionRow?.parent_session, null)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("S5 pragmas read back: synchronous 2, journal_mode wal, trusted_schema 0, foreign_keys 1", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const sql = yield* openDatabase({ filename: file, busyTimeoutMs: 1234 })
      const one = (rows: ReadonlyArray<Record<string, unknown>>) => Object.values(rows[0])[0]
      assert.strictEqual(one(yield* sql`PRAGMA synchronous`), 2)
      assert.strictEqual(one(yield* sql`PRAGMA journal_mode`), "wal")
      assert.strictEqual(one(yield* sql`PRAGMA trusted_schema`), 0)
      assert.strictEqual(one(yield* sql`PRAGMA foreign_keys`), 1)
      assert.strictEqual(one(yield* sql`PRAGMA busy_timeout`), 1234)
      // WAL persists in the file: another connection sees it
      assert.strictEqual(yield* withRaw(file, (db) => db.pragma("journal_mode", { simple: true })), "wal")
      const mem = yield* openDatabase({ filename: ":memory:" })
      assert.strictEqual(one(yield* mem`PRAGMA journal_mode`), "memory")
      assert.strictEqual(one(yield* mem`PRAGMA synchronous`), 2)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("S4 a pristine (missing or empty) file gets the canonical schema (SQL schema version 2) and ids", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const missing = yield* tempFile()
      const empty = yield* tempFile()
      yield* fs.writeFile(empty, new Uint8Array(0))
      for (const file of [missing, empty]) {
        yield* Effect.scoped(storeOn(file))
        const info = yield* withRaw(file, (db) => ({
          userVersion: db.pragma("user_version", { simple: true }),
          applicationId: db.pragma("application_id", { simple: true }),
          objects: db.prepare("SELECT type, name FROM sqlite_schema WHERE name NOT LIKE 'sqlite%' ORDER BY name").all(),
          strict: db.prepare("SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite%' ORDER BY name").all(),
          integrity: db.pragma("integrity_check", { simple: true })
        }))
        assert.strictEqual(info.userVersion, SCHEMA_VERSION)
        assert.strictEqual(info.applicationId, APPLICATION_ID)
        assert.deepStrictEqual(info.objects, V2_OBJECTS)
        assert.deepStrictEqual(info.strict.map((r) => r.strict), [1, 1, 1])
        assert.strictEqual(info.integrity, "ok")
        // and reopening an own database is accepted (S3 positive)
        yield* Effect.scoped(storeOn(file))
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("S3 accepts the canonical schema (SQL schema version 2) written with other whitespace, unchanged", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      yield* rawCanonical(file, (s) => s.replace(/\s+/g, "  \n\t "))
      const before = yield* schemaOf(file)
      const store = yield* storeOn(file)
      assert.deepStrictEqual(yield* store.list(), [])
      assert.deepStrictEqual(yield* schemaOf(file), before)
      assert.deepStrictEqual(before, { userVersion: SCHEMA_VERSION, applicationId: APPLICATION_ID, objects: V2_OBJECTS })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("SQL schema version 2: a version-1 canonical schema (other whitespace) is accepted and migrated by a writing open", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      yield* rawCanonical(file, (s) => s.replace(/\s+/g, "  \n\t "), "", 1)
      assert.strictEqual((yield* schemaOf(file)).userVersion, 1)
      // a read-only open reads it as it is
      yield* Effect.scoped(makeSqliteStore({ filename: file, readOnly: true }))
      assert.strictEqual((yield* schemaOf(file)).userVersion, 1)
      const store = yield* storeOn(file)
      assert.deepStrictEqual(yield* store.list(), [])
      assert.deepStrictEqual(yield* schemaOf(file), { userVersion: SCHEMA_VERSION, applicationId: APPLICATION_ID, objects: V2_OBJECTS })
      // the migrated table is exactly the canonical one: a later open accepts it (S3)
      const ddl = yield* withRaw(file, (db) => db.prepare("SELECT sql FROM sqlite_schema WHERE name = 'event_rows'").get())
      assert.strictEqual(ddl?.sql, CANONICAL_SCHEMA.find((o) => o.name === "event_rows")!.sql)
      yield* Effect.scoped(storeOn(file))
    }).pipe(Effect.provide(NodeContext.layer)))

  describe("foreign databases are refused and left byte-identical (S1–S3)", () => {
    const cases: ReadonlyArray<{
      readonly name: string
      readonly rule: string
      readonly setup: (file: string) => Effect.Effect<void, unknown, FileSystem.FileSystem>
    }> = [
      {
        name: "S1 another user_version (a later schema version)",
        rule: "S1",
        setup: (f) => rawCanonical(f, undefined, `PRAGMA user_version = ${SCHEMA_VERSION + 1}`)
      },
      {
        name: "S1 version 1's schema stamped with a later version",
        rule: "S1",
        setup: (f) => rawCanonical(f, undefined, `PRAGMA user_version = ${SCHEMA_VERSION + 1}`, 1)
      },
      {
        name: "S1 a user_version without our application_id",
        rule: "S1",
        setup: (f) => withRaw(f, (db) => db.exec("CREATE TABLE t (x); PRAGMA user_version = 7"))
      },
      {
        name: "S2 another application_id",
        rule: "S2",
        setup: (f) => rawCanonical(f, undefined, "PRAGMA application_id = 305419896")
      },
      {
        name: "S2 version 1's schema with another application_id (not migrated)",
        rule: "S2",
        setup: (f) => rawCanonical(f, undefined, "PRAGMA application_id = 305419896", 1)
      },
      {
        name: "S2 application_id 0 with user objects",
        rule: "S2",
        setup: (f) => withRaw(f, (db) => db.exec("CREATE TABLE notes (body TEXT)"))
      },
      {
        name: "S2 a text file that is not SQLite (short)",
        rule: "S2",
        setup: (f) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(f, "hello, not a database\n"))
      },
      {
        name: "S2 a text file that is not SQLite (long)",
        rule: "S2",
        setup: (f) =>
          Effect.flatMap(FileSystem.FileSystem, (fs) => fs.writeFileString(f, "line of text\n".repeat(2000)))
      },
      {
        name: "S3 a changed column",
        rule: "S3",
        setup: (f) => rawCanonical(f, (s, n) => n === "sessions" ? s.replace("cwd              TEXT", "cwd              BLOB") : s)
      },
      {
        name: "S3 a changed event_rows column (data_z TEXT)",
        rule: "S3",
        setup: (f) => rawCanonical(f, (s, n) => n === "event_rows" ? s.replace("data_z            BLOB", "data_z            TEXT") : s)
      },
      {
        name: "S3 event_rows without the data/data_z CHECK",
        rule: "S3",
        setup: (f) => rawCanonical(f, (s, n) => n === "event_rows" ? s.replace("CHECK ((data IS NULL) <> (data_z IS NULL)),", "") : s)
      },
      {
        name: "S3 a non-STRICT table",
        rule: "S3",
        setup: (f) => rawCanonical(f, (s, n) => n === "event_rows" ? s.replace(/\) STRICT$/, ")") : s)
      },
      {
        name: "S3 an extra index",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, "CREATE INDEX event_rows_by_type ON event_rows(type)")
      },
      {
        name: "S3 version 2's schema stamped version 1",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, "PRAGMA user_version = 1")
      },
      {
        name: "S3 version 1's schema stamped version 2",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, `PRAGMA user_version = ${SCHEMA_VERSION}`, 1)
      },
      {
        name: "S3 version 1's schema with an extra index (not migrated)",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, "CREATE INDEX events_by_type ON events(type)", 1)
      },
      {
        name: "S3 version 1's schema with a changed column (not migrated)",
        rule: "S3",
        setup: (f) => rawCanonical(f, (s, n) => n === "events" ? s.replace("data              TEXT    NOT NULL", "data              TEXT") : s, "", 1)
      },
      {
        name: "S3 version 1's schema next to event_rows (a half-migrated copy)",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, CANONICAL_SCHEMA.find((o) => o.name === "event_rows")!.sql, 1)
      },
      {
        name: "S3 an extra table",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, "CREATE TABLE extra (x INTEGER) STRICT")
      },
      {
        name: "S3 an extra trigger",
        rule: "S3",
        setup: (f) =>
          rawCanonical(f, undefined, "CREATE TRIGGER t AFTER INSERT ON event_rows BEGIN SELECT 1; END")
      },
      {
        name: "S3 a missing table",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, "DROP TABLE session_backups")
      },
      {
        name: "S3 version 1's schema missing a table (not migrated)",
        rule: "S3",
        setup: (f) => rawCanonical(f, undefined, "DROP TABLE session_backups", 1)
      }
    ]
    for (const c of cases) {
      it.scoped(c.name, () =>
        Effect.gen(function*() {
          const fs = yield* FileSystem.FileSystem
          const file = yield* tempFile()
          yield* c.setup(file)
          const before = yield* fs.readFile(file)
          const exit = yield* Effect.exit(Effect.scoped(storeOn(file)))
          assert.isTrue(Exit.isFailure(exit))
          const error = yield* Effect.flip(Effect.scoped(storeOn(file)))
          assert.strictEqual(error._tag, "StoreSchemaMismatch")
          assert.strictEqual(error.rule, c.rule)
          const after = yield* fs.readFile(file)
          assert.deepStrictEqual(after, before)
          // no switch to WAL happened
          assert.isFalse(yield* fs.exists(file + "-wal"))
        }).pipe(Effect.provide(NodeContext.layer)))
    }
  })

  it.scoped("lazy create: nothing is written before the first append; J14 for a registered or stored id", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("lazy"))
      assert.strictEqual((yield* withRaw(file, (db) => db.prepare("SELECT count(*) AS n FROM sessions").get()))?.n, 0)
      const loaded = yield* store.load("lazy")
      assert.deepStrictEqual(loaded.events, [])
      assert.strictEqual(loaded.revision, "0")
      assert.deepStrictEqual(yield* store.list(), [])
      const again = yield* Effect.flip(store.create(header("lazy")))
      assert.strictEqual(again._tag, "SessionExists")
      yield* store.append("lazy", [ev(0)], { expectedSeq: 0 })
      const other = yield* storeOn(file)
      const stored = yield* Effect.flip(other.create(header("lazy")))
      assert.strictEqual(stored._tag, "SessionExists")
      assert.strictEqual(stored.rule, "J14")
      // J13: a rejected create registers nothing
      const bad = yield* Effect.flip(store.create({ version: 1, id: "frac", createdAt: 1.5 }))
      assert.strictEqual(bad._tag, "SessionHeaderInvalid")
      const unknown = yield* Effect.flip(store.load("frac"))
      assert.strictEqual(unknown._tag, "SessionNotFound")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("L11 unknown ids; an empty batch is a no-op without checks", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.append("nobody", [], { expectedSeq: 99 })
      const e1 = yield* Effect.flip(store.append("nobody", [ev(0)], { expectedSeq: 0 }))
      assert.strictEqual(e1._tag, "SessionNotFound")
      assert.strictEqual(e1.rule, "L11")
      const e2 = yield* Effect.flip(store.load("nobody"))
      assert.strictEqual(e2._tag, "SessionNotFound")
      assert.strictEqual((yield* withRaw(file, (db) => db.prepare("SELECT count(*) AS n FROM sessions").get()))?.n, 0)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("C5/C7 expected-seq conflicts write nothing; C6 is checked before the store", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("c"))
      const first = yield* Effect.flip(store.append("c", [ev(1)], { expectedSeq: 1 }))
      assert.strictEqual(first._tag, "AppendConflict")
      assert.strictEqual(first.rule, "C5")
      yield* store.append("c", [ev(0), ev(1)], { expectedSeq: 0 })
      const before = yield* store.load("c")
      const c5 = yield* Effect.flip(store.append("c", [ev(3)], { expectedSeq: 3 }))
      assert.strictEqual(c5.rule, "C5")
      const c7 = yield* Effect.flip(store.append("c", [ev(1), ev(2)], { expectedSeq: 1 }))
      assert.strictEqual(c7._tag, "AppendConflict")
      assert.strictEqual(c7.rule, "C7")
      const c6 = yield* Effect.flip(store.append("c", [ev(2), ev(4)], { expectedSeq: 2 }))
      assert.strictEqual(c6.rule, "C6")
      const after = yield* store.load("c")
      assert.deepStrictEqual(encoded(after.events), encoded(before.events))
      assert.strictEqual(after.revision, before.revision)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("two store instances on one file: the stale append is rejected, the winner's rows untouched", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const a = yield* storeOn(file)
      const b = yield* storeOn(file)
      // both register the same id; the second materialisation is J14
      yield* a.create(header("race"))
      yield* b.create(header("race", 6))
      yield* a.append("race", [ev(0), ev(1)], { expectedSeq: 0 })
      const lost = yield* Effect.flip(b.append("race", [ev(0, "turn/start", { turn: 99 })], { expectedSeq: 0 }))
      assert.strictEqual(lost._tag, "SessionExists")
      assert.strictEqual(lost.rule, "J14")
      // both read next seq 2; a wins, b is stale
      const seenByB = yield* b.load("race")
      assert.strictEqual(seenByB.events.length, 2)
      yield* a.append("race", [ev(2, "turn/start", { turn: "a" })], { expectedSeq: 2 })
      const stale = yield* Effect.flip(b.append("race", [ev(2, "turn/start", { turn: "b" }), ev(3)], { expectedSeq: 2 }))
      assert.strictEqual(stale._tag, "AppendConflict")
      assert.strictEqual(stale.rule, "C7")
      const rows = yield* withRaw(file, (db) => db.prepare("SELECT seq, data FROM event_rows ORDER BY seq").all())
      assert.deepStrictEqual(rows, [
        { seq: 0, data: "{\"turn\":0}" },
        { seq: 1, data: "{\"turn\":1}" },
        { seq: 2, data: "{\"turn\":\"a\"}" }
      ])
      const loaded = yield* b.load("race")
      assert.strictEqual(loaded.header.createdAt, 5)
      assert.strictEqual(loaded.revision, "2")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("concurrent appends in one process with the same expectedSeq: exactly one wins", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("conc"))
      yield* store.append("conc", [ev(0)], { expectedSeq: 0 })
      const results = yield* Effect.all(
        Array.from({ length: 8 }, (_, k) => Effect.exit(store.append("conc", [ev(1, "turn/start", { k })], { expectedSeq: 1 }))),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(results.filter(Exit.isSuccess).length, 1)
      assert.strictEqual((yield* store.load("conc")).events.length, 2)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("SQL metacharacters and NUL in ids, types and payloads round-trip verbatim", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      const nasty = ["'; DROP TABLE event_rows; --", "\"quoted\" 'single' `tick`", "nul\u0000inside", "back\\slash %_ ?1 :x @y $z"]
      for (const id of nasty) {
        yield* store.create(header(id, 1, { cwd: "/" + id, agentPreset: id }))
        const events = [
          ev(0, id, { [id]: id, nested: [id, { k: id }] }, { ignorable: true }),
          ev(1, "x/" + id, null, { ignorable: true })
        ]
        yield* store.append(id, events, { expectedSeq: 0 })
        const reread = yield* storeOn(file)
        const loaded = yield* reread.load(id)
        assert.strictEqual(loaded.header.id, id)
        assert.strictEqual(loaded.header.agentPreset, id)
        assert.deepStrictEqual(encoded(loaded.events), encoded(events))
        assert.deepStrictEqual(encoded(yield* reread.readFrom(id, 1)), encoded(events.slice(1)))
      }
      const listed = yield* store.list()
      assert.deepStrictEqual(listed.map((h) => h.id), [...nasty].sort())
      const integrity = yield* withRaw(file, (db) => db.pragma("integrity_check", { simple: true }))
      assert.strictEqual(integrity, "ok")
      assert.strictEqual((yield* withRaw(file, (db) => db.prepare("SELECT count(*) AS n FROM event_rows").get()))?.n, 8)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("S11 lone surrogates: verbatim inside JSON columns, refused (not mangled) in TEXT columns", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("surrogates"))
      const events = [ev(0, "x/y", { s: "\ud800 and \udc00" }, { ignorable: true })]
      yield* store.append("surrogates", events, { expectedSeq: 0 })
      assert.deepStrictEqual(encoded((yield* store.load("surrogates")).events), encoded(events))
      const badType = yield* Effect.flip(store.append("surrogates", [ev(1, "x/\ud800", null, { ignorable: true })], { expectedSeq: 1 }))
      assert.strictEqual(badType._tag, "StoreFailure")
      assert.strictEqual((badType as { rule?: string }).rule, "S11")
      const badId = yield* Effect.flip(store.create(header("id\udc00")))
      assert.strictEqual(badId._tag, "StoreFailure")
      assert.strictEqual((badId as { rule?: string }).rule, "S11")
      assert.strictEqual((yield* store.load("surrogates")).events.length, 1)
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("list: materialised sessions only, sorted by (createdAt, id); NULL header columns stay absent", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      for (const [id, at] of [["b", 2], ["a", 2], ["z", 1], ["pending", 0]] as const) {
        yield* store.create(header(id, at, id === "a" ? { delegationDepth: 0 } : {}))
        if (id !== "pending") yield* store.append(id, [ev(0)], { expectedSeq: 0 })
      }
      const listed = yield* store.list()
      assert.deepStrictEqual(listed.map((h) => h.id), ["z", "a", "b"])
      assert.deepStrictEqual(listed[1], { version: 1, id: "a", createdAt: 2, delegationDepth: 0 })
      assert.deepStrictEqual(listed[2], { version: 1, id: "b", createdAt: 2 })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a batch larger than one INSERT chunk is stored whole, in one transaction", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("big"))
      const events = Array.from({ length: 4_500 }, (_, i) => ev(i, "x/e", { i }, { ignorable: true }))
      yield* store.append("big", events, { expectedSeq: 0 })
      const loaded = yield* store.load("big")
      assert.strictEqual(loaded.events.length, 4_500)
      assert.strictEqual(loaded.revision, "1")
      // a conflicting big batch leaves nothing behind
      const bad = [...Array.from({ length: 4_100 }, (_, i) => ev(4_499 + i, "x/e", {}, { ignorable: true }))]
      const c = yield* Effect.flip(store.append("big", bad, { expectedSeq: 4_499 }))
      assert.strictEqual(c._tag, "AppendConflict")
      assert.strictEqual(c.rule, "C7")
      assert.strictEqual((yield* store.load("big")).events.length, 4_500)
    }).pipe(Effect.provide(NodeContext.layer)))

  describe("load classifies damaged rows (L1–L3, L9)", () => {
    const seeded = (file: string) =>
      Effect.gen(function*() {
        const store = yield* storeOn(file)
        yield* store.create(header("d"))
        yield* store.append("d", [ev(0), ev(1), ev(2), ev(3)], { expectedSeq: 0 })
        return store
      })

    it.scoped("L3 an unparsable row with no later turn/end is a torn tail; truncateTornTail removes it", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{\"turn\":' WHERE seq = 2").run())
        const loaded = yield* store.load("d")
        assert.strictEqual(loaded.events.length, 2)
        assert.deepStrictEqual(loaded.tornTail, { fromSeq: 2, reason: "unparsable", position: 2 })
        // L8: load never mutates
        assert.strictEqual((yield* withRaw(file, (db) => db.prepare("SELECT count(*) AS n FROM event_rows").get()))?.n, 4)
        // readFrom falls back to the full read and returns the kept prefix's suffix
        assert.strictEqual((yield* store.readFrom("d", 1)).length, 1)
        // L1: an append onto the damaged log at the kept length is a conflict
        const onTorn = yield* Effect.flip(store.append("d", [ev(2)], { expectedSeq: 2 }))
        assert.strictEqual(onTorn._tag, "AppendConflict")
        // a stale revision is L8
        const stale = yield* Effect.flip(store.truncateTornTail("d", loaded.tornTail!, { revision: "0" }))
        assert.strictEqual(stale.rule, "L8")
        const other = yield* Effect.flip(
          store.truncateTornTail("d", { ...loaded.tornTail!, fromSeq: 3 }, { revision: loaded.revision })
        )
        assert.strictEqual(other.rule, "L8")
        yield* store.truncateTornTail("d", loaded.tornTail!, { revision: loaded.revision })
        const repaired = yield* store.load("d")
        assert.strictEqual(repaired.events.length, 2)
        assert.strictEqual(repaired.tornTail, undefined)
        assert.notStrictEqual(repaired.revision, loaded.revision)
        yield* store.append("d", [ev(2)], { expectedSeq: 2 })
        assert.strictEqual((yield* store.load("d")).events.length, 3)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L2 a defective row before a later turn/end is corruption", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* store.append("d", [turnEnd(4)], { expectedSeq: 4 })
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET surface_op = 'nope' WHERE seq = 1").run())
        const e = yield* Effect.flip(store.load("d"))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual(e.rule, "L2")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L3 a seq gap is a torn tail from the missing seq", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) => db.prepare("DELETE FROM event_rows WHERE seq = 1").run())
        const loaded = yield* store.load("d")
        assert.deepStrictEqual(loaded.tornTail, { fromSeq: 1, reason: "seq-gap", position: 1 })
        assert.strictEqual(loaded.events.length, 1)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L2 sessions.next_seq disagreeing with the rows is corruption", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) => db.prepare("UPDATE sessions SET next_seq = 7").run())
        const e = yield* Effect.flip(store.load("d"))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual(e.rule, "L2")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("readFrom classifies the rows below fromSeq: the kept prefix's suffix past a torn tail, L2 before a later turn/end", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{\"turn\":' WHERE seq = 1").run())
        // the read's result is [ev(0)] (torn tail from 1): nothing at or after seq 2
        assert.deepStrictEqual(yield* store.readFrom("d", 2), [])
        assert.deepStrictEqual((yield* store.readFrom("d", 0)).map((e) => (e as Event).seq), [0])
        const other = yield* tempFile()
        const damaged = yield* seeded(other)
        yield* damaged.append("d", [turnEnd(4)], { expectedSeq: 4 })
        yield* withRaw(other, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE seq = 1").run())
        const e = yield* Effect.flip(damaged.readFrom("d", 3))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual((e as { rule: string }).rule, "L2")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("a row whose JSON columns parse but hold odd markers is loaded as stored, like a JSONL line; SessionLive.open refuses it as L9 and truncates nothing", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("odd"))
        const events = [ev(0), ev(1, "x/e", {}, { surfaceOp: 5, sourceEventSeqs: {}, ignorable: true })]
        yield* store.append("odd", events, { expectedSeq: 0 })
        const loaded = yield* store.load("odd")
        assert.strictEqual(loaded.tornTail, undefined)
        assert.deepStrictEqual(encoded(loaded.events), encoded(events))
        const e = yield* Effect.flip(Effect.scoped(SessionLive.open("odd").pipe(Effect.provideService(SessionStore, store))))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual((e as { rule: string }).rule, "L9")
        assert.strictEqual((yield* withRaw(file, (db) => db.prepare("SELECT count(*) AS n FROM event_rows").get()))?.n, 2)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("a row with an unparsable column is a defect even when another of its columns fails the lossless walk", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{\"turn\":-0}', surface_op = '{' WHERE seq = 3").run())
        assert.deepStrictEqual((yield* store.load("d")).tornTail, { fromSeq: 3, reason: "unparsable", position: 3 })
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET surface_op = NULL WHERE seq = 3").run())
        assert.strictEqual((yield* Effect.flip(store.load("d"))).rule, "L9")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L2 a row with a negative seq is corruption (a torn-tail truncation could never remove it)", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) =>
          db.prepare("INSERT INTO event_rows (session_id, seq, members, type, time, data) VALUES ('d', -1, 1, 'turn/start', 1, '{')").run())
        const e = yield* Effect.flip(store.load("d"))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual(e.rule, "L2")
        assert.strictEqual((yield* Effect.flip(store.readFrom("d", 2))).rule, "L2")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L9 a committed row whose JSON fails the lossless walk (-0) is corruption", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* seeded(file)
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{\"turn\":-0}' WHERE seq = 3").run())
        const e = yield* Effect.flip(store.load("d"))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual(e.rule, "L9")
      }).pipe(Effect.provide(NodeContext.layer)))
  })

  it.scoped("readFrom: L10, seek from the middle, past the end, K7 on the returned suffix", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("r"))
      const events = [ev(0), ev(1, "plugin/unknown", {}), ev(2), ev(3, "plugin/skip", 1, { ignorable: true })]
      // append refuses an unmarked unknown type (K9): write it marked, then unmark it as another
      // writer of the file could
      yield* store.append("r", [events[0], { ...events[1], ignorable: true }, events[2], events[3]], { expectedSeq: 0 })
      yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET ignorable = NULL WHERE seq = 1").run())
      const l10 = yield* Effect.flip(store.readFrom("r", -1))
      assert.strictEqual(l10._tag, "SeqNotContiguous")
      assert.strictEqual(l10.rule, "L10")
      assert.strictEqual((yield* Effect.flip(store.readFrom("r", 1.5))).rule, "L10")
      assert.deepStrictEqual(encoded(yield* store.readFrom("r", 2)), encoded(events.slice(2)))
      assert.deepStrictEqual(yield* store.readFrom("r", 4), [])
      assert.deepStrictEqual(yield* store.readFrom("r", 100), [])
      const k7 = yield* Effect.flip(store.readFrom("r", 0))
      assert.strictEqual(k7._tag, "UnknownEventType")
      assert.strictEqual(k7.rule, "K7")
      assert.strictEqual((yield* Effect.flip(store.readFrom("nobody", 0)))._tag, "SessionNotFound")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("replaceLog keeps the previous content as JSONL in session_backups; a stale revision is L8", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("rep", 3, { cwd: "/w" }))
      const old = [ev(0), ev(1, "user/message", { id: "u" }, { surfaceOp: "append", sourceEventSeqs: [0] })]
      yield* store.append("rep", old, { expectedSeq: 0 })
      const loaded = yield* store.load("rep")
      const stale = yield* Effect.flip(
        store.replaceLog("rep", loaded.header, [ev(0)], { revision: "999", backup: "v0-upgrade" })
      )
      assert.strictEqual(stale._tag, "AppendConflict")
      assert.strictEqual(stale.rule, "L8")
      const next = [ev(0, "turn/start", { turn: "new" })]
      yield* store.replaceLog("rep", { version: 1, id: "rep", createdAt: 4 }, next, {
        revision: loaded.revision,
        backup: "v0-upgrade"
      })
      const after = yield* store.load("rep")
      assert.deepStrictEqual(encoded(after.events), encoded(next))
      assert.deepStrictEqual(after.header, { version: 1, id: "rep", createdAt: 4 })
      const backups = yield* withRaw(file, (db) => db.prepare("SELECT session_id, reason, content FROM session_backups").all())
      assert.deepStrictEqual(backups, [{
        session_id: "rep",
        reason: "v0-upgrade",
        content: "{\"type\":\"session\",\"version\":1,\"id\":\"rep\",\"createdAt\":3,\"cwd\":\"/w\"}\n" +
          encoded(old).map((l) => l + "\n").join("")
      }])
      yield* store.append("rep", [ev(1)], { expectedSeq: 1 })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("replaceLog with no events empties the log (no INSERT of an empty batch) and keeps the backup", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* storeOn(file)
      yield* store.create(header("empty", 3))
      yield* store.append("empty", [ev(0)], { expectedSeq: 0 })
      const loaded = yield* store.load("empty")
      yield* store.replaceLog("empty", loaded.header, [], { revision: loaded.revision, backup: "v0-upgrade" })
      const after = yield* store.load("empty")
      assert.deepStrictEqual(after.events, [])
      assert.notStrictEqual(after.revision, loaded.revision)
      const backups = yield* withRaw(file, (db) => db.prepare("SELECT content FROM session_backups").all())
      assert.deepStrictEqual(backups, [{
        content: "{\"type\":\"session\",\"version\":1,\"id\":\"empty\",\"createdAt\":3}\n" + encoded([ev(0)])[0] + "\n"
      }])
      yield* store.append("empty", [ev(0)], { expectedSeq: 0 })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("the SQL store runs over a SqlClient provided from outside, one with name transforms included", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const client = yield* Layer.build(SqliteClient.layer({
        filename: file,
        disableWAL: true,
        transformResultNames: Str.snakeToCamel,
        transformQueryNames: Str.camelToSnake
      }))
      const store = yield* makeSqlStore({ dialect: sqliteDialect({ filename: file }), location: file }).pipe(
        Effect.provide(client)
      )
      yield* store.create(header("outside", 7, { parentSession: "p", seedLength: 0 }))
      const events = [ev(0), ev(1, "user/message", { id: "u" }, { surfaceOp: "append", sourceEventSeqs: [0] })]
      yield* store.append("outside", events, { expectedSeq: 0 })
      const loaded = yield* store.load("outside")
      assert.deepStrictEqual(encoded(loaded.events), encoded(events))
      assert.deepStrictEqual(loaded.header, { version: 1, id: "outside", createdAt: 7, parentSession: "p", seedLength: 0 })
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["outside"])
      // the file is an own database of the SQLite store (S3), with its pragmas (S5)
      const info = yield* withRaw(file, (db) => ({
        userVersion: db.pragma("user_version", { simple: true }),
        journal: db.pragma("journal_mode", { simple: true }),
        columns: db.prepare("SELECT parent_session, seed_length, next_seq FROM sessions").get()
      }))
      assert.deepStrictEqual(info, {
        userVersion: SCHEMA_VERSION,
        journal: "wal",
        columns: { parent_session: "p", seed_length: 0, next_seq: 2 }
      })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a missing directory is a StoreFailure, not a defect", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const e = yield* Effect.flip(storeOn(file + "/no/such/dir/x.db"))
      assert.strictEqual(e._tag, "StoreFailure")
    }).pipe(Effect.provide(NodeContext.layer)))

  describe("read and write paths", () => {
    /** The stored rows of a session, as the texts they hold (payload inflated, provenance decoded). */
    const storedRows = sqliteRows

    /** The row of one event (SQL schema version 2 column encodings), computed independently of the store. */
    const expectedRow = eventRow

    const chunk = (seq: number, text: string) =>
      ev(seq, "assistant/chunk", { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text } })

    // events whose type or data contain the text of envelope keys around `data`; long payloads
    // (over 1 KiB: compressed) with provenance runs and text; a run of delta chunks
    const mimics: ReadonlyArray<Event> = [
      ev(0, "x/,\"data\":{\"a\":1}", { v: ",\"data\":" }, { ignorable: true }),
      ev(1, "x/\"quoted\" \\ type", { tail: "\"},\"surfaceOp\":\"append\"}" }, { ignorable: true }),
      ev(2, "user/message", {
        id: "u",
        role: "user",
        content: [{ type: "text", text: ",\"sourceEventSeqs\":[1],\"surfaceOp\":\"append\",\"ignorable\":true}" }]
      }, { surfaceOp: "append", sourceEventSeqs: [0, 1] }),
      ev(3, "x/y", "a string with } and ,\"ignorable\":true", { ignorable: true }),
      ev(4, "x/y", [1, 2.5, -3e-7, "\u0000\ud800"], { ignorable: true }),
      ev(5, "x/y", null, { ignorable: true, sourceEventSeqs: [4] }),
      ev(6, "user/message", { id: "v", role: "user", content: [{ type: "text", text: "r" }] }, {
        surfaceOp: { op: "replace", start: 2, end: 2 },
        sourceEventSeqs: [2]
      }),
      ev(7, "x/long", { text: ",\"data\":".repeat(200), end: "\"}" }, { ignorable: true, sourceEventSeqs: [0, 1, 2, 5] }),
      ev(8, "x/long", "🙂".repeat(300), { ignorable: true, sourceEventSeqs: [5, 1] }),
      chunk(9, "a"),
      chunk(10, "\"},\"surfaceOp\":\"append\"}"),
      chunk(11, ""),
      chunk(12, "🙂"),
      chunk(13, "e")
    ]

    it.scoped("SQL schema version 2 column encodings hold for events mimicking the envelope frame (single appends, a batch, replaceLog)", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("single"))
        for (const e of mimics) yield* store.append("single", [e], { expectedSeq: e.seq })
        yield* store.create(header("batch"))
        yield* store.append("batch", mimics, { expectedSeq: 0 })
        // single appends: one row per event; the batch: the chunk run is one packed row
        const want = mimics.map(expectedRow)
        assert.deepStrictEqual(yield* storedRows(file, "single"), want)
        const packed: StoredRow = {
          seq: 9,
          members: 5,
          type: "text-chunks",
          time: 1_009,
          payload: "{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,1,1,1],\"texts\":[\"a\",\"\\\"},\\\"surfaceOp\\\":\\\"append\\\"}\",\"\",\"🙂\",\"e\"]}",
          column: "data",
          provenance: null,
          provenanceTag: null,
          surface_op: null,
          ignorable: null
        }
        assert.deepStrictEqual(yield* storedRows(file, "batch"), [...want.slice(0, 9), packed])
        assert.deepStrictEqual(expectedRows(mimics, true), [...want.slice(0, 9), packed])
        // the long payloads are compressed; the provenance [0, 1, 2, 5] is runs, [5, 1] text
        assert.deepStrictEqual(want.slice(7, 9).map((r) => [r.column, r.provenanceTag]), [["data_z", 0], ["data_z", 1]])
        const loaded = yield* store.load("batch")
        assert.deepStrictEqual(encoded(loaded.events), encoded(mimics))
        assert.deepStrictEqual(encoded((yield* store.load("single")).events), encoded(mimics))
        yield* store.replaceLog("batch", loaded.header, mimics.slice(0, 3), { revision: loaded.revision, backup: "test" })
        assert.deepStrictEqual(yield* storedRows(file, "batch"), want.slice(0, 3))
        // replaceLog packs as an append does
        const replaced = yield* store.load("batch")
        yield* store.replaceLog("batch", replaced.header, mimics, { revision: replaced.revision, backup: "test" })
        assert.deepStrictEqual(yield* storedRows(file, "batch"), [...want.slice(0, 9), packed])
        assert.deepStrictEqual(encoded((yield* store.load("batch")).events), encoded(mimics))
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("SQL schema version 2 column encodings with packChunks: false: one row per event, chunks included", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* makeSqliteStore({ filename: file, packChunks: false })
        yield* store.create(header("unpacked"))
        yield* store.append("unpacked", mimics, { expectedSeq: 0 })
        assert.deepStrictEqual(yield* storedRows(file, "unpacked"), mimics.map(expectedRow))
        assert.deepStrictEqual(encoded((yield* store.load("unpacked")).events), encoded(mimics))
        // a store that packs reads the same file to the same events
        assert.deepStrictEqual(encoded((yield* storeOn(file).pipe(Effect.flatMap((s) => s.load("unpacked")))).events), encoded(mimics))
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("SQL schema version 2 column encodings of session-built (trusted) events equal an independent encoding", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const written = yield* Effect.scoped(
          Effect.gen(function*() {
            const s = yield* SessionLive.create({ id: "trusted" })
            return yield* appendSample(s, "a \"quoted\" ,\"data\": text }")
          }).pipe(Effect.provide(layerSqliteStore({ filename: file })))
        )
        assert.deepStrictEqual(yield* storedRows(file, "trusted"), written.map(expectedRow))
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped.prop(
      "SQL schema version 2 random valid logs under random batch partitions: each batch is stored as its expected rows (packChunks true and false)",
      { log: anyValidLog, sizes: fc.array(fc.integer({ min: 1, max: 12 }), { maxLength: 6 }) },
      ({ log, sizes }) =>
        Effect.gen(function*() {
          const events = asEvents(log.events)
          const batches = partition(events, sizes)
          const loads: Array<ReadonlyArray<string>> = []
          for (const packChunks of [true, false]) {
            const file = yield* tempFile()
            const store = yield* makeSqliteStore({ filename: file, packChunks })
            yield* store.create(header("p"))
            let next = 0
            for (const batch of batches) {
              yield* store.append("p", batch, { expectedSeq: next })
              next += batch.length
            }
            assert.deepStrictEqual(yield* storedRows(file, "p"), batches.flatMap((b) => expectedRows(b, packChunks)))
            loads.push(encoded((yield* store.load("p")).events))
            assert.deepStrictEqual(loads[loads.length - 1], encoded(events))
          }
          assert.deepStrictEqual(loads[0], loads[1])
        }).pipe(Effect.provide(NodeContext.layer)),
      { fastCheck: { numRuns: 15 } }
    )

    const many = (n: number, from = 0) => Array.from({ length: n }, (_, i) => ev(from + i, "x/e", { i: from + i }, { ignorable: true }))

    it.scoped("load and readFrom across read pages: 2,500 rows round-trip; a defect in a later page is found", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("pages"))
        const events = many(2_500)
        yield* store.append("pages", events, { expectedSeq: 0 })
        const loaded = yield* store.load("pages")
        assert.deepStrictEqual(encoded(loaded.events), encoded(events))
        assert.strictEqual(loaded.tornTail, undefined)
        assert.deepStrictEqual(encoded(yield* store.readFrom("pages", 999)), encoded(events.slice(999)))
        assert.deepStrictEqual(encoded(yield* store.readFrom("pages", 2_000)), encoded(events.slice(2_000)))
        // L3: a row in the third page that does not parse
        yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = '{' WHERE seq = 2100").run())
        const torn = yield* store.load("pages")
        assert.strictEqual(torn.events.length, 2_100)
        assert.deepStrictEqual(torn.tornTail, { fromSeq: 2_100, reason: "unparsable", position: 2_100 })
        assert.strictEqual((yield* store.readFrom("pages", 1_500)).length, 600)
        // L2: the same defect before a turn/end further on
        yield* withRaw(file, (db) =>
          db.prepare("UPDATE event_rows SET type = 'turn/end', data = ?, ignorable = NULL WHERE seq = 2499").run(
            "{\"turn\":1,\"reason\":{\"kind\":\"completed\"}}"
          ))
        const corrupt = yield* Effect.flip(store.load("pages"))
        assert.strictEqual(corrupt._tag, "StoreCorrupt")
        assert.strictEqual(corrupt.rule, "L2")
        // L3: a seq gap in the second page
        yield* withRaw(file, (db) => db.prepare("DELETE FROM event_rows WHERE seq >= 1500").run())
        yield* withRaw(file, (db) => db.prepare("UPDATE sessions SET next_seq = 1500").run())
        yield* withRaw(file, (db) => db.prepare("DELETE FROM event_rows WHERE seq = 1200").run())
        const gap = yield* store.load("pages")
        assert.deepStrictEqual(gap.tornTail, { fromSeq: 1_200, reason: "seq-gap", position: 1_200 })
        assert.strictEqual(gap.events.length, 1_200)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L9 a -0 is found at any depth with its exact path; deeply nested values round-trip", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        const nested = (depth: number, leaf: string) => "[".repeat(depth) + leaf + "]".repeat(depth)
        const cases: ReadonlyArray<readonly [string, string]> = [
          ["{\"a\":{\"b\":[1,-0]}}", "/data/a/b/1"],
          [nested(200, "-0"), "/data" + "/0".repeat(200)],
          [nested(70, "{\"k\":1e999}"), "/data" + "/0".repeat(70) + "/k"]
        ]
        for (const [i, [text, path]] of cases.entries()) {
          const id = `deep-${i}`
          yield* store.create(header(id))
          yield* store.append(id, [ev(0)], { expectedSeq: 0 })
          yield* withRaw(file, (db) => db.prepare("UPDATE event_rows SET data = ? WHERE session_id = ?").run(text, id))
          const e = yield* Effect.flip(store.load(id))
          assert.strictEqual(e._tag, "StoreCorrupt")
          assert.strictEqual(e.rule, "L9")
          const cause = (e as { readonly cause?: { readonly _tag?: string; readonly path?: string } }).cause
          assert.strictEqual(cause?._tag, "NotLosslessJson")
          assert.strictEqual(cause?.path, path)
        }
        let deep: unknown = { leaf: [1, "x", null, true] }
        for (let d = 0; d < 5_000; d++) deep = d % 2 === 0 ? [deep] : { d: deep }
        yield* store.create(header("deep-ok"))
        const events = [ev(0, "x/deep", deep, { ignorable: true })]
        yield* store.append("deep-ok", events, { expectedSeq: 0 })
        const loaded = yield* store.load("deep-ok")
        assert.deepStrictEqual(encoded(loaded.events), encoded(events))
        // the loaded value is deep-frozen like every walked value
        let node: unknown = (loaded.events[0] as Event).data
        let frozen = true
        while (typeof node === "object" && node !== null) {
          frozen &&= Object.isFrozen(node)
          node = Array.isArray(node) ? node[0] : (node as Record<string, unknown>).d ?? (node as Record<string, unknown>).leaf
        }
        assert.isTrue(frozen)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("L2 seqs beyond 2^53 written behind the store's back: the paged load terminates with StoreCorrupt", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("huge"))
        yield* store.append("huge", many(999), { expectedSeq: 0 })
        yield* withRaw(file, (db) =>
          db.exec(
            "INSERT INTO event_rows (session_id, seq, members, type, time, data) VALUES " +
              "('huge', 9007199254740992, 1, 'x/e', 1, '{}'), ('huge', 9007199254740993, 1, 'x/e', 1, '{}'), " +
              "('huge', 9007199254740994, 1, 'x/e', 1, '{}')"
          ))
        const e = yield* Effect.flip(store.load("huge"))
        assert.strictEqual(e._tag, "StoreCorrupt")
        assert.strictEqual(e.rule, "L2")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("C7 a row already stored at expectedSeq: the append fails and next_seq and revision stay", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("pk"))
        yield* store.append("pk", [ev(0)], { expectedSeq: 0 })
        yield* store.append("pk", [ev(1)], { expectedSeq: 1 })
        assert.strictEqual((yield* store.load("pk")).revision, "2")
        // a row at seq 2 behind the store's back (next_seq stays 2)
        yield* withRaw(file, (db) =>
          db.prepare("INSERT INTO event_rows (session_id, seq, members, type, time, data) VALUES ('pk', 2, 1, 'x/e', 1, '{}')").run())
        const e = yield* Effect.flip(store.append("pk", [ev(2), ev(3)], { expectedSeq: 2 }))
        assert.strictEqual(e._tag, "AppendConflict")
        assert.strictEqual(e.rule, "C7")
        const row = yield* withRaw(file, (db) => db.prepare("SELECT next_seq, revision FROM sessions WHERE id = 'pk'").get())
        assert.deepStrictEqual(row, { next_seq: 2, revision: 2 })
        assert.strictEqual((yield* storedRows(file, "pk")).length, 3)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("concurrent first appends of a registered session: one materialises it, the others are C7", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("first"))
        const results = yield* Effect.all(
          Array.from({ length: 6 }, (_, k) => Effect.exit(store.append("first", [ev(0, "turn/start", { k })], { expectedSeq: 0 }))),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(results.filter(Exit.isSuccess).length, 1)
        for (const r of results) {
          if (Exit.isFailure(r)) {
            const e = yield* Effect.flip(r)
            assert.strictEqual(e._tag, "AppendConflict")
            assert.strictEqual(e.rule, "C7")
          }
        }
        const loaded = yield* store.load("first")
        assert.strictEqual(loaded.events.length, 1)
        assert.strictEqual(loaded.revision, "1")
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("append is a description: building it checks and writes nothing; run twice, the second run is C7", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        yield* store.create(header("lazy-append"))
        const bad = store.append("lazy-append", [ev(1)], { expectedSeq: 0 })
        const good = store.append("lazy-append", [ev(0)], { expectedSeq: 0 })
        assert.deepStrictEqual(yield* storedRows(file, "lazy-append"), [])
        assert.strictEqual((yield* Effect.flip(bad)).rule, "C6")
        yield* good
        const again = yield* Effect.flip(good)
        assert.strictEqual(again._tag, "AppendConflict")
        assert.strictEqual(again.rule, "C7")
        assert.strictEqual((yield* storedRows(file, "lazy-append")).length, 1)
      }).pipe(Effect.provide(NodeContext.layer)))

    it.scoped("operations of one store interleave safely: concurrent appends, creates, lists, loads and reads", () =>
      Effect.gen(function*() {
        const file = yield* tempFile()
        const store = yield* storeOn(file)
        const ids = ["w0", "w1", "w2", "w3"]
        for (const id of ids) yield* store.create(header(id))
        const writer = (id: string) =>
          Effect.gen(function*() {
            for (let b = 0; b < 20; b++) yield* store.append(id, many(25, b * 25), { expectedSeq: b * 25 })
          })
        const reader = (tag: string) =>
          Effect.gen(function*() {
            for (let r = 0; r < 20; r++) {
              yield* store.list()
              for (const id of ids) {
                const loaded = yield* store.load(id)
                assert.strictEqual(loaded.tornTail, undefined)
                assert.strictEqual(loaded.events.length % 25, 0)
                assert.strictEqual(loaded.revision, String(loaded.events.length / 25))
                assert.strictEqual((yield* store.readFrom(id, 0)).length, loaded.events.length)
              }
              yield* store.create(header(`late-${tag}-${r}`, 9))
            }
          })
        yield* Effect.all([...ids.map(writer), reader("a"), reader("b")], { concurrency: "unbounded" })
        for (const id of ids) assert.deepStrictEqual(encoded((yield* store.load(id)).events), encoded(many(500)))
        assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ids)
      }).pipe(Effect.provide(NodeContext.layer)))
  })
})
