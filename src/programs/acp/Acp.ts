/**
 * The ACP (Agent Client Protocol) entry point of effect-session-log, separate from the core
 * library: an agent for editors (Zed and other ACP clients) over `Session` + `AgentLoop` + any
 * `@effect/ai` `LanguageModel` and any store, on `@agentclientprotocol/sdk` 2.x (an optional peer
 * dependency). `makeAgentApp` builds the SDK app (in-process or any stream), `serveStdio` serves
 * it on stdio; `layerSessionFactory({ create: SessionLive.create, open: SessionLive.open })`
 * provides the sessions.
 */
export { type AcpAgentOptions, type AcpRequirements, makeAgentApp } from "./AcpAgent.js"
export { AcpRejected } from "./AcpErrors.js"
export {
  type AcpMode,
  composition,
  configOptions,
  defaultModes,
  foldMode,
  MODE_CONFIG_ID,
  MODE_EVENT,
  modeState
} from "./AcpModes.js"
export { PERMISSION_OPTIONS } from "./AcpPermission.js"
export {
  coalesce,
  defaultPresenter,
  makeProjector,
  type ProjectionOptions,
  projectTranscript,
  type ToolPresenter
} from "./AcpProjection.js"
export { PROMPT_CAPABILITIES } from "./AcpPrompt.js"
export {
  type CreateSessionOptions,
  layerSessionFactory,
  type SessionConstructors,
  SessionFactory,
  type SessionFactoryShape
} from "./AcpSessions.js"
export { serveStdio } from "./AcpStdio.js"
