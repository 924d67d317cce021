/**
 * Lossless JSON (SPEC §1.2, rules A1–A16), the public module: the acceptance walk that checks,
 * copies and deep-freezes a caller value (`JsonWalk`), its check-and-freeze-in-place variant for
 * freshly parsed values (`JsonParse`), an encoder whose output equals `JSON.stringify`
 * (`JsonEncode`), and here structural equality, deep freeze and UTF-8 length. Everything is pure
 * and iterative (explicit heap stacks, no recursion), so 100,000 levels of nesting never overflow
 * the call stack (A14).
 *
 * @since 0.1.0
 */
import { Buffer } from "node:buffer"
import type { Container, Json } from "./JsonWalk.js"

export {
  /**
   * The iterative encoder (no recursion, any depth).
   *
   * @since 0.1.0
   * @category utils
   */
  encodeIterative,
  /**
   * Iterative encoder: output identical to JSON.stringify for every value it can handle (no whitespace, same escapes incl. lone surrogates as lower-case \udxxx, Number toString formatting, own-key order), and never a RangeError at 100,000+ nesting levels.
   *
   * @since 0.1.0
   * @category utils
   */
  encodeJson
} from "./JsonEncode.js"
export {
  /**
   * Check-and-freeze in place for values fresh from JSON.parse (only -0 and ±Infinity can be violations there); same verdict as walkJson.
   *
   * @since 0.1.0
   * @category utils
   */
  checkParsed,
  /**
   * JSON.parse then checkParsed; a syntax error is returned as { _tag: "Unparsable", detail }
   *
   * @since 0.1.0
   * @category utils
   */
  parseJson,
  /**
   * The verdict of `parseJson`.
   *
   * @since 0.1.0
   * @category models
   */
  type Unparsable
} from "./JsonParse.js"
export {
  /**
   * A lossless JSON value.
   *
   * @since 0.1.0
   * @category models
   */
  type Json,
  /**
   * The first violation met, with the RFC 6901 pointer of the offending value.
   *
   * @since 0.1.0
   * @category models
   */
  type WalkFailure,
  /**
   * An accepted value: a detached, deep-frozen copy.
   *
   * @since 0.1.0
   * @category models
   */
  type WalkOk,
  /**
   * The verdict of a walk.
   *
   * @since 0.1.0
   * @category models
   */
  type WalkResult,
  /**
   * The A-rule that rejected a value (A12: reading it threw: a getter or a Proxy trap).
   *
   * @since 0.1.0
   * @category models
   */
  type WalkRule,
  /**
   * The single acceptance pass: iterative, copies while it checks, deep-freezes the copy. basePath is a JSON pointer prefix like "/data" (default "").
   *
   * @since 0.1.0
   * @category utils
   */
  walkJson
} from "./JsonWalk.js"

const freeze = Object.freeze
const isFrozen = Object.isFrozen
const isArray = Array.isArray
const objectKeys = Object.keys
const hasOwn = Object.hasOwn

/**
 * Structural equality: objects key-order-insensitive, arrays positional (SPEC G5). Iterative.
 *
 * @since 0.1.0
 * @category utils
 */
export const jsonEquals = (a: Json, b: Json): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  const left: Array<unknown> = [a]
  const right: Array<unknown> = [b]
  while (left.length > 0) {
    const x = left.pop()
    const y = right.pop()
    if (x === y) continue
    if (typeof x !== "object" || typeof y !== "object" || x === null || y === null) return false
    const xArr = isArray(x)
    if (xArr !== isArray(y)) return false
    if (xArr) {
      const xs = x as ReadonlyArray<unknown>
      const ys = y as ReadonlyArray<unknown>
      const n = xs.length
      if (n !== ys.length) return false
      for (let i = 0; i < n; i++) {
        const xv = xs[i]
        const yv = ys[i]
        if (xv === yv) continue
        if (typeof xv !== "object" || typeof yv !== "object" || xv === null || yv === null) return false
        left.push(xv)
        right.push(yv)
      }
    } else {
      const xo = x as Container
      const yo = y as Container
      const xKeys = objectKeys(xo)
      if (xKeys.length !== objectKeys(yo).length) return false
      for (const k of xKeys) {
        if (!hasOwn(yo, k)) return false
        const xv = xo[k]
        const yv = yo[k]
        if (xv === yv) continue
        if (typeof xv !== "object" || typeof yv !== "object" || xv === null || yv === null) return false
        left.push(xv)
        right.push(yv)
      }
    }
  }
  return true
}

/**
 * Iterative deep freeze of a Json value (no-op on frozen values). A frozen node is taken as
 * already deep-frozen (everything this module freezes is frozen bottom-up), so frozen subtrees
 * are not re-traversed; nodes are frozen before their children are visited, so cycles end.
 *
 * @since 0.1.0
 * @category utils
 */
export const deepFreeze = <A>(value: A): A => {
  if (typeof value !== "object" || value === null || isFrozen(value)) return value
  const stack: Array<Container> = [value as Container]
  while (stack.length > 0) {
    const node = stack.pop()!
    freeze(node)
    if (isArray(node)) {
      const arr = node as unknown as ReadonlyArray<unknown>
      for (let i = 0; i < arr.length; i++) {
        const v = arr[i]
        if (typeof v === "object" && v !== null && !isFrozen(v)) stack.push(v as Container)
      }
    } else {
      for (const k of objectKeys(node)) {
        const v = node[k]
        if (typeof v === "object" && v !== null && !isFrozen(v)) stack.push(v as Container)
      }
    }
  }
  return value
}

/**
 * UTF-8 byte length of a string without allocating a Buffer if you can (Buffer.byteLength is fine).
 *
 * @since 0.1.0
 * @category utils
 */
export const utf8Length = (s: string): number => Buffer.byteLength(s, "utf8")
