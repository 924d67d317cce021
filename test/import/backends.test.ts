/**
 * The transcript import on every backend (memory, JSONL, SQLite, PostgreSQL): a Claude Code
 * project folder and a Codex tree import, every session verifies, importing again changes
 * nothing, and `--force` (the store's `replaceLog`) writes the same log again.
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as JsonlStore from "../../src/layers/jsonl/JsonlStore.js"
import * as MemoryStore from "../../src/layers/memory/MemoryStore.js"
import * as PostgresStore from "../../src/layers/sql/postgres/PostgresStore.js"
import * as SqliteStore from "../../src/layers/sql/sqlite/SqliteStore.js"
import { importClaudeCode } from "../../src/programs/import/ClaudeCode.js"
import { importCodex } from "../../src/programs/import/Codex.js"
import { SessionStore } from "../../src/services/SessionStore.js"
import { describePg, freshUrl } from "../postgres/helpers.js"
import { eventsOf, fixtures, verified } from "./helpers.js"

const inDir = (f: (dir: string) => Layer.Layer<SessionStore, unknown, FileSystem.FileSystem | Path.Path>) =>
  Layer.unwrapScoped(Effect.map(Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped()), f))

const round = Effect.gen(function*() {
  const first = [...yield* importClaudeCode(`${fixtures}/claude-code/project`), ...yield* importCodex(`${fixtures}/codex/sessions`)]
  const ids = first.flatMap((r) => r.sessions.map((s) => s.id))
  assert.deepStrictEqual(first.flatMap((r) => r.sessions.map((s) => s.status)), ["imported", "imported", "imported", "imported"])
  for (const id of ids) assert.strictEqual(yield* verified(id), "ok", id)
  const before = yield* Effect.forEach(ids, eventsOf)
  const again = [...yield* importClaudeCode(`${fixtures}/claude-code/project`), ...yield* importCodex(`${fixtures}/codex/sessions`)]
  assert.deepStrictEqual(again.flatMap((r) => r.sessions.map((s) => s.status)), ["unchanged", "unchanged", "unchanged", "unchanged"])
  const forced = [
    ...yield* importClaudeCode(`${fixtures}/claude-code/project`, { force: true }),
    ...yield* importCodex(`${fixtures}/codex/sessions`, { force: true })
  ]
  assert.deepStrictEqual(forced.flatMap((r) => r.sessions.map((s) => s.status)), ["replaced", "replaced", "replaced", "replaced"])
  assert.deepStrictEqual(yield* Effect.forEach(ids, eventsOf), before)
  const store = yield* SessionStore
  assert.deepStrictEqual((yield* store.list()).map((h) => h.id).sort(), [...ids].sort())
})

const onBackend = (name: string, layer: Layer.Layer<SessionStore, unknown, FileSystem.FileSystem | Path.Path | Scope.Scope>) =>
  it.scoped(`${name}: import, verify, re-import, --force`, () =>
    round.pipe(Effect.provide(Layer.fresh(layer)), Effect.provide(NodeContext.layer)) as Effect.Effect<void, unknown, Scope.Scope>)

describe("import --from on every backend", () => {
  onBackend("memory", MemoryStore.layer())
  onBackend("JSONL", inDir((dir) => JsonlStore.layer({ root: dir })))
  onBackend("SQLite", inDir((dir) => SqliteStore.layer({ filename: `${dir}/s.db` })))
})

describePg("import --from on PostgreSQL", () => {
  onBackend("PostgreSQL", Layer.unwrapScoped(Effect.map(freshUrl, (url) => PostgresStore.layer({ url }))))
})
