/**
 * Tables that fit (issue 27): a cell's width is its display width on a terminal — East Asian wide
 * characters and emoji take two columns, combining marks and zero-width characters none — and a
 * clipped cell never cuts a character, a surrogate pair or a grapheme cluster in half.
 */
import { assert, describe, it } from "@effect/vitest"
import * as FastCheck from "effect/FastCheck"
import { clipTo, clusterWidth, displayWidth, graphemes } from "../../src/programs/cli/DisplayWidth.js"
import { clipId, table } from "../../src/programs/cli/Output.js"

describe("display width", () => {
  it("counts columns, not UTF-16 units", () => {
    assert.strictEqual(displayWidth("abc"), 3)
    assert.strictEqual(displayWidth("日本語"), 6)
    assert.strictEqual(displayWidth("한국어"), 6)
    assert.strictEqual(displayWidth("ｆｕｌｌ"), 8)
    assert.strictEqual(displayWidth("e\u0301"), 1) // e + combining acute
    assert.strictEqual(displayWidth("a\u200bb"), 2) // zero-width space
    assert.strictEqual(displayWidth("👍"), 2)
    assert.strictEqual(displayWidth("👍🏽"), 2) // skin tone modifier
    assert.strictEqual(displayWidth("👩‍👩‍👧"), 2) // ZWJ family
    assert.strictEqual(displayWidth("🇯🇵"), 2) // flag
    assert.strictEqual(displayWidth("❤️"), 2) // text heart + VS16
    assert.strictEqual(displayWidth("𠮷"), 2) // CJK extension B, a surrogate pair
  })

  it("clips to whole clusters and an ellipsis, folding whitespace and showing control characters inert", () => {
    assert.strictEqual(clipTo("日本語のテキスト", 7), "日本語…")
    assert.strictEqual(clipTo("👩‍👩‍👧👩‍👩‍👧👩‍👩‍👧", 5), "👩‍👩‍👧👩‍👩‍👧…")
    assert.strictEqual(clipTo("e\u0301e\u0301e\u0301e\u0301", 3), "e\u0301e\u0301…")
    assert.strictEqual(clipTo("a\n\tb", 10), "a b")
    assert.strictEqual(clipTo("\u001b[31mred", 20), "\ufffd[31mred")
    assert.strictEqual(clipTo("short", 5), "short")
  })

  it("clips long ids with an ellipsis at 40 columns", () => {
    const id = "session-" + "x".repeat(60)
    assert.strictEqual(clipId(id), id.slice(0, 39) + "…")
    assert.strictEqual(clipId("s1"), "s1")
  })

  it("aligns table columns by display width", () => {
    const lines = table(["A", "B"], [["日本", "x"], ["ab", "y"], ["👍🏽x", "z"]]).split("\n").slice(1)
    const columnOfB = lines.map((line) => displayWidth(line.slice(0, line.lastIndexOf(" ") + 1)))
    assert.deepStrictEqual(columnOfB, [6, 6, 6])
  })

  const pieces = ["a", "Z", " ", "日", "語", "한", "ｆ", "𠮷", "e\u0301", "\u0301", "\u200d", "👍", "👍🏽", "👩‍👩‍👧", "🇯🇵", "❤️", "\u05d0", "\u202e"]
  const texts = FastCheck.array(FastCheck.constantFrom(...pieces), { maxLength: 40 }).map((parts) => parts.join(""))

  it.prop("a clipped text fits its width and is a prefix of whole clusters (plus …)", [texts, FastCheck.integer({ min: 1, max: 30 })], ([text, max]) => {
    const clipped = clipTo(text, max)
    assert.isAtMost(displayWidth(clipped), max)
    const body = clipped.endsWith("…") && clipped !== text ? clipped.slice(0, -1) : clipped
    const source = graphemes(text.replace(/\s+/g, " "))
    const kept = graphemes(body)
    assert.deepStrictEqual(kept, source.slice(0, kept.length))
    if (displayWidth(text) <= max) assert.strictEqual(clipped, text.replace(/\s+/g, " "))
  })

  it.prop("display width is the sum over clusters, never negative", [texts], ([text]) => {
    const sum = graphemes(text).reduce((n, c) => n + clusterWidth(c), 0)
    assert.strictEqual(displayWidth(text), sum)
    assert.isAtLeast(sum, 0)
  })
})
