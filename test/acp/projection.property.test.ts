/**
 * The one projection (ACP.md §2.5, §2.6): for any scripted session driven through the adapter, the
 * live `session/update` sequence, coalesced, equals the `session/load` replay of the resulting log
 * (without the user chunks, which only replay shows, and which are the prompts in order); every
 * replayed update precedes the load answer; nothing is capped.
 *
 * The sessions cover: reasoning and text, tool rounds, tool bodies that succeed or fail (a typed
 * failure, a defect, a result its schema rejects), a gated tool whose permission request the client
 * allows (once, always), rejects, cancels, answers with an unknown option or fails, or answers after
 * switching to plan mode (the step's later gated calls: a tool the mode no longer offers), mode
 * switches between prompts (`session/set_mode`, `session/set_config_option`), the stop reasons, a
 * model call that fails mid-stream (a provider error, or a tool call the offered toolkit cannot
 * decode: unknown, invalid arguments, not offered by the mode), and prompts cancelled mid-stream,
 * mid-tool and during a pending permission request (each cancel sent at a point the test waits for,
 * so every run is deterministic).
 *
 * The by-design differences, and only these, are taken out of live before comparing: mode updates
 * (`current_mode_update`, `config_option_update`: live only; load answers the final mode instead),
 * and the partial chunks of a model call that failed mid-stream (ACP.md §2.5: "uncommitted partial
 * chunks (crashed stream) are not replayed"), which are exactly the failed call's scripted deltas,
 * the last updates its prompt got, under a message id nothing else carries.
 */
import * as acp from "@agentclientprotocol/sdk"
import * as AiError from "@effect/ai/AiError"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as fc from "effect/FastCheck"
import * as FiberId from "effect/FiberId"
import * as Layer from "effect/Layer"
import * as HeaderSnapshotterLive from "../../src/layers/session/HeaderSnapshotterLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { type CallScript, layerScriptedLanguageModel, type ScriptPart } from "../../src/layers/model/ScriptedLanguageModel.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import * as Acp from "../../src/programs/acp/Acp.js"
import { coalesce } from "../../src/programs/acp/Acp.js"
import * as IdGenerator from "../../src/services/IdGenerator.js"
import { connect, CWD, type Harness, toolkit } from "./helpers.js"
import { runs as propertyRuns } from "../suites.js"

// ---------------------------------------------------------------------------------------------
// The generated plan of a session

/** How a tool body ends (the path it is given says so: `fail-x`, `die-x`, `bad-result-x`). */
type Outcome = "ok" | "fail" | "die" | "bad-result"
/** The client's answer to a permission request (`to-plan`: switch to plan mode, then allow once). */
type Answer = "allow-once" | "allow-always" | "reject-once" | "cancelled" | "made-up" | "throw" | "to-plan"
type Mode = "code" | "plan"

interface ToolPlan {
  readonly name: "read_file" | "write_file"
  readonly path: string
  readonly outcome: Outcome
  readonly answer: Answer
}
interface Blocks {
  readonly reasoning: ReadonlyArray<string> | undefined
  readonly text: ReadonlyArray<string> | undefined
}
/** A model call that continues the turn: its blocks, then tool calls. */
interface CallPlan extends Blocks {
  readonly tools: ReadonlyArray<ToolPlan>
}
/** How a turn's last model call ends. */
type Ending =
  | Blocks & { readonly kind: "stop"; readonly reason: "stop" | "length" | "content-filter" }
  | Blocks & {
    readonly kind: "fail"
    readonly how: "error" | "unknown-tool" | "bad-params" | "not-offered"
    /** An unfinished text block streamed before the failure. */
    readonly open: ReadonlyArray<string> | undefined
    /** Valid tool calls streamed before the failure. */
    readonly calls: ReadonlyArray<ToolPlan>
  }
  | Blocks & {
    readonly kind: "cancel-stream"
    readonly open: ReadonlyArray<string> | undefined
    readonly calls: ReadonlyArray<ToolPlan>
  }
  | Blocks & {
    /** Cancelled while `slow` runs, or while the client holds a permission request. */
    readonly kind: "cancel-tool" | "cancel-permission"
    readonly before: ReadonlyArray<ToolPlan>
    readonly after: ReadonlyArray<ToolPlan>
  }
interface TurnPlan {
  readonly switchTo: { readonly mode: Mode; readonly via: "set_mode" | "set_config_option" } | undefined
  readonly calls: ReadonlyArray<CallPlan>
  readonly ending: Ending
}

