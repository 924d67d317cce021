/**
 * The viewer's web app (docs/viewer.md), bundled by esbuild into the CLI (scripts/build-view.mjs):
 * the sessions as a fork tree, a session's paged timeline, time travel at any seq (surface,
 * derived messages, the exact request and what changed in its header) and provenance both ways.
 * Session text only ever reaches the page through `textContent` (never as HTML), with control
 * and bidirectional-override characters shown as visible escapes.
 *
 * @since 0.2.0
 */
/// <reference lib="dom" />
import type { Event } from "../../../schema/Events.js"
import type { SessionSummary, TimelinePage } from "../ViewData.js"
import type { TimeTravel } from "../Views.js"
import { byId, clipped, h, headerChanges, messageList, statusOf, time } from "./Dom.js"
import { rowElement, type RowActions } from "./Rows.js"
import { ApiRefused, httpSource, inlineSource, type Source } from "./Source.js"

const PAGE = 200
const POLL_MS = 2_000

// --- state ----------------------------------------------------------------------------------

interface State {
  source: Source
  sessions: ReadonlyArray<SessionSummary>
  session: string | null
  page: TimelinePage | null
  selected: number | null
}

let state: State

// --- layout ---------------------------------------------------------------------------------

const layout = () => {
  document.body.append(
    h(
      "header",
      { class: "bar" },
      h("h1", {}, "session-log view"),
      h("span", { id: "where", class: "where" }),
      h("span", { id: "notice", class: "notice", role: "status", "aria-live": "polite" })
    ),
    h(
      "div",
      { class: "layout" },
      h(
        "nav",
        { id: "sessions-pane", "aria-label": "Sessions" },
        h("input", { id: "search", type: "search", placeholder: "Search sessions", "aria-label": "Search sessions" }),
        h("ul", { id: "sessions", role: "tree", "aria-label": "Sessions and their forks" })
      ),
      h(
        "main",
        { id: "timeline-pane" },
        h("div", { id: "problem", class: "problem", role: "alert", hidden: "" }),
        h(
          "div",
          { class: "toolbar" },
          h("h2", { id: "title" }, "No session open"),
          h("label", { for: "seq" }, "seq"),
          h("input", { id: "seq", type: "range", min: "0", max: "0", value: "0", "aria-label": "Time travel: seq" }),
          h("output", { id: "seq-out", for: "seq" }),
          h("button", { id: "prev", type: "button" }, "◀ earlier"),
          h("button", { id: "next", type: "button" }, "later ▶"),
          h("span", { id: "range", class: "range" })
        ),
        h("ol", { id: "rows", class: "rows", "aria-label": "Timeline" })
      ),
      h(
        "aside",
        { id: "detail-pane", "aria-label": "At the selected seq" },
        // provenance first: short, and what a click on a replacing or shadowed event is about
        h("section", { id: "provenance" }),
        h("section", { id: "travel" }, h("p", { class: "hint" }, "Choose an event or a seq to see what the model saw."))
      )
    )
  )
}

const notice = (text: string) => void (byId("notice").textContent = text)

// --- sessions -------------------------------------------------------------------------------

const sessionItem = (s: SessionSummary, children: ReadonlyArray<HTMLElement>): HTMLElement => {
  const status = statusOf(s)
  const open = h(
    "button",
    { type: "button", class: "session", "data-session": s.id, "aria-current": String(s.id === state.session) },
    h("span", { class: "id" }, clipped(s.id, 80)),
    h("span", { class: `status ${status.cls}` }, status.text),
    h("span", { class: "meta" }, `${s.events} events · last ${time(s.lastActivity)}`),
    s.preview === "" ? null : h("span", { class: "preview" }, clipped(s.preview, 120))
  )
  open.addEventListener("click", () => void openSession(s.id))
  return h(
    "li",
    { role: "treeitem", "aria-expanded": "true" },
    open,
    children.length === 0 ? null : h("ul", { role: "group" }, ...children)
  )
}

