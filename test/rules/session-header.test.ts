/**
 * SPEC §2.1 / §3.4 family J (session header): J1–J11, J16 at `SessionLive.create`, `SessionLive.fromSeed`
 * and `SessionStore.create` (a rejection registers and writes nothing), J12 immutability, J13
 * (a rejected create leaves the id free) and J14 (registered and stored ids).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Session from "../../src/services/Session.js"
import * as SessionLive from "../../src/layers/session/SessionLive.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { assertError, listedIds, storedText, todo, uid, withStore } from "../helpers/state.js"

type Rec = Record<string, unknown>

const hj = (rule: string, field: string) => ({ _tag: "SessionHeaderInvalid", rule, field })

/** The id is neither registered nor stored, and nothing is listed. */
const assertNothingFor = (id: string) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    assert.deepStrictEqual(yield* listedIds, [])
    const e = yield* Effect.flip(store.load(id))
    assert.strictEqual(e._tag, "SessionNotFound")
  })

/** Reject `header` (complete, with id) through all three constructors. */
const rejectsEverywhere = (header: (id: string) => unknown, expected: ReturnType<typeof hj>) =>
  Effect.gen(function*() {
    const store = yield* SessionStore
    const a = uid("h")
    assertError(yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: header(a), seed: [] }))), expected)
    yield* assertNothingFor(a)
    const b = uid("h")
    assertError(yield* Effect.flip(store.create(header(b))), expected)
    yield* assertNothingFor(b)
    const h = header(uid("h"))
    if (typeof h === "object" && h !== null && !Array.isArray(h) && Object.getPrototypeOf(h) === Object.prototype) {
      const c = uid("h")
      const fields = { ...(h as Rec) }
      delete fields.id
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.create({ id: c, header: fields }))), expected)
      yield* assertNothingFor(c)
    }
  })

const base = (id: string): Rec => ({ version: 1, id, createdAt: 1000 })
const withField = (key: string, value: unknown) => (id: string): Rec => ({ ...base(id), [key]: value })

class Hdr {
  version = 1
  id = "x"
  createdAt = 0
}

