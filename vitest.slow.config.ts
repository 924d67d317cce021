import { defineConfig } from "vitest/config"
import { CAMPAIGNS, SLOW_ONLY } from "./test/suites.js"

// `npm run test:slow`: the campaigns at their CI sizes (TEST_SUITE=slow) and the slow-only files.
export default defineConfig({
  test: {
    include: [...CAMPAIGNS, ...SLOW_ONLY],
    env: { TEST_SUITE: "slow" },
    globalSetup: ["test/cli.setup.ts", "test/postgres.setup.ts"],
    testTimeout: 600_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
