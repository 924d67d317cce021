/**
 * Effect-side helpers of the PostgreSQL tests: `describePg` runs a block only where a server is
 * available (else it is skipped under a name that says why; SESSION_LOG_REQUIRE_PG=1 fails
 * instead), `freshUrl` is a new empty schema of the shared server for one test, dropped after it.
 */
import { describe } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import pg from "pg"
import { availability, createSchema, dropSchema, sharedServer, withSettings } from "../helpers/postgres.js"

const available = availability()

if (!available.ok && process.env.SESSION_LOG_REQUIRE_PG === "1") {
  throw new Error(`SESSION_LOG_REQUIRE_PG=1 but the PostgreSQL tests cannot run: ${available.reason}`)
}

/** `describe` where PostgreSQL is available; elsewhere a skipped block whose name gives the reason. */
export const describePg = (name: string, body: () => void): void => {
  if (available.ok) describe(name, body)
  else describe.skip(`${name} [SKIPPED: ${available.reason}]`, body)
}

/** The shared server's URL and its superuser's. */
export const server = Effect.promise(sharedServer)

/**
 * A fresh, empty schema of the shared server for this scope: the URL that uses it, with more
 * server settings for its connections if given (`{ statement_timeout: "200" }`).
 */
export const freshUrlWith = (settings: Record<string, string>): Effect.Effect<string, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { url } = yield* server
    const made = yield* Effect.acquireRelease(
      Effect.promise(() => createSchema(url)),
      ({ schema }) => Effect.promise(() => dropSchema(url, schema))
    )
    return withSettings(made.url, settings)
  })

/** A fresh, empty schema of the shared server for this scope: the URL that uses it. */
export const freshUrl: Effect.Effect<string, never, Scope.Scope> = freshUrlWith({})

/** A raw `pg` connection for this scope (to set up and inspect what the store cannot be asked). */
export const rawClient = (url: string): Effect.Effect<pg.Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      // a server going away is the point of some tests: the error reaches the next query
      client.on("error", () => undefined)
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )

/** A query on a raw connection; its rows. */
export const query = <R extends Record<string, unknown> = Record<string, unknown>>(
  client: pg.Client,
  text: string,
  values: ReadonlyArray<unknown> = []
): Effect.Effect<Array<R>> => Effect.promise(() => client.query<R>(text, values as Array<unknown>).then((r) => r.rows))

/**
 * The backends waiting for a lock `blocker` holds, once there is one: polls pg_stat_activity
 * (waits on a condition, not for a time).
 */
export const blockedBy = (blocker: pg.Client): Effect.Effect<ReadonlyArray<number>> =>
  Effect.gen(function*() {
    const [{ pid }] = yield* query<{ pid: number }>(blocker, "SELECT pg_backend_pid() AS pid")
    const blocked = query<{ pid: number }>(
      blocker,
      "SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
      [pid]
    ).pipe(Effect.map((rows) => rows.map((r) => r.pid)))
    return yield* blocked.pipe(
      Effect.tap((pids) => (pids.length === 0 ? Effect.sleep("20 millis") : Effect.void)),
      Effect.repeat({ until: (pids) => pids.length > 0 })
    )
  })
