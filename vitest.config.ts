import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // PostgreSQL for the tests that need it: started on first use, stopped at the end
    globalSetup: ["test/postgres.setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks"
  }
})
