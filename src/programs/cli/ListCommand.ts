/**
 * `session-log list` (DESIGN.md §6): the sessions of a store, each with its header, its event
 * count and what people look for next (last activity, message count, first-message preview, the
 * parent of a fork), all derived from a cold read of the stored log. Never writes.
 */
import * as Command from "@effect/cli/Command"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import type { Message } from "../../schema/Messages.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { isRecord } from "../../schema/Validation.js"
import { type LoadResult, readPipeline } from "../../services/SessionStore.js"
import { json, resolveSpec, runCommand, store } from "./CommandSupport.js"
import { clip, dim, formatTime, printJson, table } from "./Output.js"
import { textOf } from "./Render.js"
import { openExistingStore } from "./Target.js"

/** The longest first-message preview in `--json`. */
const PREVIEW_CHARS = 100

/** What `list` derives from a stored log (null when the log cannot be read). */
interface Activity {
  /** Epoch ms of the latest event (or of the creation when later: a fork's inherited events are older). */
  readonly lastActivity: number | null
  /** Messages appended to the conversation: the rows of `transcript`. */
  readonly messages: number | null
  /** The first user message, on one line and clipped. */
  readonly preview: string | null
}

const UNKNOWN: Activity = { lastActivity: null, messages: null, preview: null }

/** Activity of a loaded log, read through the read pipeline (a v0 log upgraded in memory). */
const activityOf = (header: SessionHeader, loaded: LoadResult): Effect.Effect<Activity> =>
  readPipeline(loaded).pipe(
    Effect.map(({ events }) => {
      let last = header.createdAt
      let messages = 0
      let preview: string | null = null
      for (const e of events) {
        if (!isRecord(e)) continue
        if (typeof e.time === "number" && e.time > last) last = e.time
        if (e.surfaceOp !== "append") continue
        messages++
        if (preview === null && e.type === "user/message" && isRecord(e.data) && Array.isArray(e.data.content)) {
          preview = clip(textOf(e.data as unknown as Message), PREVIEW_CHARS)
        }
      }
      return { lastActivity: last, messages, preview }
    }),
    Effect.orElseSucceed(() => UNKNOWN)
  )

/** `list`. */
export const listCommand = Command.make("list", { json, store }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const spec = yield* resolveSpec(o.store)
      // a store that does not exist is not found (exit 2), never "no sessions", and is not created
      const s = yield* openExistingStore(spec)
      const headers = yield* s.list()
      return yield* Effect.forEach(headers, (h) =>
        s.load(h.id).pipe(
          Effect.flatMap((l) => Effect.map(activityOf(h, l), (a) => ({ ...h, events: l.events.length as number | null, ...a }))),
          Effect.orElseSucceed(() => ({ ...h, events: null, ...UNKNOWN }))
        ))
    }),
    (rows) =>
      o.json ? printJson(rows) : Console.log(
        rows.length === 0 ? dim("no sessions") : table(
          ["ID", "CREATED", "LAST ACTIVITY", "EVENTS", "MESSAGES", "PARENT", "FIRST MESSAGE"],
          rows.map((r) => [
            r.id,
            formatTime(r.createdAt),
            r.lastActivity === null ? "?" : formatTime(r.lastActivity),
            String(r.events ?? "?"),
            String(r.messages ?? "?"),
            r.parentSession ?? "",
            r.preview === null ? "" : clip(r.preview, 40)
          ])
        )
      )
  )).pipe(
    Command.withDescription("sessions in a store: created, last activity, events, messages, parent (forks), first message")
  )
