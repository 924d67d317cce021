/**
 * The JSONL backend's session-id encoding (SPEC §7.4.1): an injective, traversal-safe mapping
 * from a session id to a file-name stem that is never `.`/`..`, never starts or ends with a dot,
 * is never a Windows reserved device name and stays within 200 characters.
 */
import { createHash } from "node:crypto"

const KEPT = /^[A-Za-z0-9._-]$/
const RESERVED = /^(?:CON|PRN|AUX|NUL|COM[0-9]|LPT[0-9])$/i
const MAX_SHORT = 200
const LONG_PREFIX = 128

const escapeUnit = (unit: number): string => "~" + unit.toString(16).toUpperCase().padStart(4, "0")

/** The file-name stem of a session id (`<root>/<stem>.jsonl`); pure, total, injective. */
export const encodeSessionId = (id: string): string => {
  // 1. keep [A-Za-z0-9._-] code units, escape every other UTF-16 code unit (lone surrogates too)
  let out = ""
  for (let i = 0; i < id.length; i++) {
    const ch = id[i]
    out += KEPT.test(ch) ? ch : escapeUnit(id.charCodeAt(i))
  }
  // 2. no leading or trailing dot
  if (out.startsWith(".")) out = "~002E" + out.slice(1)
  if (out.length > 1 && out.endsWith(".")) out = out.slice(0, -1) + "~002E"
  // 3. Windows reserved device names (the part before the first dot)
  const dot = out.indexOf(".")
  const base = dot === -1 ? out : out.slice(0, dot)
  if (RESERVED.test(base)) out = escapeUnit(out.charCodeAt(0)) + out.slice(1)
  // 4. over-long names: a cut prefix, "~~" (absent from every short form) and SHA-256 of the whole
  if (out.length > MAX_SHORT) {
    let cut = LONG_PREFIX
    for (let j = LONG_PREFIX - 4; j < LONG_PREFIX; j++) {
      if (out[j] === "~") {
        cut = j
        break
      }
    }
    out = out.slice(0, cut) + "~~" + createHash("sha256").update(out, "ascii").digest("hex")
  }
  return out
}