const renderSessions = () => {
  const list = byId<HTMLUListElement>("sessions")
  const query = byId<HTMLInputElement>("search").value.trim().toLowerCase()
  list.replaceChildren()
  const all = state.sessions
  if (query !== "") {
    const hits = all.filter((s) => s.id.toLowerCase().includes(query) || s.preview.toLowerCase().includes(query))
    list.append(...hits.map((s) => sessionItem(s, [])))
    if (hits.length === 0) list.append(h("li", { class: "hint" }, "No session matches."))
    return
  }
  // the fork lineage as a tree: children under their parent (a parent not in the store: a root)
  const ids = new Set(all.map((s) => s.id))
  const children = new Map<string, Array<SessionSummary>>()
  for (const s of all) {
    if (s.parentSession !== null && ids.has(s.parentSession)) {
      children.set(s.parentSession, [...(children.get(s.parentSession) ?? []), s])
    }
  }
  const seen = new Set<string>()
  const build = (s: SessionSummary): HTMLElement => {
    seen.add(s.id)
    return sessionItem(s, (children.get(s.id) ?? []).filter((c) => !seen.has(c.id)).map(build))
  }
  list.append(...all.filter((s) => s.parentSession === null || !ids.has(s.parentSession)).map(build))
  if (all.length === 0) list.append(h("li", { class: "hint" }, "No sessions in this store."))
}

// --- timeline -------------------------------------------------------------------------------

/** What a timeline row does when used (Rows.ts). */
const rowActions: RowActions = {
  select: (seq) => select(seq),
  goTo: (seq) => goTo(seq),
  move: (from, by) => moveFocus(from, by)
}

const moveFocus = (from: HTMLElement, by: 1 | -1) => {
  const next = (by === 1 ? from.nextElementSibling : from.previousElementSibling) as HTMLElement | null
  if (next !== null) {
    next.focus()
    void select(Number(next.dataset.seq))
  } else if (state.page !== null) {
    const offset = state.page.offset + by * PAGE
    if (offset >= 0 && offset < state.page.total) void loadPage(offset, by === 1 ? "first" : "last")
  }
}

const showProblem = (page: TimelinePage) => {
  const box = byId("problem")
  box.replaceChildren()
  if (page.problem === null && page.tornTail === null) {
    box.hidden = true
    return
  }
  box.hidden = false
  if (page.problem !== null) {
    const p = page.problem
    box.append(
      h("strong", {}, `This log does not load: ${p.rule ?? p.tag}`),
      h(
        "span",
        { class: "where" },
        `${p.seq === null ? "" : ` at seq ${p.seq}`}${p.line === null ? "" : `, line ${p.line}`}`
      ),
      h("p", {}, clipped(p.message, 500)),
      h("p", {}, `${page.total} events before it load and are shown.`)
    )
  }
  if (page.tornTail !== null) {
    const t = page.tornTail
    box.append(
      h(
        "p",
        {},
        `A torn tail (${t.reason}) from seq ${t.fromSeq}${t.line === null ? "" : `, line ${t.line}`} is not shown: ` +
          "`session-log repair` removes it."
      )
    )
  }
}

const renderPage = (page: TimelinePage) => {
  state.page = page
  showProblem(page)
  const rows = byId<HTMLOListElement>("rows")
  rows.replaceChildren(...page.rows.map((r) => rowElement(r, rowActions)))
  const last = page.rows.length === 0 ? page.offset : page.rows[page.rows.length - 1].lastSeq
  byId("range").textContent = page.total === 0
    ? (page.indexing === true ? "indexing…" : "no events")
    : `events ${page.offset}–${last} of ${page.total}${page.indexing === true ? " so far (indexing…)" : ""}`
  const slider = byId<HTMLInputElement>("seq")
  slider.max = String(Math.max(0, page.total - 1))
  byId<HTMLButtonElement>("prev").disabled = page.offset === 0
  byId<HTMLButtonElement>("next").disabled = page.offset + PAGE >= page.total
  markSelected()
}

