/**
 * The store contract suite (SPEC §7.1) on the SQLite backend: a real database file in a fresh
 * temporary directory per test (per run for properties), plus the durable cases.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { type DurableBackend, storeContract } from "./contract.js"

const backend: DurableBackend = {
  kind: "sqlite",
  location: Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = yield* fs.makeTempDirectoryScoped({ prefix: "store-contract-" })
    return `${dir}/sessions.db`
  }).pipe(Effect.provide(NodeContext.layer)),
  layerAt: (filename) => layerSqliteStore({ filename })
}

storeContract(
  "sqlite",
  () => Layer.unwrapScoped(Effect.map(backend.location, backend.layerAt)),
  { durable: backend }
)
