/**
 * The readable artifacts of a run (SPEC §10.1, ACP.md §3.3): `requests.md` (one section per model
 * request: the header written for it — in full in the class pin, by reference elsewhere — and its
 * messages, as a prefix of an earlier request plus what is new), the normalised ACP wire (frames
 * one per line, JSON-RPC ids renumbered by first appearance, a client's answer right after the
 * request it answers, long runs of updates elided with their digest), and the pin's sidecars.
 */
import type { Event } from "../../../src/schema/Events.js"
import type { CallRecord, Frame } from "./Driver.js"
import { line, sha256, sortKeys, type Tokens } from "./Fixture.js"

type Rec = Record<string, any>

/** Runs of more than this many consecutive updates are elided (head, digest, tail). */
const ELIDE_OVER = 40
const KEEP = 5

// ---------------------------------------------------------------------------------------------
// the wire

const isRequest = (msg: Rec) => typeof msg.method === "string" && msg.id !== undefined
const isResponse = (msg: Rec) => msg.method === undefined && msg.id !== undefined

/** `acp.expected.jsonl`: the normalised wire of every connection of the run. */
export const renderWire = (frames: ReadonlyArray<Frame>, tokens: Tokens): string => {
  // a client's response belongs right after the agent request it answers (its timing is the client's)
  const answers = new Map<string, Frame>()
  for (const f of frames) if (f.from === "client" && isResponse(f.msg)) answers.set(`${f.conn}:${f.msg.id}`, f)
  const ordered: Array<Frame> = []
  for (const f of frames) {
    if (f.from === "client" && isResponse(f.msg)) continue
    ordered.push(f)
    if (f.from === "agent" && isRequest(f.msg)) {
      const answer = answers.get(`${f.conn}:${f.msg.id}`)
      if (answer !== undefined) ordered.push(answer)
    }
  }
  const ids = new Map<string, number>()
  const renumber = (conn: number, origin: string, id: unknown) => {
    const key = `${conn}:${origin}:${String(id)}`
    if (!ids.has(key)) ids.set(key, ids.size + 1)
    return ids.get(key)!
  }
  const other = (from: string) => (from === "client" ? "agent" : "client")
  const lines: Array<string> = []
  const render = (f: Frame) => {
    const msg: Rec = { ...f.msg }
    if (msg.id !== undefined) msg.id = renumber(f.conn, isRequest(msg) ? f.from : other(f.from), msg.id)
    if (msg.method === "$/cancel_request" && msg.params?.requestId !== undefined) {
      msg.params = { ...msg.params, requestId: renumber(f.conn, f.from, msg.params.requestId) }
    }
    return JSON.stringify({ conn: f.conn, from: f.from, msg: tokens.value(sortKeys(msg)) })
  }
  for (let i = 0; i < ordered.length;) {
    let j = i
    while (j < ordered.length && ordered[j]!.from === "agent" && ordered[j]!.msg.method === "session/update") j++
    const run = ordered.slice(i, Math.max(j, i + 1))
    if (run.length > ELIDE_OVER) {
      const rendered = run.map(render)
      lines.push(...rendered.slice(0, KEEP))
      lines.push(JSON.stringify({ elided: { frames: run.length - 2 * KEEP, sha256: sha256(rendered.slice(KEEP, -KEEP).join("\n")) } }))
      lines.push(...rendered.slice(-KEEP))
    } else lines.push(...run.map(render))
    i += run.length
  }
  return `${lines.join("\n")}\n`
}

// ---------------------------------------------------------------------------------------------
// requests.md

const text = (blocks: ReadonlyArray<Rec>): string =>
  blocks.map((b) => (b.type === "text" && typeof b.text === "string" ? b.text : JSON.stringify(b))).join(" ")

const indent = (s: string) => s.trimEnd().split("\n").map((l, i) => (i === 0 || l.trim() === "" ? l.trimEnd() : `   ${l.trimEnd()}`)).join("\n")

const renderBlock = (b: Rec): string => {
  switch (b.type) {
    case "text":
      return indent(String(b.text))
    case "reasoning":
      return `_(reasoning)_ ${indent(String(b.text))}`
    case "tool-call":
      return `calls \`${b.name}\` with \`${b.arguments}\` (call \`${b.id}\`)`
    case "tool-result":
      return `result of call \`${b.toolCallId}\`${b.isError === true ? " (**error**)" : ""}: ${indent(text(b.content ?? []))}`
    default:
      return `\`${line(b)}\``
  }
}

const renderMessage = (m: Rec, n: number): string => {
  const who = m.source?.kind === "tool" ? "tool" : m.source?.kind !== undefined && m.source.kind !== "user" && m.role === "user"
    ? `${m.role} (${m.source.kind}${m.source.plugin === undefined ? "" : ` ${m.source.plugin}`})`
    : m.role
  return `${n}. **${who}**: ${(m.content as ReadonlyArray<Rec>).map(renderBlock).join("\n   ")}`
}

