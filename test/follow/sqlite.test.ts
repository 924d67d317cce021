/**
 * The follow contract (issue 31) on the sqlite store, in one process (docs/follow.md "Mechanisms").
 */
import { followContract } from "./contract.js"
import { freshStore } from "./stores.js"

followContract("sqlite", () => freshStore("sqlite"), { numRuns: 4 })
