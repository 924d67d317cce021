/**
 * SQL schema version 2 on SQLite (docs/formats.md "SQL schema version 2"): the migration of a version-1
 * database (SPEC §7.5) by a writing open, atomic under SIGKILL, and a read-only open that reads
 * version 1 as it is and writes nothing; packed chunk rows (SPEC Appendix A) and compressed
 * payloads round-tripping under random batch partitions; the provenance BLOB codec; and hostile
 * rows (malformed packed rows, undecompressable payloads, the CHECK constraints).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Path from "@effect/platform/Path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import { spawn } from "node:child_process"
import { statSync } from "node:fs"
import { join } from "node:path"
import { deflateRawSync } from "node:zlib"
import { makeSqliteStore, SCHEMA_VERSION, type SqliteStoreOptions } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { decodeProvenance, encodeProvenance } from "../../src/layers/sql/ColumnEncoding.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import type { SessionStoreShape } from "../../src/services/SessionStore.js"
import { anyValidLog, asEvents } from "../arbitraries.js"
import { bundleScript, childEnv } from "../helpers/processes.js"
import { partition } from "../store-contract/contract.js"
import {
  blobText,
  copiedRow,
  createV1Sqlite,
  eventRow,
  expectedRows,
  LONG_TEXT,
  migratedRows,
  payloadColumn,
  sqliteRows,
  V1_BACKUP,
  type V1Session,
  v1Sessions,
  v1StreamedSessions,
  withRaw
} from "./rows.js"

const provide = Effect.provide(NodeContext.layer)

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped())

const tempFile = (name = "store.db") =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    return path.join(yield* tempDir, name)
  })

const encoded = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))

const header = (id: string) => ({ version: 1, id, createdAt: 5 })

const ev = (seq: number, type: string, data: unknown, extra: Record<string, unknown> = {}) =>
  ({ type, seq, time: 1_000 + seq, data, ...extra }) as unknown as Event

const textDelta = (seq: number, text: string, time = 1_000 + seq, index = 0, kind = "text-delta") =>
  ({ type: "assistant/chunk", seq, time, data: { turn: 1, step: 1, chunk: { type: kind, index, text } } }) as unknown as Event

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

/** Every listed session of a store opened with `options`, as `summaryOf` shows it. */
const summaries = (options: SqliteStoreOptions) =>
  Effect.scoped(Effect.gen(function*() {
    const store = yield* makeSqliteStore(options)
    const ids = (yield* store.list()).map((h) => h.id)
    const sessions = yield* Effect.forEach(ids, (id) => summaryOf(store, id))
    return Object.fromEntries(ids.map((id, i) => [id, sessions[i]]))
  }))

const pragmas = (file: string) =>
  withRaw(file, (db) => ({
    userVersion: db.pragma("user_version", { simple: true }),
    tables: db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").all().map((r) => r.name)
  }))

const bytesOf = (file: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFile(file))
const exists = (file: string) => Effect.flatMap(FileSystem.FileSystem, (fs) => fs.exists(file))

// ---------------------------------------------------------------------------------------------

