/**
 * Every test file runs in one of the two suites (issue 28): `npm test` (vitest.config.ts) or
 * `npm run test:slow` (vitest.slow.config.ts). A file named otherwise than vitest's include
 * pattern, or a slow list naming a file that does not exist, fails here.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { FastCheck as fc } from "effect"
import { CAMPAIGNS, matrix, runs, sample, share, SLOW_ONLY } from "./suites.js"

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

describe("a campaign's cases in each suite (issue 28)", () => {
  const list = fc.array(fc.integer(), { maxLength: 12 })

  it.prop("matrix: the whole product in test:slow; in npm test every row and every column at least once, each pair from the product", [list, list], ([rows, columns]) => {
    const all = matrix(rows, columns, true)
    assert.strictEqual(all.length, rows.length * columns.length)
    const few = matrix(rows, columns, false)
    const key = ([a, b]: readonly [number, number], i: number, j: number) => `${i}:${j}:${a}:${b}`
    const product = new Set(rows.flatMap((a, i) => columns.map((b, j) => key([a, b], i, j))))
    assert.strictEqual(product.size, all.length)
    if (rows.length === 0 || columns.length === 0) return assert.deepStrictEqual(few, [])
    assert.isAtMost(few.length, Math.max(rows.length, columns.length))
    for (const row of rows) assert.isTrue(few.some(([a]) => a === row))
    for (const column of columns) assert.isTrue(few.some(([, b]) => b === column))
    for (const [a, b] of few) assert.isTrue(rows.includes(a) && columns.includes(b))
  })

  it.prop("sample: every case in test:slow; in npm test `count` distinct cases in order, the first and the last among them", [list, fc.integer({ min: 2, max: 8 })], ([cases, count]) => {
    assert.deepStrictEqual(sample(cases, count, true), cases)
    const indices = cases.map((_, i) => i)
    const picked = sample(indices, count, false)
    assert.strictEqual(picked.length, Math.min(count, cases.length))
    assert.deepStrictEqual([...picked].sort((a, b) => a - b), picked)
    assert.strictEqual(new Set(picked).size, picked.length)
    if (cases.length > 0) {
      assert.strictEqual(picked[0], 0)
      assert.strictEqual(picked[picked.length - 1], cases.length - 1)
    }
  })

  it.prop("share: n shares of npm test run every case exactly once between them; test:slow runs all in each", [list, fc.integer({ min: 1, max: 5 })], ([cases, n]) => {
    const indices = cases.map((_, i) => i)
    const shares = Array.from({ length: n }, (_, k) => share(indices, k, n, false))
    assert.deepStrictEqual(shares.flat().sort((a, b) => a - b), indices)
    for (let k = 0; k < n; k++) assert.deepStrictEqual(share(indices, k, n, true), indices)
  })

  it.prop("runs: the CI size in test:slow; in npm test a third of it, never below the floor nor above the CI size", [fc.integer({ min: 1, max: 20_000 }), fc.integer({ min: 1, max: 50 })], ([slow, least]) => {
    assert.strictEqual(runs(slow, least, true), slow)
    const few = runs(slow, least, false)
    assert.isAtMost(few, slow)
    assert.isAtLeast(few, Math.min(slow, least))
    assert.isAtLeast(few, Math.ceil(slow / 3))
  })
})
