/**
 * The follow contract (issue 31) on the memory store: wake-ups from the store's own appends.
 */
import { layer } from "../../src/layers/memory/MemoryStore.js"
import { followContract } from "./contract.js"

followContract("memory", () => layer(), { numRuns: 30 })
