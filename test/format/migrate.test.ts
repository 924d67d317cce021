/**
 * SPEC §8.2 persistence of the v0→v1 upgrade: viewing (load, readFrom, inspect, verify, list)
 * never rewrites a v0 log; `SessionLive.open` rewrites it as v1 keeping a backup (JSONL `.v0.bak`
 * file, SQLite `session_backups` row); the `migrate` program upgrades, reports and is idempotent,
 * leaving failing sessions unchanged. Also K1/K2 on stored versions the JSONL K4 tests do not
 * reach (a fractional version; SQLite `sessions.version` 2 and -1).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Path from "@effect/platform/Path"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import { makeJsonlStore, readJsonlFile } from "../../src/layers/jsonl/JsonlStore.js"
import { makeMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import { inspectLoaded } from "../../src/services/Resume.js"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { encodeSessionId } from "../../src/schema/SessionIdEncoding.js"
import { type MigrateReport, migrateSession, migrateStore } from "../../src/programs/Migrate.js"
import { verifySession } from "../../src/programs/Verify.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { assertError } from "../helpers/state.js"

const DIR = fileURLToPath(new URL("../fixtures/v0/", import.meta.url))
const provide = Effect.provide(NodeContext.layer)
const decoder = new TextDecoder()

/** A JSONL store over a temp root holding copies of the named fixtures. */
const jsonlWith = (names: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = path.join(yield* fs.makeTempDirectoryScoped(), "store")
    yield* fs.makeDirectory(root, { recursive: true })
    for (const name of names) yield* fs.copyFile(`${DIR}${name}.jsonl`, path.join(root, `${encodeSessionId(name)}.jsonl`))
    const store = yield* makeJsonlStore({ root })
    const fileOf = (id: string) => path.join(root, `${encodeSessionId(id)}.jsonl`)
    const read = (file: string) => fs.readFile(file).pipe(Effect.map((b) => decoder.decode(b)))
    const listing = fs.readDirectory(root).pipe(Effect.map((names) => [...names].sort()))
    return { fs, path, root, store, fileOf, read, listing }
  })

/** The upgraded and validated events of a fixture, as `inspectLoaded` gives them (JSONL lines). */
const expectedUpgrade = (name: string) =>
  Effect.gen(function*() {
    const view = yield* inspectLoaded(yield* readJsonlFile(`${DIR}${name}.jsonl`))
    return { header: view.header, lines: view.events.map((e) => encodeEvent(e)) }
  })

const firstLine = (text: string) => JSON.parse(text.slice(0, text.indexOf("\n"))) as Record<string, unknown>
const linesOf = (events: ReadonlyArray<unknown>) => events.map((e) => encodeEvent(e as Event))
const byId = (reports: ReadonlyArray<MigrateReport>) =>
  Object.fromEntries(reports.map((r) => [r.id, r.error === undefined ? r.status : `${r.status} ${r.error._tag} ${r.error.rule}`]))

describe("viewing a v0 log never rewrites it (L8, §8.2)", () => {
  it.scoped("load, readFrom, list, inspect and verify leave the JSONL file byte-identical and write no backup", () =>
    Effect.gen(function*() {
      const id = "n1-identity"
      const j = yield* jsonlWith([id])
      const before = yield* j.read(j.fileOf(id))
      const listing = yield* j.listing
      const withStore = Effect.provideService(SessionStore, j.store)
      assert.strictEqual((yield* j.store.load(id)).storedVersion, 0)
      assert.deepStrictEqual((yield* j.store.list()).map((h) => [h.id, h.version]), [[id, 0]])
      // readFrom converts the whole log, then slices: seq 8 takes the id of its target, seq 5
      const suffix = yield* j.store.readFrom(id, 8)
      assert.strictEqual((suffix[0] as { data: { message: { id: string } } }).data.message.id, `legacy-message:${id}:5`)
      const view = yield* SessionLive.inspect(id).pipe(withStore)
      assert.strictEqual(view.storedVersion, 0)
      assert.strictEqual(view.header.version, 1)
      assert.deepStrictEqual(yield* verifySession(id).pipe(withStore), { ok: true, events: 9, surface: [1, 3, 8] })
      assert.strictEqual(yield* j.read(j.fileOf(id)), before)
      assert.deepStrictEqual(yield* j.listing, listing)
    }).pipe(provide))
})

