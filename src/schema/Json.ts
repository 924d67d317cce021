/**
 * Lossless JSON (SPEC §1.2, rules A1–A16): the single acceptance walk that checks, copies and
 * deep-freezes a caller value, its check-and-freeze-in-place variant for freshly parsed values,
 * an encoder whose output equals `JSON.stringify`, structural equality, deep freeze and UTF-8
 * length. Everything here is pure and iterative (explicit heap stacks, no recursion), so
 * 100,000 levels of nesting never overflow the call stack (A14).
 */
import { Buffer } from "node:buffer"

/** A lossless JSON value. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** The A-rule that rejected a value. */
export type WalkRule = "A1" | "A2" | "A3" | "A4" | "A5" | "A6" | "A7" | "A8" | "A9"

/** The first violation met, with the RFC 6901 pointer of the offending value. */
export interface WalkFailure {
  readonly _tag: "Fail"
  readonly rule: WalkRule
  readonly path: string
  readonly detail: string
}

/** An accepted value: a detached, deep-frozen copy. */
export interface WalkOk {
  readonly _tag: "Ok"
  readonly value: Json
}

/** The verdict of a walk. */
export type WalkResult = WalkOk | WalkFailure

/** The verdict of `parseJson`. */
export interface Unparsable {
  readonly _tag: "Unparsable"
  readonly detail: string
}

// Built-ins captured once, so later monkey-patching of globals cannot change the walk.
const ObjectProto: object = Object.prototype
const ArrayProto: object = Array.prototype
const getProto = Object.getPrototypeOf
const getDesc = Object.getOwnPropertyDescriptor
const ownNames = Object.getOwnPropertyNames
const ownSymbols = Object.getOwnPropertySymbols
const objectKeys = Object.keys
const defineProp = Object.defineProperty
const freeze = Object.freeze
const isFrozen = Object.isFrozen
const isArray = Array.isArray
const apply = Reflect.apply
const hasOwn = Object.hasOwn
const jsonStringify = JSON.stringify
const jsonParse = JSON.parse

/** Below this depth the ancestor check scans the stack; deeper frames also live in a Set. */
const LINEAR_ANCESTORS = 32

// A13: one reused descriptor, so every key (including "__proto__") is defined as a writable,
// enumerable, configurable data property. A plain literal: a null-prototype descriptor is a
// dictionary-mode object and makes defineProperty about 40% slower.
const DATA_DESC: PropertyDescriptor = { value: undefined, writable: true, enumerable: true, configurable: true }

type Container = Record<PropertyKey, unknown>
type Keys = ReadonlyArray<PropertyKey>

/** Reflect.ownKeys order (strings, then symbols), but about 3x faster on V8 for ordinary objects. */
const ownKeys = (o: object): Keys => {
  const names = ownNames(o)
  const symbols = ownSymbols(o)
  return symbols.length === 0 ? names : [...names, ...symbols]
}

const ok = (value: Json): WalkOk => ({ _tag: "Ok", value })

const fail = (rule: WalkRule, path: string, detail: string): WalkFailure => ({ _tag: "Fail", rule, path, detail })

const escapeToken = (token: string): string =>
  token.indexOf("~") === -1 && token.indexOf("/") === -1 ? token : token.replace(/~/g, "~0").replace(/\//g, "~1")

/**
 * The pointer of frame `count - 1`'s current child: one token per frame, the index just read for
 * arrays (`keys === null`) or the key just read for objects. Built only when a walk fails.
 */
const pointer = (
  basePath: string,
  keysStack: ReadonlyArray<Keys | null>,
  idxStack: ReadonlyArray<number>,
  count: number
): string => {
  let out = basePath
  for (let j = 0; j < count; j++) {
    const keys = keysStack[j]
    const i = idxStack[j] - 1
    out += "/" + (keys === null ? String(i) : escapeToken(String(keys[i])))
  }
  return out
}

/** The constructor name of a prototype, read through descriptors so no hook runs. */
const protoName = (proto: object | null): string => {
  if (proto === null) return "null prototype"
  const c = getDesc(proto, "constructor")
  if (c !== undefined && typeof c.value === "function") {
    const n = getDesc(c.value, "name")
    if (n !== undefined && typeof n.value === "string" && n.value !== "") return n.value
  }
  return "anonymous"
}

/** A readable reason for A7 on an array whose own keys are not exactly its indices and `length`. */
const sparseDetail = (arr: ReadonlyArray<unknown>, keys: Keys): string => {
  const len = arr.length
  for (let i = 0; i < len; i++) {
    if (!hasOwn(arr, i)) return `sparse array: hole at index ${i}`
  }
  for (const k of keys) {
    if (typeof k === "symbol") return `array has a symbol-keyed property ${String(k)}`
    if (k !== "length" && !(String(Number(k)) === k && Number(k) < len)) return `array has an extra property "${k}"`
  }
  return "array own keys are not exactly its indices and length"
}

/** A1–A5 for a non-container value; `undefined` when it is accepted. */
const scalarRule = (value: unknown): WalkRule | undefined => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return undefined
    case "number":
      if (value !== value || value === Infinity || value === -Infinity) return "A4"
      return value === 0 && 1 / value < 0 ? "A5" : undefined
    case "undefined":
      return "A3"
    case "bigint":
      return "A1"
    case "object":
      return value === null ? undefined : "A8"
    default:
      return "A2"
  }
}

