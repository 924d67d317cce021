/**
 * Connections and transactions of the SQL store (SPEC §7.5, §7.6): a lease hands an operation a
 * connection of its own (the client's one connection for SQLite, a pooled one for a server), and
 * `transaction` is the one transaction runner: BEGIN as the dialect writes it, COMMIT failures kept
 * as errors, ROLLBACK on any failure.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"

/**
 * Runs the effect `use` builds on a connection no other operation uses meanwhile: waiting for the
 * connection is interruptible, the operation itself is not (a transaction is never cut short).
 */
export type Lease = <A, E, R>(use: (conn: Connection) => Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>

/** A lease that reserves a connection of the client per operation (a pool; the open's checks). */
export const reservePerOperation = (sql: SqlClient.SqlClient): Lease => (use) =>
  Effect.uninterruptibleMask((restore) => Effect.scoped(Effect.flatMap(restore(sql.reserve), use)))

/** Whether an operation failed in the driver (or died): its connection may be broken. */
const isDriverFailure = (cause: Cause.Cause<unknown>): boolean =>
  Cause.isDie(cause) || Chunk.some(Cause.failures(cause), (e) => e instanceof SqlError)

/** A connection a `reserveReusing` lease reserved, with the scope that hands it back to the pool. */
interface Kept {
  readonly conn: Connection
  readonly scope: Scope.CloseableScope
}

/**
 * A lease over a pool of `size` connections that keeps the connections it reserved for the
 * operations that follow, instead of a reservation per operation (a Scope, the pool's check-out
 * and check-in and their listeners: about 40% of what a single-event append on PostgreSQL adds to
 * the raw driver's time). At most `size` operations run at once (waiting for a turn is
 * interruptible), so the pool never has a waiter of this lease while it keeps an idle connection.
 * A kept connection serves another operation only while `alive(conn)` says it can; one whose
 * operation failed in the driver (or died) goes back to the pool, which drops a broken one, and so
 * does every kept one: after a server restart the next operation reserves afresh. All go back
 * when the scope closes. Only for a pool the store owns: a kept connection serves no one else.
 */
export const reserveReusing = (
  sql: SqlClient.SqlClient,
  size: number,
  alive: (conn: Connection) => boolean
): Effect.Effect<Lease, never, Scope.Scope> =>
  Effect.gen(function*() {
    const owner = yield* Effect.scope
    const turns = yield* Effect.makeSemaphore(size)
    const idle: Array<Kept> = []
    const giveBack = (kept: Kept) => Scope.close(kept.scope, Exit.void)
    const giveBackAll = (kept: ReadonlyArray<Kept>) => Effect.forEach(kept, giveBack, { discard: true })
    // finalizers run in reverse order: the kept ones go back before the pool closes
    yield* Effect.addFinalizer(() => Effect.suspend(() => giveBackAll(idle.splice(0))))
    const reserve = Effect.flatMap(Scope.fork(owner, ExecutionStrategy.sequential), (scope) =>
      Effect.map(
        // a failed or interrupted reservation gives back whatever it got
        Effect.onExit(Scope.extend(sql.reserve, scope), (exit) => Exit.isFailure(exit) ? Scope.close(scope, exit) : Effect.void),
        (conn): Kept => ({ conn, scope })
      ))
    const take = Effect.suspend((): Effect.Effect<Kept, SqlError> => {
      let dead: Array<Kept> | undefined
      for (let kept = idle.pop(); kept !== undefined; kept = idle.pop()) {
        if (alive(kept.conn)) return dead === undefined ? Effect.succeed(kept) : Effect.as(giveBackAll(dead), kept)
        // died while kept (a server restart): back to the pool, which drops it
        ;(dead ??= []).push(kept)
      }
      return dead === undefined ? reserve : Effect.zipRight(giveBackAll(dead), reserve)
    })
    const settle = (kept: Kept, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> => {
      if (Exit.isFailure(exit) && isDriverFailure(exit.cause)) return giveBackAll([kept, ...idle.splice(0)])
      if (!alive(kept.conn)) return giveBack(kept)
      idle.push(kept)
      return Effect.void
    }
    return (use) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          restore(turns.take(1)),
          Effect.ensuring(
            Effect.flatMap(restore(take), (kept) => Effect.onExit(use(kept.conn), (exit) => settle(kept, exit))),
            turns.release(1)
          )
        )
      )
  })

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
