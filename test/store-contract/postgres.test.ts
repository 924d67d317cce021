/**
 * The store contract suite (SPEC §7.1, §13 "PostgreSQL backend") on PostgreSQL: a fresh schema of
 * a real server per test (per run for properties), plus the durable cases (a second store
 * instance, two OS processes on one session).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerPostgresStore } from "../../src/layers/sql/postgres/PostgresStore.js"
import { describePg, freshUrl } from "../postgres/helpers.js"
import { type DurableBackend, storeContract } from "./contract.js"

const backend: DurableBackend = {
  kind: "postgres",
  location: freshUrl,
  layerAt: (url) => layerPostgresStore({ url })
}

describePg("PostgreSQL", () => {
  storeContract(
    "postgres",
    () => Layer.unwrapScoped(Effect.map(backend.location, backend.layerAt)),
    { durable: backend }
  )
})