describe("SQLite: SQL schema version 2 migration", () => {
  it.scoped("a version-1 database: read-only opens read it as it is and write nothing; a writing open migrates it; reopening is a no-op", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const sessions = v1Sessions()
      yield* createV1Sqlite(file, sessions)
      const original = yield* bytesOf(file)

      // read-only: version 1 as it is
      const before = yield* summaries({ filename: file, readOnly: true })
      assert.deepStrictEqual(Object.keys(before), ["chat", "corrupt", "long", "torn"])
      assert.deepStrictEqual(before.corrupt, { error: "StoreCorrupt", rule: "L2" })
      const torn = before.torn as { readonly lines: ReadonlyArray<string>; readonly tornTail: unknown; readonly revision: string }
      assert.deepStrictEqual(torn.tornTail, { fromSeq: 3, reason: "unparsable", position: 3 })
      assert.strictEqual(torn.lines.length, 3)
      const chat = before.chat as { readonly lines: ReadonlyArray<string>; readonly header: unknown; readonly revision: string }
      assert.deepStrictEqual(chat.header, { version: 1, id: "chat", createdAt: 10, cwd: "/w", delegationDepth: 0 })
      assert.strictEqual(chat.revision, "3")
      assert.deepStrictEqual(chat.lines, sessions[0].rows.map((r) => {
        const line: Record<string, unknown> = { type: r.type, seq: r.seq, time: r.time, data: JSON.parse(r.data) }
        if (r.source_event_seqs !== null) line.sourceEventSeqs = JSON.parse(r.source_event_seqs)
        if (r.surface_op !== null) line.surfaceOp = JSON.parse(r.surface_op)
        if (r.ignorable) line.ignorable = true
        return JSON.stringify(line)
      }))

      // a read-only store of version 1 refuses writes before writing anything
      yield* Effect.scoped(Effect.gen(function*() {
        const store = yield* makeSqliteStore({ filename: file, readOnly: true })
        const loaded = yield* store.load("torn")
        const append = yield* Effect.flip(store.append("chat", [ev(13, "turn/start", { turn: 2 })], { expectedSeq: 13 }))
        assert.strictEqual(append._tag, "StoreFailure")
        const truncate = yield* Effect.flip(store.truncateTornTail("torn", loaded.tornTail!, { revision: loaded.revision }))
        assert.strictEqual(truncate._tag, "StoreFailure")
        const replace = yield* Effect.flip(store.replaceLog("torn", loaded.header, [], { revision: loaded.revision, backup: "x" }))
        assert.strictEqual(replace._tag, "StoreFailure")
      }))
      assert.deepStrictEqual(yield* bytesOf(file), original)
      assert.isFalse(yield* exists(file + "-wal"))
      assert.isFalse(yield* exists(file + "-shm"))
      assert.deepStrictEqual(yield* pragmas(file), { userVersion: 1, tables: ["events", "session_backups", "sessions"] })

      // a writing open migrates: version 2, no `events`, the same sessions
      const after = yield* summaries({ filename: file })
      assert.deepStrictEqual(yield* pragmas(file), { userVersion: SCHEMA_VERSION, tables: ["event_rows", "session_backups", "sessions"] })
      assert.deepStrictEqual(after, before)

      // every row copied one to one, its texts kept exactly, but for the chunk run of chat (one packed row)
      for (const s of sessions) assert.deepStrictEqual(yield* sqliteRows(file, s.id), migratedRows(s, true))
      assert.deepStrictEqual(
        (yield* sqliteRows(file, "chat")).map((r) => [r.seq, r.members, r.type]).slice(2, 5),
        [[2, 1, "step/start"], [3, 4, "text-chunks"], [7, 1, "assistant/message"]]
      )
      const raw = yield* withRaw(file, (db) => ({
        long: db.prepare("SELECT data, length(data_z) AS z, source_event_seqs FROM event_rows WHERE session_id = 'chat' AND seq = 8").get(),
        provenance: db.prepare("SELECT seq, source_event_seqs FROM event_rows WHERE session_id = 'chat' AND source_event_seqs IS NOT NULL ORDER BY seq")
          .all(),
        damaged: db.prepare("SELECT data FROM event_rows WHERE session_id = 'torn' AND seq = 3").get(),
        backups: db.prepare("SELECT session_id, taken_at, reason, content FROM session_backups").all()
      }))
      // the long payload is compressed; provenance BLOBs: runs for ascending arrays, else the text
      assert.strictEqual(raw.long?.data, null)
      assert.isBelow(Number(raw.long?.z), Buffer.byteLength(JSON.stringify({ text: LONG_TEXT })) / 4)
      assert.deepStrictEqual(raw.provenance, [
        { seq: 7, source_event_seqs: Buffer.from([0, 3, 3]) },
        { seq: 8, source_event_seqs: Buffer.from([0, 0, 2, 2, 0]) },
        { seq: 9, source_event_seqs: Buffer.from("\u0001[6,2]") },
        { seq: 10, source_event_seqs: Buffer.from("\u0001[ 1, 2 ]") }
      ])
      assert.deepStrictEqual(raw.damaged, { data: "{\"turn\":1,\"st" })
      assert.deepStrictEqual(raw.backups, [V1_BACKUP])

      // reopening the migrated file writes nothing
      const migrated = yield* bytesOf(file)
      assert.deepStrictEqual(yield* summaries({ filename: file }), before)
      assert.deepStrictEqual(yield* bytesOf(file), migrated)
      assert.deepStrictEqual(yield* summaries({ filename: file, readOnly: true }), before)
      assert.deepStrictEqual(yield* bytesOf(file), migrated)
    }).pipe(provide))

  it.scoped("a migrated database is written as version 2: appends pack, truncateTornTail and replaceLog work", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      yield* createV1Sqlite(file, v1Sessions())
      const store = yield* makeSqliteStore({ filename: file })
      const chunks = [2, 3, 4, 5].map((k) => textDelta(13 + k - 2, `t${k}`))
      yield* store.append("chat", chunks, { expectedSeq: 13 })
      const rows = (yield* sqliteRows(file, "chat")).filter((r) => r.seq >= 13)
      assert.deepStrictEqual(rows, expectedRows(chunks, true))
      assert.strictEqual(rows[0].type, "text-chunks")
      const torn = yield* store.load("torn")
      yield* store.truncateTornTail("torn", torn.tornTail!, { revision: torn.revision })
      assert.strictEqual((yield* store.load("torn")).tornTail, undefined)
      const long = yield* store.load("long")
      yield* store.replaceLog("long", long.header, long.events.slice(0, 2) as ReadonlyArray<Event>, { revision: long.revision, backup: "test" })
      assert.strictEqual((yield* store.load("long")).events.length, 2)
    }).pipe(provide))

  it.scoped("streamed chunk runs: the migration packs them (fewer rows than events), and every session loads as before", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const sessions = v1StreamedSessions()
      yield* createV1Sqlite(file, sessions)
      const before = yield* summaries({ filename: file, readOnly: true })
      assert.deepStrictEqual(before.broken, { error: "StoreCorrupt", rule: "L2" })
      assert.deepStrictEqual((before.cut as { readonly tornTail: unknown }).tornTail, { fromSeq: 8, reason: "unparsable", position: 8 })
      const stream = sessions.find((s) => s.id === "stream")!
      assert.strictEqual((before.stream as { readonly lines: ReadonlyArray<string> }).lines.length, stream.rows.length)

      assert.deepStrictEqual(yield* summaries({ filename: file }), before)
      assert.deepStrictEqual(yield* pragmas(file), { userVersion: SCHEMA_VERSION, tables: ["event_rows", "session_backups", "sessions"] })
      for (const s of sessions) assert.deepStrictEqual(yield* sqliteRows(file, s.id), migratedRows(s, true), s.id)
      const rows = yield* sqliteRows(file, "stream")
      assert.strictEqual(rows.reduce((n, r) => n + r.members, 0), stream.rows.length)
      assert.isBelow(rows.length, 40)
      // turn 1: 1,500 text deltas in two rows, then the reasoning and tool-call runs; the run of
      // two and the lone delta stay rows of their own
      assert.deepStrictEqual(rows.slice(0, 10).map((r) => [r.seq, r.members, r.type]), [
        [0, 1, "turn/start"],
        [1, 1, "step/start"],
        [2, 1, "user/message"],
        [3, 1_024, "text-chunks"],
        [1_027, 476, "text-chunks"],
        [1_503, 4, "reasoning-chunks"],
        [1_507, 3, "tool-call-chunks"],
        [1_510, 1, "assistant/chunk"],
        [1_511, 1, "assistant/chunk"],
        [1_512, 1, "assistant/chunk"]
      ])
      // a packed row never spans a defect: from the damaged row on, rows are copied as they are
      assert.deepStrictEqual((yield* sqliteRows(file, "cut")).map((r) => r.members), [1, 1, 6, 1, 1, 1, 1, 1, 1])

      // the migrated store is appended to and read as any other
      const store = yield* makeSqliteStore({ filename: file })
      const cut = yield* store.load("cut")
      yield* store.truncateTornTail("cut", cut.tornTail!, { revision: cut.revision })
      const more = [0, 1, 2].map((k) => textDelta(8 + k, `c${k}`, 1_008 + k))
      yield* store.append("cut", more, { expectedSeq: 8 })
      assert.deepStrictEqual(encoded((yield* store.load("cut")).events), [...(before.cut as { readonly lines: ReadonlyArray<string> }).lines, ...encoded(more)])
    }).pipe(provide))

  it.scoped.prop(
    "random valid logs written as version 1 migrate to the expected rows and load identically, packed or not",
    { log: anyValidLog },
    ({ log }) =>
      Effect.gen(function*() {
        const events = asEvents(log.events)
        const rows = events.map((e) => ({
          seq: e.seq,
          type: e.type,
          time: e.time,
          data: JSON.stringify(e.data),
          source_event_seqs: e.sourceEventSeqs === undefined ? null : JSON.stringify(e.sourceEventSeqs),
          surface_op: e.surfaceOp === undefined ? null : JSON.stringify(e.surfaceOp),
          ignorable: e.ignorable === true
        }))
        const session: V1Session = { id: "r", createdAt: 1, cwd: null, delegationDepth: null, nextSeq: rows.length, revision: 1, rows }
        for (const packChunks of [true, false]) {
          const file = yield* tempFile()
          yield* createV1Sqlite(file, [session])
          const migrated = yield* summaries({ filename: file, packChunks })
          assert.deepStrictEqual((migrated.r as { readonly lines: ReadonlyArray<string> }).lines, encoded(events))
          assert.deepStrictEqual(yield* sqliteRows(file, "r"), migratedRows(session, packChunks))
        }
      }).pipe(provide),
    { fastCheck: { numRuns: 20 } }
  )

  it.scoped("packChunks: false migrates one row per event, and every session loads as before", () =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const sessions = [...v1Sessions(), ...v1StreamedSessions()]
      yield* createV1Sqlite(file, sessions)
      const before = yield* summaries({ filename: file, readOnly: true })
      assert.deepStrictEqual(yield* summaries({ filename: file, packChunks: false }), before)
      for (const s of sessions) {
        const rows = yield* sqliteRows(file, s.id)
        assert.deepStrictEqual(rows, s.rows.map(copiedRow), s.id)
        assert.deepStrictEqual(rows, migratedRows(s, false))
      }
      // a store that packs reads them alike, and packs what it appends
      assert.deepStrictEqual(yield* summaries({ filename: file }), before)
      assert.strictEqual((yield* sqliteRows(file, "stream")).length, sessions.find((s) => s.id === "stream")!.rows.length)
    }).pipe(provide))

  it.scopedLive(
    "a writing open SIGKILLed during the migration leaves version 1: it reads back identically, and a later writing open migrates",
    () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const file = join(dir, "big.db")
        const pad = "p".repeat(200)
        const bigRows = Array.from({ length: 80_000 }, (_, i) => ({
          seq: i,
          type: "test/e",
          time: i,
          data: JSON.stringify({ i, pad }),
          source_event_seqs: i === 0 ? null : `[${i - 1}]`,
          surface_op: null,
          ignorable: true
        }))
        const big: V1Session = { id: "big", createdAt: 1, cwd: null, delegationDepth: null, nextSeq: bigRows.length, revision: 1, rows: bigRows }
        yield* createV1Sqlite(file, [...v1Sessions(), big])
        const original = yield* bytesOf(file)
        const before = yield* summaries({ filename: file, readOnly: true })
        assert.strictEqual((before.big as { readonly lines: ReadonlyArray<string> }).lines.length, 80_000)

        const bundle = bundleScript("test/sqlite/child-migrate.ts", join(dir, "child-migrate.cjs"))
        // kill once the migration's uncommitted frames pass 1 MiB of the WAL (it ends above 20 MiB)
        const run = yield* Effect.async<{ readonly signal: string | null; readonly stdout: string; readonly wal: number }>((resume) => {
          const child = spawn(process.execPath, [bundle, file], { env: childEnv(), stdio: ["ignore", "pipe", "pipe"] })
          let stdout = ""
          let wal = 0
          child.stdout.on("data", (d) => void (stdout += String(d)))
          const poll = setInterval(() => {
            try {
              wal = statSync(file + "-wal").size
            } catch {
              return
            }
            if (wal > 1_048_576) {
              clearInterval(poll)
              child.kill("SIGKILL")
            }
          }, 2)
          const guard = setTimeout(() => child.kill("SIGKILL"), 120_000)
          child.on("close", (_code, signal) => {
            clearInterval(poll)
            clearTimeout(guard)
            resume(Effect.succeed({ signal, stdout, wal }))
          })
          return Effect.sync(() => child.kill("SIGKILL"))
        })
        assert.strictEqual(run.signal, "SIGKILL")
        assert.notInclude(run.stdout, "opened")
        assert.isAbove(run.wal, 1_048_576)
        // nothing committed: the database file itself is untouched, the WAL holds uncommitted frames
        assert.isTrue(yield* exists(file + "-wal"))
        assert.deepStrictEqual(yield* bytesOf(file), original)

        // read-only, the file is still version 1 with the same content
        assert.deepStrictEqual(yield* summaries({ filename: file, readOnly: true }), before)
        assert.deepStrictEqual(yield* bytesOf(file), original)

        // a later writing open completes the migration
        const after = yield* summaries({ filename: file })
        assert.deepStrictEqual(yield* pragmas(file), { userVersion: SCHEMA_VERSION, tables: ["event_rows", "session_backups", "sessions"] })
        assert.deepStrictEqual(after, before)
      }).pipe(provide),
    240_000
  )
})

