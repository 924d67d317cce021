/**
 * The snapshot harness's own tests (SPEC §10.2, §10.3), all keyless: refresh of unchanged
 * behaviour is byte-identical; record with the pretend-live model rebuilds the committed fixtures
 * from their scenario scripts and skips authored ones; replay fails with a precise message when
 * behaviour or a fixture changes; every guard rejects what it must; and a request that differs
 * from `Session.requestAt` is reported. Everything runs on temporary copies of test/snapshots.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { fileURLToPath } from "node:url"
import { memory } from "../snapshots/harness/Backends.js"
import { SCENARIOS } from "../snapshots/harness/Scenarios.js"
import { checkRequests, guardTree, runFixture } from "../snapshots/harness/Suite.js"

const ROOT = fileURLToPath(new URL("../snapshots", import.meta.url))
const NAMES = SCENARIOS.map((s) => s.name)

/** A temporary copy of the fixture tree (without the harness code). */
const copyTree = Effect.gen(function*() {
  const fs = yield* FileSystem.FileSystem
  const dir = yield* fs.makeTempDirectoryScoped({ prefix: "snapshot-fixtures-" })
  for (const name of NAMES) yield* fs.copy(`${ROOT}/${name}`, `${dir}/${name}`)
  return dir
})

/** Every file of the tree, path → bytes as text. */
const contents = (root: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const out = new Map<string, string>()
    for (const name of NAMES) {
      for (const file of (yield* fs.readDirectory(`${root}/${name}`, { recursive: true })).sort()) {
        const path = `${root}/${name}/${file}`
        if ((yield* fs.stat(path)).type === "File") out.set(`${name}/${file}`, yield* fs.readFileString(path))
      }
    }
    return out
  })

const edit = (path: string, f: (text: string) => string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    yield* fs.writeFileString(path, f(yield* fs.readFileString(path)))
  })

/** Replay one scenario of `root` on the memory store; its failures. */
const replay = (root: string, name: string) =>
  Effect.map(Effect.provide(runFixture({ root, name, mode: "replay" }), memory.layer()), (o) => o.failures)

const pretend = (name: string) => ({ kind: "pretend" as const, scripts: SCENARIOS.find((s) => s.name === name)!.pretendLive })