const scalarDetail = (rule: WalkRule, value: unknown): string => {
  switch (rule) {
    case "A1":
      return "BigInt"
    case "A2":
      return typeof value
    case "A3":
      return "undefined"
    case "A4":
      return String(value)
    case "A5":
      return "-0"
    default:
      return "not lossless JSON"
  }
}

/** The single acceptance pass: iterative, copies while it checks, deep-freezes the copy. basePath is a JSON pointer prefix like "/data" (default ""). */
export const walkJson = (value: unknown, basePath: string = ""): WalkResult => {
  if (typeof value !== "object" || value === null) {
    const rule = scalarRule(value)
    return rule === undefined ? ok(value as Json) : fail(rule, basePath, scalarDetail(rule, value))
  }
  const result = walkContainer(value, basePath)
  DATA_DESC.value = undefined
  return result
}

/** Sentinel: the classified value was a container, already attached to its parent. */
const NO_VALUE: unknown = Symbol("NO_VALUE")

/**
 * The walk proper. Frames are kept in parallel stacks: the source container, its copy, its own
 * keys (`null` for an array, whose keys are its indices), the next key position and the count.
 * A child container's copy is attached to its parent's copy when the child is entered, and
 * frozen when its frame is popped, so the finished copy is deep-frozen bottom-up.
 */