describe("SessionLive.open upgrades a v0 log with a backup (K3, §7.2 step 4a)", () => {
  it.scoped("JSONL: the file is rewritten as v1, the original kept as <file>.v0.bak, reopening writes nothing", () =>
    Effect.gen(function*() {
      const id = "n1-identity"
      const j = yield* jsonlWith([id])
      const original = yield* j.read(j.fileOf(id))
      const expected = yield* expectedUpgrade(id)
      const withStore = Effect.provideService(SessionStore, j.store)
      const opened = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open(id)
        const events = yield* s.events
        // the upgraded events, then the end-seed marker
        assert.deepStrictEqual(events.slice(0, -1).map((e) => encodeEvent(e)), expected.lines)
        assert.strictEqual(events[events.length - 1].type, "session/end-seed")
        assert.strictEqual(s.header.version, 1)
        assert.deepStrictEqual((yield* s.messages).map((m) => m.id), [
          `legacy-message:${id}:1`,
          `legacy-message:${id}:3`,
          `legacy-message:${id}:5`
        ])
        // later appends use the current format
        yield* s.append("todo/write", { todos: [] })
        return (yield* s.events).map((e) => encodeEvent(e))
      })).pipe(withStore)
      assert.strictEqual(yield* j.read(`${j.fileOf(id)}.v0.bak`), original)
      const rewritten = yield* j.read(j.fileOf(id))
      assert.deepStrictEqual(firstLine(rewritten), { type: "session", ...expected.header })
      assert.strictEqual(firstLine(rewritten).version, 1)
      assert.deepStrictEqual(rewritten.split("\n").slice(1, -1), opened)
      // a cold read by another store instance: version 1, same events
      const again = yield* makeJsonlStore({ root: j.root })
      const loaded = yield* again.load(id)
      assert.strictEqual(loaded.storedVersion, 1)
      assert.deepStrictEqual(linesOf(loaded.events), opened)
      // reopening: nothing to upgrade; the first reopen adds one end-seed marker after the todo, the next writes nothing
      const listing = yield* j.listing
      yield* Effect.scoped(SessionLive.open(id)).pipe(Effect.provideService(SessionStore, again))
      const afterFirstReopen = yield* j.read(j.fileOf(id))
      yield* Effect.scoped(SessionLive.open(id)).pipe(Effect.provideService(SessionStore, again))
      assert.strictEqual(yield* j.read(j.fileOf(id)), afterFirstReopen)
      assert.deepStrictEqual(yield* j.listing, listing)
    }).pipe(provide))

  it.scoped("JSONL: a failing v0 log (K10) makes open fail and is left unchanged", () =>
    Effect.gen(function*() {
      const id = "k10-mode-set"
      const j = yield* jsonlWith([id])
      const before = yield* j.read(j.fileOf(id))
      const e = yield* Effect.flip(Effect.scoped(SessionLive.open(id)).pipe(Effect.provideService(SessionStore, j.store)))
      assertError(e, { _tag: "LegacyFormRefused", rule: "K10", seq: 1, form: "mode/set" })
      assert.strictEqual(yield* j.read(j.fileOf(id)), before)
      assert.deepStrictEqual(yield* j.listing, [`${encodeSessionId(id)}.jsonl`])
    }).pipe(provide))
})

