/**
 * Import Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl` and their
 * `subagents/` files) as session logs (docs/import.md). Two streamed passes: the first reads only
 * the `uuid`/`parentUuid` tree to find the branch the session ended on; the second maps that
 * branch to turns, steps, messages, tool calls and results, compactions to `replace` operations,
 * sidechains to child sessions, and keeps every other record as an ignorable `import/source`.
 *
 * @since 0.2.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import { encodeJson, type Json } from "../../schema/Json.js"
import type { ContentBlock, TokenUsage } from "../../schema/Messages.js"
import { isAbsolutePath, type SessionHeader } from "../../schema/SessionHeader.js"
import type { SessionStore } from "../../services/SessionStore.js"
import { LogBuilder } from "./LogBuilder.js"
import { openWriter, type SessionWriter } from "./SessionWriter.js"
import { forEachLine, isObject, jsonText, keepRest, nonEmpty, omit, parseSourceLine, timeOf } from "./SourceLines.js"
import { DEFAULT_MAX_LINE_BYTES, type FileReport, IMPORT_ORIGIN, IMPORT_SOURCE, importPath, type ImportOptions, readFailure, RecordTally, type SessionReport } from "./TranscriptImport.js"

type Rec = Readonly<Record<string, unknown>>

/**
 * The session id of an imported Claude Code session (`claude-code:<sessionId>`, and
 * `/agent-<agentId>` for a subagent).
 *
 * @since 0.2.0
 * @category utils
 */
export const claudeCodeSessionId = (sessionId: string, agentId?: string): string =>
  agentId === undefined ? `claude-code:${sessionId}` : `claude-code:${sessionId}/agent-${agentId}`

// ---------------------------------------------------------------------------------------------
// Content blocks

const textBlock = (text: string): ContentBlock => ({ type: "text", text })

/** One Claude content block as this log's block; unknown kinds are kept as they are (H10). */
const mapBlock = (b: unknown): ContentBlock => {
  if (typeof b === "string") return textBlock(b)
  if (!isObject(b) || typeof b.type !== "string") return { type: "unknown", value: b }
  switch (b.type) {
    case "text":
      return typeof b.text === "string" ? keepRest(textBlock(b.text), b, ["type", "text"], "claudeCode") : (b as ContentBlock)
    case "thinking":
      return keepRest(
        {
          type: "reasoning",
          text: typeof b.thinking === "string" ? b.thinking : "",
          // the signature a later request must send back with the thinking
          ...(b.signature === undefined ? {} : { signature: b.signature })
        },
        b,
        ["type", "thinking", "signature"],
        "claudeCode"
      )
    case "redacted_thinking":
      return keepRest({ type: "reasoning", text: "", redacted: b.data ?? null }, b, ["type", "data"], "claudeCode")
    case "tool_use":
      return keepRest(
        { type: "tool-call", id: String(b.id), name: String(b.name), arguments: jsonText(b.input ?? {}) },
        b,
        ["type", "id", "name", "input"],
        "claudeCode"
      )
    case "image":
      return keepRest({ type: "image", attachment: { source: b.source ?? null } }, b, ["type", "source"], "claudeCode")
    default:
      return b as ContentBlock
  }
}

const blocksOf = (content: unknown): Array<ContentBlock> =>
  typeof content === "string" ? [textBlock(content)] : Array.isArray(content) ? content.map(mapBlock) : []

const usageOf = (u: unknown): TokenUsage | undefined => {
  if (!isObject(u) || typeof u.input_tokens !== "number" || typeof u.output_tokens !== "number") return undefined
  return {
    inputTokens: u.input_tokens,
    outputTokens: u.output_tokens,
    ...(typeof u.cache_read_input_tokens === "number" ? { cacheReadTokens: u.cache_read_input_tokens } : {}),
    ...(typeof u.cache_creation_input_tokens === "number" ? { cacheWriteTokens: u.cache_creation_input_tokens } : {})
  }
}

const isToolResult = (b: unknown): b is Rec => isObject(b) && b.type === "tool_result" && typeof b.tool_use_id === "string"

// ---------------------------------------------------------------------------------------------
// Pass 1: the tree

interface Node {
  parent: string | undefined
  readonly sidechain: boolean
  /** A `user`, `assistant` or `system` record or a queued prompt (a branch ends on one of these). */
  readonly conversation: boolean
  /** A `user` record that carries tool results (its parent is the record holding the call). */
  readonly toolResult: boolean
}

