/**
 * The pieces the error catalogue's classes are made of: the rule id, the optional seq and detail
 * fields, and how a message shows them. Internal to the catalogue (`Errors` is its public module).
 *
 * @since 0.2.0
 */
import * as Schema from "effect/Schema"

/**
 * The SPEC rule id an error carries.
 *
 * @since 0.2.0
 * @category schemas
 */
export const Rule = Schema.String

/**
 * The offending seq (for a seed or a loaded log: the index), when there is one.
 *
 * @since 0.2.0
 * @category schemas
 */
export const OptSeq = Schema.optional(Schema.Number)

/**
 * Words for people on what the rule found.
 *
 * @since 0.2.0
 * @category schemas
 */
export const OptDetail = Schema.optional(Schema.String)

/**
 * ` at seq <seq>`, or nothing.
 *
 * @since 0.2.0
 * @category utils
 */
export const at = (seq: number | undefined): string => (seq === undefined ? "" : ` at seq ${seq}`)

/**
 * `: <detail>`, or nothing.
 *
 * @since 0.2.0
 * @category utils
 */
export const tail = (detail: string | undefined): string => (detail === undefined ? "" : `: ${detail}`)
