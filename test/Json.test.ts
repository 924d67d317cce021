import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import {
  checkParsed,
  deepFreeze,
  encodeIterative,
  encodeJson,
  type Json,
  jsonEquals,
  parseJson,
  utf8Length,
  walkJson,
  type WalkResult,
  type WalkRule
} from "../src/schema/Json.js"

// ---------------------------------------------------------------------------------------------
// Helpers

const expectFail = (result: WalkResult | { readonly _tag: "Unparsable" }, rule: WalkRule, path: string): void => {
  assert.strictEqual(result._tag, "Fail", `expected ${rule} at "${path.slice(0, 80)}", got ${result._tag}`)
  if (result._tag === "Fail") {
    assert.strictEqual(result.rule, rule)
    assert.strictEqual(result.path, path)
    assert.isString(result.detail)
  }
}

const expectOk = (result: WalkResult | { readonly _tag: "Unparsable" }): Json => {
  if (result._tag !== "Ok") assert.fail(`expected Ok, got ${JSON.stringify(result)}`)
  return result.value
}

const verdict = (result: WalkResult): string =>
  result._tag === "Ok" ? "Ok" : `${result.rule} ${result.path}`

/** Every container reachable from `value` (iteratively, so deep values are fine). */
const containers = (value: unknown): Array<object> => {
  const out: Array<object> = []
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v !== "object" || v === null) continue
    out.push(v)
    for (const k of Object.keys(v)) stack.push((v as Record<string, unknown>)[k])
  }
  return out
}

const allFrozen = (value: unknown): boolean => containers(value).every((c) => Object.isFrozen(c))

const nestArrays = (depth: number, leaf: unknown): unknown => {
  let v: unknown = leaf
  for (let i = 0; i < depth; i++) v = [v]
  return v
}

const nestObjects = (depth: number, leaf: unknown, key = "k"): unknown => {
  let v: unknown = leaf
  for (let i = 0; i < depth; i++) v = { [key]: v }
  return v
}

const defineData = (o: object, k: PropertyKey, value: unknown): void => {
  Object.defineProperty(o, k, { value, writable: true, enumerable: true, configurable: true })
}

/** Builds an object with define semantics, so "__proto__" becomes an own data key. */
const objectOf = (entries: ReadonlyArray<readonly [string, unknown]>, nullProto = false): Record<string, unknown> => {
  const o: Record<string, unknown> = nullProto ? Object.create(null) : {}
  for (const [k, v] of entries) defineData(o, k, v)
  return o
}

/** A test oracle: JSON text with keys sorted at every level (recursive; test values are shallow). */
const canonical = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`
  if (typeof v === "object" && v !== null) {
    const keys = Object.keys(v).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`
  }
  return JSON.stringify(v)
}

/** The same value with every object's keys in reverse order. */
const reverseKeys = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(reverseKeys)
  if (typeof v === "object" && v !== null) {
    return objectOf(Object.keys(v).reverse().map((k) => [k, reverseKeys((v as Record<string, unknown>)[k])] as const))
  }
  return v
}

const objectPrototypeSnapshot = (): string =>
  Reflect.ownKeys(Object.prototype).map(String).sort().join(",")

// ---------------------------------------------------------------------------------------------
// Arbitraries

const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c))
const specialChar = fc.constantFrom(
  ...["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d\ude00", "\u0000", "\u001f", "\u007f", "\u2028"],
  ...["~", "/", "\"", "\\", "\n", "é"]
)
const jsonString = fc.string({ unit: fc.oneof(fc.char(), specialChar, codeUnit), maxLength: 8 })
const jsonNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Object.is(n, -0)),
  fc.constantFrom(0, 1e21, 1e-7, 123e-20, 5e-324, Number.MAX_VALUE, -Number.MAX_SAFE_INTEGER, 0.1 + 0.2)
)
const jsonKey = fc.oneof(
  jsonString,
  fc.constantFrom("__proto__", "constructor", "toString", "toJSON", "valueOf", "0", "1", "10", "a/b", "~1", "")
)