const renderMessages = (messages: ReadonlyArray<Rec>, from: number): Array<string> => {
  const shown = messages.slice(from).map((m, i) => renderMessage(m, from + i + 1))
  if (shown.length <= ELIDE_OVER) return shown
  const kept = 3
  return [
    ...shown.slice(0, kept),
    `… ${shown.length - 2 * kept} more messages (${from + kept + 1}–${from + shown.length - kept}), sha256 ${sha256(shown.slice(kept, -kept).join("\n"))} …`,
    ...shown.slice(-kept)
  ]
}

const fence = (lang: string, body: string) => ["```" + lang, body, "```"].join("\n")

/** What `requests.md` needs to know about the scenario. */
export interface RequestsContext {
  readonly name: string
  readonly description: string
  readonly headerClass: string
  /** The pin of the class (this scenario when it pins). */
  readonly pin: string
  readonly pins: boolean
}

/** `requests.md` of a run: every model request, in call order. */
export const renderRequests = (
  ctx: RequestsContext,
  calls: ReadonlyArray<CallRecord>,
  logs: ReadonlyMap<string, ReadonlyArray<Event>>,
  tokens: Tokens
): string => {
  const out: Array<string> = [`# Model requests: ${ctx.name}`, "", ctx.description, ""]
  out.push(
    ctx.pins
      ? `Header class \`${ctx.headerClass}\`, pinned by this scenario: every written header is shown in full (the same text as \`system-prompt.expected.md\` and \`tool-schemas.expected.json\`).`
      : `Header class \`${ctx.headerClass}\`: every header's system prompt and tools are the initial ones of the class pin, \`../${ctx.pin}/system-prompt.expected.md\` and \`../${ctx.pin}/tool-schemas.expected.json\` (checked on every run).`,
    ""
  )
  if (calls.length === 0) out.push("No model request.", "")
  const previous = new Map<string, { readonly index: number; readonly seq: number; readonly messages: ReadonlyArray<Rec> }>()
  const written: Array<{ readonly index: number; readonly header: Rec }> = []
  for (const [i, call] of calls.entries()) {
    const n = i + 1
    const log = logs.get(call.sessionId) ?? []
    let turn: unknown = "?"
    let step: unknown = "?"
    for (let s = call.seq; s >= 0; s--) {
      const e = log[s]
      if (e?.type === "step/start") {
        turn = (e.data as Rec).turn
        step = (e.data as Rec).step
        break
      }
    }
    out.push(`## Request ${n} · session ${call.sessionId} · turn ${turn} · step ${step}`, "")
    const before = previous.get(call.sessionId)
    const headerEvent = log.slice((before?.seq ?? -1) + 1, call.seq + 1).reverse().find((e) => e.type === "request/header")
    const header = call.snapshot.header as Rec | undefined
    if (headerEvent === undefined || header === undefined) {
      out.push(`Header: unchanged since request ${before?.index ?? "?"}.`, "")
    } else {
      const reason = (headerEvent.data as Rec).reason
      let cause = ""
      if (reason === "change") {
        const lastHeader = [...log.slice(0, headerEvent.seq)].reverse().find((e) => e.type === "request/header")
        const trigger = log.slice((lastHeader?.seq ?? -1) + 1, headerEvent.seq).reverse().find((e) => e.ignorable === true)
        cause = trigger === undefined ? "" : ` It follows \`${trigger.type}\` \`${line(trigger.data)}\` (event ${trigger.seq}).`
      }
      out.push(`Header: written for this request (event ${headerEvent.seq}), reason \`${reason}\`.${cause}`, "")
      out.push(`Config: \`${line(header.config)}\``, "")
      if (ctx.pins) {
        const same = written.find((w) => line({ s: w.header.system, t: w.header.tools }) === line({ s: header.system, t: header.tools }))
        if (same !== undefined && written.length > 0) out.push(`(System prompt and tools equal those of request ${same.index}; shown in full again.)`, "")
        out.push("System prompt:", "", fence("text", String(header.system)), "", "Tools:", "", fence("json", JSON.stringify(sortKeys(header.tools), null, 2)), "")
      } else {
        out.push(`System prompt and tools: the class pin's initial header (\`../${ctx.pin}/\`).`, "")
      }
      written.push({ index: n, header })
    }
    const messages = call.snapshot.messages as ReadonlyArray<Rec>
    let common = 0
    if (before !== undefined) {
      while (common < messages.length && common < before.messages.length && line(messages[common]) === line(before.messages[common])) common++
    }
    out.push(`Messages (${messages.length}):`, "")
    if (before !== undefined && common > 0) {
      out.push(
        common === before.messages.length
          ? `${common === 1 ? "1" : `1–${common}`}: as in request ${before.index}.`
          : `1–${common}: as in request ${before.index}; its messages ${common + 1}–${before.messages.length} were replaced.`
      )
    } else if (before !== undefined && before.messages.length > 0) {
      out.push(`(None of request ${before.index}'s ${before.messages.length} messages is a prefix here: the history was replaced.)`)
    }
    out.push(...renderMessages(messages, common), "")
    previous.set(call.sessionId, { index: n, seq: call.seq, messages })
  }
  return tokens.text(`${out.join("\n").trimEnd()}\n`)
}
