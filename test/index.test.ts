import { assert, describe, it } from "@effect/vitest"
import * as Api from "../src/index.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"

describe("public API", () => {
  it("re-exports the services, layers and programs as namespaces", () => {
    assert.isFunction(Api.SessionLive.create)
    assert.isFunction(Api.SessionLive.open)
    assert.isFunction(Api.MemoryStore.layer)
    assert.isFunction(Api.JsonlStore.layer)
    assert.isFunction(Api.SqliteStore.layer)
    assert.isFunction(Api.PostgresStore.layer)
    assert.isFunction(Api.SqlStore.layer)
    assert.isFunction(Api.SurfaceManager.foldSurface)
    assert.isFunction(Api.Json.walkJson)
    assert.isFunction(Api.Repair.closers)
    assert.isFunction(Api.AgentLoop.make)
    assert.isFunction(Api.Compact.compact)
    assert.strictEqual(Api.Format.SESSION_FORMAT_VERSION, 1)
  })

  it("keeps the 0.2 names one release as deprecated aliases of the renamed ones", () => {
    const pairs: ReadonlyArray<readonly [unknown, unknown]> = [
      [Api.MemoryStore.layerMemoryStore, Api.MemoryStore.layer],
      [Api.MemoryStore.makeMemoryStore, Api.MemoryStore.make],
      [Api.MemoryStore.syncAppender, Api.SessionStore.syncAppendOf],
      [Api.JsonlStore.layerJsonlStore, Api.JsonlStore.layer],
      [Api.JsonlStore.makeJsonlStore, Api.JsonlStore.make],
      [Api.SqliteStore.layerSqliteStore, Api.SqliteStore.layer],
      [Api.SqliteStore.makeSqliteStore, Api.SqliteStore.make],
      [Api.PostgresStore.layerPostgresStore, Api.PostgresStore.layer],
      [Api.PostgresStore.makePostgresStore, Api.PostgresStore.make],
      [Api.SqlStore.layerSqlStore, Api.SqlStore.layer],
      [Api.SqlStore.makeSqlStore, Api.SqlStore.make],
      [Api.ScriptedLanguageModel.layerScriptedLanguageModel, Api.ScriptedLanguageModel.layer],
      [Api.ScriptedLanguageModel.makeScriptedLanguageModel, Api.ScriptedLanguageModel.make],
      [Api.SummarizerLive.layerSummarizerDeterministic, Api.SummarizerLive.layerDeterministic],
      [Api.SummarizerLive.makeSummarizerDeterministic, Api.SummarizerLive.makeDeterministic],
      [Api.SummarizerLive.layerSummarizerModel, Api.SummarizerLive.layerModel],
      [Api.SummarizerLive.makeSummarizerModel, Api.SummarizerLive.makeModel],
      [Api.HeaderSnapshotterLive.makeHeaderSnapshotter, Api.HeaderSnapshotterLive.make]
    ]
    for (const [old, renamed] of pairs) {
      assert.isDefined(renamed)
      assert.strictEqual(old, renamed)
    }
  })
})
