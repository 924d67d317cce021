/**
 * Values fresh from `JSON.parse` (SPEC §1.2): the check-and-freeze-in-place variant of the
 * acceptance walk (only -0 and ±Infinity can be violations there; same verdict as `walkJson`) and
 * `parseJson`. Recursive only down to a fixed depth, iterative below it (A14).
 */
import { type Container, fail, type Json, type Keys, ok, pointer, scalarDetail, scalarRule, type WalkResult } from "./JsonWalk.js"

/** The verdict of `parseJson`. */
export interface Unparsable {
  readonly _tag: "Unparsable"
  readonly detail: string
}

const freeze = Object.freeze
const isArray = Array.isArray
const objectKeys = Object.keys
const jsonParse = JSON.parse

/** Check-and-freeze in place for values fresh from JSON.parse (only -0 and ±Infinity can be violations there); same verdict as walkJson. */
export const checkParsed = (value: unknown, basePath: string = ""): WalkResult =>
  typeof value === "object" && value !== null && parsedLossless(value, 0)
    ? ok(value as Json)
    : checkParsedIterative(value, basePath)

/**
 * `checkParsed(value)._tag === "Ok"` without building a verdict (the hot path of a cold read):
 * freezes in place the same way; on false, `checkParsed` of a fresh parse names the violation.
 */
export const isLosslessParsed = (value: unknown): boolean =>
  typeof value === "object" && value !== null ? parsedLossless(value, 0) : losslessScalar(value)

/** Below this depth `parsedLossless` recurses; deeper subtrees go to the iterative check. */
const RECURSION_LIMIT = 64

/** True for a scalar `checkParsed` accepts (a finite number other than -0, a string, a boolean, null). */
const losslessScalar = (x: unknown): boolean => {
  switch (typeof x) {
    case "number":
      return x === x && x !== Infinity && x !== -Infinity && !(x === 0 && 1 / x < 0)
    case "string":
    case "boolean":
      return true
    default:
      return x === null
  }
}

/**
 * The fast path of `checkParsed` (true = Ok), freezing containers in place like it but without
 * its four heap stacks per value (most parsed values are shallow): recursive up to
 * RECURSION_LIMIT levels, iterative below. On false, the iterative check reports the failure.
 */
const parsedLossless = (v: object, depth: number): boolean => {
  if (isArray(v)) {
    const arr = v as ReadonlyArray<unknown>
    for (let i = 0; i < arr.length; i++) {
      const x = arr[i]
      if (typeof x === "object" && x !== null) {
        if (depth >= RECURSION_LIMIT ? checkParsedIterative(x, "")._tag !== "Ok" : !parsedLossless(x, depth + 1)) {
          return false
        }
      } else if (!losslessScalar(x)) return false
    }
  } else {
    const o = v as Record<string, unknown>
    const keys = objectKeys(o)
    for (let i = 0; i < keys.length; i++) {
      const x = o[keys[i]]
      if (typeof x === "object" && x !== null) {
        if (depth >= RECURSION_LIMIT ? checkParsedIterative(x, "")._tag !== "Ok" : !parsedLossless(x, depth + 1)) {
          return false
        }
      } else if (!losslessScalar(x)) return false
    }
  }
  freeze(v)
  return true
}

const checkParsedIterative = (value: unknown, basePath: string): WalkResult => {
  if (typeof value !== "object" || value === null) {
    const rule = scalarRule(value)
    return rule === undefined ? ok(value as Json) : fail(rule, basePath, scalarDetail(rule, value))
  }
  // Precondition: `value` came from JSON.parse (plain data properties, no cycles), so only
  // numbers need checking; containers are frozen in place as their frames pop.
  const nodeStack: Array<Container> = [value as Container]
  const keysStack: Array<Keys | null> = [isArray(value) ? null : objectKeys(value)]
  const idxStack: Array<number> = [0]
  const rootKeys = keysStack[0]
  const lenStack: Array<number> = [rootKeys === null ? (value as ReadonlyArray<unknown>).length : rootKeys.length]
  let sp = 1
  while (sp > 0) {
    const f = sp - 1
    const i = idxStack[f]
    if (i >= lenStack[f]) {
      freeze(nodeStack[f])
      sp = f
      continue
    }
    idxStack[f] = i + 1
    const keys = keysStack[f]
    const v = nodeStack[f][keys === null ? i : keys[i]]
    if (typeof v === "number") {
      if (v !== v || v === Infinity || v === -Infinity) {
        return fail("A4", pointer(basePath, keysStack, idxStack, sp), String(v))
      }
      if (v === 0 && 1 / v < 0) return fail("A5", pointer(basePath, keysStack, idxStack, sp), "-0")
    } else if (typeof v === "object") {
      if (v === null) continue
      const childKeys = isArray(v) ? null : objectKeys(v)
      nodeStack[sp] = v as Container
      keysStack[sp] = childKeys
      idxStack[sp] = 0
      lenStack[sp] = childKeys === null ? (v as ReadonlyArray<unknown>).length : childKeys.length
      sp++
    } else if (typeof v !== "string" && typeof v !== "boolean") {
      // Not producible by JSON.parse; reported like walkJson would for robustness.
      const rule = scalarRule(v)!
      return fail(rule, pointer(basePath, keysStack, idxStack, sp), scalarDetail(rule, v))
    }
  }
  return ok(value as Json)
}

/** JSON.parse then checkParsed; a syntax error is returned as { _tag: "Unparsable", detail } */
export const parseJson = (text: string): WalkResult | Unparsable => {
  let parsed: unknown
  try {
    parsed = jsonParse(text)
  } catch (e) {
    return { _tag: "Unparsable", detail: e instanceof Error ? e.message : String(e) }
  }
  return checkParsed(parsed)
}
