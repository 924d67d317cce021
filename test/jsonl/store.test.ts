/**
 * JSONL store write path and contract basics (SPEC §7.1, §7.4.3): lazy creation, atomic
 * materialisation (no-overwrite link, permissions), expected-seq appends, file bytes, list,
 * replaceLog backups, and Session create/append/open round trips over real temp directories.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { layerJsonlStore, toJsonlText } from "../../src/layers/jsonl/JsonlStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import { type SessionHeader, validateSessionHeader } from "../../src/schema/SessionHeader.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { fileText, fixture, header, line, turn, turnEnd, turnStart, userMessage } from "./helpers.js"

const provide = Effect.provide(NodeContext.layer)

describe("JsonlStore write path", () => {
  it.scoped("J14/lazy: create writes nothing; the first append materialises with 0600 in a 0700 root", () =>
    Effect.gen(function*() {
      const { fs, root, store, fileOf } = yield* fixture()
      yield* store.create(header("s1"))
      assert.isFalse(yield* fs.exists(root))
      // a registered, unmaterialised id loads as its header and []
      const loaded = yield* store.load("s1")
      assert.deepStrictEqual(loaded.events, [])
      assert.deepStrictEqual(yield* store.list(), [])
      yield* store.append("s1", [], { expectedSeq: 0 })
      assert.isFalse(yield* fs.exists(root))
      yield* store.append("s1", turn(0), { expectedSeq: 0 })
      const dirInfo = yield* fs.stat(root)
      assert.strictEqual(dirInfo.mode & 0o777, 0o700)
      const info = yield* fs.stat(fileOf("s1"))
      assert.strictEqual(info.mode & 0o777, 0o600)
      // no temporary file remains
      assert.deepStrictEqual(yield* fs.readDirectory(root), ["s1.jsonl"])
    }).pipe(provide))

  it.scoped("J14: create of a registered or stored id is SessionExists; a rejected create registers nothing", () =>
    Effect.gen(function*() {
      const { another, store } = yield* fixture()
      yield* store.create(header("s1"))
      const again = yield* Effect.flip(store.create(header("s1")))
      assert.strictEqual(again._tag, "SessionExists")
      yield* store.append("s1", turn(0), { expectedSeq: 0 })
      const other = yield* another()
      const stored = yield* Effect.flip(other.create(header("s1")))
      assert.strictEqual(stored._tag, "SessionExists")
      // J13: fractional createdAt
      const bad = yield* Effect.flip(store.create(header("s2", { createdAt: 1.5 })))
      assert.strictEqual(bad._tag, "SessionHeaderInvalid")
      const notRegistered = yield* Effect.flip(store.append("s2", turn(0), { expectedSeq: 0 }))
      assert.strictEqual(notRegistered._tag, "SessionNotFound")
      assert.strictEqual((notRegistered as { rule: string }).rule, "L11")
    }).pipe(provide))

  it.scoped("J14: materialising onto an existing target fails with SessionExists and leaves it untouched", () =>
    Effect.gen(function*() {
      const { another, fs, root, store, fileOf } = yield* fixture()
      const a = store
      const b = yield* another()
      yield* a.create(header("race"))
      yield* b.create(header("race"))
      yield* a.append("race", turn(0), { expectedSeq: 0 })
      const before = yield* fs.readFile(fileOf("race"))
      const err = yield* Effect.flip(b.append("race", [turnStart(0, 7)], { expectedSeq: 0 }))
      assert.strictEqual(err._tag, "SessionExists")
      assert.strictEqual((err as { rule: string }).rule, "J14")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("race")), before)
      assert.deepStrictEqual(yield* fs.readDirectory(root), ["race.jsonl"])
    }).pipe(provide))

  it.scoped("file bytes after appends equal toJsonlText(header, events); load returns the same events", () =>
    Effect.gen(function*() {
      const { fs, store, fileOf } = yield* fixture()
      const h = yield* store.create(header("s1", { cwd: "/tmp", agentPreset: "x" }))
      const events: Array<Event> = [...turn(0, 1), ...turn(3, 2)]
      yield* store.append("s1", events.slice(0, 2), { expectedSeq: 0 })
      yield* store.append("s1", events.slice(2, 3), { expectedSeq: 2 })
      yield* store.append("s1", events.slice(3), { expectedSeq: 3 })
      const text = yield* fs.readFileString(fileOf("s1"))
      assert.strictEqual(text, toJsonlText(h, events))
      const loaded = yield* store.load("s1")
      assert.strictEqual(loaded.storedVersion, 1)
      assert.isUndefined(loaded.tornTail)
      assert.deepStrictEqual(loaded.header, h)
      assert.deepStrictEqual(
        loaded.events.map((e) => encodeEvent(e as Event)),
        events.map((e) => encodeEvent(e))
      )
      const readFrom = yield* store.readFrom("s1", 4)
      assert.deepStrictEqual(readFrom.map((e) => (e as Event).seq), [4, 5])
    }).pipe(provide))

  it.scoped("C5/C7/C6: an append with a wrong expectedSeq is AppendConflict and writes nothing", () =>
    Effect.gen(function*() {
      const { another, fs, store, fileOf } = yield* fixture()
      yield* store.create(header("s1"))
      const gap = yield* Effect.flip(store.append("s1", [turnStart(1)], { expectedSeq: 1 }))
      assert.strictEqual((gap as { rule: string }).rule, "C5")
      yield* store.append("s1", turn(0), { expectedSeq: 0 })
      const before = yield* fs.readFile(fileOf("s1"))
      const stale = yield* Effect.flip(store.append("s1", [turnStart(2, 2)], { expectedSeq: 2 }))
      assert.strictEqual(stale._tag, "AppendConflict")
      assert.strictEqual((stale as { rule: string }).rule, "C7")
      const ahead = yield* Effect.flip(store.append("s1", [turnStart(4, 2)], { expectedSeq: 4 }))
      assert.strictEqual((ahead as { rule: string }).rule, "C5")
      const notContiguous = yield* Effect.flip(store.append("s1", [turnStart(3, 2), turnEnd(5, 2)], { expectedSeq: 3 }))
      assert.strictEqual((notContiguous as { rule: string }).rule, "C6")
      assert.deepStrictEqual(yield* fs.readFile(fileOf("s1")), before)
      // another instance (stale cache elsewhere) sees the stored next seq by scanning
      const other = yield* another()
      yield* other.append("s1", [turnStart(3, 2)], { expectedSeq: 3 })
      // this instance's cache no longer matches the size: it rescans
      const c7 = yield* Effect.flip(store.append("s1", [turnStart(3, 3)], { expectedSeq: 3 }))
      assert.strictEqual((c7 as { rule: string }).rule, "C7")
      yield* store.append("s1", [turnEnd(4, 2)], { expectedSeq: 4 })
      assert.strictEqual((yield* store.load("s1")).events.length, 5)
    }).pipe(provide))

  it.scoped("list reads headers of materialised sessions only, sorted by (createdAt, id), skipping bad artifacts", () =>
    Effect.gen(function*() {
      const { fs, path, root, store } = yield* fixture()
      yield* store.create(header("b", { createdAt: 2 }))
      yield* store.create(header("a", { createdAt: 2 }))
      yield* store.create(header("z", { createdAt: 1 }))
      yield* store.create(header("never", { createdAt: 0 }))
      for (const id of ["b", "a", "z"]) yield* store.append(id, turn(0), { expectedSeq: 0 })
      // artifacts: a hidden temp file, a lock, a backup, a corrupt file, a renamed file
      yield* fs.writeFileString(path.join(root, ".a.0123456789abcdef.tmp"), "junk")
      yield* fs.writeFileString(path.join(root, "a.jsonl.lock"), "{}")
      yield* fs.writeFileString(path.join(root, "a.jsonl.v0.bak"), fileText("a", []))
      yield* fs.writeFileString(path.join(root, "broken.jsonl"), "not json\n")
      yield* fs.writeFileString(path.join(root, "renamed.jsonl"), fileText("other", []))
      const listed = yield* store.list()
      assert.deepStrictEqual(listed.map((h) => h.id), ["z", "a", "b"])
    }).pipe(provide))

  it.scoped("list of a missing root is empty", () =>
    Effect.gen(function*() {
      const { store } = yield* fixture()
      assert.deepStrictEqual(yield* store.list(), [])
    }).pipe(provide))

  it.scoped("replaceLog keeps the replaced file's permission bits (a 0644 or 0640 log stays so; §7.4.3: existing files are not changed)", () =>
    Effect.gen(function*() {
      const { fs, root, store, fileOf } = yield* fixture()
      yield* fs.makeDirectory(root, { recursive: true })
      const upgraded = validateSessionHeader(header("m")) as SessionHeader
      for (const mode of [0o644, 0o640]) {
        yield* fs.writeFileString(fileOf("m"), fileText("m", [turnStart(0)], { version: 0 }))
        yield* fs.chmod(fileOf("m"), mode)
        const loaded = yield* store.load("m")
        yield* store.replaceLog("m", upgraded, turn(0), { revision: loaded.revision, backup: "v0" })
        assert.strictEqual((yield* fs.stat(fileOf("m"))).mode & 0o777, mode)
        assert.strictEqual(yield* fs.readFileString(fileOf("m")), toJsonlText(upgraded, turn(0)))
      }
    }).pipe(provide))

  it.scoped("replaceLog swaps the file atomically, keeps .v<version>.bak backups and checks the revision (L8)", () =>
    Effect.gen(function*() {
      const { fs, root, store, fileOf } = yield* fixture()
      const v0 = fileText("old", [turnStart(0)], { version: 0 })
      yield* fs.makeDirectory(root, { recursive: true })
      yield* fs.writeFileString(fileOf("old"), v0)
      const loaded = yield* store.load("old")
      assert.strictEqual(loaded.storedVersion, 0)
      const upgraded = validateSessionHeader(header("old")) as SessionHeader
      const stale = yield* Effect.flip(
        store.replaceLog("old", upgraded, turn(0), { revision: "1:2", backup: "v0" })
      )
      assert.strictEqual((stale as { rule: string }).rule, "L8")
      yield* store.replaceLog("old", upgraded, turn(0), { revision: loaded.revision, backup: "v0" })
      assert.strictEqual(yield* fs.readFileString(fileOf("old")), toJsonlText(upgraded, turn(0)))
      assert.strictEqual(yield* fs.readFileString(fileOf("old") + ".v0.bak"), v0)
      // appends continue from the replaced log
      yield* store.append("old", [turnStart(3, 2)], { expectedSeq: 3 })
      // a second replace of the same version takes the next backup name
      const again = yield* store.load("old")
      yield* fs.writeFileString(fileOf("old"), v0)
      const v0again = yield* store.load("old")
      assert.notStrictEqual(v0again.revision, again.revision)
      yield* store.replaceLog("old", upgraded, turn(0), { revision: v0again.revision, backup: "v0" })
      assert.isTrue(yield* fs.exists(fileOf("old") + ".v0.1.bak"))
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["old"])
    }).pipe(provide))

  it.scoped("toJsonlText writes the header record in §2.1 order then one line per event", () =>
    Effect.gen(function*() {
      const h = validateSessionHeader({ createdAt: 3, id: "x", version: 1, cwd: "/a" }) as SessionHeader
      const text = toJsonlText(h, [userMessage(0)])
      assert.strictEqual(
        text,
        line({ type: "session", version: 1, id: "x", createdAt: 3, cwd: "/a" }) + encodeEvent(userMessage(0)) + "\n"
      )
    }))
})

describe("Session over the JSONL store", () => {
  it.scoped("SessionLive.create / append / open round trip", () =>
    Effect.gen(function*() {
      const { fs, root, fileOf } = yield* fixture()
      const layer = layerJsonlStore({ root })
      const written = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id: "rt" })
        yield* s.append("turn/start", { turn: 1 })
        yield* s.append("user/message", {
          id: "u1",
          role: "user",
          content: [{ type: "text", text: "héllo ✓" }],
          source: { kind: "user" }
        }, { surfaceOp: "append" })
        yield* s.append("turn/end", { turn: 1, reason: { kind: "completed" } })
        return { header: s.header, events: yield* s.events }
      })).pipe(Effect.provide(layer))
      assert.strictEqual(yield* fs.readFileString(fileOf("rt")), toJsonlText(written.header, written.events))
      const reopened = yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.open("rt")
        return { events: yield* s.events, messages: yield* s.messages }
      })).pipe(Effect.provide(layer))
      // the open appended the end-seed marker after the stored events
      assert.deepStrictEqual(
        reopened.events.slice(0, 3).map(encodeEvent),
        written.events.map(encodeEvent)
      )
      assert.strictEqual(reopened.events[3]?.type, "session/end-seed")
      assert.strictEqual(reopened.messages.length, 1)
      // reopening again writes nothing (idempotence)
      const before = yield* fs.readFile(fileOf("rt"))
      yield* Effect.scoped(SessionLive.open("rt")).pipe(Effect.provide(layer))
      assert.deepStrictEqual(yield* fs.readFile(fileOf("rt")), before)
      // and the store lists it
      const listed = yield* Effect.flatMap(SessionStore, (st) => st.list()).pipe(Effect.provide(layer))
      assert.deepStrictEqual(listed.map((h) => h.id), ["rt"])
    }).pipe(provide))
})
