/**
 * The follow contract (issue 31) on the jsonl-plain store, in one process (docs/follow.md "Mechanisms").
 */
import { followContract } from "./contract.js"
import { freshStore } from "./stores.js"

followContract("jsonl-plain", () => freshStore("jsonl-plain"), { numRuns: 4 })
