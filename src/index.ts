/**
 * effect-session-log: an Effect-native, event-sourced session log for LLM agents.
 * Modules are re-exported as namespaces.
 */
export * as Errors from "./schema/Errors.js"
export * as EventCodec from "./schema/EventCodec.js"
export * as Events from "./schema/Events.js"
export * as Format from "./schema/Format.js"
export * as Ids from "./schema/Ids.js"
export * as Json from "./schema/Json.js"
export * as Messages from "./schema/Messages.js"
export * as RequestHeader from "./schema/RequestHeader.js"
export * as SessionHeader from "./schema/SessionHeader.js"
export * as Validation from "./schema/Validation.js"
export * as IdGenerator from "./services/IdGenerator.js"
export * as Invariants from "./services/Invariants.js"
export * as Repair from "./services/Repair.js"
export * as Session from "./services/Session.js"
export * as SessionStore from "./services/SessionStore.js"
export * as SurfaceManager from "./services/SurfaceManager.js"
export * as MemoryStore from "./layers/MemoryStore.js"
