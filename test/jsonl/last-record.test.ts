/**
 * `listEntries` on a JSONL store reads a plain file's end only (LastRecord.ts): the last complete
 * line, a torn fragment after it skipped, a packed row's last member; what the end cannot tell (a
 * compressed file, an unparsable last line) is read whole and agrees with `load`. Real files.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import * as nodePath from "node:path"
import { makeJsonlStore } from "../../src/layers/jsonl/JsonlStore.js"
import { lastRecordOf, UNDECIDED } from "../../src/layers/jsonl/LastRecord.js"
import type { Event } from "../../src/schema/Events.js"
import { DEFAULT_MAX_LINE_BYTES } from "../../src/schema/Format.js"
import { lastOf } from "../../src/services/SessionStore.js"

/** A turn whose text streams in `deltas` chunks (packed into one row by default). */
const turn = (deltas: number): Array<Event> => {
  const out: Array<Record<string, unknown>> = [{ type: "turn/start", seq: 0, time: 10, data: { turn: 1 } }]
  out.push({ type: "step/start", seq: 1, time: 11, data: { turn: 1, step: 1 } })
  out.push({ type: "assistant/chunk", seq: 2, time: 12, data: { turn: 1, step: 1, chunk: { type: "block-start", index: 0, blockType: "text" } } })
  for (let d = 0; d < deltas; d++) {
    out.push({ type: "assistant/chunk", seq: out.length, time: 20 + 3 * d, data: { turn: 1, step: 1, chunk: { type: "text-delta", index: 0, delta: `d${d}` } } })
  }
  return out as unknown as Array<Event>
}

const storeAt = (root: string, options: { readonly compress?: boolean; readonly packChunks?: boolean } = {}) =>
  makeJsonlStore({ root, ...options })

const setup = (options: { readonly compress?: boolean; readonly packChunks?: boolean }, events: ReadonlyArray<Event>) =>
  Effect.gen(function*() {
    const fsys = yield* FileSystem.FileSystem
    const root = yield* fsys.makeTempDirectoryScoped({ prefix: "last-record-" })
    const store = yield* storeAt(root, options)
    yield* store.create({ version: 1, id: "s", createdAt: 1 })
    yield* store.append("s", events, { expectedSeq: 0 })
    const file = nodePath.join(root, fs.readdirSync(root).find((n) => n.startsWith("s.jsonl"))!)
    return { fsys, root, file }
  })

describe("JSONL listEntries from the file's end", () => {
  it.scoped("a packed row's last member, plain and unpacked alike", () =>
    Effect.gen(function*() {
      const events = turn(40)
      for (const packChunks of [true, false]) {
        const { file, fsys } = yield* setup({ packChunks }, events)
        assert.deepStrictEqual(yield* lastRecordOf(fsys, file, DEFAULT_MAX_LINE_BYTES), { seq: 42, time: 20 + 3 * 39 })
      }
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a torn fragment after the last line is skipped: the last committed event, as load reads it", () =>
    Effect.gen(function*() {
      const { file, fsys, root } = yield* setup({}, turn(5))
      fs.appendFileSync(file, "{\"type\":\"assistant/chunk\",\"seq\":8,\"ti")
      const store = yield* storeAt(root)
      const loaded = yield* store.load("s")
      assert.isDefined(loaded.tornTail)
      assert.deepStrictEqual(yield* lastRecordOf(fsys, file, DEFAULT_MAX_LINE_BYTES), lastOf(loaded.events))
      assert.deepStrictEqual((yield* store.listEntries()).map((e) => e.last), [lastOf(loaded.events)])
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("an unparsable last line is undecided: listEntries reads the file whole and agrees with load", () =>
    Effect.gen(function*() {
      const { file, fsys, root } = yield* setup({}, turn(5))
      fs.appendFileSync(file, "not json\n")
      assert.strictEqual(yield* lastRecordOf(fsys, file, DEFAULT_MAX_LINE_BYTES), UNDECIDED)
      const store = yield* storeAt(root)
      const loaded = yield* store.load("s")
      assert.deepStrictEqual((yield* store.listEntries()).map((e) => e.last), [{ seq: 7, time: 32 }])
      assert.deepStrictEqual(lastOf(loaded.events), { seq: 7, time: 32 })
    }).pipe(Effect.provide(NodeContext.layer)))

  it.scoped("a header alone: no last event; a compressed file: undecided, read whole", () =>
    Effect.gen(function*() {
      const { file, fsys, root } = yield* setup({ compress: true }, turn(5))
      assert.strictEqual(yield* lastRecordOf(fsys, file, DEFAULT_MAX_LINE_BYTES), UNDECIDED)
      assert.deepStrictEqual((yield* (yield* storeAt(root)).listEntries()).map((e) => e.last), [{ seq: 7, time: 32 }])
      const only = nodePath.join(root, "h.jsonl")
      fs.writeFileSync(only, JSON.stringify({ type: "session", version: 1, id: "h", createdAt: 1 }) + "\n")
      assert.strictEqual(yield* lastRecordOf(fsys, only, DEFAULT_MAX_LINE_BYTES), undefined)
    }).pipe(Effect.provide(NodeContext.layer)))
})