const maybe = <A>(arb: fc.Arbitrary<A>) => fc.option(arb, { nil: undefined })
const word = fc.stringMatching(/^[a-z]{1,6} ?$/)
const deltas = fc.array(word, { minLength: 1, maxLength: 4 })
const blocks = { reasoning: maybe(deltas), text: maybe(deltas) }

const outcome = fc.oneof(
  { weight: 4, arbitrary: fc.constant<Outcome>("ok") },
  { weight: 1, arbitrary: fc.constantFrom<Array<Outcome>>("fail", "die", "bad-result") }
)
const answer = fc.constantFrom<Array<Answer>>(
  "allow-once",
  "allow-once",
  "allow-always",
  "reject-once",
  "cancelled",
  "made-up",
  "throw",
  "to-plan"
)
const tool: fc.Arbitrary<ToolPlan> = fc.record({
  name: fc.constantFrom<Array<ToolPlan["name"]>>("read_file", "write_file"),
  path: fc.stringMatching(/^[a-z]{1,4}$/),
  outcome,
  answer
})
const tools = (minLength: number, maxLength: number) => fc.array(tool, { minLength, maxLength })

const ending: fc.Arbitrary<Ending> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("stop" as const),
      reason: fc.constantFrom<Array<"stop" | "length" | "content-filter">>("stop", "stop", "length", "content-filter"),
      ...blocks
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant("fail" as const),
      how: fc.constantFrom<Array<"error" | "unknown-tool" | "bad-params" | "not-offered">>("error", "unknown-tool", "bad-params", "not-offered"),
      ...blocks,
      open: maybe(deltas),
      calls: tools(0, 1)
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant("cancel-stream" as const), ...blocks, open: maybe(deltas), calls: tools(0, 1) })
  },
  ...(["cancel-tool", "cancel-permission"] as const).map((kind) => ({
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant(kind), ...blocks, before: tools(0, 2), after: tools(0, 1) })
  }))
)

const turn: fc.Arbitrary<TurnPlan> = fc.record({
  switchTo: fc.option(
    fc.record({
      mode: fc.constantFrom<Array<Mode>>("code", "plan"),
      via: fc.constantFrom<Array<"set_mode" | "set_config_option">>("set_mode", "set_config_option")
    }),
    { nil: undefined, freq: 2 }
  ),
  calls: fc.array(fc.record({ ...blocks, tools: tools(1, 3) }), { maxLength: 2 }),
  ending
})

const session = fc.array(turn, { minLength: 1, maxLength: 4 })

// ---------------------------------------------------------------------------------------------
// From a plan: the model's scripts, the client's answers, and what the test expects

type ChunkKind = "agent_message_chunk" | "agent_thought_chunk"
interface Delta {
  readonly kind: ChunkKind
  readonly text: string
}

/** How the driver ends a cancelled prompt: at which point it sends `session/cancel`. */
type CancelAt =
  | { readonly at: "stream"; readonly reached: Deferred.Deferred<void>; readonly chunks: number }
  | { readonly at: "tool"; readonly started: number }
  | { readonly at: "permission"; readonly callId: string }

interface TurnRun {
  readonly prompt: string
  readonly switchTo: TurnPlan["switchTo"]
  /** The stop reason, or `error` (a JSON-RPC internal error). */
  readonly expect: acp.StopReason | "error"
  readonly cancel: CancelAt | undefined
  /** The deltas of a model call that failed mid-stream (shown live, never committed). */
  readonly failed: ReadonlyArray<Delta>
}

interface Built {
  readonly scripts: ReadonlyArray<CallScript>
  readonly turns: ReadonlyArray<TurnRun>
  /** Permission answers by tool call id (`hold`: answered only when the request is cancelled). */
  readonly answers: ReadonlyMap<string, Answer | "hold">
  /** The tool calls the client is asked about, in order. */
  readonly asked: ReadonlyArray<string>
  /** Every committed tool call with its settled status, in order. */
  readonly settled: ReadonlyArray<readonly [string, "completed" | "failed"]>
  /** The mode of each effective switch, in order (live `current_mode_update`s). */
  readonly switches: ReadonlyArray<Mode>
  readonly finalMode: Mode
}