const jsonArb = (nullProto: boolean): fc.Arbitrary<Json> =>
  fc.letrec<{ json: Json }>((tie) => ({
    json: fc.oneof(
      { depthSize: "small", withCrossShrink: true },
      fc.constant(null),
      fc.boolean(),
      jsonNumber,
      jsonString,
      fc.array(tie("json"), { maxLength: 5 }),
      fc
        .uniqueArray(fc.tuple(jsonKey, tie("json")), { selector: (e) => e[0], maxLength: 5 })
        .chain((entries) => fc.boolean().map((np) => objectOf(entries, nullProto && np) as Json))
    )
  })).json

const json = jsonArb(false)
const jsonWithNullProtos = jsonArb(true)

// ---------------------------------------------------------------------------------------------

describe("Json walk: rejections (A1–A9)", () => {
  it("A1 rejects BigInt as the whole value, a property and an element", () => {
    expectFail(walkJson(1n), "A1", "")
    expectFail(walkJson({ a: { b: 2n } }), "A1", "/a/b")
    expectFail(walkJson([0, [1, 3n]], "/data"), "A1", "/data/1/1")
  })

  it("A2 rejects functions and symbols (values are never called)", () => {
    let called = 0
    const fn = () => {
      called++
      return 1
    }
    expectFail(walkJson(fn), "A2", "")
    expectFail(walkJson({ f: fn }), "A2", "/f")
    expectFail(walkJson({ toJSON: fn }), "A2", "/toJSON")
    expectFail(walkJson([Symbol("s")]), "A2", "/0")
    expectFail(walkJson({ a: class {} }), "A2", "/a")
    assert.strictEqual(called, 0)
  })

  it("A3 rejects undefined as the whole value, a property value and an array element", () => {
    expectFail(walkJson(undefined), "A3", "")
    expectFail(walkJson({ a: undefined }), "A3", "/a")
    expectFail(walkJson([1, undefined]), "A3", "/1")
    expectFail(walkJson({ a: [{ b: undefined }] }, "/data"), "A3", "/data/a/0/b")
    // a setter-only accessor reads as undefined
    const o = {}
    Object.defineProperty(o, "w", { set: () => {}, enumerable: true })
    expectFail(walkJson({ o }), "A3", "/o/w")
  })

  it("A4 rejects NaN, Infinity and -Infinity", () => {
    expectFail(walkJson(NaN), "A4", "")
    expectFail(walkJson({ x: Infinity }), "A4", "/x")
    expectFail(walkJson([[-Infinity]]), "A4", "/0/0")
  })

  it("A5 rejects -0 but accepts 0", () => {
    expectFail(walkJson(-0), "A5", "")
    expectFail(walkJson({ a: [0, -0] }), "A5", "/a/1")
    assert.isTrue(Object.is(expectOk(walkJson(0)), 0))
  })

  it("A6 rejects a self reference and an ancestor reference through the ancestor check", () => {
    const self: Record<string, unknown> = {}
    self["me"] = self
    expectFail(walkJson(self), "A6", "/me")
    const root: Record<string, unknown> = { a: { b: [1] } }
    ;((root["a"] as Record<string, unknown>)["b"] as Array<unknown>).push(root["a"])
    expectFail(walkJson(root, "/data"), "A6", "/data/a/b/1")
    const arr: Array<unknown> = []
    arr.push([arr])
    expectFail(walkJson(arr), "A6", "/0/0")
  })

  it("A6 detects a cycle to an ancestor far above (deeper than the linear-scan window)", () => {
    const root: Record<string, unknown> = {}
    let cur = root
    for (let i = 0; i < 100; i++) {
      const next: Record<string, unknown> = {}
      cur["n"] = next
      cur = next
    }
    cur["back"] = root["n"]
    expectFail(walkJson(root), "A6", "/n".repeat(100) + "/back")
    cur["back"] = cur
    expectFail(walkJson(root), "A6", "/n".repeat(100) + "/back")
  })

  it("A6 rejects a cycle at depth 100,000 without overflowing the stack", () => {
    const root: Array<unknown> = []
    let cur = root
    for (let i = 0; i < 100_000; i++) {
      const next: Array<unknown> = []
      cur.push(next)
      cur = next
    }
    cur.push(root)
    const result = walkJson(root)
    assert.strictEqual(result._tag, "Fail")
    if (result._tag === "Fail") {
      assert.strictEqual(result.rule, "A6")
      assert.strictEqual(result.path, "/0".repeat(100_001))
    }
  })

  it("A7 rejects sparse arrays (inner and trailing holes)", () => {
    // eslint-disable-next-line no-sparse-arrays
    expectFail(walkJson({ a: [1, , 3] }), "A7", "/a")
    const trailing: Array<number> = [1]
    trailing.length = 3
    expectFail(walkJson([trailing]), "A7", "/0")
    expectFail(walkJson(new Array(2)), "A7", "")
  })

  it("A7 rejects arrays with extra named or symbol-keyed properties", () => {
    const named = Object.assign([1, 2], { extra: 1 })
    expectFail(walkJson({ x: named }), "A7", "/x")
    const sym = [1]
    defineData(sym, Symbol("s"), 1)
    expectFail(walkJson([sym]), "A7", "/0")
    const hidden = [1]
    Object.defineProperty(hidden, "hidden", { value: 1, enumerable: false })
    expectFail(walkJson(hidden), "A7", "")
  })

  it("A7 rejects a hole compensated by an extra named property (same own-key count)", () => {
    const a: Array<unknown> = [1, 2, 3]
    delete a[1]
    ;(a as unknown as Record<string, unknown>)["x"] = 2
    assert.strictEqual(Reflect.ownKeys(a).length, a.length + 1)
    expectFail(walkJson({ a }, "/data"), "A7", "/data/a")
  })

  it("A7 is checked on the array before its elements (pre-order)", () => {
    // eslint-disable-next-line no-sparse-arrays
    expectFail(walkJson([undefined, , 1]), "A7", "")
  })

  it("A7 rejects a hole made by a getter deleting a later element", () => {
    const a: Array<unknown> = [0, 1]
    Object.defineProperty(a, 0, {
      get() {
        delete a[1]
        return 0
      },
      enumerable: true,
      configurable: true
    })
    expectFail(walkJson({ a }), "A7", "/a")
  })

  it("A8 rejects Map, Set, Date, class instances, array subclasses and other prototypes", () => {
    class Point {
      x = 1
    }
    class MyArray extends Array<number> {}
    const cases: ReadonlyArray<unknown> = [
      new Map(),
      new Set(),
      new Date(0),
      new Point(),
      MyArray.from([1, 2]),
      Object.create(Array.prototype),
      Object.setPrototypeOf([1], null),
      Object.create({ inherited: 1 }),
      new Number(1),
      new String("s"),
      /re/,
      new Uint8Array(2),
      new Error("e"),
      Promise.resolve(1)
    ]
    for (const c of cases) {
      expectFail(walkJson(c), "A8", "")
      expectFail(walkJson({ a: [c] }, "/data"), "A8", "/data/a/0")
    }
  })

  it("A8 never calls toJSON or valueOf hooks", () => {
    let calls = 0
    class Hooked {
      toJSON() {
        calls++
        return 1
      }
      valueOf() {
        calls++
        return 1
      }
    }
    expectFail(walkJson({ h: new Hooked() }), "A8", "/h")
    expectFail(walkJson({ d: new Date(0) }), "A8", "/d")
    assert.strictEqual(calls, 0)
  })

  it("A9 rejects a non-enumerable own property (at its pointer, without calling its getter)", () => {
    let calls = 0
    const o: Record<string, unknown> = { a: 1 }
    Object.defineProperty(o, "hidden", { value: 1, enumerable: false })
    expectFail(walkJson({ o }), "A9", "/o/hidden")
    const g = {}
    Object.defineProperty(g, "lazy", {
      get: () => {
        calls++
        return 1
      },
      enumerable: false
    })
    expectFail(walkJson([g]), "A9", "/0/lazy")
    assert.strictEqual(calls, 0)
  })

  it("A9 rejects a symbol-keyed own property (pointer of its owner)", () => {
    const o: Record<PropertyKey, unknown> = { a: 1 }
    o[Symbol("s")] = 1
    expectFail(walkJson({ x: o }, "/data"), "A9", "/data/x")
  })
})

