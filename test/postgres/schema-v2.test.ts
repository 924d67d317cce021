/**
 * SQL schema version 2 on PostgreSQL (docs/formats.md "SQL schema version 2", SPEC §7.6): a version-1
 * schema (meta row version 1, the version-1 tables) migrated by a writing open in one transaction
 * (a backend terminated mid-migration leaves version 1), read as it is by a read-only open that
 * writes nothing; packed and compressed rows round-tripping; hostile rows.
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import * as Fiber from "effect/Fiber"
import type pg from "pg"
import { makePostgresStore, type PostgresStoreOptions, SCHEMA_VERSION } from "../../src/layers/sql/postgres/PostgresStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"
import { snapshot } from "../helpers/postgres.js"
import { anyValidLog, asEvents } from "../arbitraries.js"
import {
  copiedRow,
  eventRow,
  expectedRows,
  LONG_TEXT,
  migratedRows,
  readRow,
  ROW_COLUMNS,
  V1_BACKUP,
  v1Sessions,
  v1StreamedSessions
} from "../sqlite/rows.js"
import { partition } from "../store-contract/contract.js"
import { blockedBy, createV1Postgres, describePg, freshUrl, query, rawClient } from "./helpers.js"

const encoded = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

const header = (id: string) => ({ version: 1, id, createdAt: 5 })

const ev = (seq: number, type: string, data: unknown) => ({ type, seq, time: 1_000 + seq, data }) as unknown as Event

const textDelta = (seq: number, text: string) =>
  ({ type: "assistant/chunk", seq, time: 1_000 + seq, data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, text } } }) as unknown as Event

/** What a load shows of a session: its result, or the rule of its error. */
const summaryOf = (store: SessionStoreShape, id: string) =>
  Effect.map(Effect.either(store.load(id)), (r) =>
    Either.isRight(r)
      ? {
        header: r.right.header,
        storedVersion: r.right.storedVersion,
        lines: encoded(r.right.events),
        tornTail: r.right.tornTail,
        revision: r.right.revision
      }
      : { error: r.left._tag, rule: (r.left as { readonly rule?: string }).rule })

const summaries = (options: PostgresStoreOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* makePostgresStore(options)
    const ids = (yield* store.list()).map((h) => h.id)
    const sessions = yield* Effect.forEach(ids, (id) => summaryOf(store, id))
    return Object.fromEntries(ids.map((id, i) => [id, sessions[i]]))
  }))

const snap = (url: string) => Effect.promise(() => snapshot(url))

const tables = (raw: pg.Client) =>
  Effect.map(
    query<{ table_name: string }>(
      raw,
      "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
    ),
    (rows) => rows.map((r) => r.table_name)
  )

const storedRows = (raw: pg.Client, id: string) =>
  Effect.map(query(raw, `SELECT ${ROW_COLUMNS} FROM event_rows WHERE session_id = $1 ORDER BY seq`, [id]), (rows) => rows.map(readRow))

