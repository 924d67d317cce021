/**
 * `session-log list` (docs/cli.md): the sessions of a store, each with its header, its event
 * count and what people look for next (last activity, message count, first-message preview, the
 * parent of a fork), all derived from a streamed cold read of the stored log. `--watch` then
 * asks the store after each of its wake-ups (`changes`), else every `WATCH_MILLIS`,
 * where each log ends (`listEntries`, no log read), reads again the sessions that appeared or
 * whose end moved, and prints each that changed, one line each (`--json`: one JSON object per
 * line), until interrupted. Never writes.
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import type { Message } from "../../schema/Messages.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import { checkVocabulary, isRecord } from "../../schema/Validation.js"
import { readPipeline, type SessionEntry, type SessionStoreShape } from "../../services/SessionStore.js"
import { json, resolveSpec, runCommand, store } from "./CommandSupport.js"
import { clip, clipId, dim, formatTime, printJson, table } from "./Output.js"
import { textOf } from "./Render.js"
import { openExistingStore } from "./Target.js"

/** How often `list --watch` reads the store again, in milliseconds. */
const WATCH_MILLIS = 1_000

const watch = Options.boolean("watch").pipe(
  Options.withDescription(
    `then print each session that appears or changes (on each commit the store's watch reports), until interrupted (Ctrl-C)`
  )
)

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

/** What `list` gathers from the events of a log, in order. */
const activityFold = (header: SessionHeader) => {
  let last = header.createdAt
  let messages = 0
  let preview: string | null = null
  let unknownType = false
  let seen = 0
  return {
    add: (events: ReadonlyArray<unknown>) => {
      for (const e of events) {
        const at = seen++
        if (!isRecord(e)) continue
        // K7: a log the read pipeline refuses has no activity to show
        if (typeof e.type === "string" && checkVocabulary(e.type, e.ignorable, at, "K7") !== undefined) unknownType = true
        if (typeof e.time === "number" && e.time > last) last = e.time
        if (e.surfaceOp !== "append") continue
        messages++
        if (preview === null && e.type === "user/message" && isRecord(e.data) && Array.isArray(e.data.content)) {
          preview = clip(textOf(e.data as unknown as Message), PREVIEW_CHARS)
        }
      }
    },
    result: (): Activity => unknownType ? UNKNOWN : { lastActivity: last, messages, preview }
  }
}

/**
 * A session's row: its event count and activity from a streamed read (memory bounded by a chunk,
 * whatever the log's length); a version-0 log is read whole and upgraded in memory first.
 */
const sessionRow = (s: SessionStoreShape, h: SessionHeader) =>
  Effect.gen(function*() {
    const fold = activityFold(h)
    let legacy = false
    const summary = yield* s.loadEach(h.id, {
      onHeader: (_, version) => Effect.sync(() => void (legacy = version === 0)),
      onEvents: (events) => Effect.sync(() => legacy || fold.add(events))
    })
    if (legacy) {
      const upgraded = yield* Effect.either(readPipeline(yield* s.load(h.id)))
      if (upgraded._tag === "Left") return { ...h, events: summary.count as number | null, ...UNKNOWN }
      const v1 = activityFold(h)
      v1.add(upgraded.right.events)
      return { ...h, events: summary.count as number | null, ...v1.result() }
    }
    const version = yield* Effect.either(readPipeline({ ...summary, events: [] }))
    return { ...h, events: summary.count as number | null, ...(version._tag === "Left" ? UNKNOWN : fold.result()) }
  }).pipe(Effect.orElseSucceed(() => ({ ...h, events: null, ...UNKNOWN })))

type Row = Effect.Effect.Success<ReturnType<typeof sessionRow>>

/** Where a session's log ends, as the store's `listEntries` tells it without a read. */
const endOf = (e: SessionEntry): string => e.last === undefined ? "-" : `${e.last.seq}:${e.last.time}`

/**
 * When `list --watch` asks the store again: after each of its wake-ups, coalesced, where it has a
 * store-wide signal (`SessionStoreShape.changes`: SQLite, PostgreSQL, JSONL; a failed watch falls
 * back to the poll), else every `WATCH_MILLIS` (docs/follow.md "Known limits").
 */
