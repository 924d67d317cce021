/**
 * Which test file runs in which suite (issue 28). `npm test` (vitest.config.ts) runs every test
 * file but the slow-only ones, the campaigns at a few rounds; `npm run test:slow`
 * (vitest.slow.config.ts, TEST_SUITE=slow) runs the campaigns at their CI sizes and the slow-only
 * files. test/suites.test.ts fails when a test file belongs to neither suite.
 */

/** What a test file is named: vitest's include pattern of both configs. */
export const TEST_FILES = "test/**/*.test.ts"

/** Files whose size is set by TEST_SUITE: a few rounds in `npm test`, the campaign in `test:slow`. */
export const CAMPAIGNS: ReadonlyArray<string> = [
  "test/crash/crash.test.ts",
  "test/jsonl/writers.test.ts",
  "test/jsonl/publish.test.ts",
  "test/postgres/fleet.test.ts",
  "test/follow/processes.test.ts",
  "test/import/many.test.ts"
]

/** Files that run in `test:slow` only (each takes minutes and guards no rule a faster file misses). */
export const SLOW_ONLY: ReadonlyArray<string> = [
  "test/cli/resources.test.ts",
  "test/fleet/processes.test.ts",
  // a runner in process per test (a few seconds each): streamed prompts, a timed-out prompt run later
  "test/fleet/stream.test.ts",
  // a runner in process whose store fails its opens; the cluster's redelivery after a defect (about 6 s)
  "test/fleet/store-retry.test.ts",
  // show --follow processes while the demo, compact and migrate run (about 30 s)
  "test/follow/cli-replace.test.ts",
  "test/import/big.test.ts",
  // four CLI subprocesses over 20,000-event logs, about 15 s (issue 27 item 6)
  "test/cli/show-stream.test.ts",
  // a 150,000-event import signalled mid-write on four backends, about 12 s (issue 27 item 2)
  "test/cli/import-interrupt.test.ts",
  // headless Chromium over the CLI bundle: about 20 s of a worker (issue 32)
  "test/view/browser.test.ts",
  // view --open's process and exports of a 300,000-event session in a 96 MB heap (issue 32)
  "test/view/slow.test.ts"
]
