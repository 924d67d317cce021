/**
 * Branded identifiers. A `SessionId` is an opaque non-empty string; a `Seq` is a non-negative
 * safe integer naming an event's position in its log.
 */
import * as Schema from "effect/Schema"

/** An opaque, non-empty session id. */
export const SessionId = Schema.String.pipe(Schema.minLength(1), Schema.brand("SessionId"))
export type SessionId = typeof SessionId.Type

/** A log position. */
export const Seq = Schema.Int.pipe(Schema.nonNegative(), Schema.brand("Seq"))
export type Seq = typeof Seq.Type
