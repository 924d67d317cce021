import { assert, describe, it } from "@effect/vitest"
import * as Api from "../src/index.js"
import * as SessionLive from "../src/layers/session/SessionLive.js"

describe("public API", () => {
  it("re-exports the services, layers and programs as namespaces", () => {
    assert.isFunction(Api.SessionLive.create)
    assert.isFunction(Api.SessionLive.open)
    assert.isFunction(Api.MemoryStore.layerMemoryStore)
    assert.isFunction(Api.JsonlStore.layerJsonlStore)
    assert.isFunction(Api.SqliteStore.layerSqliteStore)
    assert.isFunction(Api.PostgresStore.layerPostgresStore)
    assert.isFunction(Api.SurfaceManager.foldSurface)
    assert.isFunction(Api.Json.walkJson)
    assert.isFunction(Api.Repair.closers)
    assert.isFunction(Api.AgentLoop.make)
    assert.isFunction(Api.Compact.compact)
    assert.strictEqual(Api.Format.SESSION_FORMAT_VERSION, 1)
  })
})
