/**
 * Argument errors that help (issue 27): an option a command does not have is named, with the
 * closest option it does have (`--sesion` → `--session`), before @effect/cli would report only the
 * value that follows it as an unknown argument; a value that is not a whole number names its
 * option; an id that names no session lists the near ones. Pure functions.
 */

/** The edit distance of two short strings (insertions, deletions, substitutions, transpositions). */
export const distance = (a: string, b: string): number => {
  const d: Array<Array<number>> = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1)
      d[i]![j] = best
    }
  }
  return d[a.length]![b.length]!
}

/** The closest of `candidates` to `word`, when it is close enough to be a likely typo. */
export const closest = (word: string, candidates: ReadonlyArray<string>): string | undefined => {
  let best: string | undefined
  let bestDistance = Infinity
  for (const candidate of candidates) {
    const d = distance(word, candidate)
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(word.length / 3)) ? best : undefined
}

/**
 * Up to `limit` of `candidates` near `word` (within a third of its length in edits, at least 2, or
 * starting with it), nearest first: the ids to suggest for an id that names no session.
 */
export const nearest = (word: string, candidates: ReadonlyArray<string>, limit = 3): ReadonlyArray<string> =>
  candidates
    .map((c) => ({ c, d: c.startsWith(word) ? 0 : distance(word, c) }))
    .filter(({ c, d }) => c !== word && d <= Math.max(2, Math.floor(word.length / 3)))
    .sort((a, b) => a.d - b.d || a.c.localeCompare(b.c))
    .slice(0, limit)
    .map(({ c }) => c)

/** The options `--name` of a help or usage text. */
export const optionsIn = (text: string): ReadonlyArray<string> => [...new Set(text.match(/--[a-z][a-z0-9-]*/g) ?? [])]

/** Options every command accepts (@effect/cli's built-ins). */
const BUILT_IN = ["--help", "--version", "--log-level", "--completions", "--wizard"]

/**
 * The first option on the command line (before `--`) that the command does not have, with the
 * sentence that names it and the closest one it has.
 */
export const unknownOption = (args: ReadonlyArray<string>, known: ReadonlyArray<string>): string | undefined => {
  const end = args.indexOf("--")
  const all = [...known, ...BUILT_IN]
  for (const arg of end < 0 ? args : args.slice(0, end)) {
    if (!arg.startsWith("--") || arg === "--") continue
    const name = arg.split("=")[0]!
    if (all.includes(name)) continue
    const near = closest(name, known)
    return `unknown option ${name}${near === undefined ? "" : `; did you mean ${near}?`} (options: ${known.join(", ")})`
  }
  return undefined
}

/**
 * @effect/cli's "'x' is not a integer" as a sentence naming the option that took `x` (the token
 * before it on the command line), or the text unchanged.
 */
export const explainNumber = (text: string, args: ReadonlyArray<string>): string => {
  const match = text.match(/'(.*)' is not a integer/)
  if (match === null) return text
  const value = match[1]!
  const at = args.indexOf(value)
  const inline = args.find((a) => a.startsWith("--") && a.endsWith(`=${value}`))
  const option = inline?.split("=")[0] ?? (at > 0 && args[at - 1]!.startsWith("--") ? args[at - 1] : undefined)
  return `${option ?? "the option"} takes a whole number (0, 1, 2, …), not '${value}'`
}
