/**
 * SPEC §5.1 canonical form and §5.2 equality, every corner: absent vs [] stop, adapter markers
 * true vs absent, tool order and key order, absent vs empty tools, system "" vs absent, the
 * config scalars. Each pair is checked on `headerEquals` and observably: a later request with
 * the second header writes a `change` snapshot exactly when the headers differ (R3/R4).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import { layer as snapshotterLayer } from "../../src/layers/session/HeaderSnapshotterLive.js"
import { layerMemoryStore } from "../../src/layers/memory/MemoryStore.js"
import { canonicalHeader, headerEquals, type RequestHeader } from "../../src/schema/RequestHeader.js"
import { HeaderSnapshotter } from "../../src/services/HeaderSnapshotter.js"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { uid } from "../helpers/state.js"

const cfg = { provider: "p", model: "m" }
const tool = (name: string, parameters: unknown = { type: "object" }) => ({ name, description: `${name} tool`, parameters })
/** A message of a `messagePrefix` (SPEC §1.5). */
const pm = (id: string, text = `text of ${id}`) => ({ id, role: "system" as const, content: [{ type: "text", text }], source: { kind: "instructions" } })
const h = (extra: Partial<RequestHeader> = {}, config: Record<string, unknown> = {}): RequestHeader =>
  ({ config: { ...cfg, ...config }, ...extra }) as RequestHeader

/** [name, a, b, equal?] */
const PAIRS: ReadonlyArray<readonly [string, RequestHeader, RequestHeader, boolean]> = [
  ["identical minimal headers", h(), h(), true],
  ["a different provider", h(), h({}, { provider: "q" }), false],
  ["a different model", h(), h({}, { model: "n" }), false],
  ["reasoningEffort present vs absent", h({}, { reasoningEffort: "low" }), h(), false],
  ["a different reasoningEffort", h({}, { reasoningEffort: "low" }), h({}, { reasoningEffort: "high" }), false],
  ["temperature 0 vs absent", h({}, { temperature: 0 }), h(), false],
  ["equal temperatures", h({}, { temperature: 0.5 }), h({}, { temperature: 0.5 }), true],
  ["maxTokens present vs absent", h({}, { maxTokens: 10 }), h(), false],
  ["different maxTokens", h({}, { maxTokens: 10 }), h({}, { maxTokens: 11 }), false],
  ["stop absent vs []", h(), h({}, { stop: [] }), false],
  ["stop [] vs []", h({}, { stop: [] }), h({}, { stop: [] }), true],
  ["equal stop lists", h({}, { stop: ["a", "b"] }), h({}, { stop: ["a", "b"] }), true],
  ["stop lists of different length", h({}, { stop: ["a"] }), h({}, { stop: ["a", "b"] }), false],
  ["stop lists in a different order", h({}, { stop: ["a", "b"] }), h({}, { stop: ["b", "a"] }), false],
  ["adapter marker true vs absent (maxTokens)", h({ adapterDefaults: { maxTokens: true } }, { maxTokens: 5 }), h({}, { maxTokens: 5 }), false],
  [
    "adapter marker true vs absent (reasoningEffort)",
    h({ adapterDefaults: { reasoningEffort: true } }, { reasoningEffort: "low" }),
    h({}, { reasoningEffort: "low" }),
    false
  ],
  [
    "different markers on the same config",
    h({ adapterDefaults: { reasoningEffort: true } }, { reasoningEffort: "low", maxTokens: 5 }),
    h({ adapterDefaults: { maxTokens: true } }, { reasoningEffort: "low", maxTokens: 5 }),
    false
  ],
  [
    "equal markers in a different key order",
    h({ adapterDefaults: { maxTokens: true, reasoningEffort: true } }, { reasoningEffort: "low", maxTokens: 5 }),
    h({ adapterDefaults: { reasoningEffort: true, maxTokens: true } }, { reasoningEffort: "low", maxTokens: 5 }),
    true
  ],
  ["adapterDefaults {} vs absent", h({ adapterDefaults: {} }), h(), true],
  ["system \"\" vs absent", h({ system: "" }), h(), true],
  ["system vs absent", h({ system: "s" }), h(), false],
  ["different systems", h({ system: "s" }), h({ system: "t" }), false],
  ["tools absent vs []", h(), h({ tools: [] }), true],
  ["equal tool lists", h({ tools: [tool("a"), tool("b")] }), h({ tools: [tool("a"), tool("b")] }), true],
  ["tools in a different order", h({ tools: [tool("a"), tool("b")] }), h({ tools: [tool("b"), tool("a")] }), false],
  ["a tool list with one more tool", h({ tools: [tool("a")] }), h({ tools: [tool("a"), tool("b")] }), false],
  ["tools [] vs one tool", h({ tools: [] }), h({ tools: [tool("a")] }), false],
  ["a tool whose parameters differ deep inside", h({ tools: [tool("a", { p: { q: 1 } })] }), h({ tools: [tool("a", { p: { q: 2 } })] }), false],
  [
    "a tool serialised with another key order (serialisation is key-order sensitive)",
    h({ tools: [{ name: "a", description: "d", parameters: {} }] }),
    h({ tools: [{ description: "d", name: "a", parameters: {} }] as never }),
    false
  ],
  [
    "a non-canonical header vs its canonical form",
    h({ system: "", tools: [], adapterDefaults: {}, messagePrefix: [] }, { stop: [] }),
    h({}, { stop: [] }),
    true
  ],
  ["messagePrefix absent vs []", h(), h({ messagePrefix: [] }), true],
  ["equal messagePrefix lists", h({ messagePrefix: [pm("a"), pm("b")] }), h({ messagePrefix: [pm("a"), pm("b")] }), true],
  ["messagePrefix absent vs one message", h(), h({ messagePrefix: [pm("a")] }), false],
  ["messagePrefix lists in a different order", h({ messagePrefix: [pm("a"), pm("b")] }), h({ messagePrefix: [pm("b"), pm("a")] }), false],
  ["messagePrefix messages whose text differs", h({ messagePrefix: [pm("a")] }), h({ messagePrefix: [pm("a", "other")] }), false]
]