interface Index {
  readonly nodes: Map<string, Node>
  sessionId: string | undefined
  /** The distinct `sessionId`s in the order they appear (a resumed session's file starts with the original's). */
  readonly sessionIds: Array<string>
  agentId: string | undefined
  cwd: string | undefined
  version: string | undefined
  firstTime: number | undefined
  lastMain: string | undefined
  lastAny: string | undefined
  /** Compactions that preserved a segment: the boundary, the segment's first record, the record it follows now. */
  readonly preserved: Array<{ readonly boundary: string; readonly head: string; readonly anchor: string }>
}

const CONVERSATION = new Set(["user", "assistant", "system"])

/** At most this many distinct session ids are remembered per file (a resume chain is short). */
const MAX_SESSION_IDS = 64

/** At most this many compactions with a preserved segment are relinked per file (memory bound). */
const MAX_PRESERVED = 10_000

const indexRecord = (index: Index, rec: Rec) => {
  const sessionId = nonEmpty(rec.sessionId)
  if (index.sessionId === undefined) index.sessionId = sessionId
  if (sessionId !== undefined && index.sessionIds.length < MAX_SESSION_IDS && !index.sessionIds.includes(sessionId)) {
    index.sessionIds.push(sessionId)
  }
  if (index.agentId === undefined) index.agentId = nonEmpty(rec.agentId)
  if (index.cwd === undefined && typeof rec.cwd === "string" && isAbsolutePath(rec.cwd)) index.cwd = rec.cwd
  if (index.version === undefined) index.version = nonEmpty(rec.version)
  const uuid = nonEmpty(rec.uuid)
  if (uuid === undefined) return
  if (index.firstTime === undefined) {
    const t = timeOf(rec.timestamp)
    if (t !== undefined && t >= 0) index.firstTime = t
  }
  if (index.nodes.has(uuid)) return
  // a compaction boundary starts a new root; its logical parent continues the branch
  const parent = nonEmpty(rec.parentUuid) ?? nonEmpty(rec.logicalParentUuid)
  const sidechain = rec.isSidechain === true
  // a queued prompt is the person's words too: a session can end on one
  const conversation = (typeof rec.type === "string" && CONVERSATION.has(rec.type)) ||
    (rec.type === "attachment" && isObject(rec.attachment) && rec.attachment.type === "queued_command")
  const segment = rec.type === "system" && rec.subtype === "compact_boundary" && isObject(rec.compactMetadata) &&
      isObject(rec.compactMetadata.preservedSegment)
    ? rec.compactMetadata.preservedSegment
    : undefined
  const head = nonEmpty(segment?.headUuid)
  const anchor = nonEmpty(segment?.anchorUuid)
  if (head !== undefined && anchor !== undefined && index.preserved.length < MAX_PRESERVED) {
    index.preserved.push({ boundary: uuid, head, anchor })
  }
  const toolResult = rec.type === "user" && isObject(rec.message) && Array.isArray(rec.message.content) &&
    rec.message.content.some(isToolResult)
  index.nodes.set(uuid, { parent, sidechain, conversation, toolResult })
  if (conversation) {
    index.lastAny = uuid
    if (!sidechain) index.lastMain = uuid
  }
}

/** The uuids from `leaf` up to its root (a cycle or a missing parent ends the walk). */
const branch = (nodes: Map<string, Node>, leaf: string | undefined, into: Map<string, string>, owner: string) => {
  for (let at = leaf; at !== undefined && !into.has(at);) {
    const node = nodes.get(at)
    if (node === undefined) break
    into.set(at, owner)
    at = node.parent
  }
}

const MAIN = ""

/**
 * A compaction that preserved a segment (`compactMetadata.preservedSegment`, Claude Code 2.1.x)
 * keeps the segment's records where they were written, before the boundary; the records after
 * the compaction continue from the segment's tail. Claude Code reads the segment as following
 * the summary (its `anchorUuid`): so does the tree here, and the boundary follows the record
 * before the segment, so that the summarised history stays on the branch. Returns the boundaries
 * relinked, with their segment's first record.
 */
