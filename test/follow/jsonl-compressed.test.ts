/**
 * The follow contract (issue 31) on the jsonl-compressed store, in one process (docs/follow.md "Mechanisms").
 */
import { followContract } from "./contract.js"
import { freshStore } from "./stores.js"

followContract("jsonl-compressed", () => freshStore("jsonl-compressed"), { numRuns: 4 })
