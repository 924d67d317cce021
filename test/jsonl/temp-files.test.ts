/**
 * Temporary files of the JSONL store (SPEC §7.4.3) never outlive the operation that wrote them:
 * a first append whose publication fails (the session's publication lock not taken in time) or is interrupted
 * after its temporary file exists leaves nothing in the root; a log replacement through a session
 * file that is a symbolic link rewrites the file it points to and keeps the link.
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { Event } from "../../src/schema/Events.js"
import { fixture, header, turn } from "./helpers.js"
import { holdPublishLockInProcess } from "./holder.js"

const provide = Effect.provide(NodeContext.layer)

for (const compress of [false, true]) {
  const layout = compress ? "compressed" : "plain"
  describe(`JSONL temporary files (${layout})`, () => {
    it.scopedLive("a first append that cannot take the session's publication lock in time fails S6 and leaves no temporary file", () =>
      Effect.gen(function*() {
        const { fs, root, store } = yield* fixture({ compress, lockTimeoutMs: 100 })
        yield* fs.makeDirectory(root)
        yield* store.create(header("s"))
        const holder = holdPublishLockInProcess(root, "s")
        const failed = yield* Effect.flip(store.append("s", turn(0), { expectedSeq: 0 }))
        holder.release()
        assert.strictEqual(failed._tag, "StoreFailure")
        assert.deepStrictEqual(yield* fs.readDirectory(root), [])
        // the registration stands: the next append materialises the session
        yield* store.append("s", turn(0), { expectedSeq: 0 })
        assert.strictEqual((yield* store.load("s")).events.length, 3)
        assert.deepStrictEqual(yield* fs.readDirectory(root), [compress ? "s.jsonlz" : "s.jsonl"])
      }).pipe(provide))

    it.scopedLive("a first append interrupted once its temporary file exists leaves nothing behind", () =>
      Effect.gen(function*() {
        const { fs, root, store } = yield* fixture({ compress, lockTimeoutMs: 30_000 })
        yield* fs.makeDirectory(root)
        yield* store.create(header("s"))
        const holder = holdPublishLockInProcess(root, "s")
        const fiber = yield* Effect.fork(store.append("s", turn(0), { expectedSeq: 0 }))
        // the temporary file is written, the publication waits for the session's publication lock
        const tmp = (names: ReadonlyArray<string>) => names.filter((n) => n.endsWith(".tmp"))
        while (tmp(yield* fs.readDirectory(root)).length === 0) yield* Effect.sleep("5 millis")
        assert.match(tmp(yield* fs.readDirectory(root))[0]!, /^\.s\.[0-9a-f]+\.tmp$/)
        const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
        holder.release()
        yield* Fiber.join(interrupting)
        const names = yield* fs.readDirectory(root)
        assert.isFalse(names.some((n) => n.endsWith(".tmp")), names.join(", "))
        // either the interruption came first (nothing published) or the link did (a whole session)
        const published = names.length > 0
        if (published) assert.deepStrictEqual(names, [compress ? "s.jsonlz" : "s.jsonl"])
        assert.strictEqual((yield* store.load("s")).events.length, published ? 3 : 0)
      }).pipe(provide))

    it.scopedLive("replaceLog through a session file that is a symbolic link rewrites its target and keeps the link", () =>
      Effect.gen(function*() {
        const { dir, fs, path, root, store } = yield* fixture({ compress })
        yield* store.create(header("s"))
        yield* store.append("s", turn(0), { expectedSeq: 0 })
        const name = compress ? "s.jsonlz" : "s.jsonl"
        const elsewhere = path.join(dir, "elsewhere")
        yield* fs.makeDirectory(elsewhere)
        const real = path.join(elsewhere, name)
        yield* fs.rename(path.join(root, name), real)
        yield* fs.symlink(real, path.join(root, name))
        const loaded = yield* store.load("s")
        const events = [...loaded.events, ...turn(3, 2)] as ReadonlyArray<Event>
        yield* store.replaceLog("s", loaded.header, events, { revision: loaded.revision, backup: "jsonl" })
        assert.strictEqual(yield* fs.readLink(path.join(root, name)), real)
        assert.deepStrictEqual([...(yield* fs.readDirectory(root))].sort(), [name])
        assert.deepStrictEqual([...(yield* fs.readDirectory(elsewhere))].sort(), [name, `${name}.v1.bak`])
        assert.strictEqual((yield* store.load("s")).events.length, 6)
      }).pipe(provide))
  })
}