const relinkPreserved = (index: Index): Map<string, string> => {
  const heads = new Map<string, string>()
  for (const p of index.preserved) {
    const head = index.nodes.get(p.head)
    const boundary = index.nodes.get(p.boundary)
    if (head === undefined || boundary === undefined || !index.nodes.has(p.anchor) || head.parent === p.anchor) continue
    boundary.parent = head.parent
    head.parent = p.anchor
    heads.set(p.boundary, p.head)
  }
  return heads
}

/**
 * Parallel tool calls (Claude Code 2.x): each `tool_use` block is a record of its own, and each
 * result's `parentUuid` is the record that holds its call, so the results of all but the last
 * call hang beside the chain the session continues on. A tool-result record whose parent belongs
 * to a chosen branch belongs to it too (file order puts a parent before its children).
 */
const adoptResults = (nodes: Map<string, Node>, owner: Map<string, string>) => {
  for (const [uuid, node] of nodes) {
    if (!node.toolResult || node.parent === undefined || owner.has(uuid)) continue
    const parentOwner = owner.get(node.parent)
    if (parentOwner !== undefined) owner.set(uuid, parentOwner)
  }
}

/**
 * Which session each uuid of the chosen branches belongs to: `MAIN`, or the root uuid of an
 * in-file sidechain (older versions). In a subagent file (only sidechain records) the file's
 * own branch is the main one.
 */
const owners = (index: Index): { readonly owner: Map<string, string>; readonly subagent: boolean } => {
  const owner = new Map<string, string>()
  const subagent = index.lastMain === undefined && index.lastAny !== undefined
  branch(index.nodes, subagent ? index.lastAny : index.lastMain, owner, MAIN)
  if (subagent) {
    adoptResults(index.nodes, owner)
    return { owner, subagent }
  }
  const rootOf = new Map<string, string>()
  const lastOfRoot = new Map<string, string>()
  for (const [uuid, node] of index.nodes) {
    if (!node.sidechain) continue
    const path = new Set<string>()
    let at: string | undefined = uuid
    let root = uuid
    while (at !== undefined) {
      const known = rootOf.get(at)
      if (known !== undefined) {
        root = known
        break
      }
      const n = index.nodes.get(at)
      if (n === undefined || !n.sidechain || path.has(at)) break
      path.add(at)
      root = at
      at = n.parent
    }
    for (const p of path) rootOf.set(p, root)
    // a sidechain is a conversation: a hook's progress record marked sidechain makes no session
    if (node.conversation) lastOfRoot.set(root, uuid)
  }
  for (const [root, last] of lastOfRoot) branch(index.nodes, last, owner, root)
  adoptResults(index.nodes, owner)
  return { owner, subagent }
}

// ---------------------------------------------------------------------------------------------
// Pass 2: mapping

interface Target {
  readonly builder: LogBuilder
  readonly writer: SessionWriter
  /** The model message being assembled from records that share its `message.id`. */
  assistant:
    | { id: string; messageId: string; content: Array<ContentBlock>; model: string; usage: TokenUsage | undefined; time: number }
    | undefined
  /** The last compaction boundary, cited by the summary that follows it (and the seq its preserved segment starts at). */
  boundary: { readonly uuid: string; readonly seq: number; readonly keepFrom: number | undefined } | undefined
  /** Boundaries whose compaction preserved a segment, with the segment's first record. */
  readonly heads: ReadonlyMap<string, string>
  /** The first seq of each preserved segment's events (its first record's). */
  readonly marks: Map<string, number>
  /** The model of the last request header written. */
  model: string | undefined
}

const flushAssistant = (t: Target) => {
  const a = t.assistant
  if (a === undefined) return
  t.assistant = undefined
  // the transcript names the model of each answer (not the system prompt or tools): a request
  // header with provider and model whenever it changes; "<synthetic>" marks Claude Code's own
  // messages, no model request
  const changed = a.model !== t.model && !a.model.startsWith("<") && a.model !== "unknown"
  if (changed) t.model = a.model
  t.builder.at(a.time).assistant(
    a.id,
    a.content,
    { provider: "anthropic", model: a.model },
    a.usage,
    changed ? { config: { provider: "anthropic", model: a.model } } : undefined
  )
}

