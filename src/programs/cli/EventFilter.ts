/**
 * The event filters of `session-log show`: by type (exact, e.g. `tool/call`, or a family, e.g.
 * `tool`), by turn (its `turn/start` through its `turn/end`), by seq range, and the last n of what
 * remains. Filters combine with AND; `--tail` applies last.
 */
import type { Event } from "../../schema/Events.js"
import { KNOWN_EVENT_TYPES } from "../../schema/Events.js"
import { isRecord } from "../../schema/Validation.js"
import { UsageError } from "./Target.js"

/** What `show` keeps; an absent field keeps everything. */
export interface EventFilter {
  readonly types?: TypeFilter
  readonly turn?: number
  readonly from?: number
  readonly to?: number
  readonly tail?: number
}

/** Event types named by `--type`: exact types (`tool/call`) and families (`tool`: every `tool/…`). */
export interface TypeFilter {
  readonly exact: ReadonlySet<string>
  readonly families: ReadonlySet<string>
}

const familyOf = (type: string): string => type.split("/")[0]

const KNOWN_FAMILIES: ReadonlySet<string> = new Set([...KNOWN_EVENT_TYPES].map(familyOf))

/**
 * The `--type` values (each repeatable and a comma list): a value with a `/` is an exact type,
 * one without names a family. Types a reader skips (`ignorable`) may be named too, so a name is
 * not checked against the known types (`unknownTypes` says which are not).
 */
export const parseTypes = (values: ReadonlyArray<string>): TypeFilter | undefined | UsageError => {
  if (values.length === 0) return undefined
  const names = values.flatMap((v) => v.split(",")).map((v) => v.trim()).filter((v) => v.length > 0)
  if (names.length === 0) return new UsageError({ detail: "--type needs an event type, e.g. --type tool/call or --type tool" })
  return {
    exact: new Set(names.filter((n) => n.includes("/"))),
    families: new Set(names.filter((n) => !n.includes("/")))
  }
}

/** The names of a type filter that are neither a known event type nor a known family. */
export const unknownTypes = (types: TypeFilter): ReadonlyArray<string> => [
  ...[...types.exact].filter((t) => !KNOWN_EVENT_TYPES.has(t)),
  ...[...types.families].filter((f) => !KNOWN_FAMILIES.has(f))
]

const typeMatches = (types: TypeFilter, type: string): boolean => types.exact.has(type) || types.families.has(familyOf(type))

/** Check a `--tail` count (a usage error when negative). */
export const checkTail = (tail: number | undefined): UsageError | undefined =>
  tail !== undefined && tail < 0 ? new UsageError({ detail: `--tail needs a count of 0 or more, got ${tail}` }) : undefined

const turnOf = (e: Event): unknown => (isRecord(e.data) ? e.data.turn : undefined)

/** Whether a filter keeps anything out (so an empty result is the filter's doing). */
export const isFiltering = (f: EventFilter): boolean =>
  f.types !== undefined || f.turn !== undefined || f.from !== undefined || f.to !== undefined || f.tail !== undefined

/**
 * The filter without `--tail` as a predicate over events in log order (it follows turns, so use
 * a fresh one per pass over a log).
 */
export const eventMatcher = (f: EventFilter): (e: Event) => boolean => {
  let inside = false
  return (e) => {
    let inTurn = true
    if (f.turn !== undefined) {
      if (e.type === "turn/start") inside = turnOf(e) === f.turn
      inTurn = inside
      if (e.type === "turn/end" && turnOf(e) === f.turn) inside = false
    }
    return inTurn &&
      (f.types === undefined || typeMatches(f.types, e.type)) &&
      (f.from === undefined || e.seq >= f.from) &&
      (f.to === undefined || e.seq <= f.to)
  }
}

/** The events a filter keeps, in log order. */
export const filterEvents = (events: ReadonlyArray<Event>, f: EventFilter): ReadonlyArray<Event> => {
  const kept = events.filter(eventMatcher(f))
  return f.tail === undefined ? kept : kept.slice(Math.max(0, kept.length - f.tail))
}
