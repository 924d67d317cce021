/**
 * The JSON encoder (SPEC §1.2): output identical to `JSON.stringify` for every lossless value,
 * through `JSON.stringify` itself when it can and an iterative encoder when nesting is too deep for
 * it (A14).
 */
import type { Container, Json } from "./JsonWalk.js"

const isArray = Array.isArray
const objectKeys = Object.keys
const jsonStringify = JSON.stringify

/** Characters JSON.stringify escapes (surrogates included, so lone ones get `\udxxx`). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/

/** JSON.stringify of a string; about twice as fast when nothing needs escaping. */
const quote = (s: string): string => (NEEDS_ESCAPE.test(s) ? jsonStringify(s) : "\"" + s + "\"")

const encodeScalar = (value: unknown): string => {
  switch (typeof value) {
    case "string":
      return quote(value)
    case "number":
      return value === Infinity || value === -Infinity || value !== value ? "null" : String(value)
    case "boolean":
      return value ? "true" : "false"
    default:
      return "null"
  }
}

/** Iterative encoder: output identical to JSON.stringify for every value it can handle (no whitespace, same escapes incl. lone surrogates as lower-case \udxxx, Number toString formatting, own-key order), and never a RangeError at 100,000+ nesting levels. */
export const encodeJson = (value: Json): string => {
  // Fast path: for walked values JSON.stringify gives the same text as a flat string; only deep
  // nesting makes it throw a RangeError, and then the iterative encoder below takes over.
  try {
    return JSON.stringify(value)
  } catch {
    return encodeIterative(value)
  }
}

/** The iterative encoder (no recursion, any depth). */
export const encodeIterative = (value: Json): string => {
  if (typeof value !== "object" || value === null) return encodeScalar(value)
  const nodeStack: Array<Container> = []
  const keysStack: Array<ReadonlyArray<string> | null> = []
  const idxStack: Array<number> = []
  let sp = 0
  let out: string
  if (isArray(value)) {
    out = "["
    keysStack[0] = null
  } else {
    out = "{"
    keysStack[0] = objectKeys(value)
  }
  nodeStack[0] = value as Container
  idxStack[0] = 0
  sp = 1
  while (sp > 0) {
    const f = sp - 1
    const node = nodeStack[f]
    const keys = keysStack[f]
    const i = idxStack[f]
    let v: unknown
    if (keys === null) {
      if (i >= (node as unknown as ReadonlyArray<unknown>).length) {
        out += "]"
        sp = f
        continue
      }
      if (i > 0) out += ","
      v = node[i]
    } else {
      if (i >= keys.length) {
        out += "}"
        sp = f
        continue
      }
      const k = keys[i]
      out += (i > 0 ? "," : "") + quote(k) + ":"
      v = node[k]
    }
    idxStack[f] = i + 1
    if (typeof v === "string") {
      out += quote(v)
    } else if (typeof v !== "object" || v === null) {
      out += encodeScalar(v)
    } else if (isArray(v)) {
      out += "["
      nodeStack[sp] = v as unknown as Container
      keysStack[sp] = null
      idxStack[sp] = 0
      sp++
    } else {
      out += "{"
      nodeStack[sp] = v as Container
      keysStack[sp] = objectKeys(v)
      idxStack[sp] = 0
      sp++
    }
  }
  return out
}
