/**
 * Chat persistence benchmark (`npm run bench:chat`, issue 30): a 500-turn `@effect/ai` chat
 * (`streamText`, a scripted model streaming a ~600-character answer in ~25 deltas to a
 * ~200-character prompt) through `@effect/ai`'s own persisted chat over
 * `Persistence.layerKeyValueStore` with the platform's file-system key-value store (its file
 * persistence: the whole history rewritten as one JSON file after every call) and through
 * `ChatPersistence.layer` over the JSONL and SQLite stores (real files in a temporary directory).
 * Per turn, averaged over the 50 turns ending at turns 50, 250 and 500: bytes the process wrote
 * (`wchar` of /proc/self/io: every write call, whatever the file) and wall time of the call. The
 * raw baseline of the same run: the turn's two messages as one JSON line appended to a file with
 * `fs.writeSync` and `fsync`.
 */
import * as Chat from "@effect/ai/Chat"
import * as Persistence from "@effect/experimental/Persistence"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as KeyValueStore from "@effect/platform/KeyValueStore"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as nodePath from "node:path"
import { performance } from "node:perf_hooks"
import * as ChatPersistence from "../src/layers/chat/ChatPersistence.js"
import { layer as layerJsonlStore } from "../src/layers/jsonl/JsonlStore.js"
import { type CallScript, layer as layerScriptedLanguageModel } from "../src/layers/model/ScriptedLanguageModel.js"
import { layer as layerSqliteStore } from "../src/layers/sql/sqlite/SqliteStore.js"
import { fmt } from "./stats.js"

const TURNS = Number(process.env.BENCH_TURNS ?? 500)
const MARKS = [50, 250, TURNS].filter((t, i, all) => t <= TURNS && all.indexOf(t) === i)
/** Turns averaged per mark: SQLite checkpoints its WAL about every 100 turns, so a short window may miss or catch one. */
const WINDOW = Number(process.env.BENCH_WINDOW ?? 50)

const words = ["session", "log", "event", "surface", "turn", "model", "chunk", "replace", "header", "store", "durable"]
const sentence = (seed: number, length: number): string => {
  let out = ""
  for (let i = 0; out.length < length; i++) out += `${words[(seed * 7 + i * 3) % words.length]} `
  return out.trim()
}
const prompt = (turn: number) => `Turn ${turn}: ${sentence(turn, 200)}`
const answer = (turn: number) => sentence(turn + 1000, 600)
const script = (turn: number): CallScript => [
  { type: "text", text: answer(turn), deltas: answer(turn).match(/(?:\S+\s+){0,3}\S+\s*/g) ?? [answer(turn)] },
  { type: "finish", reason: "stop", usage: { inputTokens: 50 * turn, outputTokens: 150 } }
]

/** Bytes this process has passed to write calls so far (Linux). */
const written = (): number => {
  const io = fs.readFileSync("/proc/self/io", "utf8")
  return Number(/^wchar: (\d+)$/m.exec(io)?.[1] ?? NaN)
}

interface Sample {
  readonly bytes: number
  readonly ms: number
}

const summarize = (samples: ReadonlyArray<Sample>, mark: number) => {
  const window = samples.slice(Math.max(0, mark - WINDOW), mark)
  return {
    bytes: window.reduce((a, s) => a + s.bytes, 0) / window.length,
    ms: window.reduce((a, s) => a + s.ms, 0) / window.length
  }
}

/** Run the chat through the `Chat.Persistence` in context: per-turn samples. */
const runChat = Effect.gen(function*() {
  const persistence = yield* Chat.Persistence
  const chat = yield* persistence.getOrCreate("bench-chat")
  const samples: Array<Sample> = []
  for (let turn = 1; turn <= TURNS; turn++) {
    const bytes0 = written()
    const t0 = performance.now()
    yield* Stream.runDrain(chat.streamText({ prompt: prompt(turn) }))
    samples.push({ bytes: written() - bytes0, ms: performance.now() - t0 })
  }
  return samples
})

