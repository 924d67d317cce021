/**
 * Helpers of the compaction tests: payload builders, a step writer that follows the agent loop's
 * canonical order, a summariser double over a caller function, and log inspection shortcuts.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as InvariantsLive from "../../src/layers/session/InvariantsLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import type { Event } from "../../src/schema/Events.js"
import type { SessionShape } from "../../src/services/Session.js"
import { Summarizer, type SummaryInput, type SummaryOutput } from "../../src/services/Summarizer.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import { layerSummarizerDeterministic } from "../../src/layers/model/SummarizerLive.js"

export const userData = (id: string, text: string) => ({
  id,
  role: "user" as const,
  content: [{ type: "text", text }],
  source: { kind: "user" }
})

export const assistantData = (
  turn: number,
  step: number,
  id: string,
  text: string,
  calls: ReadonlyArray<string> = []
) => ({
  turn,
  step,
  message: {
    id,
    role: "assistant" as const,
    content: [
      ...(text === "" ? [] : [{ type: "text", text }]),
      ...calls.map((c) => ({ type: "tool-call", id: c, name: "read_file", arguments: "{\"path\":\"a.ts\"}" }))
    ],
    source: { kind: "model" as const, provider: "p", model: "m" }
  }
})

export const toolResultData = (
  turn: number,
  step: number,
  callId: string,
  inner: ReadonlyArray<Record<string, unknown>>,
  extra: Record<string, unknown> = {}
) => ({
  turn,
  step,
  message: {
    id: `r-${callId}`,
    role: "user" as const,
    content: [{ type: "tool-result" as const, toolCallId: callId, content: inner as ReadonlyArray<any> }] as const,
    source: { kind: "tool" as const, callId }
  },
  ...extra
})

/** Write a user message (append). */
export const user = (s: SessionShape, id: string, text: string) =>
  s.append("user/message", userData(id, text), { surfaceOp: "append" })

/** One canonical step: step/start, users, assistant (with calls), tool/call + tool/result per call, step/end. */
export const step = (
  s: SessionShape,
  turn: number,
  stepNo: number,
  spec: {
    readonly users?: ReadonlyArray<string>
    readonly text: string
    readonly calls?: ReadonlyArray<{ readonly id: string; readonly output: string }>
    readonly injectAfterFirstResult?: string
  }
) =>
  Effect.gen(function*() {
    yield* s.append("step/start", { turn, step: stepNo })
    for (const [i, u] of (spec.users ?? []).entries()) yield* user(s, `u-${turn}-${stepNo}-${i}`, u)
    const calls = spec.calls ?? []
    yield* s.append("assistant/message", assistantData(turn, stepNo, `a-${turn}-${stepNo}`, spec.text, calls.map((c) => c.id)), {
      surfaceOp: "append",
      sourceEventSeqs: []
    })
    for (const [i, c] of calls.entries()) {
      const call = yield* s.append("tool/call", { turn, step: stepNo, callId: c.id, name: "read_file", arguments: "{}" })
      yield* s.append("tool/result", toolResultData(turn, stepNo, c.id, [{ type: "text", text: c.output }]), {
        surfaceOp: "append",
        sourceEventSeqs: [call.seq]
      })
      if (i === 0 && spec.injectAfterFirstResult !== undefined) {
        yield* s.append("context/message", {
          id: `ctx-${turn}-${stepNo}`,
          role: "user",
          content: [{ type: "text", text: spec.injectAfterFirstResult }],
          source: { kind: "plugin", plugin: "notes" }
        }, { surfaceOp: "append" })
      }
    }
    yield* s.append("step/end", { turn, step: stepNo })
  })

/** The memory store, counter ids and the deterministic summariser. */
export const baseLayer = Layer.mergeAll(layerMemoryStore(), IdGenerator.layerCounter("id-"), layerSummarizerDeterministic)

/** As `baseLayer`, plus the invariants validator. */
export const invariantLayer = Layer.mergeAll(baseLayer, InvariantsLive.layer)

/** A summariser double. */
export const summarizerOf = (f: (input: SummaryInput) => Effect.Effect<SummaryOutput, any>) =>
  Layer.succeed(Summarizer, { summarize: f })

/** A fixed short summary. */
export const shortSummary = (text = "short"): SummaryOutput => ({
  blocks: [{ type: "text", text }],
  provider: "test",
  model: "t1"
})

export const typesFrom = (events: ReadonlyArray<Event>, from: number): ReadonlyArray<string> =>
  events.slice(from).map((e) => e.type)

export const ofType = (events: ReadonlyArray<Event>, type: string): ReadonlyArray<Event> =>
  events.filter((e) => e.type === type)

/** A long text of `n` words. */
export const words = (n: number, word = "lorem"): string => Array.from({ length: n }, (_, i) => `${word}${i}`).join(" ")
