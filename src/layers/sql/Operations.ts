/**
 * The operations of the SQL store (SPEC §7.1, §7.5), each a function of the shared `Store`: append
 * (`Append.ts`), create's checks (here), load, readFrom and the listings (`Read.ts`),
 * truncateTornTail, discard and replaceLog (`Rewrite.ts`, each checking the revision first), over
 * the steps they share (`OperationSteps.ts`). Writes run in one write transaction on a leased
 * connection.
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { unrepresentable } from "./OperationSteps.js"
import { queryFailure, type Store } from "./StoreContext.js"
import { onConnection } from "./Transaction.js"

export { append, type CheckedBatch } from "./Append.js"
export { type FromRead, list, listEntries, load, loadEach, readFrom } from "./Read.js"
export { discard, replaceLog, truncateTornTail } from "./Rewrite.js"

/** `create`'s check of a valid header: text the database cannot store is refused (J13 happens first). */
export const checkHeader = (store: Store, header: SessionHeader) =>
  Effect.suspend(() => {
    for (const key of ["id", "cwd", "parentSession", "agentPreset"] as const) {
      const value = header[key]
      if (value !== undefined && store.dialect.unstorableText.test(value)) return Effect.fail(unrepresentable(store, "create", `header.${key}`))
    }
    return Effect.void
  })

/** J14: whether a session row with this id exists. */
export const isStored = (store: Store, id: string) =>
  store.lease((conn) => onConnection(conn, store.findNextSeq(id))).pipe(
    Effect.map(Option.isSome),
    Effect.mapError(queryFailure(store, "create"))
  )
