#!/usr/bin/env node
// The `session-log` CLI. Runs the bundle built by `npm run build:cli` (dist/session-log.mjs) when
// it is newer than every file under src/; otherwise runs the TypeScript sources through tsx.
// SESSION_LOG_BUNDLE=<file> runs that bundle (the CLI tests build a fresh one).
import { readdirSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const forced = process.env.SESSION_LOG_BUNDLE
const bundle = forced ?? join(root, "dist", "session-log.mjs")

const newestSource = (dir) => {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestSource(p) : statSync(p).mtimeMs)
  }
  return newest
}

let fresh = forced !== undefined
if (!fresh) try {
  fresh = statSync(bundle).mtimeMs >= newestSource(join(root, "src"))
} catch {
  fresh = false
}

if (fresh) {
  await import(pathToFileURL(bundle).href)
} else {
  const { register } = await import("tsx/esm/api")
  register()
  await import("../src/programs/cli/main.ts")
}