const deltasOf = (b: Blocks, open?: ReadonlyArray<string>): Array<Delta> => [
  ...(b.reasoning ?? []).map((text) => ({ kind: "agent_thought_chunk" as const, text })),
  ...(b.text ?? []).map((text) => ({ kind: "agent_message_chunk" as const, text })),
  ...(open ?? []).map((text) => ({ kind: "agent_message_chunk" as const, text }))
]

const blockParts = (b: Blocks): Array<ScriptPart> => [
  ...(b.reasoning === undefined ? [] : [{ type: "reasoning" as const, text: b.reasoning.join(""), deltas: b.reasoning }]),
  ...(b.text === undefined ? [] : [{ type: "text" as const, text: b.text.join(""), deltas: b.text }])
]

/** A text block that is started and never ended. */
const openParts = (open: ReadonlyArray<string> | undefined, id: string): Array<ScriptPart> =>
  open === undefined ? [] : [
    { type: "raw", part: { type: "text-start", id } },
    ...open.map((delta): ScriptPart => ({ type: "raw", part: { type: "text-delta", id, delta } }))
  ]

const pathOf = (t: ToolPlan) => t.outcome === "ok" ? t.path : `${t.outcome}-${t.path}`
const finishReason = { "stop": "end_turn", "length": "max_tokens", "content-filter": "refusal" } as const

/** The scripts and expectations of a plan, following the adapter's mode, gate and allow-always rules. */
const build = (plan: ReadonlyArray<TurnPlan>): Built => {
  const scripts: Array<CallScript> = []
  const turns: Array<TurnRun> = []
  const answers = new Map<string, Answer | "hold">()
  const asked: Array<string> = []
  const settled: Array<readonly [string, "completed" | "failed"]> = []
  const switches: Array<Mode> = []
  let mode: Mode = "code"
  let allowAlways = false
  let next = 1
  let slows = 0
  const id = () => `call-${next++}`

  /** A tool call part; a gated call the plan mode does not offer to the model becomes a read. */
  const callPart = (t: ToolPlan, callId: string, offered: Mode): ScriptPart =>
    t.name === "write_file" && offered === "code"
      ? { type: "tool-call", id: callId, name: "write_file", params: { path: pathOf(t), text: "" } }
      : { type: "tool-call", id: callId, name: "read_file", params: { path: pathOf(t) } }

  /** Run one dispatched call (the mode may change mid-step: a `to-plan` answer). */
  const dispatch = (t: ToolPlan, callId: string, offered: Mode) => {
    answers.set(callId, t.answer)
    const runs = (): "completed" | "failed" => t.outcome === "ok" ? "completed" : "failed"
    if (t.name === "read_file" || offered === "plan") return settled.push([callId, runs()])
    if (mode === "plan") return settled.push([callId, "failed"]) // TOOL_NOT_OFFERED, not asked
    if (allowAlways) return settled.push([callId, runs()])
    asked.push(callId)
    switch (t.answer) {
      case "allow-always":
        allowAlways = true
        return settled.push([callId, runs()])
      case "to-plan":
        mode = "plan"
        switches.push("plan")
        return settled.push([callId, runs()])
      case "allow-once":
        return settled.push([callId, runs()])
      default:
        return settled.push([callId, "failed"])
    }
  }

  /** Calls that never ran (the prompt was cancelled first): failed, not asked. */
  const aborted = (list: ReadonlyArray<ToolPlan>, offered: Mode) =>
    list.map((t) => {
      const callId = id()
      settled.push([callId, "failed"])
      return callPart(t, callId, offered)
    })

  for (const [i, p] of plan.entries()) {
    if (p.switchTo !== undefined && p.switchTo.mode !== mode) {
      mode = p.switchTo.mode
      switches.push(mode)
    }
    let chunks = 0
    for (const c of p.calls) {
      const offered = mode
      const parts = c.tools.map((t) => {
        const callId = id()
        return [t, callId, callPart(t, callId, offered)] as const
      })
      scripts.push([...blockParts(c), ...parts.map(([, , part]) => part), { type: "finish", reason: "tool-calls" }])
      chunks += deltasOf(c).length
      for (const [t, callId] of parts) dispatch(t, callId, offered)
    }
    const prompt = `prompt ${i + 1}`
    let e = p.ending
    // a cancel at a tool needs the tool offered, and asked about: else cancel the stream
    if (e.kind === "cancel-permission" && allowAlways) e = { ...e, kind: "cancel-tool" }
    if ((e.kind === "cancel-tool" || e.kind === "cancel-permission") && mode === "plan") {
      e = { kind: "cancel-stream", reasoning: e.reasoning, text: e.text, open: undefined, calls: [] }
    }
    const offered = mode
    switch (e.kind) {
      case "stop":
        scripts.push([...blockParts(e), { type: "finish", reason: e.reason }])
        turns.push({ prompt, switchTo: p.switchTo, expect: finishReason[e.reason], cancel: undefined, failed: [] })
        break
      case "fail": {
        const bad = id()
        const trigger: ScriptPart = e.how === "error"
          ? { type: "fail", error: new AiError.UnknownError({ module: "Model", method: "stream", description: "boom" }) }
          : e.how === "bad-params"
          ? { type: "tool-call", id: bad, name: "read_file", params: { path: 5 } }
          : e.how === "not-offered" && offered === "plan"
          ? { type: "tool-call", id: bad, name: "write_file", params: { path: "x", text: "" } }
          : { type: "tool-call", id: bad, name: "nope", params: { path: "x" } }
        const valid = e.calls.map((t) => callPart(t, id(), offered))
        scripts.push([...blockParts(e), ...openParts(e.open, `open-${bad}`), ...valid, trigger])
        turns.push({ prompt, switchTo: p.switchTo, expect: "error", cancel: undefined, failed: deltasOf(e, e.open) })
        break
      }
      case "cancel-stream": {
        const reached = Deferred.unsafeMake<void>(FiberId.none)
        const valid = e.calls.map((t) => callPart(t, id(), offered))
        scripts.push([...blockParts(e), ...openParts(e.open, `open-${next}`), ...valid, { type: "hang", reached }])
        chunks += deltasOf(e, e.open).length
        turns.push({ prompt, switchTo: p.switchTo, expect: "cancelled", cancel: { at: "stream", reached, chunks }, failed: [] })
        break
      }
      case "cancel-tool":
      case "cancel-permission": {
        // the calls before the cancel point stay in code mode (a switch would deny the held call)
        const before = e.before.map((t) => {
          const callId = id()
          const kept: ToolPlan = t.answer === "to-plan" || (e.kind === "cancel-permission" && t.answer === "allow-always")
            ? { ...t, answer: "allow-once" }
            : t
          return [kept, callId, callPart(kept, callId, offered)] as const
        })
        for (const [t, callId] of before) dispatch(t, callId, offered)
        const held = id()
        settled.push([held, "failed"])
        let cancel: CancelAt
        let heldPart: ScriptPart
        if (e.kind === "cancel-tool") {
          cancel = { at: "tool", started: ++slows }
          heldPart = { type: "tool-call", id: held, name: "slow", params: {} }
        } else {
          cancel = { at: "permission", callId: held }
          answers.set(held, "hold")
          asked.push(held)
          heldPart = { type: "tool-call", id: held, name: "write_file", params: { path: "held", text: "" } }
        }
        scripts.push([
          ...blockParts(e),
          ...before.map(([, , part]) => part),
          heldPart,
          ...aborted(e.after, offered),
          { type: "finish", reason: "tool-calls" }
        ])
        turns.push({ prompt, switchTo: p.switchTo, expect: "cancelled", cancel, failed: [] })
        break
      }
    }
  }
  return { scripts, turns, answers, asked, settled, switches, finalMode: mode }
}

