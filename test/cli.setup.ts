/**
 * Global set-up of a test run: the CLI bundle the CLI tests run (`session-log` built from the
 * current sources once per run, not once per test file), handed to the test workers through
 * SESSION_LOG_TEST_BUNDLE (and SESSION_LOG_BUNDLE, which bin/session-log.js runs) and removed at
 * the end.
 */
import { execFileSync } from "node:child_process"
import { rmSync } from "node:fs"
import { join, resolve } from "node:path"

export const BUNDLE_ENV = "SESSION_LOG_TEST_BUNDLE"

export default function setup(): () => void {
  const repo = resolve(import.meta.dirname, "..")
  // inside the repository, so that the bundle resolves the native addons from node_modules
  const dir = join(repo, "dist", `cli-test-${process.pid}`)
  execFileSync(process.execPath, [join(repo, "scripts/build-cli.mjs"), dir])
  const bundle = join(dir, "session-log.mjs")
  // inherited by the test workers, forked after the global set-up; every `bin/session-log.js` a
  // test starts runs it too (SESSION_LOG_BUNDLE), not a stale or missing dist/cli/session-log.mjs
  process.env[BUNDLE_ENV] = bundle
  process.env.SESSION_LOG_BUNDLE = bundle
  return () => rmSync(dir, { recursive: true, force: true })
}