describe("J1–J11, J16 rejected at construction; nothing registered or written", () => {
  for (const [name, value] of [["null", null], ["a number", 42], ["an array", []], ["a string", "h"], ["a class instance", new Hdr()], ["a Map", new Map()]] as const) {
    it.scoped(`J1 rejects ${name}`, () => withStore(rejectsEverywhere(() => value, hj("J1", ""))))
  }

  for (const v of [2, 0, "1", null]) {
    it.scoped(`J2 rejects version ${JSON.stringify(v)}`, () => withStore(rejectsEverywhere(withField("version", v), hj("J2", "version"))))
  }
  it.scoped("J2 rejects an absent version (fromSeed, store.create)", () =>
    withStore(Effect.gen(function*() {
      const store = yield* SessionStore
      const id = uid("h")
      assertError(yield* Effect.flip(store.create({ id, createdAt: 0 })), hj("J2", "version"))
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: { id, createdAt: 0 }, seed: [] }))), hj("J2", "version"))
      yield* assertNothingFor(id)
    })))

  it.scoped("J3 rejects an empty or non-string id", () =>
    withStore(Effect.gen(function*() {
      const store = yield* SessionStore
      for (const id of ["", 5, null]) {
        assertError(yield* Effect.flip(store.create({ version: 1, id, createdAt: 0 })), hj("J3", "id"))
        assertError(
          yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed: [] }))),
          hj("J3", "id")
        )
      }
      assert.deepStrictEqual(yield* listedIds, [])
    })))

  it.scoped("J3 rejects a header id different from the session id", () =>
    withStore(Effect.gen(function*() {
      const id = uid("h")
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.create({ id, header: { id: "other" } }))), hj("J3", "id"))
      yield* assertNothingFor(id)
      yield* assertNothingFor("other")
    })))

  for (const v of ["0", 1.5, -1, 2 ** 53, null]) {
    it.scoped(`J4 rejects createdAt ${JSON.stringify(v)}`, () => withStore(rejectsEverywhere(withField("createdAt", v), hj("J4", "createdAt"))))
  }
  for (const v of [5, "relative/path", "./x", "C:relative", "~/home", ""]) {
    it.scoped(`J5 rejects cwd ${JSON.stringify(v)}`, () => withStore(rejectsEverywhere(withField("cwd", v), hj("J5", "cwd"))))
  }
  it.scoped("J6 rejects a non-string parentSession", () =>
    withStore(rejectsEverywhere(withField("parentSession", 5), hj("J6", "parentSession"))))
  for (const v of ["1", 1.5, -1]) {
    it.scoped(`J7 rejects seedLength ${JSON.stringify(v)}`, () => withStore(rejectsEverywhere(withField("seedLength", v), hj("J7", "seedLength"))))
  }
  for (const v of ["fork", "", "Subagent", 1]) {
    it.scoped(`J8 rejects origin ${JSON.stringify(v)}`, () => withStore(rejectsEverywhere(withField("origin", v), hj("J8", "origin"))))
  }
  for (const v of ["1", 0.5, -1]) {
    it.scoped(`J9 rejects delegationDepth ${JSON.stringify(v)}`, () =>
      withStore(rejectsEverywhere(withField("delegationDepth", v), hj("J9", "delegationDepth"))))
  }
  it.scoped("J10 rejects a non-string agentPreset", () => withStore(rejectsEverywhere(withField("agentPreset", ["a"]), hj("J10", "agentPreset"))))

  const lossy: ReadonlyArray<readonly [string, (id: string) => Rec, string]> = [
    ["a BigInt", withField("seedLength", 1n), "/seedLength"],
    ["-0", withField("createdAt", -0), "/createdAt"],
    ["NaN", withField("delegationDepth", NaN), "/delegationDepth"],
    ["undefined", withField("cwd", undefined), "/cwd"],
    ["a Date", withField("createdAt", new Date(0)), "/createdAt"]
  ]
  for (const [name, header, path] of lossy) {
    it.scoped(`J11 rejects a header holding ${name} ("not losslessly JSON-serializable")`, () =>
      withStore(Effect.gen(function*() {
        const store = yield* SessionStore
        const id = uid("h")
        const e = yield* Effect.flip(store.create(header(id)))
        assertError(e, hj("J11", path))
        assert.include(e.message, "not losslessly JSON-serializable")
        yield* rejectsEverywhere(header, hj("J11", path))
      })))
  }

  it.scoped("J16 rejects a key outside the closed set, naming it", () =>
    withStore(rejectsEverywhere(withField("title", "x"), hj("J16", "title"))))

  it.scoped("J16 rejects a type key other than the JSONL discriminator \"session\"", () =>
    withStore(rejectsEverywhere(withField("type", "weird"), hj("J16", "type"))))

  for (const key of ["sandboxMode", "approvalPolicy"]) {
    it.scoped(`J16 names the retired key ${key} as retired`, () =>
      withStore(Effect.gen(function*() {
        yield* rejectsEverywhere(withField(key, "x"), hj("J16", key))
        const e = yield* Effect.flip((yield* SessionStore).create(withField(key, "x")(uid("h"))))
        assert.include(e.message, "retired")
      })))
  }
})

describe("accepted headers", () => {
  const full = (id: string): Rec => ({
    agentPreset: "coder",
    delegationDepth: 1,
    origin: "subagent",
    seedLength: 0,
    parentSession: "parent",
    cwd: "/work",
    createdAt: 5,
    id,
    version: 1
  })

  it.scoped("§2.1 a full header is validated, frozen, stored in §2.1 key order and listed once materialised", () =>
    withStore(Effect.gen(function*() {
      const id = uid("h")
      const s = yield* SessionLive.create({ id, header: full(id) })
      assert.deepStrictEqual(Object.keys(s.header), [
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "agentPreset"
      ])
      assert.isTrue(Object.isFrozen(s.header))
      // lazy: registered, not listed before the first append
      assert.deepStrictEqual(yield* listedIds, [])
      assert.include(yield* storedText(id), `"events":[]`)
      yield* s.appendUnknown(...todo)
      const [listed] = yield* (yield* SessionStore).list()
      assert.deepStrictEqual(listed, s.header)
    })))

  for (const cwd of ["/", "C:\\work", "c:/work", "\\\\server\\share"]) {
    it.scoped(`J5 accepts the absolute cwd ${JSON.stringify(cwd)}`, () =>
      withStore(Effect.gen(function*() {
        const id = uid("h")
        const s = yield* SessionLive.create({ id, header: { cwd } })
        assert.strictEqual(s.header.cwd, cwd)
      })))
  }

  it.scoped("§2.1 a session created without a header gets { version: 1, id, createdAt: now }", () =>
    withStore(Effect.gen(function*() {
      const id = uid("h")
      const s = yield* SessionLive.create({ id })
      assert.deepStrictEqual(s.header, { version: 1, id, createdAt: 0 })
    })))

  it.scoped("J12 caller mutation of the header object never changes the session or stored header", () =>
    withStore(Effect.gen(function*() {
      const id = uid("h")
      const input = full(id)
      const s = yield* SessionLive.fromSeed({ header: input, seed: [] })
      input.cwd = "/elsewhere"
      input.extra = 1
      assert.strictEqual(s.header.cwd, "/work")
      assert.isFalse("extra" in s.header)
      assert.throws(() => {
        ;(s.header as Rec).cwd = "/x"
      })
      const loaded = yield* (yield* SessionStore).load(id)
      assert.strictEqual(loaded.header.cwd, "/work")
      const id2 = uid("h")
      const fields: Rec = { cwd: "/a" }
      const s2 = yield* SessionLive.create({ id: id2, header: fields })
      fields.cwd = "/b"
      assert.strictEqual(s2.header.cwd, "/a")
    })))
})