describe("Json walk: order and paths", () => {
  it("A3 reports the first violation in depth-first pre-order", () => {
    expectFail(walkJson({ a: { b: undefined }, c: 1n }), "A3", "/a/b")
    expectFail(walkJson({ a: [1n], b: undefined }), "A1", "/a/0")
    expectFail(walkJson([[[], [NaN]], -0]), "A4", "/0/1/0")
  })

  it("A1 follows Reflect.ownKeys order (integer-like keys first)", () => {
    expectFail(walkJson({ b: undefined, 1: 1n }), "A1", "/1")
  })

  it("A9 for a symbol key comes after violations under string keys", () => {
    const o: Record<PropertyKey, unknown> = { a: undefined }
    o[Symbol("s")] = 1
    expectFail(walkJson(o), "A3", "/a")
    const ok: Record<PropertyKey, unknown> = { a: 1 }
    ok[Symbol("s")] = 1
    expectFail(walkJson(ok), "A9", "")
  })

  it("A3 paths are RFC 6901 pointers: ~ as ~0, / as ~1, empty keys, basePath prefix", () => {
    expectFail(walkJson({ "a/b": { "m~n": { "": [undefined] } } }), "A3", "/a~1b/m~0n//0")
    expectFail(walkJson({ "~1": undefined }, "/data"), "A3", "/data/~01")
    expectFail(walkJson(undefined, "/data"), "A3", "/data")
  })

  it.prop("A3 path points at an undefined placed anywhere in a random value", [json, fc.nat()], ([value, seed]) => {
    // Replace one random container slot with undefined; the pointer must resolve to that slot.
    const slots: Array<{ readonly parent: Record<string, unknown>; readonly key: string; readonly path: string }> = []
    const stack: Array<{ readonly v: unknown; readonly path: string }> = [{ v: value, path: "" }]
    while (stack.length > 0) {
      const { path, v } = stack.pop()!
      if (typeof v !== "object" || v === null) continue
      for (const k of Object.keys(v)) {
        const childPath = `${path}/${k.replace(/~/g, "~0").replace(/\//g, "~1")}`
        slots.push({ parent: v as Record<string, unknown>, key: k, path: childPath })
        stack.push({ v: (v as Record<string, unknown>)[k], path: childPath })
      }
    }
    if (slots.length === 0) return
    const slot = slots[seed % slots.length]
    defineData(slot.parent, slot.key, undefined)
    // Another undefined may precede it in pre-order only if it is the same slot.
    expectFail(walkJson(value, "/data"), "A3", `/data${slot.path}`)
  })
})

