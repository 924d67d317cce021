/**
 * The store contract suite (SPEC §7.1) on the JSONL backend with its default layout (packed chunk
 * rows): a fresh temporary directory per test (per run for properties), plus the durable cases
 * (second instances, two OS processes). `jsonl-plain.test.ts` and `jsonl-compressed.test.ts` run
 * it on the other layouts.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { type DurableBackend, storeContract } from "./contract.js"

const backend: DurableBackend = {
  kind: "jsonl",
  location: Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "store-contract-" })).pipe(
    Effect.provide(NodeContext.layer)
  ),
  layerAt: (root) => layerJsonlStore({ root }).pipe(Layer.provide(NodeContext.layer))
}

storeContract(
  "jsonl",
  () => Layer.unwrapScoped(Effect.map(backend.location, backend.layerAt)),
  { durable: backend }
)