describe("migrate (§8.2)", () => {
  const names = ["n1-identity", "n4-turn-end", "n5-context-message", "k10-mode-set", "k11-turn-start", "malformed-current"]

  it.scoped("JSONL: upgrades v0 sessions with backups, reports failures and leaves them unchanged, reports v1 as current; idempotent", () =>
    Effect.gen(function*() {
      const j = yield* jsonlWith(names)
      const withStore = Effect.provideService(SessionStore, j.store)
      // a current (v1) session beside them
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "current-one" })
        yield* s.append("todo/write", { todos: [] })
      })).pipe(withStore)
      const originals = new Map<string, string>()
      for (const n of [...names, "current-one"]) originals.set(n, yield* j.read(j.fileOf(n)))

      const first = yield* migrateStore().pipe(withStore)
      assert.deepStrictEqual(byId(first), {
        "n1-identity": "upgraded",
        "n4-turn-end": "upgraded",
        "n5-context-message": "upgraded",
        "k10-mode-set": "failed LegacyFormRefused K10",
        "k11-turn-start": "failed StoreCorrupt K11",
        "malformed-current": "failed MessageShapeInvalid H1",
        "current-one": "current"
      })
      assert.strictEqual(first.find((r) => r.id === "k10-mode-set")?.error?.seq, 1)
      for (const n of ["n1-identity", "n4-turn-end", "n5-context-message"]) {
        // the backup is the original; the session is now v1 holding exactly the upgraded events
        assert.strictEqual(yield* j.read(`${j.fileOf(n)}.v0.bak`), originals.get(n))
        const expected = yield* expectedUpgrade(n)
        const loaded = yield* j.store.load(n)
        assert.strictEqual(loaded.storedVersion, 1)
        assert.deepStrictEqual(loaded.header, expected.header)
        assert.deepStrictEqual(linesOf(loaded.events), expected.lines)
      }
      for (const n of ["k10-mode-set", "k11-turn-start", "malformed-current", "current-one"]) {
        assert.strictEqual(yield* j.read(j.fileOf(n)), originals.get(n), n)
      }
      const listing = yield* j.listing
      assert.strictEqual(listing.filter((f) => f.endsWith(".bak")).length, 3)

      // idempotent: nothing changes, upgraded sessions are now current
      const texts = new Map<string, string>()
      for (const n of [...names, "current-one"]) texts.set(n, yield* j.read(j.fileOf(n)))
      const second = yield* migrateStore().pipe(withStore)
      assert.deepStrictEqual(byId(second), {
        ...byId(first),
        "n1-identity": "current",
        "n4-turn-end": "current",
        "n5-context-message": "current"
      })
      for (const n of [...names, "current-one"]) assert.strictEqual(yield* j.read(j.fileOf(n)), texts.get(n), n)
      assert.deepStrictEqual(yield* j.listing, listing)
      // migrated sessions open like any v1 session
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open("n5-context-message")
        assert.strictEqual((yield* s.messages).length, 3)
      })).pipe(withStore)
    }).pipe(provide))

  it.scoped("migrateSession: an unknown id is reported failed (L11); a newer version is reported failed (K1) and untouched", () =>
    Effect.gen(function*() {
      const j = yield* jsonlWith([])
      const withStore = Effect.provideService(SessionStore, j.store)
      const unknown = yield* migrateSession("nope").pipe(withStore)
      assert.deepStrictEqual([unknown.status, unknown.error?._tag, unknown.error?.rule], ["failed", "SessionNotFound", "L11"])
      const text = `{"type":"session","version":2,"id":"newer","createdAt":1}\n{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}\n`
      yield* j.fs.writeFileString(j.fileOf("newer"), text)
      const newer = yield* migrateSession("newer").pipe(withStore)
      assert.deepStrictEqual([newer.status, newer.error?._tag, newer.error?.rule], ["failed", "FormatUnsupported", "K1"])
      assert.strictEqual(yield* j.read(j.fileOf("newer")), text)
    }).pipe(provide))

  it.scoped("K2: a fractional stored version is refused as older (no upgrade path) before the header shape", () =>
    Effect.gen(function*() {
      const j = yield* jsonlWith([])
      yield* j.fs.writeFileString(j.fileOf("frac"), `{"type":"session","version":0.5,"id":"frac","bogus":true}\n`)
      const e = yield* Effect.flip(j.store.load("frac"))
      assertError(e, { _tag: "FormatUnsupported", rule: "K2", direction: "older", found: 0.5 })
      const viaOpen = yield* Effect.flip(Effect.scoped(SessionLive.open("frac")).pipe(Effect.provideService(SessionStore, j.store)))
      assert.strictEqual(viaOpen._tag, "FormatUnsupported")
    }).pipe(provide))
})

// ---------------------------------------------------------------------------------------------
// SQLite: v0 rows inserted by hand into a store-created database

