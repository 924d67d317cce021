/**
 * The SQL store's append (SPEC §7.5 "Append"): the expected-seq check and the counter in one
 * UPDATE on a materialised session, the first append materialising the session row, both in one
 * write transaction on a leased connection.
 */
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import { AppendConflict, SessionExists, SessionNotFound } from "../../schema/Errors.js"
import type { Event } from "../../schema/Events.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import type { StoreAppendError } from "../../services/SessionStore.js"
import { conflict, insertEvents, notFound, notifying, olderLayout, unrepresentable } from "./OperationSteps.js"
import { rowFromHeader } from "./SessionRows.js"
import { failures, type Store } from "./StoreContext.js"
import { onConnection, transaction } from "./Transaction.js"

/** A batch that passed the pre-checks, with the events' JSONL texts. */
export interface CheckedBatch {
  readonly events: ReadonlyArray<Event>
  readonly lines: ReadonlyArray<string>
}

// C7 (SPEC §7.5): a row of the batch is already stored although `next_seq` matched
const rowTaken = (id: string, expectedSeq: number) =>
  new AppendConflict({
    rule: "C7",
    sessionId: id,
    expectedSeq,
    storedSeq: expectedSeq,
    detail: "a row of the batch is already stored"
  })

/** `insertEvents` of an append: a unique violation means a row of the batch is already stored (C7). */
const insertBatch = (store: Store, conn: Connection, id: string, batch: CheckedBatch, expectedSeq: number) =>
  insertEvents(store, conn, id, batch.events, batch.lines).pipe(
    Effect.catchIf((e) => store.dialect.classify(e) === "unique", () => rowTaken(id, expectedSeq))
  )

/** Advance `next_seq` from `expectedSeq` and insert the batch (a materialised session). */
const advance = (store: Store, conn: Connection, id: string, batch: CheckedBatch, expectedSeq: number) =>
  Effect.flatMap(
    // C5/C7 and the counter in one statement; on no match, tell L11 and C5/C7 apart
    store.runRaw(conn, "advance", store.statements.advance, [expectedSeq + batch.events.length, id, expectedSeq]),
    (advanced): Effect.Effect<false, SessionNotFound | AppendConflict | SqlError | ParseError> =>
      store.dialect.changedRows(advanced) === 1
        ? Effect.as(insertBatch(store, conn, id, batch, expectedSeq), false as const)
        : Effect.flatMap(onConnection(conn, store.findNextSeq(id)), (found) =>
          Effect.fail(Option.isNone(found) ? notFound(id) : conflict(id, expectedSeq, found.value.next_seq)))
  )

/** The first append of a session registered here: the `sessions` row and the batch, atomically. */
const materialise = (
  store: Store,
  conn: Connection,
  pending: SessionHeader,
  batch: CheckedBatch,
  expectedSeq: number
) =>
  Effect.gen(function*() {
    const { sql } = store
    const id = pending.id
    if (Option.isSome(yield* store.findNextSeq(id))) {
      // materialised by another writer meanwhile: the registration is stale
      store.registry.materialised(id)
      return yield* new SessionExists({ rule: "J14", sessionId: id })
    }
    // nothing stored yet: the stored next seq is 0
    if (expectedSeq !== 0) return yield* conflict(id, expectedSeq, 0)
    // J14: the primary key decides between writers materialising the same id
    yield* sql`INSERT INTO sessions ${sql.insert(rowFromHeader(pending))}`.pipe(
      Effect.catchIf((e) => store.dialect.classify(e) === "unique", () => new SessionExists({ rule: "J14", sessionId: id }))
    )
    yield* insertBatch(store, conn, id, batch, expectedSeq)
    yield* sql`UPDATE sessions SET next_seq = ${batch.events.length}, revision = revision + 1 WHERE id = ${id}`
    return true as const
  })

/**
 * Append a pre-checked, non-empty batch in one write transaction (SPEC §7.5 "Append"). The hot
 * path: static statements on the leased connection, no generator on a materialised session.
 */
export const append = (
  store: Store,
  id: string,
  batch: CheckedBatch,
  expectedSeq: number
): Effect.Effect<void, StoreAppendError> => {
  if (store.layout !== 2) return Effect.fail(olderLayout(store, "append"))
  for (const e of batch.events) {
    if (store.dialect.unstorableText.test(e.type)) return Effect.fail(unrepresentable(store, "append", `type of seq ${e.seq}`))
  }
  return store.lease((conn) => {
    // the `sql` template (and its context copy) only for the first append of a session
    const body = Effect.suspend((): Effect.Effect<boolean, StoreAppendError | SqlError | ParseError> => {
      const pending = store.registry.get(id)
      const written: Effect.Effect<boolean, StoreAppendError | SqlError | ParseError> = pending === undefined
        ? advance(store, conn, id, batch, expectedSeq)
        : onConnection(conn, materialise(store, conn, pending, batch, expectedSeq))
      // a stored session's advance notifies itself (`advanceReturning`): no statement of its own
      return pending === undefined && store.dialect.advanceReturning !== undefined ? written : notifying(store, conn, id, written)
    })
    return transaction(conn, store.dialect.beginWrite, body, (materialised) => {
      if (materialised) store.registry.materialised(id)
    })
  }).pipe(failures(store, "append"), Effect.asVoid)
}