// ---------------------------------------------------------------------------------------------

describe("SQLite: SQL schema version 2 packing and compression", () => {
  /** `batches` appended to session `id` of a new store on a new file; the file. */
  const appended = (batches: ReadonlyArray<ReadonlyArray<Event>>, packChunks: boolean) =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* makeSqliteStore({ filename: file, packChunks })
      yield* store.create(header("s"))
      let next = 0
      for (const batch of batches) {
        yield* store.append("s", batch, { expectedSeq: next })
        next += batch.length
      }
      return { file, store }
    })

  it.scoped("chunk runs become packed rows (kinds, tool-call ids and names, negative time gaps, 1,024-member rows); both layouts load alike", () =>
    Effect.gen(function*() {
      const events: Array<Event> = []
      const push = (make: (seq: number) => Event) => void events.push(make(events.length))
      push((seq) => ev(seq, "turn/start", { turn: 1 }))
      push((seq) => ev(seq, "step/start", { turn: 1, step: 1 }))
      for (const [k, text] of ["a", "b", "c", "d"].entries()) push((seq) => textDelta(seq, text, 2_000 - k * 7))
      for (const text of ["r1", "r2", "r3"]) push((seq) => textDelta(seq, text, 3_000, 1, "reasoning-delta"))
      // x continues the run of r1..r3 (four members); y, with an extra key, stays verbatim and
      // breaks it; z alone stays verbatim
      push((seq) => textDelta(seq, "x", 3_001, 1, "reasoning-delta"))
      push((seq) => ({ ...textDelta(seq, "y", 3_002, 1, "reasoning-delta"), ignorable: true }) as Event)
      push((seq) => textDelta(seq, "z", 3_003, 1, "reasoning-delta"))
      for (const [k, args] of ["{\"pa", "th\":", "\"a\"}"].entries()) {
        push((seq) => ({
          type: "assistant/chunk",
          seq,
          time: 4_000 + k,
          data: { turn: 1, step: 1, chunk: { type: "tool-call-delta", index: 2, id: "call_1", name: "read", argumentsDelta: args } }
        }) as unknown as Event)
      }
      for (const [k, args] of ["{", "}", ""].entries()) {
        push((seq) => ({
          type: "assistant/chunk",
          seq,
          time: 4_100 + k,
          data: { turn: 1, step: 1, chunk: { type: "tool-call-delta", index: 3, id: "call_2", argumentsDelta: args } }
        }) as unknown as Event)
      }
      for (let k = 0; k < 2_500; k++) push((seq) => textDelta(seq, `w${k} `, 5_000 + k, 4))
      push((seq) => ev(seq, "step/end", { turn: 1, step: 1 }))

      const packed = yield* appended([events], true)
      const rows = yield* sqliteRows(packed.file, "s")
      assert.deepStrictEqual(rows, expectedRows(events, true))
      assert.deepStrictEqual(
        rows.filter((r) => r.members > 1).map((r) => [r.type, r.members]),
        [["text-chunks", 4], ["reasoning-chunks", 4], ["tool-call-chunks", 3], ["tool-call-chunks", 3], ["text-chunks", 1_024], [
          "text-chunks",
          1_024
        ], ["text-chunks", 452]]
      )
      assert.strictEqual(rows[2].payload, "{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[-7,-7,-7],\"texts\":[\"a\",\"b\",\"c\",\"d\"]}")
      assert.strictEqual(
        rows.find((r) => r.type === "tool-call-chunks")?.payload,
        "{\"turn\":1,\"step\":1,\"index\":2,\"id\":\"call_1\",\"name\":\"read\",\"dt\":[1,1],\"args\":[\"{\\\"pa\",\"th\\\":\",\"\\\"a\\\"}\"]}"
      )
      // a packed row of 1,024 members is over 1 KiB: compressed
      assert.deepStrictEqual(rows.filter((r) => r.members === 1_024).map((r) => r.column), ["data_z", "data_z"])
      const unpacked = yield* appended([events], false)
      const unpackedRows = yield* sqliteRows(unpacked.file, "s")
      assert.strictEqual(unpackedRows.length, events.length)
      assert.isBelow(rows.length, 30)
      assert.deepStrictEqual(encoded((yield* packed.store.load("s")).events), encoded(events))
      assert.deepStrictEqual(encoded((yield* unpacked.store.load("s")).events), encoded(events))
      assert.deepStrictEqual(encoded(yield* packed.store.readFrom("s", 1_000)), encoded(events.slice(1_000)))
    }).pipe(provide))

  it.scoped.prop(
    "random valid logs under random batch partitions load identically with packChunks true and false, from fewer rows when packed",
    { log: anyValidLog, sizes: fc.array(fc.integer({ min: 1, max: 40 }), { maxLength: 4 }) },
    ({ log, sizes }) =>
      Effect.gen(function*() {
        const events = asEvents(log.events)
        const batches = partition(events, sizes)
        const packed = yield* appended(batches, true)
        const unpacked = yield* appended(batches, false)
        const packedRows = yield* sqliteRows(packed.file, "s")
        const unpackedRows = yield* sqliteRows(unpacked.file, "s")
        assert.deepStrictEqual(packedRows, batches.flatMap((b) => expectedRows(b, true)))
        assert.deepStrictEqual(unpackedRows, events.map(eventRow))
        const runs = packedRows.filter((r) => r.members > 1).length
        assert.strictEqual(packedRows.length < unpackedRows.length, runs > 0)
        const fromPacked = encoded((yield* packed.store.load("s")).events)
        assert.deepStrictEqual(fromPacked, encoded(events))
        assert.deepStrictEqual(encoded((yield* unpacked.store.load("s")).events), fromPacked)
      }).pipe(provide),
    { fastCheck: { numRuns: 20 } }
  )

  it.scoped("payloads: text in data up to 1 KiB, compressed in data_z above it when that is smaller", () =>
    Effect.gen(function*() {
      // JSON texts of exactly 1,024 and 1,025 UTF-8 bytes (the string's quotes included)
      const payloads: ReadonlyArray<readonly [unknown, "data" | "data_z"]> = [
        ["a".repeat(1_022), "data"],
        ["a".repeat(1_023), "data_z"],
        ["é".repeat(511), "data"],
        ["é".repeat(512), "data_z"],
        ["🙂".repeat(255), "data"],
        ["🙂".repeat(256), "data_z"],
        [{ nested: Array.from({ length: 60 }, (_, i) => ({ i, text: "same words again" })) }, "data_z"]
      ]
      const events = payloads.map(([data], seq) => ev(seq, "x/p", data, { ignorable: true }))
      const { file, store } = yield* appended([events], true)
      const rows = yield* sqliteRows(file, "s")
      assert.deepStrictEqual(rows.map((r) => r.column), payloads.map(([, column]) => column))
      assert.deepStrictEqual(rows.map((r) => r.payload), payloads.map(([data]) => JSON.stringify(data)))
      assert.deepStrictEqual(encoded((yield* store.load("s")).events), encoded(events))
    }).pipe(provide))

  it.scoped.prop(
    "random payloads round-trip and sit in the column their size and compressibility say",
    { texts: fc.array(fc.oneof(fc.string({ maxLength: 1_500 }), fc.string({ unit: "binary", maxLength: 900 }), fc.integer({ min: 1, max: 400 }).map((n) => "ab".repeat(n))), { minLength: 1, maxLength: 6 }) },
    ({ texts }) =>
      Effect.gen(function*() {
        const events = texts.map((t, seq) => ev(seq, "x/p", { t }, { ignorable: true }))
        const { file, store } = yield* appended([events], true)
        const rows = yield* sqliteRows(file, "s")
        assert.deepStrictEqual(rows.map((r) => r.column), texts.map((t) => payloadColumn(JSON.stringify({ t }))))
        assert.deepStrictEqual(encoded((yield* store.load("s")).events), encoded(events))
      }).pipe(provide),
    { fastCheck: { numRuns: 20 } }
  )
})