const model = () =>
  layerScriptedLanguageModel({ scripts: Array.from({ length: TURNS }, (_, i) => script(i + 1)), requireConsumed: false })

const withDir = <A, E>(f: (dir: string) => Effect.Effect<A, E>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => fs.mkdtempSync(nodePath.join(os.tmpdir(), "bench-chat-"))),
    f,
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )

const theirs = withDir((dir) =>
  runChat.pipe(
    Effect.provide(Layer.mergeAll(
      Chat.layerPersisted({ storeId: "chats" }).pipe(
        Layer.provide(Persistence.layerKeyValueStore),
        Layer.provide(KeyValueStore.layerFileSystem(dir)),
        Layer.provide(NodeContext.layer)
      ),
      model()
    ))
  )
)

const oursJsonl = withDir((dir) =>
  runChat.pipe(
    Effect.provide(Layer.mergeAll(
      ChatPersistence.layer().pipe(Layer.provide(layerJsonlStore({ root: dir })), Layer.provide(NodeContext.layer)),
      model()
    ))
  )
)

const oursSqlite = withDir((dir) =>
  runChat.pipe(
    Effect.provide(Layer.mergeAll(
      ChatPersistence.layer().pipe(Layer.provide(layerSqliteStore({ filename: nodePath.join(dir, "chats.db") }))),
      model()
    ))
  )
)

/** The raw baseline: each turn's user and assistant messages as one JSON line, appended and fsynced. */
const raw = withDir((dir) =>
  Effect.sync(() => {
    const fd = fs.openSync(nodePath.join(dir, "raw.jsonl"), "a")
    const samples: Array<Sample> = []
    try {
      for (let turn = 1; turn <= TURNS; turn++) {
        const bytes0 = written()
        const t0 = performance.now()
        const line = JSON.stringify([
          { role: "user", content: prompt(turn) },
          { role: "assistant", content: [{ type: "text", text: answer(turn) }] }
        ]) + "\n"
        fs.writeSync(fd, line)
        fs.fsyncSync(fd)
        samples.push({ bytes: written() - bytes0, ms: performance.now() - t0 })
      }
    } finally {
      fs.closeSync(fd)
    }
    return samples
  })
)

const program = Effect.gen(function*() {
  const runs: Array<readonly [string, ReadonlyArray<Sample>]> = [
    ["raw: JSON line + fsync (baseline)", yield* raw],
    ["@effect/ai KeyValueStore (files)", yield* theirs],
    ["ChatPersistence on JSONL", yield* oursJsonl],
    ["ChatPersistence on SQLite", yield* oursSqlite]
  ]
  const lines = [
    `effect-session-log chat bench: ${TURNS} turns of streamText, node ${process.version}, ${os.cpus().length} cores`,
    `per turn, mean of the ${WINDOW} turns ending at the turn named; bytes = what the process wrote (wchar)`,
    "",
    ["persistence".padEnd(36), ...MARKS.flatMap((m) => [`B/turn @${m}`.padStart(14), `ms/turn @${m}`.padStart(13)]), "bytes growth".padStart(13), "bytes in all".padStart(14)].join("")
  ]
  for (const [name, samples] of runs) {
    const at = MARKS.map((m) => summarize(samples, m))
    const growth = at.length > 1 ? at[at.length - 1].bytes / at[0].bytes : 1
    const total = samples.reduce((a, s) => a + s.bytes, 0)
    lines.push([
      name.padEnd(36),
      ...at.flatMap((s) => [fmt(s.bytes).padStart(14), fmt(s.ms, 2).padStart(13)]),
      `${fmt(growth, 2)}x`.padStart(13),
      fmt(total).padStart(14)
    ].join(""))
  }
  lines.push("", "bytes growth = bytes per turn at the last mark / at the first (flat is 1.00x); bytes in all = the whole run")
  yield* Effect.sync(() => console.log(lines.join("\n")))
})

// a bench is an edge, like the CLI
Effect.runPromise(program).catch((e) => {
  console.error(e)
  process.exit(1)
})
