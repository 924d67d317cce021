/**
 * The viewer app's DOM helpers (docs/viewer.md): elements built with attributes and text nodes
 * only (never `innerHTML`), session text clipped and its control and bidirectional-override
 * characters shown as visible escapes, and the small pure pieces of the page built from them.
 *
 * @since 0.2.0
 */
/// <reference lib="dom" />
import type { Message } from "../../../schema/Messages.js"
import type { SessionSummary } from "../ViewData.js"
import { contentText, type TimeTravel } from "../Views.js"

/** The longest text shown in one row (the rest is counted, never dropped silently). */
export const ROW_CHARS = 2_000

// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g

/** Text with control and bidi-control characters made visible (⟨U+202E⟩): inert and honest. */
export const visible = (s: string): string =>
  s.replace(UNSAFE, (c) => `⟨U+${c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}⟩`)

export const clipped = (s: string, max = ROW_CHARS): string =>
  s.length <= max ? visible(s) : `${visible(s.slice(0, max))} … (${s.length - max} more characters)`

export type Child = Node | string | null | undefined | false

/** An element with attributes (never `innerHTML`) and children as text nodes or elements. */
export const h = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: ReadonlyArray<Child>
): HTMLElementTagNameMap[K] => {
  const el = document.createElement(tag)
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v)
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue
    el.append(typeof c === "string" ? document.createTextNode(c) : c)
  }
  return el
}

export const byId = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T

export const time = (ms: number): string => new Date(ms).toISOString().replace("T", " ").slice(0, 19)

/** A session's status as the list shows it: its text and its class. */
export const statusOf = (s: SessionSummary): { text: string; cls: string } =>
  s.indexing === true
    ? { text: `indexing… ${s.events.toLocaleString("en")} events so far`, cls: "pending" }
    : s.problem !== null
    ? { text: `✗ ${s.problem.rule ?? s.problem.tag}${s.problem.seq === null ? "" : ` at seq ${s.problem.seq}`}`, cls: "bad" }
    : s.tornTail !== null
    ? { text: `torn tail at seq ${s.tornTail.fromSeq}`, cls: "warn" }
    : { text: "✓ verified", cls: "ok" }

/** Messages as an ordered list: each one's role and its text. */
export const messageList = (messages: ReadonlyArray<Message>, testId: string): HTMLElement =>
  h(
    "ol",
    { class: "messages", "data-testid": testId },
    ...messages.map((m) =>
      h(
        "li",
        { class: `message ${m.role}`, "data-role": m.role, "data-id": String(m.id) },
        h("span", { class: "role" }, m.role),
        h("span", { class: "text" }, clipped(contentText(m.content)))
      )
    )
  )

/** The header's top-level keys whose values differ from the previous header's. */
export const headerChanges = (at: TimeTravel): ReadonlyArray<string> => {
  const now = (at.request.header ?? {}) as Record<string, unknown>
  const before = (at.previousHeader ?? {}) as Record<string, unknown>
  const keys = [...new Set([...Object.keys(now), ...Object.keys(before)])]
  return keys.filter((k) => JSON.stringify(now[k]) !== JSON.stringify(before[k]))
}
