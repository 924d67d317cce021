/**
 * The store contract suite (SPEC §7.1) on the JSONL backend writing every event as its own line
 * (`packChunks: false`; `jsonl.test.ts` runs the default, packed chunk rows).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { type DurableBackend, storeContract } from "./contract.js"

const backend: DurableBackend = {
  kind: "jsonl",
  location: Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "store-contract-p-" })).pipe(
    Effect.provide(NodeContext.layer)
  ),
  layerAt: (root) => layerJsonlStore({ root, packChunks: false }).pipe(Layer.provide(NodeContext.layer))
}

storeContract(
  "jsonl (one line per event)",
  () => Layer.unwrapScoped(Effect.map(backend.location, backend.layerAt)),
  { durable: backend }
)
