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
  "test/import/many.test.ts",
  // CLI matrices: a covering share in npm test (`matrix`, `sample`, `share` below), every pair here
  "test/cli/file-targets.test.ts",
  "test/cli/read-only.test.ts",
  "test/cli/contract.test.ts",
  "test/cli/jsonlz-store.test.ts",
  // property tests: a third of their runs in npm test (`runs` below), all of them here
  "test/session/read-each.test.ts",
  "test/property/mutations.test.ts",
  "test/acp/projection.property.test.ts",
  "test/property/surface.test.ts",
  "test/jsonl/encoding.test.ts",
  "test/compaction/property.test.ts",
  "test/schema/payload-agreement.test.ts",
  "test/repair/closers.test.ts",
  "test/property/v0-reference.test.ts",
  "test/session/prepared.test.ts",
  "test/headers/property.test.ts",
  "test/store-contract/memory.test.ts",
  "test/store-contract/jsonl.test.ts",
  "test/store-contract/jsonl-plain.test.ts",
  "test/store-contract/jsonl-compressed.test.ts",
  "test/store-contract/sqlite.test.ts",
  "test/store-contract/postgres.test.ts",
  // the ACP snapshots: each scenario replayed on one backend in npm test (`matrix`), on all of them here
  "test/acp/snapshot.test.ts",
  // the compressed file's last frame cut at every byte here, at a sample in npm test
  "test/crash/truncation.test.ts",
  // the viewer's time travel from its index against the core: a third of the runs in npm test
  "test/view/timetravel.test.ts"
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

/** True in `npm run test:slow` (TEST_SUITE=slow): the campaigns run at their CI sizes. */
export const SLOW_SUITE = process.env.TEST_SUITE === "slow"

/**
 * The cases of a matrix a campaign file runs: every pair of `rows` × `columns` in `test:slow`; in
 * `npm test` a covering subset in which every row and every column appears at least once (row i
 * with column i mod |columns|, then each column not yet met with a row), so each behaviour is
 * still checked and the product of both lists runs in CI.
 */
export const matrix = <A, B>(
  rows: ReadonlyArray<A>,
  columns: ReadonlyArray<B>,
  slow: boolean = SLOW_SUITE
): ReadonlyArray<readonly [A, B]> => {
  if (slow) return rows.flatMap((row) => columns.map((column) => [row, column] as const))
  if (rows.length === 0 || columns.length === 0) return []
  const pairs = rows.map((row, i) => [row, columns[i % columns.length]] as const)
  const met = Math.min(rows.length, columns.length)
  for (let j = met; j < columns.length; j++) pairs.push([rows[j % rows.length], columns[j]] as const)
  return pairs
}

/**
 * The cases a campaign file runs: all of them in `test:slow`; in `npm test` `count` of them
 * spread evenly over the list (the first and the last always among them).
 */
export const sample = <A>(cases: ReadonlyArray<A>, count: number, slow: boolean = SLOW_SUITE): ReadonlyArray<A> => {
  if (slow || cases.length <= count) return cases
  if (count <= 1) return cases.slice(0, Math.max(count, 0))
  const picked = new Set<number>()
  for (let k = 0; k < count; k++) picked.add(Math.round((k * (cases.length - 1)) / (count - 1)))
  return [...picked].sort((a, b) => a - b).map((i) => cases[i])
}

/**
 * The `k`-th of `n` shares of a campaign's cases: all of them in `test:slow`; in `npm test` every
 * n-th case from the k-th, so that n tests taking shares 0 … n−1 run every case between them.
 */
export const share = <A>(cases: ReadonlyArray<A>, k: number, n: number, slow: boolean = SLOW_SUITE): ReadonlyArray<A> =>
  slow ? cases : cases.filter((_, i) => i % n === k)

/**
 * The runs of a property test in a campaign file: `slow` (its CI size) in `test:slow`; in `npm test`
 * a third of it, at least `least` (every generator still explored, fewer samples drawn).
 */
export const runs = (slow: number, least: number = 5, isSlow: boolean = SLOW_SUITE): number =>
  isSlow ? slow : Math.min(slow, Math.max(least, Math.ceil(slow / 3)))
