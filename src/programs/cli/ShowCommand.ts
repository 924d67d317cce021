/**
 * `session-log show` (docs/cli.md, SPEC §12): the events of one session, one line each or as
 * one JSON array, filtered by type, turn, seq range and `--tail`. Streamed: a first read
 * validates the whole log and counts what the filter keeps (nothing is printed for an invalid
 * log), the next prints as it reads, so memory stays bounded by a chunk whatever the log's
 * length (a table's column widths take one more read). A session-level table (no filter, no
 * `--json`) is one read that prints as it validates (`streamTable`): it starts at once. `--tail n`
 * (n up to `TAIL_IN_MEMORY`) is one read keeping the last n matches. `--follow` then prints each event committed after that
 * read as it comes (`SessionLive.follow`, docs/follow.md), `--json` one event per line, until
 * interrupted. Never writes.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import { follow as followSession } from "../../layers/session/SessionLive.js"
import type { Event } from "../../schema/Events.js"
import { encodeJson, type Json } from "../../schema/Json.js"
import { readEach } from "../../services/ReadEach.js"
import { SessionStore } from "../../services/SessionStore.js"
import { file, json, optionalInteger, resolve, runCommand, session, store } from "./CommandSupport.js"
import { checkTail, eventMatcher, type EventFilter, isFiltering, parseTypes, unknownTypes } from "./EventFilter.js"
import { columnWidths, dim, tableHeader, tableLine, widen } from "./Output.js"
import { EVENT_COLUMNS, eventRow } from "./Render.js"
import { sourceWithProgress } from "./Progress.js"
import { openExistingStore, type SessionSource, sourceReader, type SourceReader, UsageError } from "./Target.js"

const type = Options.text("type").pipe(
  Options.withPseudoName("<type>"),
  Options.withDescription(
    "only events of this type (e.g. tool/call) or family (e.g. tool: every tool/* type); repeat it or give a comma list"
  ),
  Options.repeated,
  Options.optional
)
const turn = optionalInteger("turn", "<turn>", "only the events of this turn number, from its turn/start through its turn/end")
const from = optionalInteger("from", "<seq>", "only events whose seq is at least this")
const to = optionalInteger("to", "<seq>", "only events whose seq is at most this")
const tail = optionalInteger("tail", "<n>", "only the last n events (applied after the other filters)")
const followOption = Options.boolean("follow").pipe(
  Options.withDescription(
    "then print each event as it is committed, until interrupted (Ctrl-C); with --json one event per line (needs --store and --session)"
  )
)

/** The filter the `show` options ask for (a usage error for a bad value). */
const showFilter = (o: {
  readonly type: Option.Option<ReadonlyArray<string>>
  readonly turn: Option.Option<number>
  readonly from: Option.Option<number>
  readonly to: Option.Option<number>
  readonly tail: Option.Option<number>
}) =>
  Effect.gen(function*() {
    const types = parseTypes(Option.getOrElse(o.type, () => []))
    if (types !== undefined && "_tag" in types) return yield* types
    const badTail = checkTail(Option.getOrUndefined(o.tail))
    if (badTail !== undefined) return yield* badTail
    const filter: EventFilter = {
      ...(types === undefined ? {} : { types }),
      ...(Option.isSome(o.turn) ? { turn: o.turn.value } : {}),
      ...(Option.isSome(o.from) ? { from: o.from.value } : {}),
      ...(Option.isSome(o.to) ? { to: o.to.value } : {}),
      ...(Option.isSome(o.tail) ? { tail: o.tail.value } : {})
    }
    return filter
  })

/** People's note for an empty filtered result (naming `--type` values no event type has). */
const noMatch = (filter: EventFilter): string => {
  const unknown = filter.types === undefined ? [] : unknownTypes(filter.types)
  return dim(`no events match${unknown.length === 0 ? "" : ` (not a known event type: ${unknown.join(", ")})`}`)
}

/** Write to stdout (synchronous for files and pipes on Linux: memory stays bounded). */
const write = (text: string) => Effect.sync(() => void process.stdout.write(text))

