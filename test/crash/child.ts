/**
 * The crash harness's child process: resumes (or creates) a session on a real JSONL directory
 * (plain, or `jsonlz`: the compressed layout) or SQLite file and runs a scripted agent (turns, steps, streamed chunks, tool
 * calls and results, compactions between turns), printing `ack <seq> <sha1 of encodeEvent>`
 * after every acknowledged append. At a failpoint it prints `paused <name>` and waits for the
 * parent's SIGKILL. Usage:
 *   node_modules/.bin/tsx test/crash/child.ts <jsonl|jsonlz|sqlite> <location> <sessionId>
 * Environment: CRASH_FAILPOINT = none | before-write | after-write | mid-batch | tool-body |
 * compaction | repair; CRASH_K = which occurrence fires (1-based); CRASH_SEED = script seed;
 * CRASH_BIG = 1 to make every tool result a large multi-byte event (mid-batch uses this; for
 * jsonlz an incompressible one, so that its compressed batch is large too);
 * CRASH_TURNS = turns before printing `done` (default 100); CRASH_MODE = durable (default: an ack
 * after every append) | batched (write-behind, acks after the flush of each §7.3 checkpoint:
 * pre-step, before the model request, before a tool body, at the turn's end).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { createHash } from "node:crypto"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"
import { encodeEvent } from "../../src/schema/EventCodec.js"
import type { Event } from "../../src/schema/Events.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore, type SessionStoreShape } from "../../src/services/SessionStore.js"
import { textContent as text } from "../helpers/events.js"

const [kind, location, sessionId] = process.argv.slice(2)
const failpoint = process.env.CRASH_FAILPOINT ?? "none"
const K = Number(process.env.CRASH_K ?? "1")
const big = process.env.CRASH_BIG === "1"
const maxTurns = Number(process.env.CRASH_TURNS ?? "100")
/** `durable` (each append acknowledged once stored) or `batched` (write-behind; acknowledged at checkpoints). */
const mode = process.env.CRASH_MODE === "batched" ? "batched" : "durable"
let seed = Number(process.env.CRASH_SEED ?? "1") >>> 0

/** mulberry32: a small deterministic PRNG for the script. */
const random = (): number => {
  seed = (seed + 0x6d2b79f5) >>> 0
  let t = seed
  t = Math.imul(t ^ (t >>> 15), t | 1)
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}
const pick = (n: number): number => Math.floor(random() * n)

/** Pipes are synchronous on Linux: once this returns, the parent can read the line. */
const say = (line: string): void => void process.stdout.write(line + "\n")

/** Stop here until the parent kills the process. */
const pause = (name: string): Effect.Effect<never> =>
  Effect.zipRight(Effect.sync(() => say(`paused ${name}`)), Effect.never)

const counters = new Map<string, number>()
/** True on the K-th time `name` is reached, when `name` is the selected failpoint. */
const fires = (name: string): boolean => {
  if (failpoint !== name) return false
  const n = (counters.get(name) ?? 0) + 1
  counters.set(name, n)
  return n === K
}

let opening = false

/** The store, with write failpoints around each non-empty append (and open's repair writes). */
const instrument = (inner: SessionStoreShape): SessionStoreShape => ({
  ...inner,
  append: (id, events, options) =>
    Effect.gen(function*() {
      if (events.length === 0) return yield* inner.append(id, events, options)
      if (opening && fires("repair")) yield* pause("repair-append")
      if (!opening && fires("before-write")) yield* pause("before-write")
      yield* inner.append(id, events, options)
      if (!opening && fires("after-write")) yield* pause("after-write")
    }),
  truncateTornTail: (id, tornTail, options) =>
    Effect.gen(function*() {
      if (opening && fires("repair")) yield* pause("repair-truncate")
      yield* inner.truncateTornTail(id, tornTail, options)
    })
})

