/**
 * How wide a text is on a terminal (issue 27): counted per grapheme cluster (a user-perceived
 * character: a letter with its combining marks, an emoji with its modifiers and joiners), 2 columns
 * for East Asian wide and fullwidth characters and emoji, 0 for clusters made only of combining or
 * format characters (ZWJ, zero-width space), 1 otherwise. `clipTo` shortens a text to a width
 * without cutting a cluster, and shows control characters as U+FFFD so that session text can never
 * drive the terminal.
 */

const segmenter = new Intl.Segmenter("en", { granularity: "grapheme" })

/** The grapheme clusters of a text. */
export const graphemes = (text: string): Array<string> => Array.from(segmenter.segment(text), (s) => s.segment)

const ZERO_WIDTH = /^[\p{Mn}\p{Me}\p{Cf}]+$/u
const EMOJI = /\p{Emoji_Presentation}|\p{Extended_Pictographic}\uFE0F/u

/** Code point ranges of East Asian Wide (W) and Fullwidth (F) characters that are not emoji. */
const WIDE: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f], // Hangul Jamo initials
  [0x2e80, 0x303e], // CJK radicals, Kangxi, ideographic description, CJK symbols and punctuation
  [0x3041, 0x33ff], // Hiragana, Katakana, Bopomofo, Hangul compatibility Jamo, Kanbun, CJK strokes, enclosed CJK
  [0x3400, 0x4dbf], // CJK extension A
  [0x4e00, 0x9fff], // CJK unified ideographs
  [0xa000, 0xa4cf], // Yi
  [0xa960, 0xa97f], // Hangul Jamo extended A
  [0xac00, 0xd7a3], // Hangul syllables
  [0xf900, 0xfaff], // CJK compatibility ideographs
  [0xfe10, 0xfe19], // vertical forms
  [0xfe30, 0xfe6f], // CJK compatibility forms, small forms
  [0xff00, 0xff60], // fullwidth forms
  [0xffe0, 0xffe6], // fullwidth signs
  [0x1b000, 0x1b2ff], // Kana supplement and extensions
  [0x20000, 0x2fffd], // CJK extensions B–F, compatibility supplement
  [0x30000, 0x3fffd] // CJK extensions G–H
]

const isWide = (codePoint: number): boolean => {
  for (const [from, to] of WIDE) {
    if (codePoint < from) return false
    if (codePoint <= to) return true
  }
  return false
}

/** The columns one grapheme cluster takes. */
export const clusterWidth = (cluster: string): number => {
  if (ZERO_WIDTH.test(cluster)) return 0
  if (EMOJI.test(cluster)) return 2
  return isWide(cluster.codePointAt(0)!) ? 2 : 1
}

/** The columns a text takes on a terminal (no escape sequences in it). */
export const displayWidth = (text: string): number => {
  // the common case, printable ASCII, needs no segmentation
  if (/^[\x20-\x7e]*$/.test(text)) return text.length
  let width = 0
  for (const cluster of graphemes(text)) width += clusterWidth(cluster)
  return width
}

// C0 and C1 control characters, DEL (line breaks and tabs are folded to spaces first)
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/g

/**
 * A text shortened to at most `max` columns (`max` ≥ 1): whitespace runs folded to one space,
 * control characters shown as U+FFFD, and when it is too wide, the whole clusters that fit in
 * `max - 1` columns followed by "…".
 */
export const clipTo = (text: string, max: number): string => {
  const flat = text.replace(/\s+/g, " ").replace(CONTROL, "\ufffd")
  if (displayWidth(flat) <= max) return flat
  let out = ""
  let width = 0
  for (const cluster of graphemes(flat)) {
    const w = clusterWidth(cluster)
    if (width + w > max - 1) break
    out += cluster
    width += w
  }
  return out + "…"
}
