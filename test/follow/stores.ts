/**
 * The backends the follow tests run on: fresh locations and store layers over them.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import type { SessionStore } from "../../src/services/SessionStore.js"
import { freshUrl } from "../postgres/helpers.js"
import { type Kind, storeAt } from "./layers.js"

export { type Kind, storeAt } from "./layers.js"

/** A fresh temporary directory, removed with the scope. */
export const tempDir: Effect.Effect<string, unknown, Scope.Scope> = Effect.flatMap(
  FileSystem.FileSystem,
  (fs) => fs.makeTempDirectoryScoped({ prefix: "follow-" })
).pipe(Effect.provide(NodeContext.layer))

/** A fresh, empty location of `kind`, removed with the scope. */
export const location = (kind: Kind): Effect.Effect<string, unknown, Scope.Scope> =>
  kind === "postgres" ? freshUrl : kind === "sqlite" ? Effect.map(tempDir, (dir) => `${dir}/sessions.db`) : tempDir

/** A store of `kind` over a fresh location. */
export const freshStore = (kind: Kind): Layer.Layer<SessionStore, unknown, Scope.Scope> =>
  Layer.unwrapScoped(Effect.map(location(kind), (at) => storeAt(kind, at)))