describe("Json walk: accepted values (A10–A16)", () => {
  it("A10 accepts null-prototype objects and copies them with Object.prototype", () => {
    const inner = objectOf([["b", 1]], true)
    const outer = objectOf([["a", inner], ["list", [objectOf([], true)]]], true)
    const copy = expectOk(walkJson(outer))
    for (const c of containers(copy)) {
      assert.strictEqual(Object.getPrototypeOf(c), Array.isArray(c) ? Array.prototype : Object.prototype)
    }
    assert.strictEqual(encodeJson(copy), "{\"a\":{\"b\":1},\"list\":[{}]}")
  })

  it("A11 calls each getter exactly once and stores its first value", () => {
    let objReads = 0
    let arrReads = 0
    const o = {
      get n() {
        objReads++
        return objReads
      }
    }
    const a: Array<unknown> = [0]
    Object.defineProperty(a, 0, {
      get() {
        arrReads++
        return { read: arrReads }
      },
      enumerable: true,
      configurable: true
    })
    const copy = expectOk(walkJson({ o, a })) as { o: { n: number }; a: Array<{ read: number }> }
    assert.strictEqual(objReads, 1)
    assert.strictEqual(arrReads, 1)
    assert.strictEqual(copy.o.n, 1)
    assert.strictEqual(copy.a[0].read, 1)
    const d = Object.getOwnPropertyDescriptor(copy.o, "n")!
    assert.strictEqual(d.value, 1)
    assert.isUndefined(d.get)
  })

  it("A11 checks the value the getter returned", () => {
    let reads = 0
    const o = {
      get x() {
        reads++
        return reads === 1 ? -0 : 1
      }
    }
    expectFail(walkJson({ o }), "A5", "/o/x")
    assert.strictEqual(reads, 1)
  })

  it("A12 a getter that throws is a failure naming its pointer, never a throw (issue 18; SPEC A12 said defect)", () => {
    const boom = new Error("boom")
    const deep = {
      a: [
        1,
        {
          get bad(): unknown {
            throw boom
          }
        }
      ]
    }
    expectFail(walkJson(deep), "A12", "/a/1/bad")
    const thrownValue = { not: "an error" }
    const inArray = [Object.defineProperty({}, "x", { get: () => { throw thrownValue }, enumerable: true })]
    expectFail(walkJson(inArray), "A12", "/0/x")
    expectFail(walkJson({ get x() { throw thrownValue } }), "A12", "/x")
  })

  it("A13 keeps an own \"__proto__\" key as data; the copy's prototype and Object.prototype are unchanged", () => {
    const before = objectPrototypeSnapshot()
    const input = JSON.parse("{\"a\":{\"__proto__\":{\"polluted\":1,\"toString\":2}},\"__proto__\":[1]}") as unknown
    const copy = expectOk(walkJson(input)) as Record<string, unknown>
    assert.strictEqual(Object.getPrototypeOf(copy), Object.prototype)
    assert.isTrue(Object.hasOwn(copy, "__proto__"))
    assert.deepStrictEqual(Object.getOwnPropertyDescriptor(copy, "__proto__")!.value, [1])
    const a = copy["a"] as Record<string, unknown>
    assert.strictEqual(Object.getPrototypeOf(a), Object.prototype)
    assert.deepStrictEqual(Object.keys(a), ["__proto__"])
    assert.isUndefined((a as { polluted?: unknown }).polluted)
    assert.isUndefined(({} as { polluted?: unknown }).polluted)
    assert.strictEqual(objectPrototypeSnapshot(), before)
    assert.strictEqual(encodeJson(copy as Json), JSON.stringify(input))
    const reparsed = expectOk(parseJson(encodeJson(copy as Json))) as Record<string, unknown>
    assert.isTrue(Object.hasOwn(reparsed, "__proto__"))
    assert.isTrue(jsonEquals(reparsed as Json, copy as Json))
  })

  it.prop(
    "A13 \"__proto__\" keys at random depths survive walk, encode and parse with Object.prototype untouched",
    [json, fc.array(fc.nat(), { minLength: 1, maxLength: 4 }), json],
    ([value, where, payload]) => {
      const before = objectPrototypeSnapshot()
      // Wrap `value` in objects with a "__proto__" key at random depths.
      let wrapped: unknown = value
      for (const w of where) {
        wrapped = w % 2 === 0
          ? objectOf([["__proto__", wrapped], ["p", payload]])
          : [objectOf([["x", 1], ["__proto__", wrapped]], true)]
      }
      const copy = expectOk(walkJson(wrapped))
      for (const c of containers(copy)) {
        assert.strictEqual(Object.getPrototypeOf(c), Array.isArray(c) ? Array.prototype : Object.prototype)
      }
      assert.isTrue(jsonEquals(copy, wrapped as Json))
      const text = encodeJson(copy)
      assert.strictEqual(text, JSON.stringify(wrapped))
      const parsed = expectOk(parseJson(text))
      assert.isTrue(jsonEquals(parsed, copy))
      assert.strictEqual(encodeJson(parsed), text)
      assert.strictEqual(objectPrototypeSnapshot(), before)
      assert.isUndefined(({} as { p?: unknown }).p)
    }
  )

  it("A14 depth ladder 10^2..10^5 of nested arrays and objects: walk, freeze, encode, parse, compare", () => {
    for (const depth of [100, 1_000, 10_000, 100_000]) {
      for (const kind of ["array", "object"] as const) {
        const value = kind === "array" ? nestArrays(depth, 1) : nestObjects(depth, 1)
        const expectedText = kind === "array"
          ? "[".repeat(depth) + "1" + "]".repeat(depth)
          : "{\"k\":".repeat(depth) + "1" + "}".repeat(depth)
        const copy = expectOk(walkJson(value))
        assert.notStrictEqual(copy, value)
        assert.isTrue(allFrozen(copy), `${kind} ${depth} frozen`)
        const text = encodeJson(copy)
        assert.strictEqual(text, expectedText)
        if (depth <= 1_000) assert.strictEqual(text, JSON.stringify(value))
        const parsed = expectOk(parseJson(text))
        assert.isTrue(allFrozen(parsed))
        assert.isTrue(jsonEquals(parsed, copy))
        assert.isTrue(jsonEquals(copy, value as Json))
        assert.isFalse(jsonEquals(copy, (kind === "array" ? nestArrays(depth, 2) : nestObjects(depth, 2)) as Json))
        const fresh = kind === "array" ? nestArrays(depth, 1) : nestObjects(depth, 1)
        assert.strictEqual(deepFreeze(fresh), fresh)
        assert.isTrue(allFrozen(fresh))
        expectOk(checkParsed(JSON.parse(text)))
      }
    }
  })

  it("A14 deep values with a violation at the bottom report the full pointer", () => {
    const depth = 100_000
    expectFail(walkJson(nestArrays(depth, -0)), "A5", "/0".repeat(depth))
    expectFail(walkJson(nestObjects(depth, undefined, "a/b")), "A3", "/a~1b".repeat(depth))
    expectFail(parseJson("[".repeat(depth) + "1e400" + "]".repeat(depth)), "A4", "/0".repeat(depth))
  })

  it("A15 the copy is detached and deep-frozen: later caller mutation never reaches it", () => {
    const input = { a: [1, { b: "x" }], c: { d: true } }
    const copy = expectOk(walkJson(input)) as { a: [number, { b: string }]; c: { d: boolean } }
    const text = encodeJson(copy as unknown as Json)
    input.a.push(2)
    ;(input.a[1] as { b: string }).b = "changed"
    input.c.d = false
    assert.strictEqual(encodeJson(copy as unknown as Json), text)
    assert.isTrue(allFrozen(copy))
    assert.throws(() => {
      copy.c.d = false
    })
    assert.throws(() => {
      ;(copy.a as unknown as Array<number>).push(3)
    })
  })

  it("A16 accepts a shared acyclic sub-object and copies it twice", () => {
    const shared = { z: [1] }
    const copy = expectOk(walkJson({ a: shared, b: [shared, shared] })) as {
      a: unknown
      b: ReadonlyArray<unknown>
    }
    assert.notStrictEqual(copy.a, shared)
    assert.notStrictEqual(copy.a, copy.b[0])
    assert.notStrictEqual(copy.b[0], copy.b[1])
    assert.isTrue(jsonEquals(copy.a as Json, copy.b[1] as Json))
  })

  it("A16 a shared reference deeper than the linear-scan window is not mistaken for a cycle", () => {
    const shared = { s: 1 }
    const value = nestObjects(50, [shared, nestArrays(40, shared), shared])
    const copy = expectOk(walkJson(value))
    assert.isTrue(jsonEquals(copy, value as Json))
  })

  it.prop("A16 walkJson accepts every JSON value; the copy is equal, frozen, detached", [jsonWithNullProtos], ([value]) => {
    const copy = expectOk(walkJson(value))
    assert.isTrue(jsonEquals(copy, value))
    assert.isTrue(allFrozen(copy))
    assert.strictEqual(encodeJson(copy), JSON.stringify(value))
    const originals = new Set(containers(value))
    for (const c of containers(copy)) assert.isFalse(originals.has(c))
  })
})

