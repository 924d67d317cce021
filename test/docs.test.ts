/**
 * The documentation ships and holds together (issue 29): every `SPEC §x.y` cited in src/ or test/
 * names a heading of docs/SPEC.md, every rule id an error in src/ carries names a rule row of it,
 * and every relative link of the README, docs/, bench/README.md and CHANGELOG.md points at a file
 * that exists and, with a #fragment, at a heading in it (GitHub's anchor names).
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"

const repo = resolve(import.meta.dirname, "..")
const read = (file: string) => readFileSync(join(repo, file), "utf8")

const walk = (dir: string): Array<string> =>
  readdirSync(join(repo, dir), { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)]
  )

const spec = read("docs/SPEC.md")
const headings = (text: string) => [...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1]!.trim())

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens; repeats numbered. */
const anchorsOf = (text: string): Set<string> => {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const heading of headings(text.replace(/```[\s\S]*?```/g, ""))) {
    const plain = heading.replace(/`/g, "").replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    const base = plain.toLowerCase().replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "").replace(/ /g, "-")
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    anchors.add(n === 0 ? base : `${base}-${n}`)
  }
  return anchors
}

const sources = [...walk("src"), ...walk("test")].filter((file) => /\.(ts|mjs|cjs)$/.test(file))

describe("docs (issue 29)", () => {
  it("every SPEC §x.y cited in src/ and test/ is a heading of docs/SPEC.md", () => {
    const sections = new Set(headings(spec).map((h) => h.match(/^(?:Appendix )?([0-9A-Z]+(?:\.[0-9]+)*)[ .]/)?.[1]).filter(Boolean))
    const missing: Array<string> = []
    for (const file of sources) {
      for (const [, section] of read(file).matchAll(/SPEC §([0-9]+(?:\.[0-9]+)*)/g)) {
        if (!sections.has(section!)) missing.push(`${file}: §${section}`)
      }
    }
    assert.isAbove(sections.size, 50)
    assert.deepStrictEqual(missing, [])
  })

  it("every rule id an error in src/ carries is a rule of docs/SPEC.md", () => {
    const rules = new Set([...spec.matchAll(/^\| ([A-Z][0-9]+) \|/gm)].map((m) => m[1]))
    const missing: Array<string> = []
    for (const file of sources.filter((f) => f.startsWith("src"))) {
      for (const [, rule] of read(file).matchAll(/\brule: "([A-Z][0-9]+)"/g)) {
        if (!rules.has(rule!)) missing.push(`${file}: ${rule}`)
      }
    }
    assert.isAbove(rules.size, 100)
    assert.deepStrictEqual(missing, [])
  })

  it("no comment in src/ cites a design file that does not ship", () => {
    const cited: Array<string> = []
    for (const file of sources.filter((f) => f.startsWith("src"))) {
      for (const [name] of read(file).matchAll(/\b(?:DESIGN|ACP|STYLE)\.md\b/g)) cited.push(`${file}: ${name}`)
    }
    assert.deepStrictEqual(cited, [])
  })

  it("a comment citing a page of the documentation names one that ships, and a heading of it when it quotes one", () => {
    const broken: Array<string> = []
    for (const file of sources.filter((f) => f !== "test/docs.test.ts")) {
      const text = read(file).replace(/\n\s*\*\s*/g, " ")
      for (const [, page, heading] of text.matchAll(/\b((?:docs|bench)\/[a-z-]+\.md)(?: "([^"]+)")?/gi)) {
        if (!existsSync(join(repo, page!))) broken.push(`${file}: ${page} (no such file)`)
        else if (heading !== undefined && !headings(read(page!)).includes(heading)) broken.push(`${file}: ${page} "${heading}"`)
      }
      // the README is a front page now: its sections are not cited as the reference
      for (const [cite] of text.matchAll(/README "[^"]+"/g)) broken.push(`${file}: ${cite}`)
    }
    assert.deepStrictEqual(broken, [])
  })

  it("every relative link of the README, docs/, bench/README.md and CHANGELOG.md resolves", () => {
    const pages = ["README.md", "CHANGELOG.md", "bench/README.md", ...walk("docs").filter((f) => f.endsWith(".md"))]
      .filter((f) => existsSync(join(repo, f)))
    const broken: Array<string> = []
    for (const page of pages) {
      const text = read(page).replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "")
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target!)) continue
        const [path, fragment] = target!.split("#") as [string, string | undefined]
        const file = path === "" ? page : relative(repo, resolve(join(repo, dirname(page)), path))
        if (!existsSync(join(repo, file))) {
          broken.push(`${page}: ${target} (no ${file})`)
          continue
        }
        if (fragment !== undefined && statSync(join(repo, file)).isFile() && !anchorsOf(read(file)).has(fragment)) {
          broken.push(`${page}: ${target} (no heading #${fragment} in ${file})`)
        }
      }
    }
    assert.isAbove(pages.length, 2)
    assert.deepStrictEqual(broken, [])
  })
})
