/**
 * Readable exports of one session (docs/viewer.md "Exports"): a Markdown transcript (messages,
 * tool calls and results, compactions and prunings as notes) and one self-contained HTML file
 * (the viewer's app with the session's events inline, openable from disk). Both are written piece
 * by piece as the events are read: a writer holds one chunk of events, never the log.
 *
 * @since 0.2.0
 */
import { createHash } from "node:crypto"
import type { Event } from "../../schema/Events.js"
import { encodeJson, type Json } from "../../schema/Json.js"
import type { SessionHeader } from "../../schema/SessionHeader.js"
import type { SessionSummary } from "./ViewData.js"
import type { TornTailNote } from "./ViewIndex.js"
import { contentText } from "./Views.js"
import type { ViewAssets } from "./Server.js"

type Rec = Record<string, unknown>
const isRec = (u: unknown): u is Rec => typeof u === "object" && u !== null && !Array.isArray(u)

// --- Markdown -------------------------------------------------------------------------------

/** A fenced block holding `text` verbatim: the fence is longer than any run of backticks in it. */
const fenced = (text: string, info = ""): string => {
  let longest = 0
  for (const m of text.matchAll(/`+/g)) longest = Math.max(longest, m[0].length)
  const fence = "`".repeat(Math.max(3, longest + 1))
  return `${fence}${info}\n${text}\n${fence}\n\n`
}

/** Markdown-inert inline text (a session id, a tool name): backslash-escaped punctuation. */
const inline = (s: string): string => s.replace(/[\\`*_[\]<>|~#]/g, (c) => `\\${c}`).replace(/[\r\n]+/g, " ")

/**
 * The start of a Markdown transcript: the session's title and header.
 *
 * @since 0.2.0
 * @category utils
 */
export const markdownStart = (header: SessionHeader): string =>
  `# Session ${inline(header.id)}\n\n` +
  `Created ${new Date(header.createdAt).toISOString()}` +
  (header.parentSession === undefined ? "" : `, forked from ${inline(header.parentSession)}`) +
  `. Session text is quoted verbatim in fenced blocks.\n\n`

const replacementNote = (e: Event): string =>
  typeof e.surfaceOp === "object" && e.surfaceOp !== null
    ? `> **Replaces** events ${e.surfaceOp.start}–${e.surfaceOp.end} (seq ${e.seq}).\n\n`
    : ""

/**
 * The Markdown of a chunk of events: messages, tool calls and results, compactions and prunings
 * as notes; other events are left out (they are in the JSONL export).
 *
 * @since 0.2.0
 * @category utils
 */
export const markdownEvents = (events: ReadonlyArray<Event>): string => {
  let out = ""
  for (const e of events) {
    const d = isRec(e.data) ? e.data : {}
    switch (e.type) {
      case "user/message":
      case "context/message":
        out += `## ${e.type === "user/message" ? "User" : "Context"} (seq ${e.seq})\n\n${replacementNote(e)}` +
          fenced(contentText(d.content))
        break
      case "assistant/message": {
        const m = isRec(d.message) ? d.message : {}
        const text = contentText(Array.isArray(m.content) ? m.content.filter((b) => isRec(b) && b.type !== "tool-call") : [])
        out += `## Assistant (seq ${e.seq}${d.turn === undefined ? "" : `, turn ${String(d.turn)}`})\n\n${replacementNote(e)}` +
          (text === "" ? "" : fenced(text))
        break
      }
      case "tool/call":
        out += `### Tool call ${inline(String(d.name))} (seq ${e.seq}, ${inline(String(d.callId))})\n\n` +
          fenced(String(d.arguments), "json")
        break
      case "tool/result": {
        const m = isRec(d.message) ? d.message : {}
        const block = Array.isArray(m.content) && isRec(m.content[0]) ? m.content[0] : {}
        out += `### Tool result (seq ${e.seq}${typeof block.toolCallId === "string" ? `, ${inline(block.toolCallId)}` : ""})\n\n` +
          replacementNote(e) + fenced(contentText(block.content))
        break
      }
      case "compaction/summary":
        out += `> **Compaction** (seq ${e.seq}): the earlier conversation was summarised:\n\n` + fenced(contentText(d.summary))
        break
      case "compaction/prune":
        out += `> **Pruned** (seq ${e.seq}): tool results ${
          Array.isArray(d.shadowedSeqs) ? d.shadowedSeqs.join(", ") : ""
        } were trimmed (${String(d.shadowedTokenCount ?? "?")} tokens).\n\n`
        break
      case "turn/end":
        if (isRec(d.reason) && d.reason.kind === "interrupted") {
          out += `> **Turn ${String(d.turn)} was interrupted** (seq ${e.seq}): closed by repair.\n\n`
        }
        break
      default:
        break
    }
  }
  return out
}

// --- HTML -----------------------------------------------------------------------------------

/** JSON for a `<script type="application/json">` element: no `<` can end it early. */
const scriptJson = (value: unknown): string =>
  // `<` appears in JSON text only inside strings, where \u003c stands for it
  encodeJson(value as Json).replace(/</g, "\\u003c")

const sha256 = (text: string): string => createHash("sha256").update(text, "utf8").digest("base64")

const escapeText = (s: string): string => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

/**
 * The start of an exported HTML file: its CSP (the inline app and style allowed by their hashes,
 * nothing fetched), the style, the title.
 *
 * @since 0.2.0
 * @category utils
 */
export const htmlStart = (header: SessionHeader, assets: ViewAssets): string =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-${sha256(assets.appJs)}'; style-src 'sha256-${
    sha256(assets.appCss)
  }'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Session ${escapeText(header.id)} — session-log</title>
<style>${assets.appCss}</style>
</head>
<body>
<noscript>This exported session is shown by a script; open the file in a browser with JavaScript enabled.</noscript>
`

/**
 * One chunk of events of an exported HTML file (inert JSON data, read by the app).
 *
 * @since 0.2.0
 * @category utils
 */
export const htmlEvents = (events: ReadonlyArray<Event>): string =>
  events.length === 0 ? "" : `<script type="application/json" class="session-log-events">${scriptJson(events)}</script>\n`

/**
 * The end of an exported HTML file: the session's summary, then the app.
 *
 * @since 0.2.0
 * @category utils
 */
export const htmlEnd = (
  header: SessionHeader,
  counts: { readonly events: number; readonly lastActivity: number; readonly tornTail: TornTailNote | null },
  assets: ViewAssets
): string => {
  const summary: SessionSummary = {
    id: header.id,
    createdAt: header.createdAt,
    parentSession: header.parentSession ?? null,
    events: counts.events,
    lastActivity: counts.lastActivity,
    preview: "",
    problem: null,
    tornTail: counts.tornTail
  }
  return `<script type="application/json" id="session-log-summary">${scriptJson(summary)}</script>
<script>${assets.appJs}</script>
</body>
</html>
`
}

/**
 * Whether the app's script can be inlined as is (no `</script` inside it).
 *
 * @since 0.2.0
 * @category utils
 */
export const inlinable = (assets: ViewAssets): boolean => !/<\/script/i.test(assets.appJs) && !/<\/style/i.test(assets.appCss)
