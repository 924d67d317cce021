/**
 * Compaction and pruning in the agent loop, end to end (SPEC §9.6, §9.7, §1.6, §5.3 R5, §5.4) on
 * the memory, JSONL and SQLite stores with the deterministic summariser and the invariants layer:
 * a scripted multi-turn session with tool calls whose pre-step hook (`Compact.preStepHook`) prunes
 * a large tool result and later compacts under pressure. Checked: the prune and compaction events
 * and their citations, the request of every model call against `requestAt` of its dispatch point,
 * the `series` header of the first request after each surface replacement, reopen and replay
 * (`SessionLive.open`, `SessionLive.fromSeed`) deriving identical messages, no repair closers, no veto.
 */
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as HeaderSnapshotterLive from "../../src/layers/session/HeaderSnapshotterLive.js"
import * as InvariantsLive from "../../src/layers/session/InvariantsLive.js"
import { type CallScript, layerScriptedLanguageModel } from "../../src/layers/model/ScriptedLanguageModel.js"
import { deterministicLine, layerSummarizerDeterministic } from "../../src/layers/model/SummarizerLive.js"
import * as AgentLoop from "../../src/programs/agent/AgentLoop.js"
import * as Compact from "../../src/programs/compaction/Compact.js"
import { PRUNE_MARKER } from "../../src/programs/compaction/PruneToolResults.js"
import type { Event } from "../../src/schema/Events.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import { Session } from "../../src/services/Session.js"
import * as SessionApi from "../../src/services/Session.js"
import { frameCheckpoint } from "../../src/services/Summarizer.js"
import { deriveEventMessage } from "../../src/services/SurfaceManager.js"
import type { SessionStore } from "../../src/services/SessionStore.js"
import {
  assertChunkCitations,
  assertPaired,
  assertRequestsMatch,
  backends,
  dispatchPoints,
  NotFound,
  route,
  system,
  toolkit
} from "./helpers.js"

type Rec = Record<string, any>

const words = (n: number, word: string): string => Array.from({ length: n }, (_, i) => `${word}${i}`).join(" ")

/** A tool result far over the pruner's threshold (about 3,200 characters). */
const BIG = Array.from({ length: 80 }, (_, i) => `line ${i}: ${"x".repeat(30)}`).join("\n")

const handlers = toolkit.toLayer({
  list_files: () => Effect.succeed(["big.txt", "small.txt"]),
  read_file: ({ path }) =>
    path === "big.txt"
      ? Effect.succeed(BIG)
      : path === "small.txt"
      ? Effect.succeed("tiny")
      : Effect.fail(new NotFound({ code: "ENOENT", path })),
  slow: () => Effect.never
})

/** A small context window: threshold ⌊1000 × 0.8⌋ = 800 tokens. */
const e2eRoute = { ...route, contextWindow: 1000 }
const policy: Compact.CompactionPolicy = {
  retainTokens: 200,
  prune: { thresholdChars: 400, headChars: 100, tailChars: 60 }
}

const call = (id: string, name: string, params: unknown): CallScript => [
  { type: "text", text: "Working." },
  { type: "tool-call", id, name, params },
  { type: "finish", reason: "tool-calls", usage: { inputTokens: 10, outputTokens: 5 } }
]
const answer = (text: string): CallScript => [
  { type: "text", text },
  { type: "finish", reason: "stop", usage: { inputTokens: 10, outputTokens: 5 } }
]

/** Turn 1 reads big.txt (pruned at the next pre-step); turn 2 lists files; turn 3 opens under pressure (compaction). */
const scripts: ReadonlyArray<CallScript> = [
  call("r1", "read_file", { path: "big.txt" }),
  answer("big.txt holds eighty log lines."),
  call("l1", "list_files", { dir: "." }),
  answer("There are two files."),
  call("r2", "read_file", { path: "small.txt" }),
  answer("small.txt says tiny."),
  answer("Goodbye.")
]

const turns: ReadonlyArray<string> = [
  "Read big.txt and tell me what it holds.",
  words(150, "detail"),
  words(100, "more"),
  "Thanks, that is all."
]

const layerFor = (store: Layer.Layer<SessionStore>) =>
  Layer.mergeAll(
    store,
    layerScriptedLanguageModel({ scripts, captureRequests: true }),
    HeaderSnapshotterLive.layer,
    InvariantsLive.layer,
    IdGenerator.layerCounter("id-"),
    handlers,
    layerSummarizerDeterministic
  )

