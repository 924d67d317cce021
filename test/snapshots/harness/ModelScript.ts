/**
 * The replay model of a fixture (SPEC §10.2): its `assistant/chunk` events split into one call per
 * model attempt at each terminal `finish` chunk, each call turned back into the `@effect/ai` stream
 * parts that the agent loop translates into exactly those chunks; an attempt without a `finish`
 * (cut off by a cancel) needs a `hang` or `throw` entry in `replay.override.json`.
 */
import * as AiError from "@effect/ai/AiError"
import type * as Response from "@effect/ai/Response"
import type * as Deferred from "effect/Deferred"
import type { CallScript, ScriptPart } from "../../../src/layers/model/ScriptedLanguageModel.js"
import type { Override } from "./Fixture.js"
import { untoken } from "./Fixture.js"

type Rec = Record<string, any>

/** One model attempt of a log: its chunks and where it is. */
interface Attempt {
  readonly chunks: Array<Rec>
  readonly turn: number
  readonly step: number
  finished: boolean
}

/** The attempts of a projected log, in order. */
export const attemptsOf = (lines: ReadonlyArray<Rec>): Array<Attempt> => {
  const out: Array<Attempt> = []
  let open: Attempt | undefined
  for (const e of lines) {
    if (e.type !== "assistant/chunk") {
      // an attempt is a run of chunks; log-only ignorable events (a mode switch) do not end it
      if (open !== undefined && e.ignorable !== true && e.type !== undefined) open = undefined
      continue
    }
    const chunk = e.data.chunk as Rec
    if (open === undefined || open.turn !== e.data.turn || open.step !== e.data.step) {
      open = { chunks: [], turn: e.data.turn, step: e.data.step, finished: false }
      out.push(open)
    }
    open.chunks.push(chunk)
    if (chunk.type === "finish") {
      open.finished = true
      open = undefined
    }
  }
  return out
}

const finishReason = (reason: Rec): Response.FinishReason => {
  switch (reason.kind) {
    case "stop":
      return (reason.providerReason ?? "stop") as Response.FinishReason
    case "tool-calls":
      return "tool-calls"
    case "max-tokens":
      return "length"
    default:
      return "error"
  }
}

/** The stream parts that translate back into `chunks` (the inverse of the loop's ChunkTranslator). */
export const partsOf = (chunks: ReadonlyArray<Rec>): Array<Response.StreamPartEncoded> => {
  const parts: Array<Response.StreamPartEncoded> = []
  const toolOf = (index: number) => chunks.find((c) => c.type === "tool-call-delta" && c.index === index)
  const kinds = new Map<number, string>()
  let usage: Rec | undefined
  for (const c of chunks) {
    switch (c.type) {
      case "block-start": {
        kinds.set(c.index, c.blockType)
        if (c.blockType === "tool-call") {
          const first = toolOf(c.index)
          parts.push({ type: "tool-params-start", id: first?.id ?? `tool-${c.index}`, name: first?.name ?? "unknown" } as any)
        } else parts.push({ type: `${c.blockType}-start`, id: `b${c.index}` } as any)
        break
      }
      case "text-delta":
      case "reasoning-delta":
        parts.push({ type: c.type, id: `b${c.index}`, delta: c.text } as any)
        break
      case "tool-call-delta":
        parts.push({ type: "tool-params-delta", id: c.id, delta: c.argumentsDelta } as any)
        break
      case "block-end": {
        const block = c.block as Rec
        if (block.type === "tool-call") {
          parts.push({ type: "tool-params-end", id: block.id } as any)
          parts.push({ type: "tool-call", id: block.id, name: block.name, params: JSON.parse(block.arguments) } as any)
        } else parts.push({ type: `${kinds.get(c.index) ?? block.type}-end`, id: `b${c.index}` } as any)
        break
      }
      case "usage":
        usage = c.usage
        break
      case "finish": {
        const input = usage === undefined ? undefined : (usage.inputTokens ?? 0) + (usage.cacheReadTokens ?? 0)
        parts.push({
          type: "finish",
          reason: finishReason(c.reason),
          usage: {
            inputTokens: input,
            outputTokens: usage?.outputTokens,
            totalTokens: usage === undefined ? undefined : (input ?? 0) + (usage.outputTokens ?? 0),
            ...(usage?.reasoningTokens === undefined ? {} : { reasoningTokens: usage.reasoningTokens }),
            ...(usage?.cacheReadTokens === undefined ? {} : { cachedInputTokens: usage.cacheReadTokens })
          }
        } as any)
        break
      }
    }
  }
  return parts
}

/**
 * The call scripts of a fixture's projected log: one per attempt, with the override's `hang`
 * (completing `reached`) or `throw` after an unfinished attempt's chunks. Fails with a message
 * naming the attempt when one has no finish and no override, or an override names no attempt.
 */
export const scriptsOf = (
  lines: ReadonlyArray<Rec>,
  override: Override | undefined,
  cwd: string,
  reached: Deferred.Deferred<void>
): Array<CallScript> | string => {
  const attempts = attemptsOf(lines)
  const calls = override?.calls ?? {}
  for (const key of Object.keys(calls)) {
    const n = Number(key)
    if (!Number.isInteger(n) || n < 1 || n > attempts.length) {
      return `replay.override.json names call ${key}, but the log has ${attempts.length} model call(s)`
    }
  }
  const out: Array<CallScript> = []
  for (const [i, attempt] of attempts.entries()) {
    const entry = calls[String(i + 1)]
    const parts: Array<ScriptPart> = partsOf(untoken(attempt.chunks, cwd) as Array<Rec>).map((part) => ({ type: "raw", part }))
    if (entry === undefined) {
      if (!attempt.finished) {
        return `model call ${i + 1} (turn ${attempt.turn}, step ${attempt.step}) has no finish chunk and no hang/throw entry in replay.override.json`
      }
    } else if ("hang" in entry) parts.push({ type: "hang", reached })
    else parts.push({ type: "fail", error: new AiError.UnknownError({ module: "Snapshot", method: "streamText", description: entry.throw.message }) })
    out.push(parts)
  }
  return out
}

/** The override a live run calls for: a `hang` for every call whose script hung (pretend-live recording). */
export const harvestOverride = (scripts: ReadonlyArray<CallScript>, consumed: number): Override | undefined => {
  const calls: Record<string, Override["calls"][string]> = {}
  for (const [i, script] of scripts.slice(0, consumed).entries()) {
    for (const part of script) {
      if (part.type === "hang") calls[String(i + 1)] = { hang: true }
      if (part.type === "fail") calls[String(i + 1)] = { throw: { message: part.error.message } }
    }
  }
  return Object.keys(calls).length === 0 ? undefined : { calls }
}