// ---------------------------------------------------------------------------------------------

describe("SQL schema version 2 provenance BLOB codec", () => {
  it("exact bytes: tag 0 then varint pairs (gap from the previous run's end + 1, length - 1); tag 1 then the text", () => {
    const cases: ReadonlyArray<readonly [ReadonlyArray<number>, ReadonlyArray<number>]> = [
      [[], [0]],
      [[0], [0, 0, 0]],
      [[1], [0, 1, 0]],
      [[0, 1, 2, 5], [0, 0, 2, 2, 0]],
      [[200, 201, 202, 100_000], [0, 0xc8, 0x01, 0x02, 0xd5, 0x8b, 0x06, 0x00]],
      [[Number.MAX_SAFE_INTEGER], [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00]]
    ]
    for (const [seqs, bytes] of cases) {
      const text = JSON.stringify(seqs)
      const blob = encodeProvenance(seqs, text)
      assert.deepStrictEqual([...blob], bytes, text)
      assert.strictEqual(decodeProvenance(blob), text)
    }
    // not strictly ascending, negative, fractional, not an array, or a non-canonical text: the text
    for (const text of ["[5,1]", "[1,1]", "[-1]", "[1.5]", "[0,1e2]", "[ 1, 2 ]", "{}", "[\"0\"]", "[9007199254740992]"]) {
      const blob = encodeProvenance(JSON.parse(text), text)
      assert.deepStrictEqual([...blob], [1, ...Buffer.from(text, "utf8")], text)
      assert.strictEqual(decodeProvenance(blob), text)
    }
  })

  it("a hostile BLOB (unknown tag, cut varint, empty) decodes to nothing, never a throw", () => {
    for (const bytes of [[], [2, 0], [0, 0x80], [0, 1], [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0]]) {
      assert.strictEqual(decodeProvenance(Uint8Array.from(bytes)), undefined, JSON.stringify(bytes))
    }
  })

  it.prop(
    "any JSON array text round-trips exactly; strictly ascending non-negative safe integers in canonical text use the runs tag",
    { values: fc.array(fc.oneof(fc.jsonValue(), fc.integer({ min: -3, max: 40 })), { maxLength: 8 }), indent: fc.constantFrom(undefined, 1) },
    ({ indent, values }) => {
      const text = JSON.stringify(values, null, indent)
      const parsed = JSON.parse(text) as Array<unknown>
      const blob = encodeProvenance(parsed, text)
      assert.strictEqual(decodeProvenance(blob), text)
      assert.strictEqual(blobText(blob), text)
      const ascending = parsed.every((s, i) =>
        typeof s === "number" && Number.isSafeInteger(s) && s >= 0 && (i === 0 || s > (parsed[i - 1] as number))
      )
      assert.strictEqual(blob[0], ascending && text === `[${parsed.join(",")}]` ? 0 : 1)
    }
  )

  it.prop(
    "ascending seq sets use the runs tag and decode to their text (independent decoder agrees)",
    { seqs: fc.uniqueArray(fc.oneof(fc.nat({ max: 300 }), fc.maxSafeNat()), { maxLength: 40 }) },
    ({ seqs }) => {
      const sorted = [...seqs].sort((a, b) => a - b)
      const text = JSON.stringify(sorted)
      const blob = encodeProvenance(sorted, text)
      assert.strictEqual(blob[0], 0)
      assert.strictEqual(blobText(blob), text)
      assert.strictEqual(decodeProvenance(blob), text)
    }
  )
})

