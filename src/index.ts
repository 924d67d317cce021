/**
 * effect-session-log: an Effect-native, event-sourced session log for LLM agents.
 * Modules are re-exported as namespaces. The API is what `npm run docs` documents (docgen.json);
 * the namespaces marked deprecated below are internals, exported for one more release.
 */
export * as Errors from "./schema/Errors.js"
/**
 * Internal (the event line codec of the stores): not part of the API.
 *
 * @deprecated since 0.2.0: no longer exported from 0.3.0.
 */
export * as EventCodec from "./schema/EventCodec.js"
export * as Events from "./schema/Events.js"
export * as Format from "./schema/Format.js"
/**
 * Internal (the frozen reader of version-0 logs): not part of the API.
 *
 * @deprecated since 0.2.0: no longer exported from 0.3.0.
 */
export * as FormatV0 from "./schema/FormatV0.js"
/**
 * Internal (unused): not part of the API.
 *
 * @deprecated since 0.2.0: no longer exported from 0.3.0.
 */
export * as Ids from "./schema/Ids.js"
export * as Json from "./schema/Json.js"
export * as Messages from "./schema/Messages.js"
/**
 * Internal (the packed-row layout of the stores): not part of the API.
 *
 * @deprecated since 0.2.0: no longer exported from 0.3.0.
 */
export * as PackedChunks from "./schema/PackedChunks.js"
export * as RequestHeader from "./schema/RequestHeader.js"
export * as SessionHeader from "./schema/SessionHeader.js"
/**
 * Internal (the file-name encoding of the JSONL store): not part of the API.
 *
 * @deprecated since 0.2.0: no longer exported from 0.3.0.
 */
export * as SessionIdEncoding from "./schema/SessionIdEncoding.js"
/**
 * Internal (the rule checks behind `Session.append` and the stores): not part of the API.
 *
 * @deprecated since 0.2.0: no longer exported from 0.3.0.
 */
export * as Validation from "./schema/Validation.js"
export * as Fork from "./services/Fork.js"
export * as HeaderSnapshotter from "./services/HeaderSnapshotter.js"
export * as IdGenerator from "./services/IdGenerator.js"
export * as Invariants from "./services/Invariants.js"
export * as PrepareEvent from "./services/PrepareEvent.js"
export * as PromptConversion from "./services/PromptConversion.js"
export * as Repair from "./services/Repair.js"
export * as RequestAt from "./services/RequestAt.js"
export * as Resume from "./services/Resume.js"
export * as Seed from "./services/Seed.js"
export * as Session from "./services/Session.js"
export * as SessionStore from "./services/SessionStore.js"
export * as Summarizer from "./services/Summarizer.js"
export * as SurfaceManager from "./services/SurfaceManager.js"
export * as HeaderSnapshotterLive from "./layers/session/HeaderSnapshotterLive.js"
export * as InvariantsLive from "./layers/session/InvariantsLive.js"
export * as JsonlStore from "./layers/jsonl/JsonlStore.js"
export * as MemoryStore from "./layers/memory/MemoryStore.js"
export * as ScriptedLanguageModel from "./layers/model/ScriptedLanguageModel.js"
export * as SessionLive from "./layers/session/SessionLive.js"
export * as SqlStore from "./layers/sql/SqlStore.js"
export * as SqliteStore from "./layers/sql/sqlite/SqliteStore.js"
export * as PostgresStore from "./layers/sql/postgres/PostgresStore.js"
export * as SummarizerLive from "./layers/model/SummarizerLive.js"
export * as ChatPersistence from "./layers/chat/ChatPersistence.js"
export * as AgentLoop from "./programs/agent/AgentLoop.js"
export * as Checkpoint from "./programs/agent/Checkpoint.js"
export * as Compact from "./programs/compaction/Compact.js"
export * as Migrate from "./programs/Migrate.js"
export * as PruneToolResults from "./programs/compaction/PruneToolResults.js"
export * as Tokens from "./programs/compaction/Tokens.js"
export * as Verify from "./programs/Verify.js"
export * as ClaudeCode from "./programs/import/ClaudeCode.js"
export * as Codex from "./programs/import/Codex.js"
export * as TranscriptImport from "./programs/import/TranscriptImport.js"