const ofType = (events: ReadonlyArray<Event>, type: string) => events.filter((e) => e.type === type)

/** The reason of the first `request/header` after `seq`, and whether a chunk came before it. */
const nextHeader = (events: ReadonlyArray<Event>, seq: number) => {
  for (const e of events.slice(seq + 1)) {
    if (e.type === "assistant/chunk") return { reason: undefined, seq: e.seq }
    if (e.type === "request/header") return { reason: (e.data as Rec).reason as string, seq: e.seq }
  }
  return { reason: undefined, seq: -1 }
}

for (const backend of backends) {
  describe(`compaction end to end on ${backend.name}`, () => {
    it.scoped("§9.7 the pre-step hook prunes and compacts in a scripted session; every request equals requestAt; reopen and replay agree", () =>
      Effect.gen(function*() {
        const id = `e2e-${backend.name}`
        const first = yield* Effect.scoped(Effect.gen(function*() {
          const session = yield* SessionLive.create({ id })
          const loop = AgentLoop.make({ toolkit, system, route: e2eRoute, preStep: Compact.preStepHook(policy) })
          const results = []
          for (const text of turns) {
            results.push(yield* loop.runTurn([{ type: "user", content: text }]).pipe(Effect.provideService(Session, session)))
          }
          // the invariants layer vetoed nothing: every turn ran to completion
          assert.deepStrictEqual(results.map((r) => [r.turn, r.reason.kind, r.steps]), [
            [1, "completed", 2],
            [2, "completed", 2],
            [3, "completed", 2],
            [4, "completed", 1]
          ])
          const events = yield* session.events
          const stepStarts = ofType(events, "step/start")

          // the prune: at turn 1's second pre-step, before its step/start; cites the big result
          const prunes = ofType(events, "compaction/prune")
          assert.strictEqual(prunes.length, 1)
          const prune = prunes[0]
          assert.strictEqual(prune.seq, stepStarts[1].seq - 2)
          const original = ofType(events, "tool/result")[0]
          assert.strictEqual((original.data as Rec).message.content[0].content[0].text, BIG)
          assert.deepStrictEqual(prune.data, {
            shadowedRange: { start: original.seq, end: original.seq },
            shadowedSeqs: [original.seq],
            shadowedTokenCount: Math.ceil(new TextEncoder().encode(JSON.stringify((original.data as Rec).message.content)).length / 4)
          })
          const replacement = events[prune.seq + 1]
          assert.strictEqual(replacement.type, "tool/result")
          assert.deepStrictEqual(replacement.surfaceOp, { op: "replace", start: original.seq, end: original.seq })
          assert.deepStrictEqual(replacement.sourceEventSeqs, [original.seq])
          const pruned = (replacement.data as Rec).message.content[0].content[0].text as string
          const points = Array.from(BIG)
          assert.strictEqual(pruned, points.slice(0, 100).join("") + PRUNE_MARKER + points.slice(points.length - 60).join(""))
          assert.strictEqual((replacement.data as Rec).message.id, (original.data as Rec).message.id)

          // the compaction: at turn 3's second pre-step (after its tool result), owned by turn 3,
          // shadowing turns 1 and 2 and keeping turn 3's messages (the retained tail)
          const starts = ofType(events, "compaction/start")
          assert.strictEqual(starts.length, 1)
          const start = starts[0]
          const turn3 = ofType(events, "turn/start")[2]
          assert.deepStrictEqual(events[start.seq - 1].data, { turn: 3, step: 1 })
          assert.strictEqual(events[start.seq - 1].type, "step/end")
          assert.strictEqual((start.data as Rec).turn, 3)
          const summary = events[start.seq + 1]
          const checkpoint = events[start.seq + 2]
          const end = events[start.seq + 3]
          assert.deepStrictEqual([summary.type, checkpoint.type, end.type], ["compaction/summary", "user/message", "compaction/end"])
          assert.strictEqual(events[end.seq + 1].type, "step/start")
          const s = summary.data as Rec
          const shadowedSeqs = s.shadowedSeqs as ReadonlyArray<number>
          // shadowed: the turn 1 and 2 messages, with the pruned result in place of the original
          const messageSeqs = (from: number, to: number) =>
            events.filter((e) =>
              e.seq > from && e.seq < to && deriveEventMessage(e) !== undefined && e.seq !== original.seq
            ).map((e) => e.seq)
          assert.deepStrictEqual(shadowedSeqs, messageSeqs(-1, turn3.seq))
          assert.deepStrictEqual(yield* session.surface.nodes, [
            checkpoint.seq,
            ...messageSeqs(turn3.seq, events.length).filter((q) => q !== checkpoint.seq)
          ])
          assert.deepStrictEqual(s.shadowedRange, { start: shadowedSeqs[0], end: shadowedSeqs[shadowedSeqs.length - 1] })
          assert.strictEqual(s.provider, "deterministic")
          assert.strictEqual(s.model, "summary-v1")
          const shadowedMessages = shadowedSeqs.map((q) => deriveEventMessage(events[q])!)
          assert.deepStrictEqual(s.summary, [{ type: "text", text: shadowedMessages.map(deterministicLine).join("\n") }])
          assert.deepStrictEqual(checkpoint.surfaceOp, { op: "replace", start: shadowedSeqs[0], end: shadowedSeqs[shadowedSeqs.length - 1] })
          assert.deepStrictEqual(checkpoint.sourceEventSeqs, [start.seq, summary.seq, ...shadowedSeqs])
          assert.deepStrictEqual((checkpoint.data as Rec).content, frameCheckpoint(s.summary))
          assert.deepStrictEqual((checkpoint.data as Rec).source, {
            kind: "plugin",
            plugin: "compact",
            compactionId: (start.data as Rec).compactionId
          })
          assert.deepStrictEqual(end.data, { compactionId: (start.data as Rec).compactionId, turn: 3 })
          assert.strictEqual(yield* session.surface.replaceGeneration, 2)

          // R5: the first request after each replacement carries a `series` header; others inherit
          assert.deepStrictEqual(nextHeader(events, prune.seq + 1).reason, "series")
          assert.deepStrictEqual(nextHeader(events, end.seq).reason, "series")
          assert.deepStrictEqual(ofType(events, "request/header").map((e) => (e.data as Rec).reason), [
            "initial",
            "series",
            "series"
          ])
          assert.strictEqual(ofType(events, "request/context").length, 1)
          assert.strictEqual((ofType(events, "request/context")[0].data as Rec).contextWindow, 1000)

          // every model call received exactly requestAt(its dispatch point), through PromptConversion
          const dispatched = dispatchPoints(events)
          assert.strictEqual(dispatched.length, scripts.length)
          yield* assertRequestsMatch(session, dispatched)
          // the first request after the compaction starts with the checkpoint
          const at = yield* session.requestAt(nextHeader(events, end.seq).seq)
          assert.deepStrictEqual(at.messages[0], deriveEventMessage(checkpoint))
          assert.deepStrictEqual(at.messages.map((m) => m.role), ["user", "user", "assistant", "user"])
          // pairing over the original events: the prune's replacement result cites the result it shadows
          assertPaired(events.map((e) =>
            e.type === "tool/result" && typeof e.surfaceOp === "object" ? ({ ...e, type: "pruned/replacement" }) as Event : e
          ))
          assertChunkCitations(events)
          return { events, messages: yield* session.messages, points: dispatched }
        }))

        // reopen: identical derived messages; requestAt still reproduces every request; no closers
        const inspected = yield* SessionLive.inspect(id)
        assert.strictEqual(inspected.closers.length, 0)
        const reopened = yield* SessionLive.open(id)
        const stored = yield* reopened.events
        assert.strictEqual(stored.length, first.events.length + 1) // + session/end-seed
        assert.deepStrictEqual(yield* reopened.messages, first.messages)
        yield* assertRequestsMatch(reopened, first.points)

        // replay: a new session seeded with the stored log derives the same messages and requests
        const seed = JSON.parse(JSON.stringify(inspected.events))
        const replayed = yield* SessionLive.fromSeed({ header: { version: 1, id: `${id}-replay`, createdAt: 0 }, seed })
        assert.deepStrictEqual(yield* replayed.messages, first.messages)
        assert.deepStrictEqual(yield* replayed.surface.nodes, yield* reopened.surface.nodes)
        assert.strictEqual(yield* replayed.surface.replaceGeneration, 2)
        yield* assertRequestsMatch(replayed, first.points)
      }).pipe(Effect.provide(layerFor(backend.layer()))))
  })
}
