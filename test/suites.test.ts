/**
 * Every test file runs in one of the two suites (issue 28): `npm test` (vitest.config.ts) or
 * `npm run test:slow` (vitest.slow.config.ts). A file named otherwise than vitest's include
 * pattern, or a slow list naming a file that does not exist, fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { CAMPAIGNS, SLOW_ONLY } from "./suites.js"

const repo = resolve(import.meta.dirname, "..")

const walk = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(join(dir, entry.name)) : [relative(repo, join(dir, entry.name))]
  )

/** Files that look like tests to a reader (vitest's default patterns, any script ending). */
const looksLikeTest = (file: string) => /\.(test|spec)\.[cm]?[jt]sx?$/.test(file)
/** What the two configs include: test/**\/*.test.ts. */
const included = (file: string) => /^test\/.+\.test\.ts$/.test(file)

describe("test suites (issue 28)", () => {
  it("every test file is in npm test or npm run test:slow", () => {
    const files = walk(join(repo, "test")).filter(looksLikeTest)
    assert.isAbove(files.length, 50)
    const orphans = files.filter((file) => !included(file))
    assert.deepStrictEqual(orphans, [], "test files neither suite runs (rename them *.test.ts)")
    const fast = files.filter((file) => !SLOW_ONLY.includes(file))
    const slow = files.filter((file) => SLOW_ONLY.includes(file) || CAMPAIGNS.includes(file))
    assert.strictEqual(new Set([...fast, ...slow]).size, files.length)
  })

  it("the slow lists name existing test files, each once", () => {
    for (const file of [...CAMPAIGNS, ...SLOW_ONLY]) {
      assert.isTrue(existsSync(join(repo, file)), file)
      assert.isTrue(included(file), file)
    }
    assert.strictEqual(new Set([...CAMPAIGNS, ...SLOW_ONLY]).size, CAMPAIGNS.length + SLOW_ONLY.length)
  })
})