describe("Json encoder", () => {
  it.prop("A14 encodeJson equals JSON.stringify (lone surrogates, numbers, key order)", [jsonWithNullProtos], ([value]) => {
    assert.strictEqual(encodeJson(value), JSON.stringify(value))
    // the iterative encoder (used where JSON.stringify overflows) gives the same text
    assert.strictEqual(encodeIterative(value), JSON.stringify(value))
  })

  it("A14 encodeJson escapes like JSON.stringify", () => {
    const samples: ReadonlyArray<Json> = [
      "\ud800",
      "a\udfffb",
      "\ud83d\ude00",
      "\u0000\u001f\u007f\"\\/\n\r\t\b\f\u2028",
      { "\ud800": "\udc00", "\"": [1e21, 1e-7, 5e-324, -1.5, 0.1] },
      [],
      {},
      [null, true, false, "", { "": [] }],
      1e300,
      -0.000001
    ]
    for (const s of samples) {
      assert.strictEqual(encodeJson(s), JSON.stringify(s))
      assert.strictEqual(encodeIterative(s), JSON.stringify(s))
    }
    assert.strictEqual(encodeJson("\ud800"), "\"\\ud800\"")
  })
})

describe("Json parse", () => {
  it("A4 and A5 come out of parsing: -0 and 1e400 literals are rejected with their pointer", () => {
    expectFail(parseJson("{\"a\":[1,-0]}"), "A5", "/a/1")
    expectFail(parseJson("-0.0e5"), "A5", "")
    expectFail(parseJson("[-1e-400]"), "A5", "/0")
    expectFail(parseJson("{\"x\":{\"y\":1e400}}"), "A4", "/x/y")
    expectFail(parseJson("[-1e400]"), "A4", "/0")
    assert.strictEqual(encodeJson(expectOk(parseJson("[1e-400]"))), "[0]")
  })

  it("parseJson returns Unparsable for syntax errors", () => {
    for (const text of ["[1,", "", "{'a':1}", "NaN", "undefined", "{\"a\":1}x"]) {
      const result = parseJson(text)
      assert.strictEqual(result._tag, "Unparsable")
      if (result._tag === "Unparsable") assert.isString(result.detail)
    }
  })

  it("A13 checkParsed keeps the parsed value in place, frozen, with its \"__proto__\" key", () => {
    const parsed = JSON.parse("{\"__proto__\":{\"a\":[1,2]},\"b\":\"c\"}") as unknown
    const result = checkParsed(parsed, "/data")
    assert.strictEqual(expectOk(result), parsed)
    assert.isTrue(allFrozen(parsed))
    assert.isTrue(Object.hasOwn(parsed as object, "__proto__"))
    expectFail(checkParsed(JSON.parse("{\"a\":{\"b\":-0}}"), "/data"), "A5", "/data/a/b")
  })

  it("A5 checkParsed reports the exact path at any depth, across its recursive and iterative parts", () => {
    for (const depth of [1, 63, 64, 65, 66, 130, 1_000]) {
      // alternate arrays and objects down to a -0 leaf: [{"k":[{"k":...-0}]}]
      let text = "-0"
      let path = ""
      for (let d = depth - 1; d >= 0; d--) {
        text = d % 2 === 0 ? `[1,${text}]` : `{"a":1,"k":${text}}`
        path = (d % 2 === 0 ? "/1" : "/k") + path
      }
      expectFail(checkParsed(JSON.parse(text), "/data"), "A5", `/data${path}`)
      const fine = JSON.parse(text.replace("-0", "0")) as unknown
      assert.strictEqual(expectOk(checkParsed(fine, "/data")), fine)
      let node: unknown = fine
      for (let d = 0; d < depth; d++) {
        assert.isTrue(Object.isFrozen(node), `frozen at depth ${d}`)
        node = d % 2 === 0 ? (node as Array<unknown>)[1] : (node as Record<string, unknown>).k
      }
    }
    // 100,000 levels: no stack overflow
    const deep = JSON.parse("[".repeat(100_000) + "]".repeat(100_000)) as unknown
    assert.strictEqual(expectOk(checkParsed(deep)), deep)
    const deepFail = checkParsed(JSON.parse("[".repeat(100_000) + "1e400" + "]".repeat(100_000)))
    assert.isTrue(deepFail._tag === "Fail" && deepFail.rule === "A4" && deepFail.path === "/0".repeat(100_000))
  })

  const rawLiteral = fc.constantFrom("-0", "-0.0", "-0e10", "1e400", "-1e400", "1e-400", "-1e-400", "0", "12")
  const withRaw: fc.Arbitrary<string> = fc
    .letrec<{ node: unknown }>((tie) => ({
      node: fc.oneof(
        { depthSize: "small" },
        json,
        rawLiteral.map((l) => `\u0000RAW:${l}`),
        fc.array(tie("node"), { maxLength: 4 }),
        fc.uniqueArray(fc.tuple(jsonKey, tie("node")), { selector: (e) => e[0], maxLength: 4 }).map((e) => objectOf(e))
      )
    }))
    .node.map((v) => JSON.stringify(v).replace(/"\\u0000RAW:([^"]*)"/g, "$1"))

  it.prop("A5 checkParsed and walkJson agree on parsed values (-0 and 1e400 literals)", [withRaw], ([text]) => {
    const forWalk = JSON.parse(text) as unknown
    const inPlace = JSON.parse(text) as unknown
    const walked = walkJson(forWalk, "/data")
    const checked = checkParsed(inPlace, "/data")
    assert.strictEqual(verdict(checked), verdict(walked))
    const parsed = parseJson(text)
    const parsedVerdict = parsed._tag === "Unparsable" ? "Unparsable" : verdict(parsed)
    assert.strictEqual(parsedVerdict, verdict(walkJson(JSON.parse(text))))
    if (walked._tag === "Ok" && checked._tag === "Ok") {
      assert.isTrue(jsonEquals(walked.value, checked.value))
      assert.isTrue(allFrozen(checked.value))
    }
  })

  it.prop("A14 parseJson(encodeJson(v)) round-trips", [json], ([value]) => {
    const parsed = expectOk(parseJson(encodeJson(value)))
    assert.isTrue(jsonEquals(parsed, value))
    assert.strictEqual(encodeJson(parsed), encodeJson(value))
  })
})

