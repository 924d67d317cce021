// Bundles the viewer's web app (src/programs/view/app/) for the browser: one script and one
// stylesheet, returned as strings. build-cli.mjs defines them into the chunk `session-log view`
// loads (served from memory, written inline into `export --format html`); the viewer's tests
// bundle them the same way. No CDN, nothing fetched at run time.
import { build } from "esbuild"
import { readFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"

const root = join(dirname(fileURLToPath(import.meta.url)), "..")

// the pure core the app shares with the server counts UTF-8 bytes with node:buffer (Json.ts):
// the browser gets the one function it uses, on TextEncoder
const nodeBufferForBrowser = {
  name: "node-buffer-for-browser",
  setup(b) {
    b.onResolve({ filter: /^node:buffer$/ }, () => ({ path: "node:buffer", namespace: "browser-shim" }))
    b.onLoad({ filter: /.*/, namespace: "browser-shim" }, () => ({
      contents: "export const Buffer = { byteLength: (s) => new TextEncoder().encode(s).length }",
      loader: "js"
    }))
  }
}

/** The app's script and stylesheet. */
export const bundleView = async () => {
  const result = await build({
    entryPoints: [join(root, "src/programs/view/app/main.ts")],
    bundle: true,
    write: false,
    platform: "browser",
    format: "iife",
    target: "es2022",
    minify: true,
    legalComments: "none",
    plugins: [nodeBufferForBrowser],
    logLevel: "warning"
  })
  return {
    appJs: result.outputFiles[0].text,
    appCss: readFileSync(join(root, "src/programs/view/app/style.css"), "utf8")
  }
}