interface RawStatement {
  all(...params: ReadonlyArray<unknown>): Array<Record<string, unknown>>
  run(...params: ReadonlyArray<unknown>): unknown
}
interface RawDb {
  prepare(source: string): RawStatement
  close(): void
}
const require = createRequire(import.meta.url)
const Database = require("better-sqlite3") as new(filename: string) => RawDb
const withRaw = <A>(file: string, f: (db: RawDb) => A) =>
  Effect.acquireUseRelease(Effect.sync(() => new Database(file)), (db) => Effect.sync(() => f(db)), (db) => Effect.sync(() => db.close()))

/** Insert a fixture as a session row with the given version and its event rows. */
const insertFixture = (db: RawDb, name: string, text: string, version: number) => {
  const [head, ...rows] = text.trimEnd().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
  db.prepare(
    `INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, agent_preset, next_seq, revision)
     VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, NULL, ?, 1)`
  ).run(name, version, head.createdAt, head.cwd ?? null, head.parentSession ?? null, head.delegationDepth ?? null, rows.length)
  // schema version 2 rows, one per event: the payload as text in `data`, the provenance as a BLOB
  // holding its JSON text (tag byte 1)
  const insert = db.prepare(
    `INSERT INTO event_rows (session_id, seq, members, type, time, data, source_event_seqs, surface_op, ignorable)
     VALUES (?, ?, 1, ?, ?, ?, ?, ?, ?)`
  )
  for (const r of rows) {
    insert.run(
      name,
      r.seq,
      r.type,
      r.time,
      JSON.stringify(r.data),
      r.sourceEventSeqs === undefined ? null : Buffer.from("\u0001" + JSON.stringify(r.sourceEventSeqs), "utf8"),
      r.surfaceOp === undefined ? null : JSON.stringify(r.surfaceOp),
      r.ignorable === true ? 1 : null
    )
  }
}

/** A store-created SQLite file with the named fixtures inserted by hand (version column as given). */
const sqliteWith = (fixtures: ReadonlyArray<readonly [string, number]>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const filename = path.join(yield* fs.makeTempDirectoryScoped(), "v0.db")
    yield* Effect.scoped(makeSqliteStore({ filename }))
    const texts = new Map<string, string>()
    for (const [name] of fixtures) texts.set(name, decoder.decode(yield* fs.readFile(`${DIR}${name}.jsonl`)))
    yield* withRaw(filename, (db) => {
      for (const [name, version] of fixtures) insertFixture(db, name, texts.get(name)!, version)
    })
    const store: SessionStoreShape = yield* makeSqliteStore({ filename })
    const raw = <A>(f: (db: RawDb) => A) => withRaw(filename, f)
    return { filename, store, texts, raw }
  })

const backups = (db: RawDb) => db.prepare(`SELECT session_id, reason, content FROM session_backups ORDER BY id`).all()
const versionOf = (db: RawDb, id: string) => db.prepare(`SELECT version FROM sessions WHERE id = ?`).all(id)[0]?.version
const parsedLines = (text: string) => text.trimEnd().split("\n").map((l) => JSON.parse(l) as unknown)

