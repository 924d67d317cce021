/**
 * The JSONL store's named file (`JsonlStoreOptions.file`, SPEC §12: a `.jsonl` path given to the
 * CLI): one session kept in a file of any name, beside another file holding the same id. Loads
 * skip the file-name check but keep the header-id check (L6); appends, the kernel lock, torn-tail
 * truncation and `replaceLog` (backup beside it, mode kept) act on that file only; other ids live
 * in the root as usual, and `list` shows the named file in place of the one it shadows.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import type { Event } from "../../src/schema/Events.js"
import { fileText, header, turn, turnStart, userMessage } from "./helpers.js"
import { holdInProcess, isLocked } from "./holder.js"

const provide = Effect.provide(NodeContext.layer)

/**
 * A root holding `notes.jsonl` (session "s", one turn saying "named") and `s.jsonl` (session "s"
 * too, one turn saying "other"), and a store whose session "s" is the named file.
 */
const twoFilesOneId = (options: { readonly lockTimeoutMs?: number } = {}) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const root = yield* fs.makeTempDirectoryScoped()
    const named = path.join(root, "notes.jsonl")
    const other = path.join(root, "s.jsonl")
    const said = (text: string) => [turnStart(0), userMessage(1, text), turn(0)[2]]
    yield* fs.writeFileString(named, fileText("s", said("named")))
    yield* fs.writeFileString(other, fileText("s", said("other")))
    yield* fs.chmod(named, 0o644)
    yield* fs.chmod(other, 0o640)
    const otherBytes = yield* fs.readFile(other)
    const store = yield* makeJsonlStore({ root, file: { sessionId: "s", path: named }, ...options })
    /** The untouched `s.jsonl`: same bytes and mode as written. */
    const otherUntouched = Effect.gen(function*() {
      assert.deepStrictEqual(yield* fs.readFile(other), otherBytes, "s.jsonl unchanged")
      assert.strictEqual((yield* fs.stat(other)).mode & 0o777, 0o640)
    })
    const names = Effect.map(fs.readDirectory(root), (n) => [...n].sort())
    return { fs, path, root, named, other, store, otherUntouched, names }
  })

const textOf = (e: unknown): string =>
  ((e as { data: { content: ReadonlyArray<{ text: string }> } }).data.content[0]).text

describe("JsonlStore with a named file (JsonlStoreOptions.file)", () => {
  it.scoped("load reads the named file whatever its name (no file-name check), not <encode(id)>.jsonl", () =>
    Effect.gen(function*() {
      const { otherUntouched, store } = yield* twoFilesOneId()
      const loaded = yield* store.load("s")
      assert.strictEqual(loaded.header.id, "s")
      assert.strictEqual(textOf(loaded.events[1]), "named")
      yield* otherUntouched
    }).pipe(provide))

  it.scoped("L6: the header id must still be the session's; a file holding another id is SessionNotFound", () =>
    Effect.gen(function*() {
      const { named, root } = yield* twoFilesOneId()
      const store = yield* makeJsonlStore({ root, file: { sessionId: "t", path: named } })
      const e = yield* Effect.flip(store.load("t"))
      assert.strictEqual(e._tag, "SessionNotFound")
      assert.strictEqual((e as { rule?: string }).rule, "L6")
    }).pipe(provide))

  it.scoped("appends, torn-tail truncation and replaceLog change the named file only; the backup lies beside it, mode kept", () =>
    Effect.gen(function*() {
      const { fs, named, names, otherUntouched, store } = yield* twoFilesOneId()
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.strictEqual((yield* store.load("s")).events.length, 4)
      yield* otherUntouched

      const before = yield* fs.readFileString(named)
      yield* fs.writeFileString(named, before + `{"type":"user/mess`)
      const torn = yield* store.load("s")
      assert.isDefined(torn.tornTail)
      yield* store.truncateTornTail("s", torn.tornTail!, { revision: torn.revision })
      assert.strictEqual(yield* fs.readFileString(named), before)
      yield* otherUntouched

      const loaded = yield* store.load("s")
      yield* store.replaceLog("s", loaded.header, loaded.events.slice(0, 3) as ReadonlyArray<Event>, {
        revision: loaded.revision,
        backup: "jsonl"
      })
      assert.strictEqual((yield* store.load("s")).events.length, 3)
      assert.strictEqual(yield* fs.readFileString(`${named}.v1.bak`), before)
      assert.strictEqual((yield* fs.stat(named)).mode & 0o777, 0o644)
      yield* otherUntouched
      // no temporary file is left behind
      assert.deepStrictEqual(yield* names, ["notes.jsonl", "notes.jsonl.v1.bak", "s.jsonl"])
    }).pipe(provide))

  it.scopedLive("S6: the lock taken is the named file's (a holder of s.jsonl does not block it; a holder of the named file does)", () =>
    Effect.gen(function*() {
      const { fs, named, other, store } = yield* twoFilesOneId({ lockTimeoutMs: 150 })
      const otherHolder = holdInProcess(other)
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      otherHolder.release()

      const holder = holdInProcess(named)
      const before = yield* fs.readFile(named)
      const e = yield* Effect.flip(store.append("s", [userMessage(4)], { expectedSeq: 4 }))
      assert.strictEqual(e._tag, "StoreFailure")
      assert.strictEqual((e as { rule?: string }).rule, "S6")
      assert.deepStrictEqual(yield* fs.readFile(named), before)
      holder.release()
      yield* store.append("s", [userMessage(4)], { expectedSeq: 4 })
      assert.isFalse(isLocked(named))
    }).pipe(provide))

  it.scoped("other ids live in the root as usual; the named id is taken (J14); list shows the named file, not the one it shadows", () =>
    Effect.gen(function*() {
      const { names, otherUntouched, store } = yield* twoFilesOneId()
      const taken = yield* Effect.flip(store.create(header("s")))
      assert.strictEqual(taken._tag, "SessionExists")
      yield* store.create(header("kid", { createdAt: 9 }))
      yield* store.append("kid", turn(0), { expectedSeq: 0 })
      assert.deepStrictEqual(yield* names, ["kid.jsonl", "notes.jsonl", "s.jsonl"])
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["s", "kid"])
      assert.strictEqual(textOf((yield* store.load("s")).events[1]), "named")
      yield* otherUntouched
    }).pipe(provide))

  it.scoped("a named file with any extension is found by list too", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* fs.makeTempDirectoryScoped()
      const named = path.join(root, "log.txt")
      yield* fs.writeFileString(named, fileText("s", turn(0)))
      const store = yield* makeJsonlStore({ root, file: { sessionId: "s", path: named } })
      assert.deepStrictEqual((yield* store.list()).map((h) => h.id), ["s"])
      yield* store.append("s", [turnStart(3, 2)], { expectedSeq: 3 })
      assert.deepStrictEqual([...(yield* fs.readDirectory(root))], ["log.txt"])
    }).pipe(provide))

  it.scoped("a named file outside the root is a defect", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const root = yield* fs.makeTempDirectoryScoped()
      const exit = yield* Effect.exit(makeJsonlStore({ root: path.join(root, "a"), file: { sessionId: "s", path: path.join(root, "s.jsonl") } }))
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      assert.match(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", /must lie in the root/)
    }).pipe(provide))
})
