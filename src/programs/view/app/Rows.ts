/**
 * The viewer app's timeline rows (docs/viewer.md): one row per event or folded run of chunks, with
 * its seq, type, surface operation, repair badge, token usage and the link to its tool call or
 * result; keyboard moves between rows (Enter or space selects, arrows or j/k move).
 *
 * @since 0.2.0
 */
/// <reference lib="dom" />
import type { TimelineRow } from "../Views.js"
import { clipped, h } from "./Dom.js"

/** What a row does when used: select its seq, go to another seq, move the focus by one row. */
export interface RowActions {
  readonly select: (seq: number) => Promise<void>
  readonly goTo: (seq: number) => Promise<void>
  readonly move: (from: HTMLElement, by: 1 | -1) => void
}

const rowText = (r: TimelineRow): string => r.text

/** The element of one timeline row. */
export const rowElement = (r: TimelineRow, actions: RowActions): HTMLElement => {
  const classes = ["row", r.dim ? "dim" : "", r.closer ? "closer" : "", r.surface.startsWith("replace") ? "replacing" : ""]
  const li = h(
    "li",
    {
      class: classes.filter((c) => c !== "").join(" "),
      tabindex: "0",
      "data-seq": String(r.seq),
      "data-last": String(r.lastSeq),
      "aria-selected": "false"
    },
    h("span", { class: "seq" }, r.seq === r.lastSeq ? String(r.seq) : `${r.seq}–${r.lastSeq}`),
    h("span", { class: "type" }, r.type === "assistant/chunk" ? `assistant/chunk ×${r.lastSeq - r.seq + 1}` : r.type),
    r.surface === "" ? null : h("span", { class: "surface" }, r.surface),
    r.closer ? h("span", { class: "badge closer" }, "repair closer") : null,
    r.usage === null ? null : h("span", { class: "usage" }, `${r.usage.inputTokens ?? "?"} in / ${r.usage.outputTokens ?? "?"} out tokens`),
    r.pairedSeq === null ? null : pairLink(r, actions),
    h("span", { class: "text" }, clipped(rowText(r)))
  )
  li.addEventListener("click", () => void actions.select(r.seq))
  li.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") {
      e.preventDefault()
      void actions.select(r.seq)
    } else if (e.key === "ArrowDown" || e.key === "j") {
      e.preventDefault()
      actions.move(li, 1)
    } else if (e.key === "ArrowUp" || e.key === "k") {
      e.preventDefault()
      actions.move(li, -1)
    }
  })
  return li
}

const pairLink = (r: TimelineRow, actions: RowActions): HTMLElement => {
  const label = r.type === "tool/call" ? `result at seq ${r.pairedSeq}` : `call at seq ${r.pairedSeq}`
  const b = h("button", { type: "button", class: "link pair" }, label)
  b.addEventListener("click", (e) => {
    e.stopPropagation()
    void actions.goTo(r.pairedSeq!)
  })
  return b
}