describe("SQLite: a v0 session upgrades with a session_backups row", () => {
  it.scoped("viewing writes nothing; migrate upgrades (backup row = the v0 content as JSONL), then reports current", () =>
    Effect.gen(function*() {
      const id = "n1-identity"
      const db = yield* sqliteWith([[id, 0], ["k10-header-delta", 0]])
      const withStore = Effect.provideService(SessionStore, db.store)
      const expected = yield* expectedUpgrade(id)
      // viewing
      assert.strictEqual((yield* db.store.load(id)).storedVersion, 0)
      const view = yield* SessionLive.inspect(id).pipe(withStore)
      assert.deepStrictEqual(linesOf(view.events), expected.lines)
      assert.isTrue((yield* verifySession(id).pipe(withStore)).ok)
      assert.deepStrictEqual(yield* db.raw(backups), [])
      assert.strictEqual(yield* db.raw((d) => versionOf(d, id)), 0)
      // migrate
      const reports = yield* migrateStore().pipe(withStore)
      assert.deepStrictEqual(byId(reports), { [id]: "upgraded", "k10-header-delta": "failed LegacyFormRefused K10" })
      const rows = yield* db.raw(backups)
      assert.strictEqual(rows.length, 1)
      assert.strictEqual(rows[0].session_id, id)
      assert.strictEqual(rows[0].reason, "v0")
      assert.deepStrictEqual(parsedLines(rows[0].content as string), parsedLines(db.texts.get(id)!))
      assert.strictEqual(yield* db.raw((d) => versionOf(d, id)), 1)
      assert.strictEqual(yield* db.raw((d) => versionOf(d, "k10-header-delta")), 0)
      const loaded = yield* db.store.load(id)
      assert.strictEqual(loaded.storedVersion, 1)
      assert.deepStrictEqual(loaded.header, expected.header)
      assert.deepStrictEqual(linesOf(loaded.events), expected.lines)
      // idempotent
      const again = yield* migrateSession(id).pipe(withStore)
      assert.deepStrictEqual(again, { id, status: "current" })
      assert.strictEqual((yield* db.raw(backups)).length, 1)
    }).pipe(provide))

  it.scoped("SessionLive.open on a v0 SQLite session rewrites it as v1 with a backup row", () =>
    Effect.gen(function*() {
      const id = "n3-steering"
      const db = yield* sqliteWith([[id, 0]])
      const expected = yield* expectedUpgrade(id)
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open(id)
        assert.deepStrictEqual((yield* s.events).slice(0, -1).map((e) => encodeEvent(e)), expected.lines)
        assert.deepStrictEqual((yield* s.messages).map((m) => m.id), ["u1", "s1", `legacy-message:${id}:3`])
      })).pipe(Effect.provideService(SessionStore, db.store))
      const rows = yield* db.raw(backups)
      assert.deepStrictEqual(rows.map((r) => [r.session_id, r.reason]), [[id, "v0"]])
      assert.deepStrictEqual(parsedLines(rows[0].content as string), parsedLines(db.texts.get(id)!))
      assert.strictEqual(yield* db.raw((d) => versionOf(d, id)), 1)
      const reopened = yield* makeSqliteStore({ filename: db.filename })
      const loaded = yield* reopened.load(id)
      assert.strictEqual(loaded.storedVersion, 1)
      assert.deepStrictEqual(linesOf(loaded.events).slice(0, -1), expected.lines)
      assert.strictEqual((loaded.events[loaded.events.length - 1] as Event).type, "session/end-seed")
    }).pipe(provide))

  it.scoped("K1/K2: sessions.version 2 is refused as newer, -1 as older (no upgrade path); nothing is modified", () =>
    Effect.gen(function*() {
      const db = yield* sqliteWith([["n2-turn-start-trigger", 2], ["n5-context-message", -1]])
      const withStore = Effect.provideService(SessionStore, db.store)
      const newer = yield* Effect.flip(db.store.load("n2-turn-start-trigger"))
      assertError(newer, { _tag: "FormatUnsupported", rule: "K1", direction: "newer", found: 2, supported: 1 })
      const older = yield* Effect.flip(Effect.scoped(SessionLive.open("n5-context-message")).pipe(withStore))
      assertError(older, { _tag: "FormatUnsupported", rule: "K2", direction: "older", found: -1 })
      const m = yield* migrateSession("n2-turn-start-trigger").pipe(withStore)
      assert.deepStrictEqual([m.status, m.error?.rule], ["failed", "K1"])
      assert.deepStrictEqual(yield* db.raw(backups), [])
      assert.strictEqual(yield* db.raw((d) => versionOf(d, "n2-turn-start-trigger")), 2)
      assert.strictEqual(yield* db.raw((d) => versionOf(d, "n5-context-message")), -1)
    }).pipe(provide))
})