/** Map one record on a chosen branch; the reason when it is kept aside instead. */
const mapRecord = (t: Target, rec: Rec, line: number, uuid: string): string | undefined => {
  const b = t.builder
  const time = timeOf(rec.timestamp)
  const message = isObject(rec.message) ? rec.message : undefined
  const envelope = () =>
    b.at(time).ignorable(IMPORT_SOURCE, {
      line,
      mapped: true,
      record: omit(rec, ["message"]),
      ...(message === undefined ? {} : { message: omit(message, ["content"]) })
    })
  switch (rec.type) {
    case "assistant": {
      if (message === undefined) return "no-message"
      const messageId = nonEmpty(message.id) ?? uuid
      const blocks = blocksOf(message.content)
      if (t.assistant !== undefined && t.assistant.messageId === messageId) {
        // one record per content block; a record that repeats the blocks so far (a snapshot of
        // the message) adds only what is new
        const held = t.assistant.content
        const repeats = blocks.length >= held.length && held.every((b, k) => encodeJson(b as Json) === encodeJson(blocks[k] as Json))
        if (repeats) held.push(...blocks.slice(held.length))
        else held.push(...blocks)
        t.assistant.usage = usageOf(message.usage) ?? t.assistant.usage
      } else {
        flushAssistant(t)
        t.assistant = {
          id: messageId,
          messageId,
          content: blocks,
          model: nonEmpty(message.model) ?? "unknown",
          usage: usageOf(message.usage),
          time: time ?? b.time
        }
      }
      envelope()
      return undefined
    }
    case "user": {
      if (message === undefined) return "no-message"
      // a person's record ends the model message being assembled (its tool calls are known then)
      flushAssistant(t)
      const content = message.content
      if (rec.isCompactSummary === true) {
        const seq = envelope()
        const boundary = t.boundary
        t.boundary = undefined
        b.compaction(uuid, blocksOf(content), boundary?.uuid ?? uuid, boundary === undefined ? [seq] : [boundary.seq, seq], {}, boundary?.keepFrom)
        return undefined
      }
      const all = Array.isArray(content) ? content : undefined
      const results = all === undefined ? [] : all.filter(isToolResult)
      if (results.length > 0) {
        const answering = new Set<string>()
        for (const r of results) {
          const callId = String(r.tool_use_id)
          const can = answering.has(callId) ? "duplicate-result" : b.canAnswer(callId)
          if (can !== true) return can
          answering.add(callId)
        }
        envelope()
        for (const r of results) {
          // the result block's keys the mapping does not use go to the result's meta (hidden from the model)
          const rest = omit(r, ["type", "tool_use_id", "content", "is_error"])
          b.toolResult(
            `${uuid}/${String(r.tool_use_id)}`,
            String(r.tool_use_id),
            blocksOf(r.content ?? ""),
            r.is_error === true,
            Object.keys(rest).length === 0 ? undefined : { claudeCode: rest }
          )
        }
        const others = (all ?? []).filter((x) => !isToolResult(x))
        if (others.length > 0) b.userInTurn(uuid, others.map(mapBlock))
        return undefined
      }
      envelope()
      // newer versions (2.1.x) say who wrote a user entry: `origin.kind` "human", or "peer" (a
      // subagent's hand-back), "task-notification", ...; only a person's words open a turn
      const origin = isObject(rec.origin) && typeof rec.origin.kind === "string" ? rec.origin.kind : undefined
      if (rec.isMeta === true) b.context(uuid, blocksOf(content), { kind: "import", tool: "claude-code", form: "meta" })
      else if (origin !== undefined && origin !== "human") {
        b.context(uuid, blocksOf(content), { kind: "import", tool: "claude-code", form: "origin", origin })
      } else b.prompt(uuid, blocksOf(content))
      return undefined
    }
    case "attachment": {
      // what Claude Code added to the next request; a prompt typed while a turn ran is one
      const a = isObject(rec.attachment) ? rec.attachment : undefined
      if (a === undefined || a.type !== "queued_command") return bookkeeping(rec)
      const content = blocksOf(a.prompt)
      if (content.length === 0) return "attachment:queued_command"
      flushAssistant(t)
      b.at(time).ignorable(IMPORT_SOURCE, { line, mapped: true, record: omit(rec, ["attachment"]), attachment: omit(a, ["prompt"]) })
      const mode = typeof a.commandMode === "string" ? a.commandMode : "prompt"
      // a person's queued prompt joins the running turn where the model received it; a queued
      // notification (a background task's) is context, not the person's words
      if (mode === "prompt") b.userInTurn(uuid, content)
      else b.context(uuid, content, { kind: "import", tool: "claude-code", form: "queued_command", commandMode: mode })
      return undefined
    }
    case "system": {
      if (rec.subtype !== "compact_boundary") return `system:${typeof rec.subtype === "string" ? rec.subtype : "other"}`
      flushAssistant(t)
      const head = t.heads.get(uuid)
      t.boundary = { uuid, seq: envelope(), keepFrom: head === undefined ? undefined : t.marks.get(head) }
      return undefined
    }
    default:
      return bookkeeping(rec)
  }
}

