/**
 * The follow contract (issue 31) on PostgreSQL (a fresh schema of the shared test server per test).
 */
import { describePg } from "../postgres/helpers.js"
import { followContract } from "./contract.js"
import { freshStore } from "./stores.js"

describePg("PostgreSQL", () => followContract("postgres", () => freshStore("postgres"), { numRuns: 2 }))