describe("J13, J14 store registration", () => {
  it.scoped("J13 SessionStore.create with a fractional createdAt is J4 and leaves the id free", () =>
    withStore(Effect.gen(function*() {
      const store = yield* SessionStore
      const id = uid("h")
      const e = yield* Effect.flip(store.create({ version: 1, id, createdAt: 1.5 }))
      assertError(e, hj("J4", "createdAt"))
      yield* assertNothingFor(id)
      const h = yield* store.create({ version: 1, id, createdAt: 2 })
      assert.deepStrictEqual(h, { version: 1, id, createdAt: 2 })
    })))

  it.scoped("J13 a rejected SessionLive.create or fromSeed leaves the id free for a later valid one", () =>
    withStore(Effect.gen(function*() {
      const id = uid("h")
      yield* Effect.flip(Effect.scoped(SessionLive.create({ id, header: { createdAt: 0.5 } })))
      const s = yield* SessionLive.create({ id })
      assert.strictEqual(s.id, id)
      const id2 = uid("h")
      yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: { version: 1, id: id2, createdAt: -1 }, seed: [] })))
      // also a seed rejected after a valid header registers nothing
      yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: { version: 1, id: id2, createdAt: 0 }, seed: [null] })))
      const s2 = yield* SessionLive.fromSeed({ header: { version: 1, id: id2, createdAt: 0 }, seed: [] })
      assert.strictEqual((yield* s2.events).length, 1)
    })))

  it.scoped("J14 a registered (unmaterialised) id is refused: store.create, SessionLive.create, fromSeed", () =>
    withStore(Effect.gen(function*() {
      const store = yield* SessionStore
      const id = uid("h")
      yield* store.create({ version: 1, id, createdAt: 0 })
      const before = yield* storedText(id)
      const ex = { _tag: "SessionExists", rule: "J14", sessionId: id }
      assertError(yield* Effect.flip(store.create({ version: 1, id, createdAt: 9 })), ex)
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.create({ id }))), ex)
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed: [] }))), ex)
      assert.strictEqual(yield* storedText(id), before)
      assert.deepStrictEqual(yield* listedIds, [])
    })))

  it.scoped("J14 a stored id is refused and its log untouched", () =>
    withStore(Effect.gen(function*() {
      const store = yield* SessionStore
      const id = uid("h")
      yield* Effect.scoped(Effect.gen(function*() {
        const s = yield* SessionLive.create({ id })
        yield* s.appendUnknown(...todo)
      }))
      const before = yield* storedText(id)
      const ex = { _tag: "SessionExists", rule: "J14", sessionId: id }
      assertError(yield* Effect.flip(store.create({ version: 1, id, createdAt: 0 })), ex)
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.create({ id }))), ex)
      assertError(yield* Effect.flip(Effect.scoped(SessionLive.fromSeed({ header: { version: 1, id, createdAt: 0 }, seed: [] }))), ex)
      assert.strictEqual(yield* storedText(id), before)
      assert.deepStrictEqual(yield* listedIds, [id])
    })))
})