describe("Json equality", () => {
  it("jsonEquals is key-order insensitive for objects and positional for arrays", () => {
    assert.isTrue(jsonEquals({ a: 1, b: [1, { c: null, d: "x" }] }, { b: [1, { d: "x", c: null }], a: 1 }))
    assert.isFalse(jsonEquals([1, 2], [2, 1]))
    assert.isFalse(jsonEquals({}, []))
    assert.isFalse(jsonEquals(null, {}))
    assert.isFalse(jsonEquals({ a: 1 }, { a: 1, b: 2 }))
    assert.isFalse(jsonEquals({ a: 1, b: 2 }, { a: 1, c: 2 }))
    assert.isFalse(jsonEquals({ a: [1] }, { a: [1, 2] }))
    assert.isFalse(jsonEquals("1", 1))
    assert.isFalse(jsonEquals({ x: { y: true } }, { x: { y: false } }))
    assert.isTrue(jsonEquals(objectOf([["__proto__", 1]]) as Json, JSON.parse("{\"__proto__\":1}") as Json))
    assert.isFalse(jsonEquals({}, JSON.parse("{\"__proto__\":{}}") as Json))
  })

  it.prop("jsonEquals ignores key order and agrees with a sorted-key oracle", [json, json], ([a, b]) => {
    assert.isTrue(jsonEquals(a, reverseKeys(a) as Json))
    assert.isTrue(jsonEquals(a, expectOk(walkJson(a))))
    assert.strictEqual(jsonEquals(a, b), canonical(a) === canonical(b))
  })
})

