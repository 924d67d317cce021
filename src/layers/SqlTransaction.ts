/**
 * Connections and transactions of the SQL store (SPEC §7.5, §7.6): a lease hands an operation a
 * connection of its own (the client's one connection for SQLite, a pooled one for a server), and
 * `transaction` is the one transaction runner: BEGIN as the dialect writes it, COMMIT failures kept
 * as errors, ROLLBACK on any failure.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"

/**
 * Runs the effect `use` builds on a connection no other operation uses meanwhile: waiting for the
 * connection is interruptible, the operation itself is not (a transaction is never cut short).
 */
export type Lease = <A, E, R>(use: (conn: Connection) => Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>

/** A lease that reserves a connection of the client per operation (a pool; the open's checks). */
export const reservePerOperation = (sql: SqlClient.SqlClient): Lease => (use) =>
  Effect.uninterruptibleMask((restore) => Effect.scoped(Effect.flatMap(restore(sql.reserve), use)))

/**
 * A lease over one connection reserved for the lifetime of the scope, taken in turns through a
 * semaphore. For a client with a single connection (SQLite) this saves a Scope per operation
 * (~12 µs, about what the rest of a single-event append costs). Closing the scope waits for the
 * operation in flight before the connection is released.
 */
export const reserveForScope = (sql: SqlClient.SqlClient): Effect.Effect<Lease, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const conn = yield* sql.reserve
    const withPermit = (yield* Effect.makeSemaphore(1)).withPermits(1)
    // finalizers run in reverse order: this one before the reservation's release
    yield* Effect.addFinalizer(() => withPermit(Effect.void))
    return (use) => withPermit(Effect.uninterruptible(use(conn)))
  })

/** `effect` with `conn` as the connection of the `sql` template and of `SqlSchema` queries. */
export const onConnection = <A, E, R>(
  conn: Connection,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, Exclude<R, SqlClient.TransactionConnection>> =>
  Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0] as const)

/**
 * Run `body` in one transaction on `conn`, opened with `begin` (SQLite write transactions MUST
 * be `BEGIN IMMEDIATE`, never the client's deferred BEGIN: SPEC §7.5). Unlike
 * `SqlClient.withTransaction`, a failed COMMIT is an error of the result, not a defect; any failure
 * rolls back. `afterCommit` runs before the connection is handed on. The caller holds `conn` alone
 * (a `Lease`). A body that uses the `sql` template runs under `onConnection(conn, ...)`; the
 * append's hot path runs static statements on `conn` and skips that context copy (~7 µs per
 * append). Plain combinators, no generator.
 */
export const transaction = <A, E, R>(
  conn: Connection,
  begin: string,
  body: Effect.Effect<A, E, R>,
  afterCommit?: (a: A) => void
): Effect.Effect<A, E | SqlError, R> => {
  const { commit, rollback } = controlOf(conn)
  return Effect.zipRight(
    statementOf(conn, begin),
    Effect.matchCauseEffect(body, {
      onFailure: (cause) => Effect.zipRight(rollback, Effect.failCause(cause)),
      onSuccess: (a) =>
        Effect.matchCauseEffect(commit, {
          onFailure: (cause) => Effect.zipRight(rollback, Effect.failCause(cause)),
          onSuccess: () => {
            afterCommit?.(a)
            return Effect.succeed(a)
          }
        })
    })
  )
}

/** The transaction statements of one connection as effects, built once per connection. */
interface Control {
  readonly commit: Effect.Effect<unknown, SqlError>
  readonly rollback: Effect.Effect<void>
  readonly begins: Map<string, Effect.Effect<unknown, SqlError>>
}

const controls = new WeakMap<Connection, Control>()

const controlOf = (conn: Connection): Control => {
  let control = controls.get(conn)
  if (control === undefined) {
    control = {
      commit: conn.execute("COMMIT", [], undefined),
      rollback: Effect.ignore(conn.execute("ROLLBACK", [], undefined)),
      begins: new Map()
    }
    controls.set(conn, control)
  }
  return control
}

const statementOf = (conn: Connection, begin: string): Effect.Effect<unknown, SqlError> => {
  const { begins } = controlOf(conn)
  let statement = begins.get(begin)
  if (statement === undefined) {
    statement = conn.execute(begin, [], undefined)
    begins.set(begin, statement)
  }
  return statement
}