const nextChange = (s: SessionStoreShape) =>
  Effect.gen(function*() {
    const changes = s.changes
    if (changes === undefined) return Effect.sleep(WATCH_MILLIS)
    const woken = yield* Queue.sliding<void>(1)
    const poll = Effect.forever(Effect.zipRight(Effect.sleep(WATCH_MILLIS), Queue.offer(woken, undefined)))
    yield* Stream.runForEach(changes(), () => Queue.offer(woken, undefined)).pipe(
      Effect.catchAll((failure) => Effect.zipRight(Effect.logWarning("list --watch: the store's watch failed; polling instead", failure), poll)),
      Effect.forkScoped
    )
    // the watch's first wake-up (once armed) asks again at once: nothing committed meanwhile is missed
    return Queue.take(woken)
  })

/**
 * `list --watch`: after each change of the store, the rows that are new or whose events or
 * activity changed. Each round asks the store where each log ends (`listEntries`, no log read)
 * and reads again only the sessions whose end moved.
 */
const watchRows = (s: SessionStoreShape, first: ReadonlyArray<Row>, ends: Map<string, string>, asJson: boolean) =>
  Effect.scoped(Effect.gen(function*() {
    const seen = new Map(first.map((r) => [r.id, `${r.events}:${r.lastActivity}`]))
    const next = yield* nextChange(s)
    while (true) {
      yield* next
      const moved = (yield* s.listEntries()).filter((e) => ends.get(e.header.id) !== endOf(e))
      const rows = yield* Effect.forEach(moved, (e) => sessionRow(s, e.header))
      for (const [i, r] of rows.entries()) {
        ends.set(r.id, endOf(moved[i]))
        const key = `${r.events}:${r.lastActivity}`
        if (seen.get(r.id) === key) continue
        const fresh = !seen.has(r.id)
        seen.set(r.id, key)
        yield* Console.log(
          asJson
            ? JSON.stringify(r)
            : `${fresh ? "new" : "changed"} ${clipId(r.id)}  events ${r.events ?? "?"}  messages ${r.messages ?? "?"}  last activity ${
              r.lastActivity === null ? "?" : formatTime(r.lastActivity)
            }`
        )
      }
    }
  }))

/** `list`. */
export const listCommand = Command.make("list", { json, store, watch }, (o) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const spec = yield* resolveSpec(o.store)
      // a store that does not exist is not found (exit 2), never "no sessions", and is not created
      const s = yield* openExistingStore(spec, { readOnly: true })
      if (!o.watch) return yield* Effect.forEach(yield* s.list(), (h) => sessionRow(s, h))
      const entries = yield* s.listEntries()
      const rows = yield* Effect.forEach(entries, (e) => sessionRow(s, e.header))
      // --watch: the list as it is (one JSON object per line with --json), then its changes
      yield* o.json ? Effect.forEach(rows, (r) => Console.log(JSON.stringify(r))) : listOutput(rows)
      return yield* watchRows(s, rows, new Map(entries.map((e) => [e.header.id, endOf(e)])), o.json)
    }),
    (rows) => o.json ? printJson(rows) : listOutput(rows)
  )).pipe(
    Command.withDescription("sessions in a store: created, last activity, events, messages, parent (forks), first message")
  )

/** People's table of `list`. */
const listOutput = (rows: ReadonlyArray<Row>) =>
  Console.log(
        rows.length === 0 ? dim("no sessions") : table(
          ["ID", "CREATED", "LAST ACTIVITY", "EVENTS", "MESSAGES", "PARENT", "FIRST MESSAGE"],
          rows.map((r) => [
            clipId(r.id),
            formatTime(r.createdAt),
            r.lastActivity === null ? "?" : formatTime(r.lastActivity),
            String(r.events ?? "?"),
            String(r.messages ?? "?"),
            clipId(r.parentSession ?? ""),
            r.preview === null ? "" : clip(r.preview, 40)
          ])
        )
  )
