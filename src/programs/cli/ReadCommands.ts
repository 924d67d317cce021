/**
 * The reading commands on one session (docs/cli.md, SPEC §12): `messages`, `transcript`,
 * `surface` and `request` (`show` is `ShowCommand`). They cold-read and never write.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { requestAtLog } from "../../services/RequestAt.js"
import { deriveMessages, foldSurface } from "../../services/SurfaceManager.js"
import { file, json, optionalInteger, readStoredEvents, runCommand, session, store } from "./CommandSupport.js"
import { bold, clip, dim, printJson } from "./Output.js"
import { messageTable, replacementTable, transcriptTable } from "./Render.js"

// --- messages, transcript, surface ----------------------------------------------------------

/**
 * `messages`: the surface's derived messages (SPEC §4.6, §12), not the request: a request
 * header's `messagePrefix` belongs to the request (§1.5, §5.4) and `request --at` prints it.
 */
export const messagesCommand = Command.make("messages", { json, store, session, file }, (o) =>
  runCommand(
    o.json,
    Effect.map(readStoredEvents(o.file, o.session, o.store), (events) => {
      const fold = foldSurface(events)
      return "nodes" in fold ? deriveMessages(fold.nodes, (seq) => events[seq]) : []
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
