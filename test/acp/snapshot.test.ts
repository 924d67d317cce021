/**
 * The keyless ACP snapshot suite (SPEC §10, ACP.md §3): the fixture guards, then every scenario of
 * test/snapshots/ on every backend. `SNAPSHOT_MODE` picks the mode: `replay` (default; the CI gate)
 * compares, `refresh` rewrites the derived files from the committed logs (memory writes, the other
 * backends then replay what it wrote), `record` re-records with a live model on JSONL — the layer
 * from the module named by `SNAPSHOT_LIVE_LAYER` and the key from `SNAPSHOT_MODEL_KEY`, or with
 * `SNAPSHOT_LIVE=pretend` the pretend-live scripts (`SNAPSHOT_RECORD_AUTHORED=1` records authored
 * scenarios too, for their first authoring).
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import { fileURLToPath } from "node:url"
import { type Backend, jsonl, memory, postgres, sqlite } from "../snapshots/harness/Backends.js"
import { SCENARIOS } from "../snapshots/harness/Scenarios.js"
import { matrix } from "../suites.js"
import { guardTree, type LiveModel, modeOf, runFixture } from "../snapshots/harness/Suite.js"

const ROOT = fileURLToPath(new URL("../snapshots", import.meta.url))
const mode = modeOf(process.env.SNAPSHOT_MODE)
const pg = await postgres()
const backends: ReadonlyArray<Backend> = mode === "record" ? [jsonl] : [memory, jsonl, sqlite, ...(pg === undefined ? [] : [pg])]

/** The record model: the pretend-live scripts, or the live layer with its key (read only here, redacted). */
const liveModel = (name: string): Effect.Effect<LiveModel, unknown> =>
  process.env.SNAPSHOT_LIVE === "pretend"
    ? Effect.succeed({ kind: "pretend", scripts: SCENARIOS.find((s) => s.name === name)!.pretendLive })
    : Effect.gen(function*() {
      const key = yield* Config.redacted("SNAPSHOT_MODEL_KEY")
      const path = yield* Config.string("SNAPSHOT_LIVE_LAYER")
      const module = (yield* Effect.promise(() => import(path))) as {
        readonly layer: (key: Redacted.Redacted) => Layer.Layer<LanguageModel.LanguageModel, unknown>
      }
      return { kind: "live", layer: module.layer(key) }
    })

describe(`SPEC §10 ACP snapshot suite (${mode})`, () => {
  it.effect("§10.3 guards: every scenario registered and present, its files complete, one pin per class, headers scrubbed, sidecars canonical", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* guardTree(ROOT, SCENARIOS.map((s) => s.name)), [])
    }).pipe(Effect.provide(NodeContext.layer)))

  // replaying in npm test: each scenario on one backend and each backend under several scenarios;
  // test:slow (and refresh, record): every scenario on every backend
  const cases = mode === "replay" ? matrix(SCENARIOS, backends) : matrix(SCENARIOS, backends, true)
  for (const [{ name }, backend] of cases) {
    // refresh writes once (memory); the other backends replay what it wrote
    const effective = mode === "refresh" && backend.name !== "memory" ? "replay" : mode
    it.scoped(`§10.2 ${effective} ${name} on ${backend.name}`, () =>
      Effect.gen(function*() {
        const live = effective === "record" ? yield* liveModel(name) : undefined
        const outcome = yield* runFixture({
          root: ROOT,
          name,
          mode: effective,
          ...(live === undefined ? {} : { live }),
          authored: process.env.SNAPSHOT_RECORD_AUTHORED === "1"
        })
        assert.deepStrictEqual(outcome.failures, [], outcome.failures.join("\n\n"))
      }).pipe(Effect.provide(Layer.merge(backend.layer(), NodeContext.layer))))
  }
})
