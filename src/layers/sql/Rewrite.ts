/**
 * The SQL store's rewrites (SPEC §7.5 "replaceLog", §7.1 `truncateTornTail`, `discard`): each in
 * one write transaction that first locks the session row and checks it is still at the revision
 * the caller read (L8); `replaceLog` keeps the previous content in `session_backups`.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import type { SqlError } from "@effect/sql/SqlError"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { ParseError } from "effect/ParseResult"
import { type AppendConflict, type SessionNotFound, StoreCorrupt } from "../../schema/Errors.js"
import { encodeEvent } from "../../schema/EventCodec.js"
import type { Event } from "../../schema/Events.js"
import { encodeJson, type Json } from "../../schema/Json.js"
import { headerRecord, type SessionHeader } from "../../schema/SessionHeader.js"
import type { TornTail } from "../../services/SessionStore.js"
import type { CheckedBatch } from "./Append.js"
import { isEventRow, rawLine, rowEnd, rowToEvents, undecodable } from "./EventRows.js"
import { insertEvents, LOWEST_SEQ, notFound, notifying, olderLayout, staleRevision } from "./OperationSteps.js"
import { scanEvents } from "./Read.js"
import { headerFromRow, type SessionRow } from "./SessionRows.js"
import { failures, inTransaction, type Store } from "./StoreContext.js"

/** The session row, locked until COMMIT, if it is still at `revision` (L11, L8). */
const atRevision = (
  store: Store,
  id: string,
  revision: string
): Effect.Effect<SessionRow, SessionNotFound | AppendConflict | SqlError | ParseError, SqlClient.TransactionConnection> =>
  Effect.flatMap(store.lockSession(id), (found): Effect.Effect<SessionRow, SessionNotFound | AppendConflict> => {
    if (Option.isNone(found)) return Effect.fail(notFound(id))
    const row = found.value
    return String(row.revision) === revision ? Effect.succeed(row) : Effect.fail(staleRevision(id, revision, row))
  })

/** After this instance rewrites a log (whatever the outcome), its next `readFrom` reads it whole again. */
const forgetClean = (store: Store, id: string) => <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.ensuring(self, Effect.sync(() => void store.readClean.delete(id)))

/** Delete a whole session (its rows, then its sessions row) if it is still at `revision` (L8). */
export const discard = (store: Store, id: string, revision: string) =>
  inTransaction(store, true, (conn) =>
    notifying(
      store,
      conn,
      id,
      Effect.gen(function*() {
        yield* atRevision(store, id, revision)
        yield* store.runRaw(conn, "delete-from", store.statements.deleteFrom, [id, LOWEST_SEQ])
        yield* store.sql`DELETE FROM sessions WHERE id = ${id}`
      })
    )).pipe(failures(store, "discard"), Effect.asVoid, forgetClean(store, id))

/** Delete the torn tail `load` reported, if the log is still at `revision` and still torn there (L8). */
export const truncateTornTail = (store: Store, id: string, tornTail: TornTail, revision: string) =>
  store.layout !== 2 ? Effect.fail(olderLayout(store, "truncateTornTail")) : inTransaction(store, true, (conn) =>
    Effect.gen(function*() {
      const { sql } = store
      const row = yield* atRevision(store, id, revision)
      // recompute the torn point under the write lock
      const scanned = (yield* scanEvents(store, conn, id)).result(row.next_seq)
      if (scanned instanceof StoreCorrupt) return yield* scanned
      const now = scanned.tornTail
      if (now === undefined || now.fromSeq !== tornTail.fromSeq || now.reason !== tornTail.reason) {
        return yield* staleRevision(id, revision, row, "the torn tail differs from the one load reported")
      }
      yield* conn.executeRaw(store.statements.deleteFrom, [id, now.fromSeq])
      yield* notifying(store, conn, id, sql`UPDATE sessions SET next_seq = ${now.fromSeq}, revision = revision + 1 WHERE id = ${id}`)
    })).pipe(failures(store, "truncateTornTail"), forgetClean(store, id))

/** The stored content of a session as JSONL text (§7.4.2); a defective row is kept as stored. */
const backupContent = (store: Store, conn: Connection, row: SessionRow) =>
  Effect.gen(function*() {
    const rows = yield* conn.executeValues(store.statements.allEvents, [row.id])
    let content = encodeJson(headerRecord(headerFromRow(row) as SessionHeader) as Json) + "\n"
    let next = 0
    const events: Array<Event> = []
    for (const r of rows) {
      if (!isEventRow(r)) return yield* undecodable(store.location, r)
      events.length = 0
      const verdict = rowToEvents(r, next, store.location, events)
      if (typeof verdict === "number") for (const e of events) content += encodeEvent(e) + "\n"
      else content += rawLine(r) + "\n"
      next = rowEnd(r)
    }
    return content
  })

/**
 * Replace header and events if the log is still at `revision` (L8), keeping the previous content
 * as JSONL text in `session_backups` (SPEC §7.5 "replaceLog").
 */
export const replaceLog = (
  store: Store,
  id: string,
  header: SessionHeader,
  batch: CheckedBatch,
  options: { readonly revision: string; readonly backup: string; readonly takenAt: number }
) =>
  store.layout !== 2 ? Effect.fail(olderLayout(store, "replaceLog")) : inTransaction(store, true, (conn) =>
    Effect.gen(function*() {
      const { sql } = store
      const row = yield* atRevision(store, id, options.revision)
      const content = yield* backupContent(store, conn, row)
      yield* sql`INSERT INTO session_backups ${
        sql.insert({ session_id: id, taken_at: options.takenAt, reason: options.backup, content })
      }`
      yield* conn.executeRaw(store.statements.deleteFrom, [id, LOWEST_SEQ])
      yield* sql`UPDATE sessions SET
                   version = ${header.version},
                   created_at = ${header.createdAt},
                   cwd = ${header.cwd ?? null},
                   parent_session = ${header.parentSession ?? null},
                   seed_length = ${header.seedLength ?? null},
                   origin = ${header.origin ?? null},
                   delegation_depth = ${header.delegationDepth ?? null},
                   agent_preset = ${header.agentPreset ?? null},
                   next_seq = ${batch.events.length},
                   revision = revision + 1
                 WHERE id = ${id}`
      yield* notifying(store, conn, id, insertEvents(store, conn, id, batch.events, batch.lines))
    })).pipe(failures(store, "replaceLog"), forgetClean(store, id))