/**
 * Wait until stdout has handed every queued write to the system: a full pipe queues them, and a
 * failing command's process exits at once (runMain), which would drop the lines printed before.
 */
const drained = Effect.async<void>((resume) => {
  if (process.stdout.writableLength === 0) return resume(Effect.void)
  const done = () => resume(Effect.void)
  process.stdout.once("drain", done)
  return Effect.sync(() => void process.stdout.off("drain", done))
})

/**
 * Up to this many `--tail` events are kept in memory from the one validating read; a longer tail
 * is read again (memory stays bounded by a chunk).
 */
const TAIL_IN_MEMORY = 100_000

/** The options naming the session `show` reads. */
interface SourceOptions {
  readonly file: Parameters<typeof resolve>[0]
  readonly session: Parameters<typeof resolve>[1]
  readonly store: string
}

/**
 * The filter and the source of `show`; `kept` is one validated read handing on, chunk by chunk,
 * the events the filter and `--tail` keep. A first read validates and counts what the filter keeps.
 */
const showPasses = (o: Parameters<typeof showFilter>[0] & SourceOptions & { readonly json: boolean }) =>
  Effect.gen(function*() {
    const filter = yield* showFilter(o)
    const source = yield* resolve(o.file, o.session, o.store)
    const reader = yield* sourceReader(source)
    // the validating read shows progress on a terminal (Progress.ts); the printing reads do not
    // (their lines go to the same terminal)
    const validating = yield* sourceWithProgress(source, reader, "show", o.json)
    // the matches numbered [from, to) of one read, handed on chunk by chunk
    const pass = (
      from: number,
      to: number,
      onKept: (events: ReadonlyArray<Event>) => Effect.Effect<void>,
      via: SourceReader = reader
    ) => {
      const matches = eventMatcher(filter)
      let index = 0
      return readEach(via.read, via.reload, (events) => {
        const out: Array<Event> = []
        for (const e of events) {
          if (!matches(e)) continue
          if (index >= from && index < to) out.push(e)
          index++
        }
        return out.length === 0 ? Effect.void : onKept(out)
      })
    }
    if (filter.tail !== undefined && filter.tail <= TAIL_IN_MEMORY) {
      // --tail n: one read validates and keeps the last n matches (a ring of n), which are then shown
      const n = filter.tail
      const ring: Array<Event> = []
      let next = 0
      const tailRead = yield* pass(0, Infinity, (events) =>
        Effect.sync(() => {
          if (n === 0) return
          for (const e of events) {
            if (ring.length < n) ring.push(e)
            else ring[next] = e
            next = (next + 1) % n
          }
        }), validating)
      const last = ring.length < n ? ring : [...ring.slice(next), ...ring.slice(0, next)]
      return {
        filter,
        source,
        length: tailRead.count,
        count: last.length,
        kept: (onKept: (events: ReadonlyArray<Event>) => Effect.Effect<void>) => last.length === 0 ? Effect.void : onKept(last)
      }
    }
    let matched = 0
    const read = yield* pass(0, Infinity, (events) => Effect.sync(() => void (matched += events.length)), validating)
    const skip = filter.tail === undefined ? 0 : Math.max(0, matched - filter.tail)
    return {
      filter,
      source,
      length: read.count,
      count: matched - skip,
      // the log as the first read saw it: events a writer appends meanwhile are not shown
      kept: (onKept: (events: ReadonlyArray<Event>) => Effect.Effect<void>) => pass(skip, matched, onKept)
    }
  })

/**
 * `--follow`: the events of `source` from `fromSeq` that `filter` keeps (its `--to` ends the
 * stream), each handed to `print` as it is committed.
 */
