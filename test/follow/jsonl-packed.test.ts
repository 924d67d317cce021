/**
 * The follow contract (issue 31) on the jsonl-packed store, in one process (docs/follow.md "Mechanisms").
 */
import { followContract } from "./contract.js"
import { freshStore } from "./stores.js"

followContract("jsonl-packed", () => freshStore("jsonl-packed"), { numRuns: 4 })