// ---------------------------------------------------------------------------------------------
// The environment: the helpers' agent and toolkit, with tool bodies that can fail

class ToolBroke extends Error {
  readonly _tag = "ToolBroke"
}

const body = (path: string, ok: string): Effect.Effect<string> =>
  path.startsWith("fail-")
    ? Effect.fail(new ToolBroke(`cannot use ${path}`)) as unknown as Effect.Effect<string>
    : path.startsWith("die-")
    ? Effect.die(new Error(`crashed on ${path}`))
    : path.startsWith("bad-result-")
    ? Effect.succeed(42 as unknown as string)
    : Effect.succeed(ok)

const environmentOf = (scripts: ReadonlyArray<CallScript>) => {
  const probe = { slowStarted: 0 }
  const tools = toolkit.toLayer({
    read_file: ({ path }) => body(path, `contents of ${path}`),
    write_file: ({ path }) => body(path, `wrote ${path}`),
    slow: () => Effect.zipRight(Effect.sync(() => void probe.slowStarted++), Effect.never)
  })
  const layer = Layer.mergeAll(
    Acp.layerSessionFactory({ create: SessionLive.create, open: SessionLive.open }),
    layerScriptedLanguageModel({ scripts }),
    HeaderSnapshotterLive.layer,
    IdGenerator.layerCounter("id-"),
    tools
  ).pipe(Layer.provideMerge(layerMemoryStore()))
  return { layer, probe }
}

