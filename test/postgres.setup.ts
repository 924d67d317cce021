/**
 * Global set-up of the test run for the PostgreSQL cases: the state directory where the first test
 * that needs a server records the cluster it starts (test/helpers/postgres.ts), and the teardown
 * that stops and removes that cluster (a watchdog does it if the run is killed). Without a server the cases skip with a message printed
 * here; with SESSION_LOG_REQUIRE_PG=1 (CI) the run fails instead.
 */
import { tmpdir } from "node:os"
import { join } from "node:path"
import { availability, OWNER_ENV, STATE_ENV, stopShared } from "./helpers/postgres.js"

export default function setup(): () => void {
  const available = availability()
  if (!available.ok) {
    if (process.env.SESSION_LOG_REQUIRE_PG === "1") {
      throw new Error(`SESSION_LOG_REQUIRE_PG=1 but the PostgreSQL tests cannot run: ${available.reason}`)
    }
    process.stderr.write(`\n[postgres] SKIPPING the PostgreSQL tests: ${available.reason}\n\n`)
  }
  // inherited by the test workers, forked after the global set-up; nothing is made until a test needs a server
  const state = join(tmpdir(), `session-log-pg-state-${process.pid}`)
  process.env[STATE_ENV] = state
  process.env[OWNER_ENV] = String(process.pid)
  return () => stopShared(state)
}
