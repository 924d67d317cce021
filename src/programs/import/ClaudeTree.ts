/**
 * The first pass of a Claude Code import (docs/import.md): the `uuid`/`parentUuid` tree of a
 * transcript file, read without keeping its records, and from it the branch the session ended
 * on, the branches of in-file sidechains, the results of parallel tool calls, the segments a
 * compaction preserved, and the file's own session id. Internal to the import: `ClaudeCode` runs
 * it.
 *
 * @since 0.2.0
 */
import { isAbsolutePath } from "../../schema/SessionHeader.js"
import { isToolResult, type Rec } from "./ClaudeRecords.js"
import { isObject, nonEmpty, timeOf } from "./SourceLines.js"

/**
 * One record of the tree.
 *
 * @since 0.2.0
 * @category models
 */
export interface Node {
  parent: string | undefined
  readonly sidechain: boolean
  /** A `user`, `assistant` or `system` record or a queued prompt (a branch ends on one of these). */
  readonly conversation: boolean
  /** A `user` record that carries tool results (its parent is the record holding the call). */
  readonly toolResult: boolean
}

/**
 * What the first pass keeps of a file: the tree and the file's session facts.
 *
 * @since 0.2.0
 * @category models
 */
export interface Index {
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

/**
 * Add one record to the index.
 *
 * @since 0.2.0
 * @category utils
 */
export const indexRecord = (index: Index, rec: Rec) => {
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

/**
 * The owner of the main session's records.
 *
 * @since 0.2.0
 * @category constants
 */
export const MAIN = ""

/**
 * A compaction that preserved a segment (`compactMetadata.preservedSegment`, Claude Code 2.1.x)
 * keeps the segment's records where they were written, before the boundary; the records after
 * the compaction continue from the segment's tail. Claude Code reads the segment as following
 * the summary (its `anchorUuid`): so does the tree here, and the boundary follows the record
 * before the segment, so that the summarised history stays on the branch. Returns the boundaries
 * relinked, with their segment's first record.
 *
 * @since 0.2.0
 * @category utils
 */
export const relinkPreserved = (index: Index): Map<string, string> => {
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
 *
 * @since 0.2.0
 * @category utils
 */
export const owners = (index: Index): { readonly owner: Map<string, string>; readonly subagent: boolean } => {
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

/**
 * An empty index.
 *
 * @since 0.2.0
 * @category constructors
 */
export const emptyIndex = (): Index => ({
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
})

/**
 * The file's own session id, and the session it resumed. A resumed session (`claude --resume`,
 * `--continue`) writes a new file that starts with the original's records, their `sessionId`
 * unchanged, and goes on with records of its own id, the file's name. A subagent file carries
 * its parent's id.
 *
 * @since 0.2.0
 * @category utils
 */
export const sessionOf = (index: Index, file: string, subagent: boolean): { readonly base: string; readonly resumedFrom?: string } => {
  const stem = file.replace(/^.*\//, "").replace(/\.jsonl$/, "")
  if (subagent) return { base: index.sessionId ?? stem }
  const ids = index.sessionIds
  const own = ids.includes(stem) ? stem : ids.at(-1) ?? stem
  return ids.length > 0 && ids[0] !== own ? { base: own, resumedFrom: ids[0] } : { base: own }
}
