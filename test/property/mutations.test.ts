/**
 * Single-mutation property tests (SPEC §3.2–§3.4): a valid random log broken in exactly one
 * place is rejected by `SessionLive.fromSeed` with exactly the expected tagged error, rule and seq,
 * with nothing stored; by `foldSurface` with the same rule where the fold checks it; and, where
 * only one event changed, by `appendUnknown` after the valid prefix, leaving the session as it was.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { foldSurface } from "../../src/services/SurfaceManager.js"
import { appendOptions, asEvents, buildLog, type Mutation, MUTATION_KINDS, mutate, mutationOf } from "../arbitraries.js"
import { runs } from "../suites.js"

interface Rejection {
  readonly _tag: string
  readonly rule: string
  readonly seq?: number | undefined
  readonly missing?: ReadonlyArray<number> | undefined
  readonly message: string
}

const expectRejection = (err: Rejection, m: Mutation, where: string) => {
  const got = `${err._tag}/${err.rule}@${err.seq} (${err.message})`
  assert.strictEqual(err._tag, m.tag, `${where}: ${m.name}: got ${got}`)
  assert.strictEqual(err.rule, m.rule, `${where}: ${m.name}: got ${got}`)
  assert.strictEqual(err.seq, m.seq, `${where}: ${m.name}: got ${got}`)
  if (m.missing !== undefined) assert.deepStrictEqual(err.missing, m.missing, `${where}: F4 missing`)
}

const checkMutation = (m: Mutation) =>
  Effect.gen(function*() {
    // seed construction: exactly the expected error, and nothing registered or stored
    const id = "mutated"
    const err = yield* Effect.flip(SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed: m.events }))
    expectRejection(err as Rejection, m, "fromSeed")
    const store = yield* SessionStore
    assert.strictEqual((yield* Effect.flip(store.load(id)))._tag, "SessionNotFound")

    // the pure fold, for the rules it checks (C1 of a seed is C2 in a fold)
    if (m.foldRule !== undefined) {
      const folded = foldSurface(asEvents(m.events))
      if ("nodes" in folded) assert.fail(`foldSurface accepted a log broken by "${m.name}"`)
      expectRejection(folded, { ...m, rule: m.foldRule }, "foldSurface")
    }

    // append: the valid prefix, then the broken event is refused and changes nothing
    if (m.inPlace) {
      const s = yield* SessionLive.create({ id: "appended" })
      const valid = m.original.events
      for (let i = 0; i < m.seq; i++) {
        const e = valid[i]
        yield* s.appendUnknown(e.type, e.data, appendOptions(e)).pipe(
          Effect.catchAll((e) => Effect.dieMessage(`valid prefix rejected: ${e.message}`))
        )
      }
      const nodes = yield* s.surface.nodes
      const generation = yield* s.surface.replaceGeneration
      const messages = yield* s.messages
      const bad = m.events[m.seq]
      const appendErr = yield* Effect.flip(s.appendUnknown(bad.type, bad.data, appendOptions(bad)))
      expectRejection(appendErr as Rejection, m, "appendUnknown")
      assert.strictEqual((yield* s.events).length, m.seq)
      assert.deepStrictEqual(yield* s.surface.nodes, nodes)
      assert.strictEqual(yield* s.surface.replaceGeneration, generation)
      assert.deepStrictEqual(yield* s.messages, messages)
      // F8: the next valid append takes the seq the rejected one would have had
      const good = valid[m.seq]
      const ok = yield* s.appendUnknown(good.type, good.data, appendOptions(good)).pipe(
        Effect.catchAll((e) => Effect.dieMessage(`valid event rejected after a rejection: ${e.message}`))
      )
      assert.strictEqual(ok.seq, m.seq)
    }
  }).pipe(Effect.provide(layerMemoryStore()))

describe("property: single mutations", () => {
  for (const kind of MUTATION_KINDS) {
    it.scoped.prop(
      `${kind.rule} rejects a log with one ${kind.name} (${kind.tag})`,
      [mutationOf(kind)],
      ([m]) => checkMutation(m),
      { fastCheck: { numRuns: runs(15) } }
    )
  }
})

describe("mutations: fixed regression cases", () => {
  const rich = buildLog([
    {
      _tag: "turn",
      open: false,
      reason: { kind: "completed" },
      steps: [{
        pre: [],
        users: [{ kind: "user", texts: ["hi"], meta: false }, { kind: "context", texts: ["ctx"], meta: true }],
        noise: [],
        header: {
          provider: "anthropic",
          model: "m-small",
          reasoningEffort: null,
          maxTokens: 1000,
          adapterMaxTokens: true,
          system: "sys",
          tools: true,
          reason: "change"
        },
        requestContext: true,
        failedAttempt: null,
        answer: { reasoning: null, texts: [["a", "b"]], bare: false, usage: true },
        tools: [
          { name: "bash", args: "{}", output: "out1", isError: false, aborted: false, meta: true },
          { name: "grep", args: "{}", output: "out2", isError: true, aborted: false, meta: false }
        ]
      }]
    },
    { _tag: "prune", pick: 1, kept: "k" },
    { _tag: "compaction", at: 0, len: 1, minSpan: 2, summary: "sum", failed: false }
  ])

  for (const kind of MUTATION_KINDS) {
    it.scoped(`${kind.rule}: every variant on a fixed log`, () =>
      Effect.gen(function*() {
        const count = kind.candidates(rich).length
        assert.isAbove(count, 0, `no candidate for ${kind.rule}`)
        for (let variant = 0; variant < 7; variant++) {
          const m = mutate(rich, kind, variant, variant)
          assert.isDefined(m)
          yield* checkMutation(m!)
        }
      }))
  }
})
