/**
 * The `sessions` row codec of the SQL store (SPEC §7.5 column encodings): a header ↔ a row, NULL
 * meaning absent. The event rows are `EventRows`.
 */
import * as Schema from "effect/Schema"
import type { SessionHeader } from "../../schema/SessionHeader.js"

// ---------------------------------------------------------------------------------------------
// sessions

/** A `sessions` row. */
export const SessionRow = Schema.Struct({
  id: Schema.String,
  version: Schema.Number,
  created_at: Schema.Number,
  cwd: Schema.NullOr(Schema.String),
  parent_session: Schema.NullOr(Schema.String),
  seed_length: Schema.NullOr(Schema.Number),
  origin: Schema.NullOr(Schema.String),
  delegation_depth: Schema.NullOr(Schema.Number),
  agent_preset: Schema.NullOr(Schema.String),
  next_seq: Schema.Number,
  revision: Schema.Number
})
export type SessionRow = typeof SessionRow.Type

/** The columns of a `sessions` row as read, in `SessionRow` order. */
export const SESSION_SELECT_COLUMNS = "id, version, created_at, cwd, parent_session, seed_length, origin, " +
  "delegation_depth, agent_preset, next_seq, revision"

/** The `next_seq` of a `sessions` row. */
export const NextSeqRow = Schema.Struct({ next_seq: Schema.Number })

/** The header as stored in a `sessions` row (NULL = absent), in header key order. */
export const headerFromRow = (r: SessionRow): Record<string, unknown> => {
  const h: Record<string, unknown> = { version: r.version, id: r.id, createdAt: r.created_at }
  if (r.cwd !== null) h.cwd = r.cwd
  if (r.parent_session !== null) h.parentSession = r.parent_session
  if (r.seed_length !== null) h.seedLength = r.seed_length
  if (r.origin !== null) h.origin = r.origin
  if (r.delegation_depth !== null) h.delegationDepth = r.delegation_depth
  if (r.agent_preset !== null) h.agentPreset = r.agent_preset
  return h
}

/** The `sessions` row of a header not yet holding events (`next_seq` 0, `revision` 0). */
export const rowFromHeader = (h: SessionHeader): SessionRow => ({
  id: h.id,
  version: h.version,
  created_at: h.createdAt,
  cwd: h.cwd ?? null,
  parent_session: h.parentSession ?? null,
  seed_length: h.seedLength ?? null,
  origin: h.origin ?? null,
  delegation_depth: h.delegationDepth ?? null,
  agent_preset: h.agentPreset ?? null,
  next_seq: 0,
  revision: 0
})