const loadPage = async (offset: number, focus?: "first" | "last") => {
  if (state.session === null) return
  const page = await state.source.page(state.session, offset, PAGE)
  renderPage(page)
  const rows = byId("rows")
  const target = (focus === "last" ? rows.lastElementChild : focus === "first" ? rows.firstElementChild : null) as HTMLElement | null
  if (target !== null) {
    target.focus()
    void select(Number(target.dataset.seq))
  }
}

const markSelected = () => {
  for (const li of Array.from(byId("rows").children) as Array<HTMLElement>) {
    const on = state.selected !== null && Number(li.dataset.seq) <= state.selected && state.selected <= Number(li.dataset.last)
    li.setAttribute("aria-selected", String(on))
  }
}

/** Show the page holding `seq`, then select it. */
const goTo = async (seq: number) => {
  const page = state.page
  if (page === null) return
  const offset = Math.floor(seq / PAGE) * PAGE
  if (offset !== page.offset) await loadPage(offset)
  await select(seq)
  const row = (Array.from(byId("rows").children) as Array<HTMLElement>).find((li) =>
    Number(li.dataset.seq) <= seq && seq <= Number(li.dataset.last)
  )
  row?.scrollIntoView({ block: "nearest" })
  row?.focus()
}

// --- time travel and provenance -------------------------------------------------------------

const seqButton = (seq: number, label = `seq ${seq}`): HTMLElement => {
  const b = h("button", { type: "button", class: "link", "data-goto": String(seq) }, label)
  b.addEventListener("click", () => void goTo(seq))
  return b
}

const renderTravel = (at: TimeTravel) => {
  const header = at.request.header
  const cfg = (header?.config ?? {}) as Record<string, unknown>
  const changes = headerChanges(at)
  byId("travel").replaceChildren(
    h("h3", { id: "travel-title" }, `At seq ${at.seq}`),
    h(
      "div",
      { class: "header", "data-testid": "request-header" },
      header === null
        ? h("p", {}, "No request header yet.")
        : h(
          "div",
          {},
          h("p", {}, h("strong", {}, `${String(cfg.provider)}/${String(cfg.model)}`), " — header at ", seqButton(at.headerSeq!),
            ` (reason: ${at.headerReason})`),
          h(
            "p",
            { "data-testid": "header-changes" },
            at.previousHeader === null
              ? "The first header of the session."
              : changes.length === 0
              ? "Unchanged against the previous header."
              : `Changed against the previous header: ${changes.join(", ")}.`
          ),
          header.system === undefined ? null : h("details", {}, h("summary", {}, "system"), h("pre", {}, clipped(header.system))),
          header.tools === undefined ? null : h("p", {}, `tools: ${header.tools.map((t) => t.name).join(", ")}`)
        )
    ),
    h("h4", {}, `The exact request: ${at.request.messages.length} messages`),
    messageList(at.request.messages, "request-messages"),
    h(
      "details",
      {},
      h("summary", {}, `Derived messages of the surface: ${at.messages.length}`),
      messageList(at.messages, "derived-messages")
    ),
    h(
      "details",
      {},
      h("summary", {}, `Surface: ${at.surface.nodes.length} events`),
      h("p", { class: "nodes" }, ...at.surface.nodes.flatMap((n) => [seqButton(n, String(n)), " "]))
    )
  )
}