describe("Json utilities", () => {
  it("deepFreeze freezes every level, returns its argument and is a no-op on frozen values", () => {
    const value = { a: [{ b: 1 }], c: { d: [] } }
    assert.strictEqual(deepFreeze(value), value)
    assert.isTrue(allFrozen(value))
    const frozen = Object.freeze({ x: 1 })
    assert.strictEqual(deepFreeze(frozen), frozen)
    assert.strictEqual(deepFreeze(3), 3)
    assert.strictEqual(deepFreeze(null), null)
  })

  it.prop("utf8Length equals the UTF-8 byte count, lone surrogates included", [jsonString, fc.string()], ([a, b]) => {
    const encoder = new TextEncoder()
    assert.strictEqual(utf8Length(a), encoder.encode(a).length)
    assert.strictEqual(utf8Length(b), encoder.encode(b).length)
  })

  it("utf8Length counts 1 to 4 bytes per code point", () => {
    assert.strictEqual(utf8Length(""), 0)
    assert.strictEqual(utf8Length("a"), 1)
    assert.strictEqual(utf8Length("é"), 2)
    assert.strictEqual(utf8Length("€"), 3)
    assert.strictEqual(utf8Length("\ud83d\ude00"), 4)
    assert.strictEqual(utf8Length("\ud800"), 3)
  })
})
