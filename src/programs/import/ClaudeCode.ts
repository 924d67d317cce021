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
import type { SessionHeader } from "../../schema/SessionHeader.js"
import type { SessionStore } from "../../services/SessionStore.js"
import { bookkeeping, flushAssistant, mapRecord, type Rec, type Target } from "./ClaudeRecords.js"
import { emptyIndex, type Index, indexRecord, MAIN, owners, relinkPreserved, sessionOf } from "./ClaudeTree.js"
import { LogBuilder } from "./LogBuilder.js"
import { openWriter } from "./SessionWriter.js"
import { forEachLine, isObject, nonEmpty, parseSourceLine, timeOf } from "./SourceLines.js"
import { DEFAULT_MAX_LINE_BYTES, type FileReport, IMPORT_ORIGIN, IMPORT_SOURCE, importPath, type ImportOptions, readFailure, RecordTally, type SessionReport } from "./TranscriptImport.js"

/**
 * The session id of an imported Claude Code session (`claude-code:<sessionId>`, and
 * `/agent-<agentId>` for a subagent).
 *
 * @since 0.2.0
 * @category utils
 */
export const claudeCodeSessionId = (sessionId: string, agentId?: string): string =>
  agentId === undefined ? `claude-code:${sessionId}` : `claude-code:${sessionId}/agent-${agentId}`

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
    const index: Index = emptyIndex()
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