const followFrom = (source: SessionSource, fromSeq: number, filter: EventFilter, print: (e: Event) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    if (source.kind !== "store") return yield* new UsageError({ detail: "--follow needs --store and --session (not a .jsonl path)" })
    const store = yield* openExistingStore(source.spec, { readOnly: true })
    const matches = eventMatcher(filter)
    const to = filter.to
    yield* followSession(source.id, { fromSeq }).pipe(
      Stream.takeWhile((e) => to === undefined || e.seq <= to),
      Stream.filter(matches),
      Stream.runForEach(print),
      Effect.provideService(SessionStore, store)
    )
  })

/**
 * The first this many events of a streamed table are held to size its columns (a session that
 * fits prints exactly as a validated read would, and nothing when it is invalid); later rows
 * widen a column only when they need it.
 */
const STREAM_HEAD_EVENTS = 1_024

/**
 * A session-level table (no filter): one validated read that prints each chunk as it is
 * validated, so the first line comes at once whatever the log's length and the log is read once.
 * An event the checks refuse ends it with its error after the lines of the events before it.
 * Returns how many events were shown (where `--follow` goes on).
 */
const streamTable = (o: SourceOptions) =>
  Effect.gen(function*() {
    const source = yield* resolve(o.file, o.session, o.store)
    const reader = yield* sourceReader(source)
    const widths = columnWidths(EVENT_COLUMNS)
    let head: Array<ReadonlyArray<string>> | undefined = []
    const print = (rows: ReadonlyArray<ReadonlyArray<string>>) => {
      for (const r of rows) widen(widths, r)
      return write(rows.map((r) => tableLine(widths, r) + "\n").join(""))
    }
    const printHead = Effect.suspend(() => {
      const rows = head ?? []
      head = undefined
      for (const r of rows) widen(widths, r)
      return Effect.zipRight(write(tableHeader(widths, EVENT_COLUMNS) + "\n"), print(rows))
    })
    const read = yield* readEach(reader.read, reader.reload, (events) =>
      Effect.suspend(() => {
        const rows = events.map(eventRow)
        if (head === undefined) return print(rows)
        for (const r of rows) head.push(r)
        return head.length >= STREAM_HEAD_EVENTS ? printHead : Effect.void
      })).pipe(Effect.tapError(() => drained))
    if (head !== undefined) yield* printHead
    return { source, widths, length: read.count }
  })

/** `show`. */
export const showCommand = Command.make("show", { json, store, session, file, type, turn, from, to, tail, follow: followOption }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const asked = yield* showFilter(o)
      if (!o.json && !isFiltering(asked)) {
        const { length, source, widths } = yield* streamTable(o)
        if (o.follow) yield* followFrom(source, length, asked, (e) => write(tableLine(widths, eventRow(e)) + "\n"))
        return
      }
      const { count, filter, kept, length, source } = yield* showPasses(o)
      if (o.follow && o.json) {
        // one event per line (JSON Lines): the shown ones, then each new one
        yield* kept((events) => write(events.map((e) => encodeJson(e as unknown as Json) + "\n").join("")))
        return yield* followFrom(source, length, filter, (e) => write(encodeJson(e as unknown as Json) + "\n"))
      }
      if (o.json) {
        // one JSON array (what `printJson` of the whole list prints), written as it is read
        let first = true
        yield* write("[")
        yield* kept((events) => {
          let text = ""
          for (const e of events) {
            text += (first ? "" : ",") + encodeJson(e as unknown as Json)
            first = false
          }
          return write(text)
        })
        return yield* write("]\n")
      }
      if (count === 0 && isFiltering(filter) && !o.follow) return yield* Console.log(noMatch(filter))
      const widths = columnWidths(EVENT_COLUMNS)
      yield* kept((events) => Effect.sync(() => events.forEach((e) => widen(widths, eventRow(e)))))
      yield* write(tableHeader(widths, EVENT_COLUMNS) + "\n")
      yield* kept((events) => write(events.map((e) => tableLine(widths, eventRow(e)) + "\n").join("")))
      if (o.follow) yield* followFrom(source, length, filter, (e) => write(tableLine(widths, eventRow(e)) + "\n"))
    }),
    () => Effect.void
  )).pipe(Command.withDescription("events, one line each (--type, --turn, --from, --to and --tail filter them)"))