/** A FileSystem whose file writes go out in 64 KiB chunks; mid-batch pauses inside a large one. */
const chunkedFileSystem = (fs: FileSystem.FileSystem): FileSystem.FileSystem => ({
  ...fs,
  open: (path, options) =>
    Effect.map(fs.open(path, options), (file) => {
      const wrapped: FileSystem.File = Object.create(file)
      Object.defineProperty(wrapped, "writeAll", {
        value: (buffer: Uint8Array) =>
          Effect.gen(function*() {
            const armed = buffer.length >= 256 * 1024 && fires("mid-batch")
            const chunk = 64 * 1024
            const stopAfter = 1 + pick(Math.max(1, Math.floor(buffer.length / chunk) - 1))
            for (let at = 0, n = 0; at < buffer.length; at += chunk, n++) {
              if (armed && n === stopAfter) yield* pause("mid-batch")
              yield* file.writeAll(buffer.subarray(at, Math.min(buffer.length, at + chunk)))
            }
          })
      })
      return wrapped
    })
})

const NOISE_ALPHABET = [..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 é✓"]
/** `n` pseudo-random characters: text that does not compress. */
const noise = (n: number): string => Array.from({ length: n }, () => NOISE_ALPHABET[pick(NOISE_ALPHABET.length)]).join("")
const sha1 = (e: Event): string => createHash("sha1").update(encodeEvent(e)).digest("hex")

const agent = Effect.gen(function*() {
  const store = yield* SessionStore
  opening = true
  const existing = yield* Effect.either(store.load(sessionId))
  // batched: a short window (background writes happen too) and the agent loop's checkpoints
  const persistence = mode === "batched" ? { mode: "batched" as const, windowMs: 50 } : { mode: "durable" as const }
  const session = existing._tag === "Right"
    ? yield* SessionLive.open(sessionId, { persistence })
    : yield* SessionLive.create({ id: sessionId, header: { cwd: "/crash" }, persistence })
  opening = false
  const log = yield* session.events
  say(`ready ${log.length}`)
  // durable: acknowledged when the append returns; batched: when a checkpoint's flush returns
  const pending: Array<Event> = []
  const ack = (e: Event) => say(`ack ${e.seq} ${sha1(e)}`)
  const append = ((type: string, data: unknown, options?: unknown) =>
    Effect.tap(
      session.appendUnknown(type, data, options as never),
      (e) => Effect.sync(() => mode === "durable" ? ack(e) : void pending.push(e))
    )) as (type: string, data: unknown, options?: unknown) => Effect.Effect<Event, Session.AppendError>
  /** A checkpoint of SPEC §7.3 (the agent loop's): flush, then everything so far is acknowledged. */
  const checkpoint = Effect.zipRight(session.flush, Effect.sync(() => pending.splice(0).forEach(ack)))

  const lastTurn = [...log].reverse().find((e) => e.type === "turn/start")
  let turn = lastTurn === undefined ? 0 : (lastTurn.data as { turn: number }).turn
  let headerWritten = false
  let compactions = log.filter((e) => e.type === "compaction/start").length

  for (let t = 0; t < maxTurns; t++) {
    turn++
    yield* append("turn/start", { turn })
    // a step with tool calls in every turn when the failpoint needs one (tool body, large result)
    const steps = failpoint === "tool-body" || big ? 2 + pick(2) : 1 + pick(3)
    for (let step = 1; step <= steps; step++) {
      yield* checkpoint // (c) pre-step
      yield* append("step/start", { turn, step })
      if (step === 1) {
        yield* append("user/message", {
          id: `prompt-${sessionId}-${turn}`,
          role: "user",
          content: text(`Task ${turn}: naïve façade — 日本語 ✓`),
          source: { kind: "user" }
        }, { surfaceOp: "append" })
      }
      if (!headerWritten) {
        headerWritten = true
        yield* append("request/header", {
          header: { config: { provider: "scripted", model: "crash" }, system: "You are a crash test." },
          reason: log.length === 0 ? "initial" : "resume"
        })
      }
      yield* checkpoint // (a) before the model request
      const chunkSeqs: Array<number> = []
      const words = ["Working ", "on ", `step ${step}.`]
      yield* append("assistant/chunk", { turn, step, chunk: { type: "block-start", index: 0, blockType: "text" } })
        .pipe(Effect.map((e) => chunkSeqs.push(e.seq)))
      for (const w of words) {
        const e = yield* append("assistant/chunk", { turn, step, chunk: { type: "text-delta", index: 0, text: w } })
        chunkSeqs.push(e.seq)
      }
      const calls = step === steps ? 0 : 1 + pick(3)
      const ids = Array.from({ length: calls }, (_, i) => `call-${sessionId}-${turn}-${step}-${i}`)
      const assistant = yield* append("assistant/message", {
        turn,
        step,
        message: {
          id: `msg-${sessionId}-${turn}-${step}`,
          role: "assistant",
          content: [...text(words.join("")), ...ids.map((id) => ({ type: "tool-call", id, name: "run", arguments: "{}" }))],
          source: { kind: "model", provider: "scripted", model: "crash" }
        }
      }, { surfaceOp: "append", sourceEventSeqs: chunkSeqs })
      void assistant
      for (const id of ids) {
        const call = yield* append("tool/call", { turn, step, callId: id, name: "run", arguments: "{}" })
        yield* checkpoint // (b) before the tool body
        if (fires("tool-body")) yield* pause("tool-body")
        const output = !big ? `output of ${id}` : kind === "jsonlz" ? noise(400_000) : `${"é".repeat(150_000)}${"x".repeat(200_000)}${"✓".repeat(1000)}`
        yield* append("tool/result", {
          turn,
          step,
          message: {
            id: `result-${id}`,
            role: "user",
            content: [{ type: "tool-result", toolCallId: id, content: text(output) }],
            source: { kind: "tool", callId: id }
          }
        }, { surfaceOp: "append", sourceEventSeqs: [call.seq] })
      }
      yield* append("step/end", { turn, step })
    }
    yield* append("turn/end", { turn, reason: { kind: "completed" } })
    yield* checkpoint // (d) the turn's end
    // a compaction between turns, sometimes (always when it is the selected failpoint)
    if (failpoint === "compaction" || pick(4) === 0) {
      const nodes = yield* session.surface.nodes
      const shadowed = nodes.slice(0, Math.max(0, nodes.length - 2))
      if (shadowed.length > 0) {
        const compactionId = `compaction-${sessionId}-${++compactions}`
        const start = yield* append("compaction/start", { compactionId, turn: null })
        if (fires("compaction")) yield* pause("compaction-start")
        const summary = yield* append("compaction/summary", {
          compactionId,
          summary: text(`summary ${compactions}`),
          shadowedRange: { start: shadowed[0], end: shadowed[shadowed.length - 1] },
          shadowedSeqs: shadowed,
          shadowedTokenCount: shadowed.length * 10,
          provider: "scripted",
          model: "crash"
        })
        if (fires("compaction")) yield* pause("compaction-summary")
        yield* append("user/message", {
          id: `checkpoint-${compactionId}`,
          role: "user",
          content: text(`<compacted-summary>summary ${compactions}</compacted-summary>`),
          source: { kind: "plugin", plugin: "compact", compactionId }
        }, {
          surfaceOp: { op: "replace", start: shadowed[0], end: shadowed[shadowed.length - 1] },
          sourceEventSeqs: [start.seq, summary.seq, ...shadowed]
        })
        if (fires("compaction")) yield* pause("compaction-replace")
        yield* append("compaction/end", { compactionId, turn: null })
        yield* checkpoint
      }
    }
  }
  say("done")
})

if (kind !== "jsonl" && kind !== "jsonlz" && kind !== "sqlite") {
  process.stderr.write("usage: child.ts <jsonl|jsonlz|sqlite> <location> <sessionId>\n")
  process.exit(2)
}

const storeLayer = kind === "sqlite"
  ? Layer.scoped(SessionStore, Effect.map(makeSqliteStore({ filename: location }), instrument))
  : Layer.scoped(
    SessionStore,
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      return instrument(yield* makeJsonlStore({ root: location, compress: kind === "jsonlz" }).pipe(
        Effect.provideService(FileSystem.FileSystem, chunkedFileSystem(fs))
      ))
    })
  ).pipe(Layer.provide(NodeContext.layer))

NodeRuntime.runMain(Effect.scoped(agent).pipe(Effect.provide(storeLayer)))
