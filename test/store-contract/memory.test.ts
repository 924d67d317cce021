/**
 * The store contract suite (SPEC §7.1) on the memory store, the reference backend.
 */
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { storeContract } from "./contract.js"

storeContract("memory", () => layerMemoryStore())