describe("§8.3 normalisation 6 and messagePrefix on every backend (issue 13)", () => {
  const FIXTURES = ["n6-reference-log-only", "n-message-prefix"]

  /** Open the fixture through `SessionLive.open` on `store`: every request rebuilt as from the file. */
  const sameRequests = (store: SessionStoreShape, id: string) =>
    Effect.gen(function*() {
      const expected = yield* inspectLoaded(yield* readJsonlFile(`${DIR}${id}.jsonl`))
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open(id)
        const events = yield* s.events
        assert.deepStrictEqual(linesOf(events.slice(0, expected.events.length)), linesOf(expected.events))
        for (let seq = 0; seq < expected.events.length; seq++) {
          assert.deepStrictEqual(yield* s.requestAt(seq), requestAtLog(expected.events, seq) as never, `${id} at ${seq}`)
        }
      })).pipe(Effect.provideService(SessionStore, store))
      // reopened from storage: the same again
      const reloaded = yield* inspectLoaded(yield* store.load(id))
      assert.deepStrictEqual(linesOf(reloaded.events.slice(0, expected.events.length)), linesOf(expected.events))
    })

  it.scoped("JSONL: open upgrades them (backup kept) and every requestAt equals the file's own", () =>
    Effect.gen(function*() {
      const j = yield* jsonlWith(FIXTURES)
      for (const id of FIXTURES) {
        yield* sameRequests(j.store, id)
        assert.include(yield* j.listing, `${encodeSessionId(id)}.jsonl.v0.bak`)
      }
    }).pipe(provide))

  it.scoped("SQLite: open upgrades them (backup row) and every requestAt equals the file's own", () =>
    Effect.gen(function*() {
      const db = yield* sqliteWith(FIXTURES.map((id) => [id, 0] as const))
      for (const id of FIXTURES) yield* sameRequests(db.store, id)
      assert.strictEqual((yield* db.raw(backups)).length, FIXTURES.length)
    }).pipe(provide))

  it.scoped("memory: imported as upgraded v1 events, every requestAt equals the file's own", () =>
    Effect.gen(function*() {
      const store = yield* makeMemoryStore()
      for (const id of FIXTURES) {
        const view = yield* inspectLoaded(yield* readJsonlFile(`${DIR}${id}.jsonl`))
        yield* store.create(view.header)
        yield* store.append(id, view.events as ReadonlyArray<Event>, { expectedSeq: 0 })
        yield* sameRequests(store, id)
      }
    }).pipe(provide))
})

describe("torn tails are visible (issue 13, L1/L3)", () => {
  const v0 = `{"type":"session","version":0,"id":"torn","createdAt":1,"delegationDepth":0}\n`
  const seqless = [
    `{"type":"turn/start","time":1,"data":{"turn":1}}\n`,
    `{"type":"user/message","time":2,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}\n`,
    `{"type":"session/title","time":3,"data":{"title":"t"}}\n`
  ].join("")

  it.scoped("load reports the extent of a torn tail; verifySession reports it beside the count", () =>
    Effect.gen(function*() {
      const j = yield* jsonlWith([])
      yield* j.fs.writeFileString(j.fileOf("torn"), v0 + seqless)
      const loaded = yield* j.store.load("torn")
      assert.deepStrictEqual(loaded.tornTail, { fromSeq: 0, reason: "seq-gap", position: v0.length })
      assert.deepStrictEqual(loaded.tornTailExtent, { line: 2, completeLines: 3, bytes: seqless.length })
      const report = yield* verifySession("torn").pipe(Effect.provideService(SessionStore, j.store))
      assert.deepStrictEqual(report, {
        ok: true,
        events: 0,
        surface: [],
        tornTail: { fromSeq: 0, reason: "seq-gap", line: 2, completeLines: 3, bytes: seqless.length }
      })
    }).pipe(provide))

  it.scoped("L3 migrateSession refuses to drop complete lines (TornTailRefused, nothing written); dropTornTail accepts", () =>
    Effect.gen(function*() {
      const j = yield* jsonlWith([])
      yield* j.fs.writeFileString(j.fileOf("torn"), v0 + seqless)
      const withStore = Effect.provideService(SessionStore, j.store)
      const refused = yield* migrateSession("torn").pipe(withStore)
      assert.strictEqual(refused.status, "failed")
      assert.deepInclude(refused.error, { _tag: "TornTailRefused", rule: "L3", seq: 0 })
      assert.strictEqual(yield* j.read(j.fileOf("torn")), v0 + seqless)
      assert.deepStrictEqual(yield* j.listing, [`${encodeSessionId("torn")}.jsonl`])
      const store = yield* migrateStore().pipe(withStore)
      assert.deepStrictEqual(store.map((r) => [r.id, r.status, r.error?._tag]), [["torn", "failed", "TornTailRefused"]])
      const accepted = yield* migrateSession("torn", { dropTornTail: true }).pipe(withStore)
      assert.deepStrictEqual(accepted, { id: "torn", status: "upgraded" })
      assert.strictEqual(yield* j.read(j.fileOf("torn") + ".v0.bak"), v0 + seqless)
    }).pipe(provide))
})