/** Poll `condition` on real timers, failing the run (not hanging it) when it never holds. */
const until = (what: string, condition: Effect.Effect<boolean>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 5_000; i++) {
      if (yield* condition) return
      yield* Effect.promise(() => new Promise((r) => setTimeout(r, 2)))
    }
    assert.fail(`timed out waiting for ${what}`)
  })

const sessionUpdates = (frames: ReadonlyArray<{ kind: string }>, sessionId: string, end?: number) =>
  frames.slice(0, end).flatMap((f: any) => f.kind === "update" && f.sessionId === sessionId ? [f.update as acp.SessionUpdate] : [])

const isModeUpdate = (u: acp.SessionUpdate) =>
  u.sessionUpdate === "current_mode_update" || u.sessionUpdate === "config_option_update"
const isChunk = (u: acp.SessionUpdate): u is Extract<acp.SessionUpdate, { sessionUpdate: ChunkKind }> =>
  u.sessionUpdate === "agent_message_chunk" || u.sessionUpdate === "agent_thought_chunk"

// ---------------------------------------------------------------------------------------------

describe("ACP projection: live equals replay", () => {
  it.effect.prop("for any scripted session, coalesced live updates equal the session/load replay", [session], ([plan]) => {
    const built = build(plan)
    const prompts = built.turns.map((t) => t.prompt)
    const env = environmentOf(built.scripts)
    return Effect.gen(function*() {
      let live: Harness | undefined = undefined
      live = yield* connect({
        permission: async (request, signal) => {
          const answer = built.answers.get(request.toolCall.toolCallId)
          switch (answer) {
            case "hold":
              return new Promise<acp.RequestPermissionResponse>((resolve) =>
                signal.addEventListener("abort", () => resolve({ outcome: { outcome: "cancelled" } }))
              )
            case "throw":
              throw acp.RequestError.internalError()
            case "cancelled":
              return { outcome: { outcome: "cancelled" } }
            case "to-plan":
              await live!.connection.agent.request("session/set_mode", { sessionId: request.sessionId, modeId: "plan" })
              return { outcome: { outcome: "selected", optionId: "allow-once" } }
            case undefined:
              throw new Error(`no answer planned for ${request.toolCall.toolCallId}`)
            default:
              return { outcome: { outcome: "selected", optionId: answer } }
          }
        }
      })
      const h = live
      const { sessionId } = yield* h.request("session/new", { cwd: CWD, mcpServers: [] })
      /** The frames of each prompt: from its request to its answer. */
      const segments: Array<{ readonly start: number; readonly end: number; readonly failed: ReadonlyArray<Delta> }> = []
      for (const t of built.turns) {
        if (t.switchTo !== undefined) {
          if (t.switchTo.via === "set_mode") {
            yield* h.request("session/set_mode", { sessionId, modeId: t.switchTo.mode })
          } else {
            const answer = yield* h.request("session/set_config_option", { sessionId, configId: "mode", value: t.switchTo.mode })
            assert.strictEqual(answer.configOptions[0].currentValue, t.switchTo.mode)
          }
        }
        const start = h.frames.length
        const request = h.request("session/prompt", { sessionId, prompt: [{ type: "text", text: t.prompt }] })
        if (t.cancel === undefined) {
          const answer = yield* Effect.either(request)
          if (t.expect === "error") {
            assert.isTrue(Either.isLeft(answer), `${t.prompt} fails`)
            if (Either.isLeft(answer)) assert.strictEqual(answer.left.code, -32603)
          } else {
            assert.isTrue(Either.isRight(answer), `${t.prompt} answers`)
            if (Either.isRight(answer)) assert.strictEqual(answer.right.stopReason, t.expect)
          }
        } else {
          const running = yield* Effect.fork(request)
          const cancel = t.cancel
          switch (cancel.at) {
            case "stream":
              yield* until(`the stream of ${t.prompt} to hang`, Deferred.isDone(cancel.reached))
              yield* until(
                `the chunks of ${t.prompt}`,
                Effect.sync(() => sessionUpdates(h.frames.slice(start), sessionId).filter(isChunk).length >= cancel.chunks)
              )
              break
            case "tool":
              yield* until(`slow to run in ${t.prompt}`, Effect.sync(() => env.probe.slowStarted >= cancel.started))
              break
            case "permission":
              yield* until(
                `the permission request of ${cancel.callId}`,
                Effect.sync(() => h.frames.some((f) => f.kind === "permission" && f.request.toolCall.toolCallId === cancel.callId))
              )
              break
          }
          yield* h.notify("session/cancel", { sessionId })
          const answer = yield* running.await.pipe(Effect.flatten)
          assert.strictEqual(answer.stopReason, "cancelled")
        }
        segments.push({ start, end: h.frames.length, failed: t.failed })
      }
      yield* h.close

      // every update of a prompt arrived before its answer: between prompts only mode switches
      const indexed = h.frames.flatMap((f, i) => f.kind === "update" && f.sessionId === sessionId ? [{ i, u: f.update }] : [])
      for (const { i, u } of indexed) {
        if (isModeUpdate(u)) continue
        assert.isTrue(segments.some((s) => s.start <= i && i < s.end), `update ${i} (${u.sessionUpdate}) outside its prompt`)
      }
      assert.deepStrictEqual(h.frames.flatMap((f) => f.kind === "permission" ? [f.request.toolCall.toolCallId] : []), built.asked)
      // mode switches are live only (ACP.md §2.5), one current_mode_update and config_option_update each
      const modes = indexed.map(({ u }) => u).filter(isModeUpdate)
      assert.deepStrictEqual(modes.flatMap((u: any) => u.sessionUpdate === "current_mode_update" ? [u.currentModeId] : []), [...built.switches])
      assert.deepStrictEqual(
        modes.flatMap((u: any) => u.sessionUpdate === "config_option_update" ? [u.configOptions[0].currentValue] : []),
        [...built.switches]
      )
      // the partial chunks of a failed model call (never committed, never replayed): exactly its
      // scripted deltas, the last updates of its prompt, under a message id of their own
      const dropped = new Set<number>()
      const failedIds = new Set<string>()
      for (const s of segments) {
        if (s.failed.length === 0) continue
        const own = indexed.filter(({ i, u }) => s.start <= i && i < s.end && !isModeUpdate(u))
        const tail = own.slice(own.length - s.failed.length)
        assert.deepStrictEqual(tail.map(({ u }) => isChunk(u) && u.content.type === "text" ? { kind: u.sessionUpdate, text: u.content.text } : u) as Array<unknown>, [...s.failed])
        const ids = new Set(tail.map(({ u }) => (u as any).messageId as string))
        assert.strictEqual(ids.size, 1)
        const [messageId] = ids
        assert.isFalse(own.slice(0, own.length - s.failed.length).some(({ u }) => (u as any).messageId === messageId))
        failedIds.add(messageId!)
        for (const { i } of tail) dropped.add(i)
      }
      const liveUpdates = coalesce(indexed.filter(({ i, u }) => !isModeUpdate(u) && !dropped.has(i)).map(({ u }) => u))

      const loader = yield* connect()
      const loaded = yield* loader.request("session/load", { sessionId, cwd: CWD, mcpServers: [] })
      assert.strictEqual(loaded.modes.currentModeId, built.finalMode)
      assert.strictEqual(loaded.configOptions[0].currentValue, built.finalMode)
      const answer = loader.frames.findIndex((f) => f.kind === "response" && f.method === "session/load")
      assert.deepStrictEqual(sessionUpdates(loader.frames, sessionId), sessionUpdates(loader.frames, sessionId, answer))
      const replay = sessionUpdates(loader.frames, sessionId, answer)
      const users = replay.filter((u) => u.sessionUpdate === "user_message_chunk")
      assert.deepStrictEqual(users.map((u: any) => u.content.text), prompts)
      assert.isFalse(replay.some((u: any) => failedIds.has(u.messageId)), "a failed call's chunks are not replayed")
      // every committed tool call, settled as planned (nothing left pending or in progress)
      assert.deepStrictEqual(
        replay.flatMap((u): Array<readonly [string, string | null | undefined]> => u.sessionUpdate === "tool_call" ? [[u.toolCallId, u.status]] : []),
        built.settled.map(([id, status]) => [id, status] as const)
      )
      assert.deepStrictEqual(replay.filter((u) => u.sessionUpdate !== "user_message_chunk"), liveUpdates)
    }).pipe(Effect.scoped, Effect.provide(env.layer))
  }, { fastCheck: { numRuns: propertyRuns(40) } })
})