const renderProvenance = async (seq: number) => {
  if (state.session === null) return
  const { provenance, related } = await state.source.provenance(state.session, seq)
  const box = byId("provenance")
  box.replaceChildren()
  if (provenance === null) return
  const rowOf = new Map(related.map((r) => [r.seq, r]))
  const relatedItem = (s: number) =>
    h("li", {}, seqButton(s), " ", h("span", { class: "text" }, clipped(rowOf.get(s)?.text ?? "", 300)))
  if (provenance.replaced !== null) {
    const r = provenance.replaced
    box.append(
      h("h3", {}, "What this replacement is made of"),
      h("p", { "data-testid": "replaced-span" }, `Replaces the span ${r.start}..${r.end}; it shadowed ${r.shadowedSeqs.length} events:`),
      h("ul", { "data-testid": "shadowed" }, ...[...r.shadowedSeqs].sort((a, b) => a - b).map(relatedItem))
    )
  }
  if (provenance.sources.length > 0) {
    box.append(h("h4", {}, "Sources"), h("ul", { "data-testid": "sources" }, ...provenance.sources.map(relatedItem)))
  }
  if (provenance.shadowedBy.length > 0) {
    box.append(
      h("h3", {}, "Replaced"),
      h(
        "ul",
        { "data-testid": "shadowed-by" },
        ...provenance.shadowedBy.map((r) =>
          h("li", {}, "shadowed by ", seqButton(r.seq), ` (replacing ${r.start}..${r.end})`)
        )
      )
    )
  }
  if (provenance.replaced === null && provenance.shadowedBy.length === 0 && provenance.sources.length === 0) {
    box.append(h("p", { class: "hint" }, "No replacement made or shadowed this event."))
  }
}

let selecting = 0

const select = async (seq: number) => {
  if (state.session === null) return
  const ticket = ++selecting
  state.selected = seq
  markSelected()
  byId<HTMLInputElement>("seq").value = String(seq)
  byId("seq-out").textContent = String(seq)
  history.replaceState(null, "", `${location.pathname}${location.search}#session=${encodeURIComponent(state.session)}&seq=${seq}`)
  const { at } = await state.source.at(state.session, seq)
  if (ticket !== selecting) return
  if (at !== null) renderTravel(at)
  await renderProvenance(seq)
}

// --- sessions and live updates --------------------------------------------------------------

const openSession = async (id: string, seq?: number) => {
  state.session = id
  state.selected = null
  byId("title").textContent = clipped(id, 200)
  byId("where").textContent = ""
  renderSessions()
  byId("travel").replaceChildren(h("p", { class: "hint" }, "Choose an event or a seq to see what the model saw."))
  byId("provenance").replaceChildren()
  await loadPage(seq === undefined ? 0 : Math.floor(seq / PAGE) * PAGE)
  watch(id)
  if (seq !== undefined) await goTo(seq)
}

/** A count of the open session's events: the last page grows in place, elsewhere only the counts change. */
const onCount = (session: string, count: number) => {
  const { page } = state
  if (state.session !== session || page === null || count === page.total) return
  // the page was served while the index was built: its total was the events indexed so far
  if (page.indexing === true) {
    void state.source.page(session, page.offset, PAGE).then(renderPage)
    return
  }
  notice(`${count - page.total} new events`)
  const onLastPage = page.offset + PAGE >= page.total
  void (onLastPage ? loadPage(page.offset) : state.source.page(session, page.offset, PAGE).then(renderPage))
}

let unwatch: (() => void) | undefined

/**
 * Live updates of the open session: pushed by the server from the store's follow (server-sent
 * events); polling the head is the fallback of a browser without EventSource.
 */
const watch = (session: string) => {
  unwatch?.()
  unwatch = undefined
  if (!state.source.live) return
  const { watch: push } = state.source
  if (push !== undefined) {
    unwatch = push(session, (count) => onCount(session, count), (refusal) => {
      unwatch = undefined
      refused(refusal)
    })
    return
  }
  const timer = setInterval(() => {
    void state.source.head(session).then(({ count }) => onCount(session, count)).catch((e: unknown) => {
      // a refusal (the token missing or wrong) stops the polling and is shown
      if (!(e instanceof ApiRefused) || (e.status !== 401 && e.status !== 403)) return
      clearInterval(timer)
      unwatch = undefined
      refused(e)
    })
  }, POLL_MS)
  unwatch = () => clearInterval(timer)
}