describePg("PostgreSQL: SQL schema version 2", () => {
  it.scoped("migration: a version-1 schema is read as it is read-only (nothing written) and migrated by a writing open; reopening is a no-op", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const raw = yield* rawClient(url)
      const sessions = v1Sessions()
      yield* createV1Postgres(raw, sessions, V1_BACKUP)
      const original = yield* snap(url)

      const before = yield* summaries({ url, readOnly: true })
      assert.deepStrictEqual(Object.keys(before), ["chat", "corrupt", "long", "torn"])
      assert.deepStrictEqual(before.corrupt, { error: "StoreCorrupt", rule: "L2" })
      assert.deepStrictEqual((before.torn as { readonly tornTail: unknown }).tornTail, { fromSeq: 3, reason: "unparsable", position: 3 })
      assert.strictEqual((before.chat as { readonly lines: ReadonlyArray<string> }).lines.length, 13)
      assert.strictEqual((before.long as { readonly lines: ReadonlyArray<string> }).lines.length, 2_345)
      // writes of a read-only version-1 store are refused before anything is written
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* makePostgresStore({ url, readOnly: true })
        const loaded = yield* store.load("torn")
        const errors = [
          yield* Effect.flip(store.append("chat", [ev(13, "turn/start", { turn: 2 })], { expectedSeq: 13 })),
          yield* Effect.flip(store.truncateTornTail("torn", loaded.tornTail!, { revision: loaded.revision })),
          yield* Effect.flip(store.replaceLog("torn", loaded.header, [], { revision: loaded.revision, backup: "x" }))
        ]
        assert.deepStrictEqual(errors.map((e) => e._tag), ["StoreFailure", "StoreFailure", "StoreFailure"])
      }))
      assert.strictEqual(yield* snap(url), original)

      const after = yield* summaries({ url })
      assert.deepStrictEqual(after, before)
      assert.deepStrictEqual(yield* query(raw, "SELECT * FROM session_log_meta"), [
        { application: "effect-session-log", schema_version: SCHEMA_VERSION }
      ])
      assert.deepStrictEqual(yield* tables(raw), ["event_rows", "session_backups", "session_log_meta", "sessions"])
      // every row copied one to one, its texts kept exactly, but for the chunk run of chat (one packed row)
      for (const s of sessions) assert.deepStrictEqual(yield* storedRows(raw, s.id), migratedRows(s, true))
      assert.deepStrictEqual((yield* storedRows(raw, "chat"))[3].members, 4)
      const chat = yield* query(
        raw,
        "SELECT seq, data IS NULL AS compressed, source_event_seqs FROM event_rows WHERE session_id = 'chat' AND source_event_seqs IS NOT NULL ORDER BY seq"
      )
      assert.deepStrictEqual(chat, [
        { seq: "7", compressed: false, source_event_seqs: Buffer.from([0, 3, 3]) },
        { seq: "8", compressed: true, source_event_seqs: Buffer.from([0, 0, 2, 2, 0]) },
        { seq: "9", compressed: false, source_event_seqs: Buffer.from("\u0001[6,2]") },
        { seq: "10", compressed: false, source_event_seqs: Buffer.from("\u0001[ 1, 2 ]") }
      ])
      assert.strictEqual((yield* storedRows(raw, "chat")).find((r) => r.seq === 8)?.payload, JSON.stringify({ text: LONG_TEXT }))
      assert.deepStrictEqual(yield* query(raw, "SELECT session_id, taken_at::int, reason, content FROM session_backups"), [V1_BACKUP])

      const migrated = yield* snap(url)
      assert.deepStrictEqual(yield* summaries({ url }), before)
      assert.deepStrictEqual(yield* summaries({ url, readOnly: true }), before)
      assert.strictEqual(yield* snap(url), migrated)
    }))

  it.scoped("migration: streamed chunk runs are packed (fewer rows than events); packChunks: false copies one row per event; both load as before", () =>
    Effect.gen(function*() {
      const sessions = v1StreamedSessions()
      const stream = sessions.find((s) => s.id === "stream")!
      let before: Record<string, unknown> | undefined
      for (const packChunks of [true, false]) {
        const url = yield* freshUrl
        const raw = yield* rawClient(url)
        yield* createV1Postgres(raw, sessions, V1_BACKUP)
        const read = yield* summaries({ url, readOnly: true })
        before ??= read
        assert.deepStrictEqual(read, before)
        assert.deepStrictEqual(before.broken, { error: "StoreCorrupt", rule: "L2" })
        assert.deepStrictEqual((before.cut as { readonly tornTail: unknown }).tornTail, { fromSeq: 8, reason: "unparsable", position: 8 })
        assert.deepStrictEqual(yield* summaries({ url, packChunks }), before)
        assert.deepStrictEqual(yield* tables(raw), ["event_rows", "session_backups", "session_log_meta", "sessions"])
        for (const s of sessions) {
          const rows = yield* storedRows(raw, s.id)
          assert.deepStrictEqual(rows, migratedRows(s, packChunks), s.id)
          if (!packChunks) assert.deepStrictEqual(rows, s.rows.map(copiedRow))
        }
        const rows = yield* storedRows(raw, "stream")
        assert.strictEqual(rows.reduce((n, r) => n + r.members, 0), stream.rows.length)
        if (packChunks) assert.isBelow(rows.length, 40)
        else assert.strictEqual(rows.length, stream.rows.length)
        assert.deepStrictEqual((yield* storedRows(raw, "cut")).map((r) => r.members), packChunks ? [1, 1, 6, 1, 1, 1, 1, 1, 1] : Array(14).fill(1))
      }
    }))

  it.scopedLive("migration: a backend terminated mid-migration leaves version 1 untouched; a later writing open migrates", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const raw = yield* rawClient(url)
      yield* createV1Postgres(raw, v1Sessions(), V1_BACKUP)
      const original = yield* snap(url)
      const before = yield* summaries({ url, readOnly: true })
      // a reader of the events table: the migration copies every row, then waits to drop the
      // table, inside its transaction (the ownership checks before it only read)
      const blocker = yield* rawClient(url)
      yield* query(blocker, "BEGIN")
      yield* query(blocker, "LOCK TABLE events IN ACCESS SHARE MODE")
      const open = yield* Effect.fork(Effect.flip(Effect.scoped(makePostgresStore({ url }))))
      const [pid] = yield* blockedBy(blocker)
      const [waiting] = yield* query<{ query: string }>(blocker, "SELECT query FROM pg_stat_activity WHERE pid = $1", [pid])
      assert.include(waiting.query, "DROP TABLE events")
      yield* query(blocker, "SELECT pg_terminate_backend($1)", [pid])
      const error = yield* Fiber.join(open)
      yield* query(blocker, "ROLLBACK")
      assert.strictEqual(error._tag, "StoreFailure")
      assert.strictEqual(yield* snap(url), original)
      assert.deepStrictEqual(yield* query(raw, "SELECT schema_version FROM session_log_meta"), [{ schema_version: 1 }])
      assert.deepStrictEqual(yield* summaries({ url, readOnly: true }), before)
      assert.deepStrictEqual(yield* summaries({ url }), before)
      assert.deepStrictEqual(yield* tables(raw), ["event_rows", "session_backups", "session_log_meta", "sessions"])
    }))

  it.scoped.prop(
    "packing: random valid logs under random batch partitions are stored as their expected rows and load identically with packChunks true and false",
    { log: anyValidLog, sizes: fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 4 }) },
    ({ log, sizes }) =>
      Effect.gen(function*() {
        const url = yield* freshUrl
        const raw = yield* rawClient(url)
        const events = asEvents(log.events)
        const batches = partition(events, sizes)
        const loads: Array<ReadonlyArray<string>> = []
        for (const packChunks of [true, false]) {
          const id = `p-${packChunks}`
          const store = yield* makePostgresStore({ url, packChunks })
          yield* store.create(header(id))
          let next = 0
          for (const batch of batches) {
            yield* store.append(id, batch, { expectedSeq: next })
            next += batch.length
          }
          assert.deepStrictEqual(
            yield* storedRows(raw, id),
            packChunks ? batches.flatMap((b) => expectedRows(b, true)) : events.map(eventRow)
          )
          loads.push(encoded((yield* store.load(id)).events))
        }
        assert.deepStrictEqual(loads[0], encoded(events))
        assert.deepStrictEqual(loads[1], loads[0])
      }),
    { fastCheck: { numRuns: 8 } }
  )

  it.scoped("payloads over 1 KiB are compressed into data_z, shorter ones stay text in data; both round-trip", () =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const raw = yield* rawClient(url)
      const store = yield* makePostgresStore({ url })
      yield* store.create(header("z"))
      const events = ["a".repeat(1_022), "a".repeat(1_023), "\u0000".repeat(200)].map((data, seq) =>
        ({ type: "x/p", seq, time: seq, data, ignorable: true }) as unknown as Event
      )
      yield* store.append("z", events, { expectedSeq: 0 })
      // "\u0000" is six bytes of JSON text each: 1,202 bytes, compressed
      assert.deepStrictEqual((yield* storedRows(raw, "z")).map((r) => r.column), ["data", "data_z", "data_z"])
      assert.deepStrictEqual(encoded((yield* store.load("z")).events), encoded(events))
    }))

  /** Session `h` of a fresh schema: turn/start, step/start, five text deltas in one packed row at seq 2, maybe a turn/end. */
  const packedSession = (committed: boolean) =>
    Effect.gen(function*() {
      const url = yield* freshUrl
      const raw = yield* rawClient(url)
      const store = yield* makePostgresStore({ url })
      yield* store.create(header("h"))
      const events = [ev(0, "turn/start", { turn: 1 }), ev(1, "step/start", { turn: 1, step: 1 }), ...["a", "b", "c", "d", "e"].map((t, k) => textDelta(2 + k, t))]
      yield* store.append("h", events, { expectedSeq: 0 })
      if (committed) yield* store.append("h", [ev(7, "turn/end", { turn: 1, reason: { kind: "completed" } })], { expectedSeq: 7 })
      assert.deepStrictEqual((yield* storedRows(raw, "h")).map((r) => r.members), committed ? [1, 1, 5, 1] : [1, 1, 5])
      const damage = (statement: string) =>
        Effect.zipRight(
          query(raw, statement),
          query(raw, "UPDATE sessions SET next_seq = (SELECT max(seq + members) FROM event_rows WHERE session_id = 'h')")
        )
      return { raw, store, events, damage }
    })

  const hostile: ReadonlyArray<readonly [string, string, string, string]> = [
    ["a malformed packed row (an extra payload key)", "UPDATE event_rows SET data = replace(data, '\"texts\"', '\"x\":1,\"texts\"') WHERE seq = 2", "unparsable", "L4"],
    ["a packed row whose members disagree with its payload", "UPDATE event_rows SET members = 4 WHERE seq = 2", "unparsable", "L4"],
    ["a packed row after a seq gap", "UPDATE event_rows SET seq = 3 WHERE seq = 2", "seq-gap", "L4"],
    ["a packed row whose data_z does not inflate", "UPDATE event_rows SET data = NULL, data_z = '\\xdeadbeef'::bytea WHERE seq = 2", "unparsable", "L2"]
  ]
  for (const [what, statement, reason, rule] of hostile) {
    it.scoped(`hostile rows: ${what} is a torn tail after the last turn/end, ${rule} before one`, () =>
      Effect.gen(function*() {
        const tail = yield* packedSession(false)
        yield* tail.damage(statement)
        const loaded = yield* tail.store.load("h")
        assert.deepStrictEqual(loaded.tornTail, { fromSeq: 2, reason, position: 2 })
        assert.deepStrictEqual(encoded(loaded.events), encoded(tail.events.slice(0, 2)))
        yield* tail.store.truncateTornTail("h", loaded.tornTail!, { revision: loaded.revision })
        yield* tail.store.append("h", tail.events.slice(2), { expectedSeq: 2 })
        assert.deepStrictEqual(encoded((yield* tail.store.load("h")).events), encoded(tail.events))
        const committed = yield* packedSession(true)
        yield* committed.damage(statement)
        const error = yield* Effect.flip(committed.store.load("h"))
        assert.strictEqual(error._tag, "StoreCorrupt")
        assert.strictEqual((error as { readonly rule: string }).rule, rule)
      }))
  }

  it.scoped("hostile rows: the CHECK constraints refuse both data and data_z, neither, and members below 1 (23514)", () =>
    Effect.gen(function*() {
      const { raw, store } = yield* packedSession(false)
      const attempt = (statement: string) =>
        Effect.promise(() => raw.query(statement).then(() => "ok", (e: { readonly code?: string }) => e.code))
      const insert = "INSERT INTO event_rows (session_id, seq, members, type, time, data, data_z) VALUES ('h', 7, "
      const codes = [
        yield* attempt(insert + "1, 'x/y', 1, '{}', '\\x00'::bytea)"),
        yield* attempt(insert + "1, 'x/y', 1, NULL, NULL)"),
        yield* attempt(insert + "0, 'x/y', 1, '{}', NULL)"),
        yield* attempt("UPDATE event_rows SET data = NULL WHERE seq = 0")
      ]
      assert.deepStrictEqual(codes, ["23514", "23514", "23514", "23514"])
      assert.strictEqual((yield* store.load("h")).events.length, 7)
    }))
})
