// Bundles the CLI into dist/cli/: the entry session-log.mjs, and chunks it loads only when a
// command needs them (the ACP SDK for `acp`, the cluster for `fleet`, the PostgreSQL and SQLite clients on first use), so that
// every command starts without parsing them. better-sqlite3 and fs-native-extensions stay external
// (native addons). The directory is emptied first: no chunk of an earlier build is left behind.
// An argument names another directory (the tests build their own). bin/session-log.js uses the
// bundle while it is newer than src/.
import { build } from "esbuild"
import { rmSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { bundleView } from "./build-view.mjs"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")
const outdir = process.argv[2] ?? join(root, "dist/cli")

rmSync(outdir, { recursive: true, force: true })
// the viewer's web app, defined into the chunk only `view` loads (src/programs/cli/ViewServe.ts)
const viewAssets = await bundleView()
await build({
  entryPoints: { "session-log": join(root, "src/programs/cli/main.ts") },
  outdir,
  outExtension: { ".js": ".mjs" },
  bundle: true,
  splitting: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: ["better-sqlite3", "fs-native-extensions"],
  // string literals: inlined where used (an object would be hoisted into a chunk every command loads)
  define: {
    __SESSION_LOG_VIEW_JS__: JSON.stringify(viewAssets.appJs),
    __SESSION_LOG_VIEW_CSS__: JSON.stringify(viewAssets.appCss)
  },
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
  logLevel: "warning"
})