const walkContainer = (root: object, basePath: string): WalkResult => {
  const srcStack: Array<object> = []
  const copyStack: Array<Container> = []
  const keysStack: Array<Keys | null> = []
  const idxStack: Array<number> = []
  const lenStack: Array<number> = []
  let ancestors: Set<object> | undefined
  let sp = 0
  let rootCopy: Container | undefined
  let val: unknown = root

  for (;;) {
    // Classify `val`, the current child of frame sp - 1 (or the root when sp === 0).
    let out: unknown = val
    switch (typeof val) {
      case "string":
      case "boolean":
        break
      case "number":
        if (val !== val || val === Infinity || val === -Infinity) {
          return fail("A4", pointer(basePath, keysStack, idxStack, sp), String(val))
        }
        if (val === 0 && 1 / val < 0) return fail("A5", pointer(basePath, keysStack, idxStack, sp), "-0")
        break
      case "object": {
        if (val === null) break
        // A6: only ancestors on the current path count; a shared acyclic reference is copied again (A16).
        const lim = sp < LINEAR_ANCESTORS ? sp : LINEAR_ANCESTORS
        let cyclic = false
        for (let j = 0; j < lim; j++) {
          if (srcStack[j] === val) {
            cyclic = true
            break
          }
        }
        if (cyclic || (ancestors !== undefined && ancestors.has(val))) {
          return fail("A6", pointer(basePath, keysStack, idxStack, sp), "cyclic reference to an ancestor")
        }
        const proto = getProto(val)
        let copy: Container
        let keys: Keys | null
        let len: number
        if (isArray(val)) {
          if (proto !== ArrayProto) {
            return fail("A8", pointer(basePath, keysStack, idxStack, sp), `array with ${protoName(proto)}`)
          }
          // A7: own keys must be exactly the indices 0..length-1 followed by "length" (ordinary
          // arrays list indices ascending, then "length", then other strings, then symbols).
          len = (val as ReadonlyArray<unknown>).length
          const names = ownNames(val)
          if (names.length !== len + 1 || names[len] !== "length" || ownSymbols(val).length !== 0) {
            const detail = sparseDetail(val as ReadonlyArray<unknown>, ownKeys(val))
            return fail("A7", pointer(basePath, keysStack, idxStack, sp), detail)
          }
          copy = [] as unknown as Container
          keys = null
        } else {
          if (proto !== ObjectProto && proto !== null) {
            return fail(
              "A8",
              pointer(basePath, keysStack, idxStack, sp),
              proto === ArrayProto ? "object with Array.prototype" : `instance of ${protoName(proto)}`
            )
          }
          keys = ownKeys(val)
          len = keys.length
          copy = {} // A10: always Object.prototype, also for null-prototype input
        }
        if (sp >= LINEAR_ANCESTORS) (ancestors ??= new Set()).add(val)
        srcStack[sp] = val
        copyStack[sp] = copy
        keysStack[sp] = keys
        idxStack[sp] = 0
        lenStack[sp] = len
        if (sp === 0) {
          rootCopy = copy
          sp = 1
        } else {
          attach(copyStack[sp - 1], keysStack[sp - 1], idxStack[sp - 1] - 1, copy)
          sp++
        }
        out = NO_VALUE
        break
      }
      case "undefined":
        return fail("A3", pointer(basePath, keysStack, idxStack, sp), "undefined")
      case "bigint":
        return fail("A1", pointer(basePath, keysStack, idxStack, sp), "BigInt")
      default:
        return fail("A2", pointer(basePath, keysStack, idxStack, sp), typeof val)
    }
    if (out !== NO_VALUE) attach(copyStack[sp - 1], keysStack[sp - 1], idxStack[sp - 1] - 1, out)

    // Advance to the next child, popping (and freezing) finished frames.
    for (;;) {
      if (sp === 0) return ok(rootCopy as unknown as Json)
      const f = sp - 1
      const i = idxStack[f]
      if (i < lenStack[f]) {
        idxStack[f] = i + 1
        const src = srcStack[f]
        const keys = keysStack[f]
        // A11/A12: each property is read once through its own descriptor; a getter is called
        // once and its exception propagates untouched.
        if (keys === null) {
          const d = getDesc(src, i)
          // A7: a hole can only appear here if an earlier getter deleted the element.
          if (d === undefined) {
            return fail("A7", pointer(basePath, keysStack, idxStack, f), `sparse array: hole at index ${i}`)
          }
          val = d.get !== undefined ? apply(d.get, src, []) : d.value
        } else {
          const k = keys[i]
          if (typeof k === "symbol") {
            return fail("A9", pointer(basePath, keysStack, idxStack, f), `symbol-keyed property ${String(k)}`)
          }
          const d = getDesc(src, k)
          if (d === undefined) continue // deleted by an earlier getter: nothing left to read
          if (d.enumerable !== true) {
            return fail("A9", pointer(basePath, keysStack, idxStack, sp), `non-enumerable property "${k}"`)
          }
          val = d.get !== undefined ? apply(d.get, src, []) : d.value
        }
        break
      }
      freeze(copyStack[f])
      if (f >= LINEAR_ANCESTORS) ancestors!.delete(srcStack[f])
      sp = f
    }
  }
}

/** Store a child into a copy: index assignment on a fresh array, a defined data key on an object (A13). */
const attach = (copy: Container, keys: Keys | null, i: number, value: unknown): void => {
  if (keys === null) {
    ;(copy as unknown as Array<unknown>)[i] = value
  } else {
    DATA_DESC.value = value
    defineProp(copy, keys[i], DATA_DESC)
  }
}

/** Check-and-freeze in place for values fresh from JSON.parse (only -0 and ±Infinity can be violations there); same verdict as walkJson. */
export const checkParsed = (value: unknown, basePath: string = ""): WalkResult =>
  typeof value === "object" && value !== null && parsedLossless(value, 0)
    ? ok(value as Json)
    : checkParsedIterative(value, basePath)

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

/** Structural equality: objects key-order-insensitive, arrays positional (SPEC G5). Iterative. */
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

/** UTF-8 byte length of a string without allocating a Buffer if you can (Buffer.byteLength is fine). */
export const utf8Length = (s: string): number => Buffer.byteLength(s, "utf8")
