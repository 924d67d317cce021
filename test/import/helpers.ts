/**
 * What the import tests share: a real SQLite store in a temp directory, reading a session back
 * (its events, its derived messages at the last seq) and verifying it as `verify` does.
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { fileURLToPath } from "node:url"
import * as SqliteStore from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { Event } from "../../src/schema/Events.js"
import type { Message } from "../../src/schema/Messages.js"
import { verifySession } from "../../src/programs/Verify.js"
import { requestAtLog } from "../../src/services/RequestAt.js"
import { SessionStore } from "../../src/services/SessionStore.js"

/** The directory of the fixtures. */
export const fixtures = fileURLToPath(new URL("./fixtures", import.meta.url))

/** A temp directory for this scope. */
export const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped())

/** Run `body` with a SQLite store in a fresh temp directory (and the store file's path). */
export const withStore = <A, E>(body: (file: string) => Effect.Effect<A, E, SessionStore | NodeContext.NodeContext | Scope.Scope>) =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const path = yield* Path.Path
    const file = path.join(dir, "sessions.db")
    return yield* body(file).pipe(Effect.provide(Layer.fresh(SqliteStore.layer({ filename: file }))))
  })

/** The stored events of a session. */
export const eventsOf = (id: string) =>
  Effect.flatMap(SessionStore, (s) => s.load(id)).pipe(Effect.map((l) => l.events as ReadonlyArray<Event>))

/** The derived messages in force after the last event (what `request --at <last>` shows). */
export const messagesOf = (id: string) =>
  Effect.map(eventsOf(id), (events): ReadonlyArray<Message> => {
    const r = requestAtLog(events, events.length - 1)
    if ("_tag" in r) throw new Error(r.message)
    return r.messages
  })

/** `verify` of a stored session: ok, or the first error's tag and rule. */
export const verified = (id: string) =>
  Effect.map(verifySession(id), (r) => (r.ok ? "ok" : `${r.error._tag} ${r.error.rule}: ${r.error.message}`))

/** The derived messages in force after event `seq` (`request --at <seq>`). */
export const messagesAt = (id: string, seq: number) =>
  Effect.map(eventsOf(id), (events): ReadonlyArray<Message> => {
    const r = requestAtLog(events, seq)
    if ("_tag" in r) throw new Error(r.message)
    return r.messages
  })