// ---------------------------------------------------------------------------------------------

describe("SQLite: SQL schema version 2 hostile rows", () => {
  /**
   * Session `h`: turn/start, step/start, then five text deltas packed into the row at seq 2; with
   * `committed`, a step/end and a turn/end after it (the packed row lies in the committed region).
   */
  const packedSession = (committed: boolean) =>
    Effect.gen(function*() {
      const file = yield* tempFile()
      const store = yield* makeSqliteStore({ filename: file })
      yield* store.create(header("h"))
      const events = [
        ev(0, "turn/start", { turn: 1 }),
        ev(1, "step/start", { turn: 1, step: 1 }),
        ...["a", "b", "c", "d", "e"].map((t, k) => textDelta(2 + k, t))
      ]
      yield* store.append("h", events, { expectedSeq: 0 })
      if (committed) {
        yield* store.append("h", [ev(7, "step/end", { turn: 1, step: 1 }), ev(8, "turn/end", { turn: 1, reason: { kind: "completed" } })], {
          expectedSeq: 7
        })
      }
      const rows = yield* sqliteRows(file, "h")
      assert.deepStrictEqual(rows.map((r) => [r.seq, r.members, r.type]).slice(0, 3), [[0, 1, "turn/start"], [1, 1, "step/start"], [2, 5, "text-chunks"]])
      return { file, store, events }
    })

  /** Damage the rows with `statement`, then make `next_seq` agree with the rows again. */
  const damage = (file: string, statement: string, ...params: ReadonlyArray<unknown>) =>
    withRaw(file, (db) => {
      db.prepare(statement).run(...params)
      db.prepare("UPDATE sessions SET next_seq = (SELECT max(seq + members) FROM event_rows WHERE session_id = 'h')").run()
    })

  const malformed: ReadonlyArray<readonly [string, string, string]> = [
    ["members larger than the payload's", "UPDATE event_rows SET members = 6 WHERE seq = 2", "unparsable"],
    ["members smaller than the payload's", "UPDATE event_rows SET members = 4 WHERE seq = 2", "unparsable"],
    ["an extra payload key", "UPDATE event_rows SET data = replace(data, '\"texts\"', '\"x\":1,\"texts\"') WHERE seq = 2", "unparsable"],
    ["args in a text-chunks row", "UPDATE event_rows SET data = replace(data, '\"texts\"', '\"args\"') WHERE seq = 2", "unparsable"],
    ["dt of the wrong length", "UPDATE event_rows SET data = replace(data, '[1,1,1,1]', '[1,1,1]') WHERE seq = 2", "unparsable"],
    ["a member that is not a string", "UPDATE event_rows SET data = replace(data, '\"e\"', '5') WHERE seq = 2", "unparsable"],
    ["a provenance BLOB on a packed row", "UPDATE event_rows SET source_event_seqs = X'00' WHERE seq = 2", "unparsable"],
    ["a marker on a packed row", "UPDATE event_rows SET surface_op = '\"append\"' WHERE seq = 2", "unparsable"],
    ["seq0 after a gap", "UPDATE event_rows SET seq = 3 WHERE seq = 2", "seq-gap"]
  ]
  for (const [what, statement, reason] of malformed) {
    it.scoped(`Appendix A a malformed packed row (${what}): a torn tail dropping the whole row after the last turn/end, L4 before one`, () =>
      Effect.gen(function*() {
        const tail = yield* packedSession(false)
        yield* damage(tail.file, statement)
        const loaded = yield* tail.store.load("h")
        assert.deepStrictEqual(loaded.tornTail, { fromSeq: 2, reason, position: 2 })
        assert.deepStrictEqual(encoded(loaded.events), encoded(tail.events.slice(0, 2)))
        // truncation removes the whole row; the log continues from seq 2
        yield* tail.store.truncateTornTail("h", loaded.tornTail!, { revision: loaded.revision })
        assert.deepStrictEqual((yield* sqliteRows(tail.file, "h")).map((r) => r.seq), [0, 1])
        yield* tail.store.append("h", tail.events.slice(2), { expectedSeq: 2 })
        assert.deepStrictEqual(encoded((yield* tail.store.load("h")).events), encoded(tail.events))

        const committed = yield* packedSession(true)
        yield* damage(committed.file, statement)
        const error = yield* Effect.flip(committed.store.load("h"))
        assert.strictEqual(error._tag, "StoreCorrupt")
        assert.strictEqual((error as { readonly rule: string }).rule, "L4")
      }).pipe(provide))
  }

  const none = (): ReadonlyArray<unknown> => []
  const undecodable: ReadonlyArray<readonly [string, string, () => ReadonlyArray<unknown>]> = [
    ["data_z that is not deflate data", "UPDATE event_rows SET data = NULL, data_z = X'DEADBEEF0102' WHERE seq = ?", none],
    ["data_z inflating beyond 64 MiB", "UPDATE event_rows SET data = NULL, data_z = ? WHERE seq = ?", () => [
      deflateRawSync(Buffer.alloc(65 * 1_048_576, 0x20))
    ]],
    ["a provenance BLOB of an unknown tag", "UPDATE event_rows SET source_event_seqs = X'0700' WHERE seq = ?", none],
    ["a provenance BLOB cut inside a varint", "UPDATE event_rows SET source_event_seqs = X'0080' WHERE seq = ?", none]
  ]
  for (const [what, statement, paramsOf] of undecodable) {
    it.scoped(`L3/L2 a row with ${what} is an unparsable defect: a torn tail, or L2 before a turn/end`, () =>
      Effect.gen(function*() {
        // on a one-event row (seq 1) and, for the payload cases, on the packed row (seq 2)
        const targets = what.startsWith("data_z") ? [1, 2] : [1]
        const params = paramsOf()
        for (const seq of targets) {
          const tail = yield* packedSession(false)
          yield* damage(tail.file, statement, ...params, seq)
          const loaded = yield* tail.store.load("h")
          assert.deepStrictEqual(loaded.tornTail, { fromSeq: seq, reason: "unparsable", position: seq })
          assert.strictEqual(loaded.events.length, seq)
          const committed = yield* packedSession(true)
          yield* damage(committed.file, statement, ...params, seq)
          const error = yield* Effect.flip(committed.store.load("h"))
          assert.strictEqual(error._tag, "StoreCorrupt")
          assert.strictEqual((error as { readonly rule: string }).rule, "L2")
        }
      }).pipe(provide))
  }

  it.scoped("a payload moved into data_z (even a short one) reads back the same: readers do not depend on the size rule", () =>
    Effect.gen(function*() {
      const { events, file, store } = yield* packedSession(true)
      yield* withRaw(file, (db) => {
        for (const r of db.prepare("SELECT seq, data FROM event_rows WHERE session_id = 'h'").all()) {
          db.prepare("UPDATE event_rows SET data = NULL, data_z = ? WHERE seq = ?").run(deflateRawSync(Buffer.from(String(r.data))), r.seq)
        }
      })
      assert.deepStrictEqual((yield* sqliteRows(file, "h")).map((r) => r.column), ["data_z", "data_z", "data_z", "data_z", "data_z"])
      const loaded = yield* store.load("h")
      assert.strictEqual(loaded.tornTail, undefined)
      assert.deepStrictEqual(encoded(loaded.events), encoded([...events, ev(7, "step/end", { turn: 1, step: 1 }), ev(8, "turn/end", { turn: 1, reason: { kind: "completed" } })]))
    }).pipe(provide))

  it.scoped("the CHECK constraints refuse both data and data_z, neither, and members below 1", () =>
    Effect.gen(function*() {
      const { file, store } = yield* packedSession(false)
      const codes = yield* withRaw(file, (db) => {
        const attempt = (statement: string, ...params: ReadonlyArray<unknown>) => {
          try {
            db.prepare(statement).run(...params)
            return "ok"
          } catch (e) {
            return (e as { readonly code?: string }).code
          }
        }
        const insert = "INSERT INTO event_rows (session_id, seq, members, type, time, data, data_z) VALUES ('h', 7, ?, 'x/y', 1, ?, ?)"
        return [
          attempt(insert, 1, "{}", deflateRawSync(Buffer.from("{}"))),
          attempt(insert, 1, null, null),
          attempt(insert, 0, "{}", null),
          attempt("UPDATE event_rows SET data_z = ? WHERE seq = 0", deflateRawSync(Buffer.from("{}"))),
          attempt("UPDATE event_rows SET data = NULL WHERE seq = 0")
        ]
      })
      assert.deepStrictEqual(codes, Array.from({ length: 5 }, () => "SQLITE_CONSTRAINT_CHECK"))
      assert.strictEqual((yield* store.load("h")).events.length, 7)
    }).pipe(provide))
})
