// Prints the per-file durations of a vitest run from its JSON report (`--reporter=json
// --outputFile.json=<file>`), slowest first, and the ten slowest files again at the end, so that
// slow growth of the suites is visible in CI's output. Usage: node scripts/test-durations.mjs <report.json> [title]
import { readFileSync } from "node:fs"
import { relative } from "node:path"

const [report, title = "test files"] = process.argv.slice(2)
const { testResults } = JSON.parse(readFileSync(report, "utf8"))
const rows = testResults
  .map((file) => ({ name: relative(process.cwd(), file.name), ms: file.endTime - file.startTime, tests: file.assertionResults.length, status: file.status }))
  .sort((a, b) => b.ms - a.ms)
const seconds = (ms) => `${(ms / 1000).toFixed(1).padStart(7)} s`
process.stdout.write(`\n${title}: per-file durations (${rows.length} files)\n`)
for (const row of rows) process.stdout.write(`${seconds(row.ms)}  ${String(row.tests).padStart(4)} tests  ${row.status === "passed" ? "" : `[${row.status}] `}${row.name}\n`)
process.stdout.write(`\n${title}: the ten slowest files\n`)
for (const row of rows.slice(0, 10)) process.stdout.write(`${seconds(row.ms)}  ${row.name}\n`)
