/**
 * A SQLite store opened for writing only once something is written (SPEC §12: reads never write;
 * issue 27): `acp` serves reads and session registrations from a read-only open (or, before the
 * database exists, from an empty in-memory store); the first write opens the store for writing
 * (creating the database then), registers the headers registered so far and from then on every
 * call goes to it.
 */
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { SessionExists, StoreFailure } from "../../schema/Errors.js"
import { make as makeMemoryStore } from "../../layers/memory/MemoryStore.js"
import type { SessionStoreShape } from "../../services/SessionStore.js"

/**
 * The store that reads through `readOnly` (`undefined`: no database yet, nothing stored) and
 * opens `openWritable` at the first write. `openWritable` must already be bound to the scope the
 * store lives in.
 */
export const makeWriteOnDemandStore = <E extends { readonly _tag: string }>(
  readOnly: SessionStoreShape | undefined,
  openWritable: Effect.Effect<SessionStoreShape, E>
): Effect.Effect<SessionStoreShape> =>
  Effect.gen(function*() {
    const reader = readOnly ?? (yield* makeMemoryStore())
    // headers registered before the writable open, by id (raw, as given to `create`)
    const pending = new Map<string, unknown>()
    let writable: SessionStoreShape | undefined
    const lock = yield* Effect.makeSemaphore(1)
    const current = () => writable ?? reader

    const toStoreFailure = (method: string) => (e: unknown): StoreFailure | SessionExists =>
      e instanceof StoreFailure || e instanceof SessionExists ? e : new StoreFailure({ method, cause: e })
    // a session that is stored already cannot fail its registration: a rewrite fails as the store
    const asStoreFailure = (method: string) => (e: StoreFailure | SessionExists): StoreFailure =>
      e instanceof StoreFailure ? e : new StoreFailure({ method, cause: e })

    /** The writable store, opened once; `id`'s registration failing there fails the write. */
    const opened = (method: string, id: string) =>
      lock.withPermits(1)(Effect.suspend(() => {
        if (writable !== undefined) return Effect.succeed(writable)
        return Effect.gen(function*() {
          const w = yield* openWritable
          for (const [each, header] of pending) {
            // another process may have stored one of them meanwhile: only the written one matters
            const registered = yield* Effect.either(w.create(header))
            if (registered._tag === "Left" && each === id) return yield* registered.left
          }
          pending.clear()
          writable = w
          return w
        }).pipe(Effect.mapError(toStoreFailure(method)))
      }))

    return {
      create: (header) =>
        Effect.suspend(() =>
          writable !== undefined
            ? writable.create(header)
            : Effect.tap(reader.create(header), (h) => Effect.sync(() => void pending.set(h.id, header)))
        ),
      append: (id, events, options) =>
        events.length === 0
          ? Effect.suspend(() => current().append(id, events, options))
          : Effect.flatMap(opened("append", id), (w) => w.append(id, events, options)),
      load: (id) => Effect.suspend(() => current().load(id)),
      loadEach: (id, sink, options) => Effect.suspend(() => current().loadEach(id, sink, options)),
      readFrom: (id, fromSeq) => Effect.suspend(() => current().readFrom(id, fromSeq)),
      follow: (id, options) => Stream.suspend(() => current().follow(id, options)),
      list: () => Effect.suspend(() => current().list()),
      listEntries: () => Effect.suspend(() => current().listEntries()),
      truncateTornTail: (id, tornTail, options) =>
        Effect.flatMap(
          Effect.mapError(opened("truncateTornTail", id), asStoreFailure("truncateTornTail")),
          (w) => w.truncateTornTail(id, tornTail, options)
        ),
      replaceLog: (id, header, events, options) =>
        Effect.flatMap(
          Effect.mapError(opened("replaceLog", id), asStoreFailure("replaceLog")),
          (w) => w.replaceLog(id, header, events, options)
        ),
      discard: (id, options) =>
        Effect.flatMap(
          Effect.mapError(opened("discard", id), asStoreFailure("discard")),
          (w) => w.discard(id, options)
        )
    } satisfies SessionStoreShape
  })
