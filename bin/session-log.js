#!/usr/bin/env node
// The `session-log` CLI. In an installed package (no tsconfig.json) it runs the bundle
// dist/cli/session-log.mjs. In the repository it runs that bundle (built by `npm run build:cli`, and by
// `npm start`) when it is newer than every file under src/; otherwise it runs the TypeScript sources
// through tsx (a development dependency). SESSION_LOG_BUNDLE=<file> runs that bundle (the CLI
// tests build a fresh one).
import { readdirSync, statSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const forced = process.env.SESSION_LOG_BUNDLE
const bundle = forced ?? join(root, "dist", "cli", "session-log.mjs")
const sources = join(root, "src")

const newestSource = (dir) => {
  let newest = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name)
    newest = Math.max(newest, entry.isDirectory() ? newestSource(p) : statSync(p).mtimeMs)
  }
  return newest
}

const mtime = (path) => {
  try {
    return statSync(path).mtimeMs
  } catch {
    return undefined
  }
}

const useBundle = () => {
  if (forced !== undefined) return true
  const built = mtime(bundle)
  if (built === undefined) return false
  // an installed package: it ships src/ for its source maps, but no tsconfig.json and no tsx
  if (mtime(join(root, "tsconfig.json")) === undefined) return true
  return built >= newestSource(sources)
}

if (useBundle()) {
  await import(pathToFileURL(bundle).href)
} else if (mtime(sources) !== undefined) {
  const { register } = await import("tsx/esm/api")
  register()
  await import("../src/programs/cli/main.ts")
} else {
  process.stderr.write(`session-log: the CLI bundle ${bundle} is missing; reinstall the package\n`)
  process.exit(2)
}
