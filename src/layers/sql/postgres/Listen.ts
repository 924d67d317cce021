/**
 * The followers' wake-ups on PostgreSQL (docs/follow.md "PostgreSQL"): the `NOTIFY` each write
 * transaction sends (in the append's advance statement, or a statement of its own) and one
 * `LISTEN` connection per store instance shared by every session it follows. Internal to the
 * PostgreSQL store: `PostgresStore` re-exports `FOLLOW_CHANNEL`.
 */
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as PubSub from "effect/PubSub"
import * as Stream from "effect/Stream"
import { StoreFailure } from "../../../schema/Errors.js"
import { APPLICATION } from "./Schema.js"

/**
 * Where the LISTEN connection goes: the store's URL (the password included) and its connect timeout.
 *
 * @since 0.2.0
 * @category models
 */
export interface ListenTarget {
  readonly url: string
  readonly connectTimeoutMs: number
}

/**
 * The channel of the followers' wake-ups; a payload is `<current_schema()>/<session id>`.
 *
 * @since 0.2.0
 * @category constants
 */
export const FOLLOW_CHANNEL = "effect_session_log"

export const NOTIFY_STATEMENT = `SELECT pg_notify('${FOLLOW_CHANNEL}', current_schema() || '/' || $1)`

/** The notification of an append, in its advance statement (no round trip of its own). */
export const ADVANCE_RETURNING = `RETURNING pg_notify('${FOLLOW_CHANNEL}', current_schema() || '/' || id)`

/**
 * The notifications of this schema on a `LISTEN` connection of its own: `undefined` once the
 * LISTEN is in place, then the session id of each committed write (its `NOTIFY`). A dropped
 * connection fails the stream.
 */
export const listenAll = (target: ListenTarget): Stream.Stream<string | undefined, StoreFailure> =>
  Stream.asyncScoped<string | undefined, StoreFailure>((emit) =>
    Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const pg = await import("pg")
          const client = new pg.default.Client({
            connectionString: target.url,
            connectionTimeoutMillis: target.connectTimeoutMs,
            application_name: APPLICATION
          })
          const dropped = (cause: unknown) =>
            void emit.fail(new StoreFailure({ method: "follow", cause, detail: "the LISTEN connection was lost" }))
          client.on("error", dropped)
          client.on("end", () => dropped("connection ended"))
          await client.connect()
          const rows = await client.query<{ readonly s: string }>("SELECT current_schema() AS s")
          const prefix = `${rows.rows[0]?.s ?? ""}/`
          client.on("notification", (msg) => {
            const payload = msg.payload
            if (msg.channel === FOLLOW_CHANNEL && payload?.startsWith(prefix) === true) void emit.single(payload.slice(prefix.length))
          })
          await client.query(`LISTEN ${FOLLOW_CHANNEL}`)
          // armed: every follower reads once more now
          void emit.single(undefined)
          return client
        },
        catch: (cause) => new StoreFailure({ method: "follow", cause, detail: "LISTEN failed" })
      }),
      (client) =>
        Effect.promise(() => {
          client.removeAllListeners("end")
          client.removeAllListeners("error")
          client.on("error", () => undefined)
          return client.end()
        }).pipe(Effect.interruptible, Effect.timeoutOption(1_000))
    ), "unbounded")

/** What the shared listener hands its subscribers: a session id, "armed" (`undefined`), or its end. */
type Heard = string | undefined | StoreFailure

interface Listener {
  readonly pubsub: PubSub.PubSub<Heard>
  readonly fiber: Fiber.RuntimeFiber<void>
  refs: number
}

/**
 * The wake-ups of the followers of one store instance (docs/follow.md "PostgreSQL"): one `LISTEN`
 * connection for all the sessions they follow, opened with the first follower and closed with the
 * last; a session's wake-ups are one element at once (and again once the LISTEN is in place),
 * then one per notification naming it. A dropped connection fails every session's wake-ups (the
 * store then polls); the next follower opens a new one.
 */
export const listenWakeups = (target: ListenTarget) => {
  let current: Listener | undefined
  const lock = Effect.unsafeMakeSemaphore(1)
  const acquire = lock.withPermits(1)(Effect.gen(function*() {
    if (current === undefined) {
      const pubsub = yield* PubSub.unbounded<Heard>()
      const fiber = yield* listenAll(target).pipe(
        Stream.runForEach((heard) => PubSub.publish(pubsub, heard)),
        Effect.catchAll((failure) => Effect.zipRight(Effect.sync(() => void (current === listener ? current = undefined : undefined)), PubSub.publish(pubsub, failure))),
        Effect.asVoid,
        Effect.interruptible,
        Effect.forkDaemon
      )
      const listener: Listener = { pubsub, fiber, refs: 0 }
      current = listener
    }
    const listener = current
    listener.refs++
    return listener
  }))
  const release = (listener: Listener) =>
    lock.withPermits(1)(Effect.suspend(() => {
      if (--listener.refs > 0) return Effect.void
      if (current === listener) current = undefined
      return Effect.zipRight(Fiber.interrupt(listener.fiber), PubSub.shutdown(listener.pubsub))
    }))
  return (id: string): Stream.Stream<void, StoreFailure> =>
    Stream.unwrapScoped(Effect.map(
      Effect.flatMap(Effect.acquireRelease(acquire, release), (listener) => PubSub.subscribe(listener.pubsub)),
      (heard) =>
        Stream.concat(
          Stream.make(undefined),
          Stream.fromQueue(heard).pipe(
            Stream.mapEffect((h): Effect.Effect<boolean, StoreFailure> => h instanceof StoreFailure ? Effect.fail(h) : Effect.succeed(h === undefined || h === id)),
            Stream.filter((wake) => wake),
            Stream.as(undefined)
          )
        )
    ))
}
