/**
 * Session-id encoding of the JSONL backend (SPEC §7.4.1): traversal and device-name attacks,
 * over-long ids, lone surrogates, and the tested properties (paths inside root, names within
 * 255 bytes, injectivity through decodability of short forms and `~~` in long forms).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "effect/FastCheck"
import { Buffer } from "node:buffer"
import * as NodePath from "node:path"
import { encodeSessionId } from "../../src/schema/SessionIdEncoding.js"
import { runs } from "../suites.js"

/** Inverse of a short form: each `~XXXX` back to its code unit. */
const decodeShort = (name: string): string => name.replace(/~([0-9A-F]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))

const SHORT_FORM = /^(?:[A-Za-z0-9._-]|~[0-9A-F]{4})+$/
const LONG_FORM = /^(?:[A-Za-z0-9._-]|~[0-9A-F]{4}){1,128}~~[0-9a-f]{64}$/

const byteLength = (s: string) => Buffer.byteLength(s, "utf8")
const RESERVED = /^(?:CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])$/i

/** Every name the backend derives from a stem (SPEC §7.4.1). */
const derivedNames = (stem: string) => [
  `${stem}.jsonl`,
  `${stem}.jsonl.lock`,
  `.${stem}.0123456789abcdef.tmp`,
  `${stem}.jsonl.v0.bak`,
  `${stem}.jsonl.v12345.99999.bak`
]

/** Ids built from adversarial pieces (escape look-alikes, dots, reserved names) and any UTF-16 unit. */
const adversarialId = fc.array(
  fc.oneof(
    fc.constantFrom(".", "..", "~", "~~", "~002E", "~002e", "/", "\\", ":", "\u0000", " ", "CON", "nul", "Com1", "lpt9", "a", "Z", "0", "-", "_"),
    fc.integer({ min: 0, max: 0xffff }).map((u) => String.fromCharCode(u))
  ),
  { minLength: 1, maxLength: 80 }
).map((parts) => parts.join(""))

const anyId = fc.oneof(
  adversarialId,
  fc.string({ unit: "binary", minLength: 1, maxLength: 300 }),
  fc.string({ unit: fc.constantFrom("a", "~", ".", "\ud800"), minLength: 150, maxLength: 260 })
)

describe("encodeSessionId (SPEC §7.4.1)", () => {
  const examples: ReadonlyArray<readonly [string, string]> = [
    ["abc-DEF_1.2", "abc-DEF_1.2"],
    ["../x", "~002E.~002Fx"],
    ["/", "~002F"],
    ["\\", "~005C"],
    [".", "~002E"],
    ["..", "~002E~002E"],
    ["...", "~002E.~002E"],
    ["a.", "a~002E"],
    ["a..", "a.~002E"],
    ["~", "~007E"],
    ["~002E", "~007E002E"],
    ["a\u0000b", "a~0000b"],
    ["C:\\x", "C~003A~005Cx"],
    ["CON", "~0043ON"],
    ["con", "~0063on"],
    ["nul.txt", "~006Eul.txt"],
    ["NUL.", "NUL~002E"],
    ["COM1", "~0043OM1"],
    ["com0.a.b", "~0063om0.a.b"],
    ["LPT9", "~004CPT9"],
    ["AUX", "~0041UX"],
    ["PRN", "~0050RN"],
    ["CONX", "CONX"],
    ["COM10", "COM10"],
    ["x.CON", "x.CON"],
    ["é", "~00E9"],
    ["\ud800", "~D800"],
    ["\udfffa", "~DFFFa"],
    ["😀", "~D83D~DE00"],
    ["a b", "a~0020b"]
  ]
  for (const [id, expected] of examples) {
    it(`encodes ${JSON.stringify(id)} as ${expected}`, () => {
      assert.strictEqual(encodeSessionId(id), expected)
      assert.strictEqual(decodeShort(expected), id)
    })
  }

  it("a 1,000-character id becomes a 128-character prefix, ~~ and a SHA-256", () => {
    const id = "a".repeat(1000)
    const name = encodeSessionId(id)
    assert.match(name, LONG_FORM)
    assert.strictEqual(name.length, 128 + 2 + 64)
    assert.isTrue(name.startsWith("a".repeat(128) + "~~"))
    assert.notStrictEqual(encodeSessionId("a".repeat(1001)), name)
  })

  it("a long non-ASCII id is never cut inside a ~XXXX escape", () => {
    for (let pad = 0; pad < 6; pad++) {
      const id = "b".repeat(pad) + "é".repeat(300)
      const name = encodeSessionId(id)
      assert.match(name, LONG_FORM)
      const prefix = name.slice(0, name.indexOf("~~"))
      assert.match(prefix, SHORT_FORM)
      assert.isAtMost(prefix.length, 128)
      assert.isAtLeast(prefix.length, 124)
    }
  })

  it("exactly 200 characters stays short; 201 becomes long", () => {
    assert.strictEqual(encodeSessionId("x".repeat(200)), "x".repeat(200))
    assert.match(encodeSessionId("x".repeat(201)), LONG_FORM)
  })

  it.prop("every name is a short form that decodes back, or a long form; never a dot name", [anyId], ([id]) => {
    const name = encodeSessionId(id)
    const ok = !name.startsWith(".") && !name.endsWith(".") && name !== "" &&
      (name.includes("~~")
        ? LONG_FORM.test(name)
        : SHORT_FORM.test(name) && name.length <= 200 && decodeShort(name) === id) &&
      !RESERVED.test(name.split(".")[0]) &&
      derivedNames(name).every((derived) => byteLength(derived) <= 255)
    assert.isTrue(ok, `${JSON.stringify(id)} -> ${name}`)
  }, { fastCheck: { numRuns: runs(10_000) } })

  it.prop("injective: distinct ids give distinct names", [anyId, anyId], ([a, b]) => {
    if (a !== b) assert.notStrictEqual(encodeSessionId(a), encodeSessionId(b))
  }, { fastCheck: { numRuns: runs(10_000) } })

  it.prop("every produced path is inside root", [anyId], ([id]) => {
    const root = NodePath.resolve("/srv/sessions")
    for (const name of derivedNames(encodeSessionId(id))) {
      const full = NodePath.join(root, name)
      const rel = NodePath.relative(root, full)
      assert.isTrue(NodePath.dirname(full) === root && NodePath.basename(full) === name && !rel.startsWith(".."), name)
    }
  }, { fastCheck: { numRuns: runs(10_000) } })
})