/** The reason a record that is no conversation is kept aside: its type (an attachment's kind). */
const bookkeeping = (rec: Rec): string =>
  rec.type === "attachment"
    ? `attachment:${isObject(rec.attachment) && typeof rec.attachment.type === "string" ? rec.attachment.type : "none"}`
    : `type:${typeof rec.type === "string" ? rec.type : "none"}`

/**
 * The file's own session id, and the session it resumed. A resumed session (`claude --resume`,
 * `--continue`) writes a new file that starts with the original's records, their `sessionId`
 * unchanged, and goes on with records of its own id, the file's name. A subagent file carries
 * its parent's id.
 */
const sessionOf = (index: Index, file: string, subagent: boolean): { readonly base: string; readonly resumedFrom?: string } => {
  const stem = file.replace(/^.*\//, "").replace(/\.jsonl$/, "")
  if (subagent) return { base: index.sessionId ?? stem }
  const ids = index.sessionIds
  const own = ids.includes(stem) ? stem : ids.at(-1) ?? stem
  return ids.length > 0 && ids[0] !== own ? { base: own, resumedFrom: ids[0] } : { base: own }
}

/**
 * Import one Claude Code transcript file: its session (and the child sessions of in-file
 * sidechains) into the store in context.
 *
 * @since 0.2.0
 * @category constructors
 */
export const importClaudeCodeFile = (
  file: string,
  existing: Set<string>,
  options: ImportOptions = {}
): Effect.Effect<FileReport, never, SessionStore | FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const max = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES
    const tally = new RecordTally()
    const index: Index = {
      nodes: new Map(),
      sessionId: undefined,
      sessionIds: [],
      agentId: undefined,
      cwd: undefined,
      version: undefined,
      firstTime: undefined,
      lastMain: undefined,
      lastAny: undefined,
      preserved: []
    }
    const first = yield* Effect.either(forEachLine(file, max, (l) =>
      Effect.sync(() => {
        if (l._tag !== "Text") return
        const p = parseSourceLine(l.text)
        if (p._tag === "Json" && isObject(p.value)) indexRecord(index, p.value)
      })))
    if (first._tag === "Left") return tally.report(file, "claude-code", [], readFailure(file, first.left))
    const preservedHeads = relinkPreserved(index)
    const segmentHeads = new Set(preservedHeads.values())
    const { owner, subagent } = owners(index)
    const { base, resumedFrom } = sessionOf(index, file, subagent)
    const mainId = subagent ? claudeCodeSessionId(base, index.agentId ?? "sidechain") : claudeCodeSessionId(base)
    const headerOf = (id: string, parent?: string, createdAt = index.firstTime): SessionHeader => ({
      version: 1,
      id,
      createdAt: createdAt !== undefined && createdAt >= 0 ? createdAt : 0,
      ...(index.cwd === undefined ? {} : { cwd: index.cwd }),
      ...(parent === undefined ? {} : { parentSession: parent, origin: "subagent" as const, delegationDepth: 1 })
    })
    // a resumed session is a fork of the one it resumed: its own log (the inherited records
    // included), with the original as its parent
    const mainHeader = (): SessionHeader =>
      subagent
        ? headerOf(mainId, claudeCodeSessionId(base))
        : resumedFrom === undefined
        ? headerOf(mainId)
        : { ...headerOf(mainId), parentSession: claudeCodeSessionId(resumedFrom) }
    const targets = new Map<string, Target>()
    const order: Array<Target> = []
    // a sidechain's session starts at its first record (`time`), the file's at its first record
    const targetOf = (key: string, time?: number) =>
      Effect.gen(function*() {
        const known = targets.get(key)
        if (known !== undefined) return known
        const header = key === MAIN
          ? mainHeader()
          : headerOf(`${claudeCodeSessionId(base)}/sidechain-${key}`, claudeCodeSessionId(base), time ?? index.firstTime)
        const writer = yield* openWriter(header, existing, options.force === true)
        const builder = new LogBuilder().at(header.createdAt)
        builder.ignorable(IMPORT_ORIGIN, {
          tool: "claude-code",
          file,
          sourceSessionId: base,
          ...(key === MAIN && resumedFrom !== undefined ? { resumedFrom } : {}),
          ...(subagent && index.agentId !== undefined ? { agentId: index.agentId } : {}),
          ...(key === MAIN ? {} : { sidechainRoot: key }),
          ...(index.version === undefined ? {} : { sourceVersion: index.version })
        })
        const t: Target = { builder, writer, assistant: undefined, boundary: undefined, model: undefined, heads: preservedHeads, marks: new Map() }
        targets.set(key, t)
        order.push(t)
        return t
      })
    const main = yield* targetOf(MAIN)
    const emitted = new Set<string>()
    const keep = (t: Target, line: number, reason: string, data: Rec) => {
      tally.keep(reason)
      t.builder.ignorable(IMPORT_SOURCE, { line, kept: reason, ...data })
    }
    const second = yield* Effect.either(forEachLine(file, max, (l) =>
      Effect.gen(function*() {
        tally.read++
        if (l._tag === "Refused") return tally.refuse(l.line, l.reason)
        const p = parseSourceLine(l.text)
        if (p._tag === "NotJson") return keep(main, l.line, p.reason, { text: l.text })
        const rec = p.value
        if (!isObject(rec)) return keep(main, l.line, "not-an-object", { record: rec })
        const uuid = nonEmpty(rec.uuid)
        if (uuid === undefined) {
          return keep(main, l.line, typeof rec.type === "string" ? rec.type : "no-type", { record: rec })
        }
        if (emitted.has(uuid)) return keep(main, l.line, "duplicate", { record: rec })
        emitted.add(uuid)
        const who = owner.get(uuid)
        if (who === undefined) {
          // a conversation record of another branch, or bookkeeping (a hook's progress) beside
          // one; a record whose parent is in another file (a compaction's or subagent's file
          // repeating records of the main session) is no abandoned branch
          const node = index.nodes.get(uuid)
          const parent = node?.parent
          const reason = node?.conversation !== true
            ? bookkeeping(rec)
            : parent !== undefined && !index.nodes.has(parent)
            ? "parent-elsewhere"
            : rec.isSidechain === true
            ? "sidechain-off-branch"
            : "off-branch"
          return keep(main, l.line, reason, { record: rec })
        }
        const t = yield* targetOf(who, timeOf(rec.timestamp))
        if (segmentHeads.has(uuid)) {
          // where a preserved segment starts: the model message being assembled ends before it
          // unless the record continues it
          const id = isObject(rec.message) ? nonEmpty(rec.message.id) : undefined
          if (rec.type !== "assistant" || t.assistant?.messageId !== id) flushAssistant(t)
          t.marks.set(uuid, t.builder.seq)
        }
        const kept = mapRecord(t, rec, l.line, uuid)
        if (kept !== undefined) keep(t, l.line, kept, { record: rec })
        else tally.mapped++
        yield* t.writer.write(t.builder.take())
      }).pipe(Effect.zipRight(Effect.suspend(() => main.writer.write(main.builder.take()))))))
    if (second._tag === "Left") return tally.report(file, "claude-code", [], readFailure(file, second.left))
    const sessions: Array<SessionReport> = []
    for (const t of order) {
      flushAssistant(t)
      t.builder.finish()
      yield* t.writer.write(t.builder.take())
      sessions.push(yield* t.writer.close(t.builder.counts))
    }
    return tally.report(file, "claude-code", sessions)
  })

/**
 * Import the Claude Code transcripts at `path` (a file, a project folder, or all of
 * `~/.claude/projects`): one report per file.
 *
 * @since 0.2.0
 * @category constructors
 */
export const importClaudeCode = (path: string, options: ImportOptions = {}) =>
  importPath(path, "claude-code", (file, existing) => importClaudeCodeFile(file, existing, options))
