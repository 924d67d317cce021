// Builds the library into dist/: ESM JavaScript, .d.ts, source maps and declaration maps for src/
// (tsconfig.build.json; the CLI sources are bundled separately by scripts/build-cli.mjs). Output
// of an earlier build is removed first, so a deleted module never ships; the CLI bundle (dist/cli/)
// and the CLI tests' bundles (dist/cli-test-<pid>/, dist/<name>-<pid>/) are left alone.
import { spawnSync } from "node:child_process"
import { readdirSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const dist = join(root, "dist")

let entries = []
try {
  entries = readdirSync(dist)
} catch {
  // no dist/ yet
}
for (const name of entries) {
  if (name !== "cli" && !name.startsWith("cli-test-") && !/-\d+$/.test(name)) rmSync(join(dist, name), { recursive: true, force: true })
}

const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
const result = spawnSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit" })
process.exit(result.status ?? 1)
