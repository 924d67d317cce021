/** What every bench prints with: the median of its runs and numbers in a fixed format. */

/** The median of a non-empty list (the upper one of an even count). */
export const median = (xs: ReadonlyArray<number>): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

/** A number with thousands separators and exactly `digits` decimals. */
export const fmt = (x: number, digits = 0): string =>
  x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
