/**
 * The store contract suite (SPEC §7.1) on the JSONL backend writing new sessions in the
 * compressed layout (`compress: true`, `<encoded id>.jsonlz`): a fresh temporary directory per
 * test, plus the durable cases (second instances, two OS processes appending to one file).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { type DurableBackend, storeContract } from "./contract.js"

const backend: DurableBackend = {
  // the child writers open a plain-option store: appends follow the file's layout
  kind: "jsonl",
  location: Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "store-contract-z-" })).pipe(
    Effect.provide(NodeContext.layer)
  ),
  layerAt: (root) => layerJsonlStore({ root, compress: true }).pipe(Layer.provide(NodeContext.layer))
}

storeContract(
  "jsonl (compressed layout)",
  () => Layer.unwrapScoped(Effect.map(backend.location, backend.layerAt)),
  { durable: backend }
)