describe("§5.2 headerEquals and the writer's change decision", () => {
  for (const [name, a, b, equal] of PAIRS) {
    it.scoped(`${equal ? "equal" : "different"}: ${name}`, () =>
      Effect.gen(function*() {
        assert.strictEqual(headerEquals(a, b), equal)
        assert.strictEqual(headerEquals(b, a), equal)
        assert.isTrue(headerEquals(a, a))
        // observable: R3 when different, R4 when equal; the snapshot written is canonical
        const snap = yield* HeaderSnapshotter
        const s = yield* SessionLive.create({ id: uid("eq") })
        yield* snap.record(s, { header: a, firstOfInstance: true })
        const written = yield* snap.record(s, { header: b, firstOfInstance: false })
        assert.deepStrictEqual(
          written.map((e) => e.data),
          equal ? [] : [{ header: canonicalHeader(b), reason: "change" }]
        )
        assert.isTrue(headerEquals((yield* s.requestHeader)!, b))
      }).pipe(Effect.provide(snapshotterLayer), Effect.provide(layerMemoryStore())))
  }
})

describe("§5.1 canonicalHeader", () => {
  it("keeps config as is; drops adapterDefaults without a true marker, empty system, empty tools, empty messagePrefix", () => {
    const config = { provider: "p", model: "m", maxTokens: 1, stop: [] }
    assert.deepStrictEqual(canonicalHeader({ config, adapterDefaults: {}, system: "", tools: [], messagePrefix: [] }), { config })
    assert.strictEqual(canonicalHeader({ config }).config, config)
    const full: RequestHeader = {
      config,
      adapterDefaults: { maxTokens: true },
      system: "s",
      tools: [tool("a")],
      messagePrefix: [pm("a")]
    }
    assert.deepStrictEqual(canonicalHeader(full), full)
    // key order of the canonical form: config, adapterDefaults, system, tools
    assert.deepStrictEqual(Object.keys(canonicalHeader({ tools: [tool("a")], system: "s", config } as RequestHeader)), [
      "config",
      "system",
      "tools"
    ])
  })

  it("is idempotent and never changes equality", () => {
    for (const [, a, b] of PAIRS) {
      assert.deepStrictEqual(canonicalHeader(canonicalHeader(a)), canonicalHeader(a))
      assert.strictEqual(headerEquals(canonicalHeader(a), b), headerEquals(a, b))
    }
  })
})
