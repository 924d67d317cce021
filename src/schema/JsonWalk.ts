/**
 * The lossless-JSON acceptance walk (SPEC §1.2, rules A1–A16): one iterative pass over a caller
 * value that checks it, copies it onto plain prototypes and deep-freezes the copy, reporting the
 * first violation with its JSON pointer. Also the JSON value type and the walk's verdicts, and the
 * scalar rules and pointers the check of parsed values shares. No recursion: 100,000 levels of
 * nesting never overflow the call stack (A14).
 */

/** A lossless JSON value. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** The A-rule that rejected a value (A12: reading it threw: a getter or a Proxy trap). */
export type WalkRule = "A1" | "A2" | "A3" | "A4" | "A5" | "A6" | "A7" | "A8" | "A9" | "A12"

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

// Built-ins captured once, so later monkey-patching of globals cannot change the walk.
const ObjectProto: object = Object.prototype
const ArrayProto: object = Array.prototype
const getProto = Object.getPrototypeOf
const getDesc = Object.getOwnPropertyDescriptor
const ownNames = Object.getOwnPropertyNames
const ownSymbols = Object.getOwnPropertySymbols
const defineProp = Object.defineProperty
const freeze = Object.freeze
const isArray = Array.isArray
const apply = Reflect.apply
const hasOwn = Object.hasOwn

/** Below this depth the ancestor check scans the stack; deeper frames also live in a Set. */
const LINEAR_ANCESTORS = 32

// A13: one reused descriptor, so every key (including "__proto__") is defined as a writable,
// enumerable, configurable data property. A plain literal: a null-prototype descriptor is a
// dictionary-mode object and makes defineProperty about 40% slower.
const DATA_DESC: PropertyDescriptor = { value: undefined, writable: true, enumerable: true, configurable: true }

/** A container of the walk: an object or an array, indexed by its own keys. */
export type Container = Record<PropertyKey, unknown>
/** Own keys of a container (`null` stands for an array's indices in the stacks). */
export type Keys = ReadonlyArray<PropertyKey>

/** Reflect.ownKeys order (strings, then symbols), but about 3x faster on V8 for ordinary objects. */
const ownKeys = (o: object): Keys => {
  const names = ownNames(o)
  const symbols = ownSymbols(o)
  return symbols.length === 0 ? names : [...names, ...symbols]
}

/** An accepted value. */
export const ok = (value: Json): WalkOk => ({ _tag: "Ok", value })

/** A violation of `rule` at `path`. */
export const fail = (rule: WalkRule, path: string, detail: string): WalkFailure => ({ _tag: "Fail", rule, path, detail })

const escapeToken = (token: string): string =>
  token.indexOf("~") === -1 && token.indexOf("/") === -1 ? token : token.replace(/~/g, "~0").replace(/\//g, "~1")

/**
 * The pointer of frame `count - 1`'s current child: one token per frame, the index just read for
 * arrays (`keys === null`) or the key just read for objects. Built only when a walk fails.
 */
export const pointer = (
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
export const scalarRule = (value: unknown): WalkRule | undefined => {
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

/** The detail text of a scalar violation. */
export const scalarDetail = (rule: WalkRule, value: unknown): string => {
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

  // A12: a getter or a Proxy trap (getPrototypeOf, ownKeys, getOwnPropertyDescriptor, ...) that
  // throws rejects the value at the pointer being read; the exception is not rethrown
  try {
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
          // once (if it throws, the catch below rejects the value).
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
  } catch (e) {
    return fail("A12", pointer(basePath, keysStack, idxStack, sp), `reading the value threw: ${describeThrown(e)}`)
  }
}

/** A short text for a thrown value, read without running any of its hooks (it may be hostile too). */
const describeThrown = (e: unknown): string => {
  try {
    if (typeof e === "object" && e !== null) {
      const m = getDesc(e, "message")
      if (m !== undefined && typeof m.value === "string") return m.value
      return "an object"
    }
    return typeof e === "string" ? e : typeof e
  } catch {
    return "a hostile value"
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
