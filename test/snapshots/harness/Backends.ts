/**
 * The stores every snapshot scenario replays on (SPEC §10.2): memory, JSONL in a temporary
 * directory, SQLite in a temporary file, and PostgreSQL (a fresh schema of the test server) only
 * where the PostgreSQL tests can run (test/helpers/postgres.ts decides; otherwise it is left out).
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { layerJsonlStore } from "../../../src/layers/jsonl/JsonlStore.js"
import { layerMemoryStore } from "../../../src/layers/memory/MemoryStore.js"
import { layerPostgresStore } from "../../../src/layers/sql/postgres/PostgresStore.js"
import { layerSqliteStore } from "../../../src/layers/sql/sqlite/SqliteStore.js"
import type { SessionStore } from "../../../src/services/SessionStore.js"
import { availability } from "../../helpers/postgres.js"

export interface Backend {
  readonly name: "memory" | "jsonl" | "sqlite" | "postgres"
  readonly layer: () => Layer.Layer<SessionStore>
}

const tempDir = Effect.flatMap(FileSystem.FileSystem, (fs) => fs.makeTempDirectoryScoped({ prefix: "snapshot-store-" })).pipe(
  Effect.provide(NodeContext.layer),
  Effect.orDie
)

export const memory: Backend = { name: "memory", layer: () => layerMemoryStore() }
export const jsonl: Backend = {
  name: "jsonl",
  layer: () =>
    Layer.unwrapScoped(Effect.map(tempDir, (root) => layerJsonlStore({ root }).pipe(Layer.provide(NodeContext.layer)))).pipe(Layer.orDie)
}
export const sqlite: Backend = {
  name: "sqlite",
  layer: () => Layer.unwrapScoped(Effect.map(tempDir, (dir) => layerSqliteStore({ filename: `${dir}/sessions.db` }))).pipe(Layer.orDie)
}

/** PostgreSQL, when the PostgreSQL tests can run here. */
export const postgres = async (): Promise<Backend | undefined> => {
  if (!availability().ok) return undefined
  const { freshUrl } = await import("../../postgres/helpers.js")
  return {
    name: "postgres",
    layer: () => Layer.unwrapScoped(Effect.map(freshUrl, (url) => layerPostgresStore({ url }))).pipe(Layer.orDie)
  }
}