const refused = (e: unknown) => {
  if (e instanceof ApiRefused && (e.status === 401 || e.status === 403)) {
    document.body.classList.add("refused")
    byId("sessions").replaceChildren(
      h(
        "li",
        { class: "refusal", role: "alert", "data-testid": "refused" },
        "This viewer needs its token: open the URL `session-log view` printed (it ends in ?token=…)."
      )
    )
    return
  }
  notice(`error: ${e instanceof Error ? e.message : String(e)}`)
}

/**
 * While indexes are being built (the first open of a long session): the list shows their
 * progress, asked again every `POLL_MS` until every index is complete; the open session's page
 * is loaded again when its index completes (its total, its pairings).
 */
const followProgress = () => {
  const { progress } = state.source
  if (progress === undefined || !state.sessions.some((s) => s.indexing === true)) return
  const timer = setInterval(() => {
    void progress().then((sessions) => {
      const wasIndexing = new Set(state.sessions.filter((s) => s.indexing === true).map((s) => s.id))
      state.sessions = sessions
      renderSessions()
      const open = state.session
      if (open !== null && wasIndexing.has(open) && sessions.some((s) => s.id === open && s.indexing !== true)) {
        notice("indexed")
        if (state.page !== null) void loadPage(state.page.offset)
      }
      if (!sessions.some((s) => s.indexing === true)) clearInterval(timer)
    }, (e: unknown) => {
      clearInterval(timer)
      refused(e)
    })
  }, POLL_MS)
}

// --- start ----------------------------------------------------------------------------------

/** The inline data of an exported HTML file, if this page is one. */
const inlineData = (): Source | undefined => {
  const meta = document.getElementById("session-log-summary")
  if (meta === null) return undefined
  const summary = JSON.parse(meta.textContent ?? "{}") as SessionSummary & { tornTail: SessionSummary["tornTail"] }
  const events: Array<Event> = []
  for (const chunk of Array.from(document.querySelectorAll("script.session-log-events"))) {
    for (const e of JSON.parse(chunk.textContent ?? "[]") as Array<Event>) events.push(e)
  }
  return inlineSource({ ...summary, events: events.length }, events, summary.tornTail)
}

const start = async () => {
  layout()
  const inline = inlineData()
  const token = new URLSearchParams(location.search).get("token") ?? ""
  state = { source: inline ?? httpSource(token), sessions: [], session: null, page: null, selected: null }
  byId("search").addEventListener("input", renderSessions)
  const slider = byId<HTMLInputElement>("seq")
  slider.addEventListener("input", () => void (byId("seq-out").textContent = slider.value))
  slider.addEventListener("change", () => void goTo(Number(slider.value)))
  byId("prev").addEventListener("click", () => state.page && void loadPage(Math.max(0, state.page.offset - PAGE)))
  byId("next").addEventListener("click", () => state.page && void loadPage(state.page.offset + PAGE))
  try {
    state.sessions = await state.source.sessions()
    renderSessions()
    followProgress()
    const hash = new URLSearchParams(location.hash.slice(1))
    const first = hash.get("session") ?? (document.body.dataset.session || undefined) ??
      (inline === undefined ? undefined : state.sessions[0]?.id)
    const seq = hash.get("seq")
    if (first !== undefined) await openSession(first, seq === null ? undefined : Number(seq))
    // a link or a typed URL naming another session or seq (#session=…&seq=…) travels there
    window.addEventListener("hashchange", () => {
      const next = new URLSearchParams(location.hash.slice(1))
      const id = next.get("session")
      const at = next.get("seq")
      if (id === null) return
      if (id !== state.session) void openSession(id, at === null ? undefined : Number(at))
      else if (at !== null && Number(at) !== state.selected) void goTo(Number(at))
    })
    document.body.dataset.ready = "true"
  } catch (e) {
    refused(e)
    document.body.dataset.ready = "true"
  }
}

void start()
