/**
 * The optional invariants service (SPEC §11.4): a pre-commit validator that vetoes events
 * breaking turn/step nesting, tool-call pairing and compaction-bracket rules (V-rules). Without
 * the layer none of these rules apply; they are diagnostics, not acceptance.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type { ValidatorFactory } from "./Session.js"

/**
 * Provides the invariants validator factory; Session constructors use it when present.
 *
 * @since 0.1.0
 * @category tags
 */
export class Invariants extends Context.Tag("effect-session-log/Invariants")<Invariants, ValidatorFactory>() {}

