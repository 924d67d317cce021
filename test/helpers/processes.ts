/**
 * Shared helpers of the tests that run child processes: a TypeScript child script bundled once
 * (a bundle starts in a fraction of tsx's time; the native addons stay external and resolve
 * through NODE_PATH) and a small seeded PRNG for reproducible plans.
 */
import { execFileSync } from "node:child_process"
import { join, resolve } from "node:path"

export const repo = resolve(import.meta.dirname, "../..")

/** Bundle `source` (a path inside the repository) as CommonJS into `outfile`. */
export const bundleScript = (source: string, outfile: string): string => {
  execFileSync(join(repo, "node_modules/.bin/esbuild"), [
    join(repo, source),
    "--bundle",
    "--platform=node",
    "--format=cjs",
    "--external:better-sqlite3",
    "--external:fs-native-extensions",
    `--outfile=${outfile}`,
    "--log-level=error"
  ])
  return outfile
}

/** The environment a bundled child needs to find the native addons. */
export const childEnv = (extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
  ...process.env,
  NODE_PATH: join(repo, "node_modules"),
  ...extra
})

/** mulberry32: a seeded PRNG giving integers in [0, n). */
export const prng = (seed: number) => {
  let s = seed >>> 0
  return (n: number): number => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n)
  }
}
