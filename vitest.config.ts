import { defineConfig } from "vitest/config"
import { SLOW_ONLY, TEST_FILES } from "./test/suites.js"

// `npm test`: every test file but the slow-only ones (test/suites.ts); campaigns at a few rounds.
export default defineConfig({
  test: {
    include: [TEST_FILES],
    exclude: ["**/node_modules/**", ...SLOW_ONLY],
    // the CLI bundle, built once per run; PostgreSQL for the tests that need it (started on first use, stopped at the end)
    globalSetup: ["test/cli.setup.ts", "test/postgres.setup.ts"],
    // bounds that only catch a hang: a test's verdict never depends on the machine's speed, and on a
    // loaded 2-core machine a CLI test that spawns many processes can take minutes
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: "forks",
    // a worker runs file after file without reloading the modules they share (module loading was
    // about 130 s of the run's worker time); test/isolation.setup.ts gives each file a pristine
    // `it`, and every test makes its own stores, directories and sessions
    poolOptions: { forks: { isolate: false } },
    setupFiles: ["test/isolation.setup.ts"],
    // both cores: vitest's default leaves one free (one worker on a 2-core machine); the tests'
    // verdicts do not depend on speed, and most of a CLI test's time is its child processes
    maxWorkers: 2,
    minWorkers: 1
  }
})
