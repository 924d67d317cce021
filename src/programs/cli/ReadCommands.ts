/**
 * The reading commands on one session (DESIGN.md §6, SPEC §12): `show` (with its event filters),
 * `messages`, `transcript`, `surface` and `request`. They cold-read and never write.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { requestAtLog } from "../../services/RequestAt.js"
import { foldSurface } from "../../services/SurfaceManager.js"
import { file, json, optionalInteger, readStoredEvents, runCommand, session, store } from "./CommandSupport.js"
import { checkTail, type EventFilter, filterEvents, isFiltering, parseTypes, unknownTypes } from "./EventFilter.js"
import { bold, clip, dim, printJson } from "./Output.js"
import { eventTable, messageTable, replacementTable, transcriptTable } from "./Render.js"

// --- show -----------------------------------------------------------------------------------

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

/** `show`. */
export const showCommand = Command.make("show", { json, store, session, file, type, turn, from, to, tail }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const filter = yield* showFilter(o)
      return { filter, events: filterEvents(yield* readStoredEvents(o.file, o.session, o.store), filter) }
    }),
    ({ events, filter }) =>
      o.json
        ? printJson(events)
        : Console.log(events.length === 0 && isFiltering(filter) ? noMatch(filter) : eventTable(events))
  )).pipe(Command.withDescription("events, one line each (--type, --turn, --from, --to and --tail filter them)"))

// --- messages, transcript, surface ----------------------------------------------------------

/** `messages`. */
export const messagesCommand = Command.make("messages", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.map(readStoredEvents(o.file, o.session, o.store), (events) => {
      const last = requestAtLog(events, events.length - 1)
      return "messages" in last ? last.messages : []
    }),
    (messages) => o.json ? printJson(messages) : Console.log(messageTable(messages))
  )).pipe(Command.withDescription("derived model messages"))

/** `transcript`. */
export const transcriptCommand = Command.make("transcript", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.map(readStoredEvents(o.file, o.session, o.store), (events) => events.filter((e) => e.surfaceOp === "append")),
    (events) => o.json ? printJson(events) : Console.log(transcriptTable(events))
  )).pipe(Command.withDescription("human transcript (append-origin events, replacements not applied)"))

/** `surface`. */
export const surfaceCommand = Command.make("surface", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.map(readStoredEvents(o.file, o.session, o.store), (events) => {
      const fold = foldSurface(events)
      return "nodes" in fold ? fold : { nodes: [], replacements: [] }
    }),
    (fold) =>
      o.json ? printJson(fold) : Console.log(
        `${bold("surface")} ${fold.nodes.join(", ") || dim("(empty)")}\n` +
          (fold.replacements.length === 0 ? dim("no replacements") : replacementTable("SEQ", fold.replacements))
      )
  )).pipe(Command.withDescription("surface nodes and replacement history"))

// --- request --------------------------------------------------------------------------------

const at = optionalInteger("at", "<seq>", "the event seq after which to rebuild the request (default: the last)")

/** `request`. */
export const requestCommand = Command.make("request", { json, store, session, file, at }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const events = yield* readStoredEvents(o.file, o.session, o.store)
      const seq = Option.getOrElse(o.at, () => events.length - 1)
      const snap = requestAtLog(events, seq)
      // the log itself was validated above: an L10 here is a seq that is not in it (exit 2)
      if ("_tag" in snap) return yield* snap
      return { seq, header: snap.header ?? null, messages: snap.messages }
    }),
    (req) =>
      o.json ? printJson({ header: req.header, messages: req.messages }) : Console.log(
        `${bold(`request at seq ${req.seq}`)}\n` +
          (req.header === null
            ? dim("no request header")
            : `${req.header.config.provider}/${req.header.config.model}` +
              (req.header.system === undefined ? "" : `\nsystem: ${clip(req.header.system, 100)}`) +
              (req.header.tools === undefined ? "" : `\ntools: ${req.header.tools.map((t) => t.name).join(", ")}`)) +
          `\n${messageTable(req.messages)}`
      )
  )).pipe(Command.withDescription("the exact request in force at --at <seq> (header + messages)"))
