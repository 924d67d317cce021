/**
 * Appendix A's row cap is counted in UTF-8 bytes of the row's JSON text: `stringBytes` counts a
 * member's JSON text without building it, and must equal the built text's length for any string
 * (escapes, control characters, astral characters, lone surrogates).
 */
import { it } from "@effect/vitest"
import * as fc from "fast-check"
import { stringBytes } from "../../src/schema/PackedChunks.js"

const built = (s: string) => Buffer.byteLength(JSON.stringify(s), "utf8")

it.prop("Appendix A row cap: stringBytes(s) is the UTF-8 length of JSON.stringify(s)", [
  fc.oneof(
    fc.string({ unit: "binary", maxLength: 64 }),
    fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)), maxLength: 64 }),
    fc.string({ unit: fc.constantFrom("\"", "\\", "\n", "\u0000", "\u001f", "\u007f", "\ud83d", "\ude00", "é", "€"), maxLength: 32 })
  )
], ([s]) => stringBytes(s) === built(s))

it("Appendix A row cap: stringBytes of the corners", () => {
  for (const s of ["", "a", "\"\\", "\b\t\n\f\r", "\u0001\u001f", "\ud83d\ude00", "\ud83d", "\ude00x", "\ud83d\ud83d\ude00", "€é"]) {
    if (stringBytes(s) !== built(s)) throw new Error(`stringBytes(${JSON.stringify(s)}) = ${stringBytes(s)}, want ${built(s)}`)
  }
})