describe("SPEC §10 snapshot harness (keyless, on temporary copies)", () => {
  it.scoped("§10.2 refresh of unchanged behaviour is byte-identical", () =>
    Effect.gen(function*() {
      const root = yield* copyTree
      for (const name of NAMES) {
        const outcome = yield* runFixture({ root, name, mode: "refresh" }).pipe(Effect.provide(memory.layer()))
        assert.deepStrictEqual(outcome.failures, [], outcome.failures.join("\n"))
        assert.deepStrictEqual(outcome.written, [], `${name}: refresh rewrote ${outcome.written.join(", ")}`)
      }
      assert.deepStrictEqual(yield* contents(root), yield* contents(ROOT))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("§10.2 record with the pretend-live model rebuilds the committed fixtures from scenario.json alone; authored scenarios are skipped", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* copyTree
      const authored: Array<string> = []
      for (const name of NAMES) {
        const scenario = JSON.parse(yield* fs.readFileString(`${root}/${name}/scenario.json`))
        if (scenario.authored === true) {
          authored.push(name)
          continue
        }
        // leave only what a person writes: the driver script and the workspace
        for (const file of yield* fs.readDirectory(`${root}/${name}`)) {
          if (file !== "scenario.json" && file !== "workspace") yield* fs.remove(`${root}/${name}/${file}`)
        }
      }
      assert.deepStrictEqual(authored, ["cancel-mid-stream", "cancel-mid-tool", "cancel-permission"])
      for (const name of NAMES) {
        const outcome = yield* runFixture({ root, name, mode: "record", live: pretend(name) }).pipe(Effect.provide(memory.layer()))
        assert.deepStrictEqual(outcome.failures, [], outcome.failures.join("\n"))
        assert.strictEqual(outcome.skipped, authored.includes(name), name)
      }
      assert.deepStrictEqual(yield* contents(root), yield* contents(ROOT))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("§10.2 record fails loudly when the live model is left with unconsumed scripts or runs out of them", () =>
    Effect.gen(function*() {
      const root = yield* copyTree
      const scripts = pretend("plain-turn").scripts
      const extra = yield* runFixture({ root, name: "plain-turn", mode: "record", live: { kind: "pretend", scripts: [...scripts, ...scripts] } }).pipe(
        Effect.provide(memory.layer())
      )
      assert.deepStrictEqual(extra.failures, ["plain-turn: 1 model call script(s) left unconsumed: the run made 1 of 2 calls"])
      const short = yield* runFixture({ root, name: "tool-round", mode: "record", live: { kind: "pretend", scripts: pretend("tool-round").scripts.slice(0, 2) } }).pipe(
        Effect.provide(memory.layer())
      )
      assert.include(short.failures[0], "tool-round: the model script is exhausted: the run made 3 model calls, the fixture's log holds 2")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("§10.2 replay fails with a precise message when behaviour or a fixture changes", () =>
    Effect.gen(function*() {
      const root = yield* copyTree
      // the user typed something else: the log differs where the prompt is recorded
      yield* edit(`${root}/plain-turn/scenario.json`, (t) => t.replace("Say hello in one short sentence.", "Say hi."))
      const prompt = yield* replay(root, "plain-turn")
      assert.include(prompt[0], "plain-turn: session.expected.jsonl differs from the run at line 4:")
      assert.include(prompt[0], `"text":"Say hello in one short sentence."`)
      assert.include(prompt[0], `"text":"Say hi."`)

      // §10.3: a mode switch that no longer changes the header is caught by the count
      yield* edit(`${root}/mode-switch/scenario.json`, (t) => t.replace(`"expectedHeaderChanges": 1`, `"expectedHeaderChanges": 0`))
      assert.deepStrictEqual(yield* replay(root, "mode-switch"), [
        "mode-switch: session id-1: 1 request/header change(s), the scenario expects 0 (expectedHeaderChanges)"
      ])

      // the pin's sidecar no longer matches the agent's prompt: the pin and every scenario of its class fail
      yield* edit(`${root}/mode-switch/system-prompt.expected.md`, (t) => t.replace("Answer briefly.", "Answer at length."))
      assert.include(yield* replay(root, "plain-turn"), "plain-turn: session id-1 event 3: the system prompt of request/header initial differs from the initial header of the pin mode-switch")
      const pin = yield* replay(root, "mode-switch")
      assert.isTrue(pin.some((f) => f.startsWith("mode-switch: system-prompt.expected.md differs from the run at line 2:")), pin.join("\n"))

      // the model's last call is gone from the log: the script runs out
      yield* edit(`${root}/tool-round/session.expected.jsonl`, (t) =>
        t.split("\n").filter((l) => !(l.includes(`"type":"assistant/chunk"`) && l.includes(`"step":3,`))).join("\n"))
      assert.include((yield* replay(root, "tool-round"))[0], "tool-round: the model script is exhausted: the run made 3 model calls, the fixture's log holds 2")

      // an unfinished attempt needs its override
      const fs = yield* FileSystem.FileSystem
      yield* fs.remove(`${root}/cancel-mid-stream/replay.override.json`)
      assert.deepStrictEqual(yield* replay(root, "cancel-mid-stream"), [
        "cancel-mid-stream: model call 1 (turn 1, step 1) has no finish chunk and no hang/throw entry in replay.override.json"
      ])

      // the wire and the readable requests are compared too
      yield* edit(`${root}/cancel-mid-tool/acp.expected.jsonl`, (t) => t.replace(`"stopReason":"cancelled"`, `"stopReason":"end_turn"`))
      assert.isTrue((yield* replay(root, "cancel-mid-tool")).some((f) => f.startsWith("cancel-mid-tool: acp.expected.jsonl differs from the run at line")))
      yield* edit(`${root}/crash-mid-tool-load/requests.md`, (t) => t.replace("reason `resume`", "reason `initial`"))
      assert.isTrue((yield* replay(root, "crash-mid-tool-load")).some((f) => f.startsWith("crash-mid-tool-load: requests.md differs from the run at line")))
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("§10.3 guards: orphan and missing directories, missing and stray files, zero or two pins, unscrubbed headers, badly formatted sidecars, disagreeing sources", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const root = yield* copyTree
      assert.deepStrictEqual(yield* guardTree(root, NAMES), [])
      yield* fs.makeDirectory(`${root}/leftover`)
      yield* fs.writeFileString(`${root}/plain-turn/notes.txt`, "x\n")
      yield* fs.remove(`${root}/tool-round/requests.md`)
      yield* fs.copy(`${root}/mode-switch/system-prompt.expected.md`, `${root}/plain-turn/system-prompt.expected.md`)
      yield* edit(`${root}/mode-switch-back-idle/session.expected.jsonl`, (t) => t.replace(`"system":"{{system}}"`, `"system":"You are a careful coding agent."`))
      yield* edit(`${root}/mode-switch/system-prompt.expected.md`, (t) => t.trimEnd())
      yield* edit(`${root}/mode-switch/tool-schemas.expected.json`, (t) => JSON.stringify(JSON.parse(t)))
      assert.deepStrictEqual(yield* guardTree(root, [...NAMES.filter((n) => n !== "long-session"), "ghost"]), [
        "orphan scenario directory leftover/ (not registered in SCENARIOS)",
        "orphan scenario directory long-session/ (not registered in SCENARIOS)",
        "scenario ghost is registered but ghost/ is missing",
        "mode-switch: system-prompt.expected.md must end with a newline",
        "mode-switch: tool-schemas.expected.json must end with a newline",
        "mode-switch: system-prompt.expected.md must end with a newline",
        "mode-switch: tool-schemas.expected.json is not canonical JSON (sorted keys, two-space indent, final newline)",
        "mode-switch-back-idle: session.expected.jsonl line 5: unscrubbed request/header (system and tools must be {{system}} and {{tools}})",
        "plain-turn: stray file notes.txt",
        "plain-turn: stray system-prompt.expected.md (sidecars belong to the pin of class default only)",
        "tool-round: requests.md is missing"
      ])

      const pins = yield* copyTree
      yield* edit(`${pins}/mode-switch/scenario.json`, (t) => t.replace(`"pinsHeader": true`, `"pinsHeader": false`))
      assert.include(yield* guardTree(pins, NAMES), "header class default has no pin (exactly one scenario must have pinsHeader: true)")
      yield* edit(`${pins}/mode-switch/scenario.json`, (t) => t.replace(`"pinsHeader": false`, `"pinsHeader": true`))
      yield* edit(`${pins}/plain-turn/scenario.json`, (t) => t.replace(`"description"`, `"pinsHeader": true, "description"`))
      assert.include(yield* guardTree(pins, NAMES), "header class default has 2 pins: mode-switch, plain-turn")

      // two classes of one header source: their pins' sidecars must agree
      const sources = yield* copyTree
      yield* edit(`${sources}/plain-turn/scenario.json`, (t) => t.replace(`"description"`, `"headerClass": "other", "headerSource": "default", "pinsHeader": true, "expectedHeaderChanges": 0, "description"`))
      yield* fs.writeFileString(`${sources}/plain-turn/system-prompt.expected.md`, "Another prompt.\n")
      yield* fs.writeFileString(`${sources}/plain-turn/tool-schemas.expected.json`, `{\n  "changes": [],\n  "initial": []\n}\n`)
      assert.include(yield* guardTree(sources, NAMES), "the sidecars of mode-switch and plain-turn disagree for their shared header source default")
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("§10.2 a request that differs from Session.requestAt at its dispatch point is reported (SPEC §5.4)", () =>
    Effect.gen(function*() {
      const root = yield* copyTree
      const outcome = yield* runFixture({ root, name: "tool-round", mode: "replay" }).pipe(Effect.provide(memory.layer()))
      assert.deepStrictEqual(outcome.failures, [])
      const calls = outcome.run!.calls
      assert.strictEqual(calls.length, 3)
      assert.deepStrictEqual(checkRequests(calls), [])
      const tampered = calls.map((c, i) => (i === 1 ? { ...c, request: { ...c.request, tools: c.request.tools.slice(0, 1) } } : c))
      assert.deepStrictEqual(checkRequests(tampered), [`model call 2 (seq ${calls[1]!.seq} of ${calls[1]!.sessionId}): the tools differ from Session.requestAt(${calls[1]!.seq})`])
      const dropped = calls.map((c, i) => (i === 2 ? { ...c, snapshot: { ...c.snapshot, messages: c.snapshot.messages.slice(1) } } : c))
      assert.deepStrictEqual(checkRequests(dropped), [`model call 3 (seq ${calls[2]!.seq} of ${calls[2]!.sessionId}): the prompt differs from Session.requestAt(${calls[2]!.seq})`])
    }).pipe(Effect.provide(NodeContext.layer)))
})
