// Bundles the CLI into dist/session-log.mjs (one file: fast start-up). better-sqlite3 and
// fs-native-extensions stay external (native addons). bin/session-log.js uses the bundle while it is newer than src/.
import { build } from "esbuild"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

await build({
  entryPoints: [join(root, "src/programs/cli/main.ts")],
  outfile: process.argv[2] ?? join(root, "dist/session-log.mjs"),
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: ["better-sqlite3", "fs-native-extensions"],
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  logLevel: "warning"
})
