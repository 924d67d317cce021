/**
 * The store layers of the follow tests, child processes and bench by backend name (no test
 * runner imports: the child and the bench load it outside vitest).
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Layer from "effect/Layer"
import { layer as layerJsonl } from "../../src/layers/jsonl/JsonlStore.js"
import { layer as layerPostgres } from "../../src/layers/sql/postgres/PostgresStore.js"
import { layer as layerSqlite } from "../../src/layers/sql/sqlite/SqliteStore.js"
import type { SessionStore } from "../../src/services/SessionStore.js"

/** A backend of the follow tests, as the child processes name it. */
export type Kind = "jsonl-plain" | "jsonl-packed" | "jsonl-compressed" | "sqlite" | "postgres"

/** A store of `kind` over `at` (a new instance per build). */
export const storeAt = (kind: Kind, at: string): Layer.Layer<SessionStore, unknown> =>
  kind === "sqlite"
    ? layerSqlite({ filename: at })
    : kind === "postgres"
    ? layerPostgres({ url: at })
    : layerJsonl({ root: at, packChunks: kind !== "jsonl-plain", compress: kind === "jsonl-compressed" }).pipe(
      Layer.provide(NodeContext.layer)
    )
