/**
 * The ACP (Agent Client Protocol) entry point of effect-session-log, separate from the core
 * library: an agent for editors (Zed and other ACP clients) over `Session` + `AgentLoop` + any
 * `@effect/ai` `LanguageModel` and any store, on `@agentclientprotocol/sdk` 2.x (an optional peer
 * dependency). `makeAgentApp` builds the SDK app (in-process or any stream), `serveStdio` serves
 * it on stdio; `layerSessionFactory({ create: SessionLive.create, open: SessionLive.open })`
 * provides the sessions.
 *
 * @since 0.1.0
 */
export {
  /**
   * Options of the agent.
   *
   * @since 0.1.0
   * @category models
   */
  type AcpAgentOptions,
  /**
   * What the agent needs from its context.
   *
   * @since 0.1.0
   * @category models
   */
  type AcpRequirements,
  /**
   * Build the agent app. Its sessions live until the scope closes or the connection it serves
   * closes. Connect it once: `app.connect(stream)` (or a `ClientApp`, in-process).
   *
   * @since 0.1.0
   * @category constructors
   */
  makeAgentApp
} from "./AcpAgent.js"
export {
  /**
   * A request the adapter refuses: bad params, an unknown session, a turn that failed.
   *
   * @since 0.1.0
   * @category errors
   */
  AcpRejected
} from "./AcpErrors.js"
export {
  /**
   * One mode of the catalog.
   *
   * @since 0.1.0
   * @category models
   */
  type AcpMode,
  /**
   * The composition of the next request in `modeId`.
   *
   * @since 0.1.0
   * @category utils
   */
  composition,
  /**
   * The modes as the `mode` select config option.
   *
   * @since 0.1.0
   * @category utils
   */
  configOptions,
  /**
   * The default catalog: `code` (everything) and `plan` (read-only tools and a plan section).
   *
   * @since 0.1.0
   * @category utils
   */
  defaultModes,
  /**
   * The mode in force after `events`: the last valid `acp/mode`, else the catalog's first mode.
   *
   * @since 0.1.0
   * @category utils
   */
  foldMode,
  /**
   * The id of the config option that mirrors the mode.
   *
   * @since 0.1.0
   * @category constants
   */
  MODE_CONFIG_ID,
  /**
   * The log-only event of a mode switch; `data = { modeId }`, appended with `ignorable: true`.
   *
   * @since 0.1.0
   * @category constants
   */
  MODE_EVENT,
  /**
   * The modes as ACP session modes.
   *
   * @since 0.1.0
   * @category utils
   */
  modeState
} from "./AcpModes.js"
export {
  /**
   * The options offered for a gated call.
   *
   * @since 0.1.0
   * @category constants
   */
  PERMISSION_OPTIONS
} from "./AcpPermission.js"
export {
  /**
   * Live updates coalesced, as `session/load` replays them: adjacent text chunks of one kind and
   * `messageId` become one chunk, and every later `tool_call_update` of a tool call is folded into the
   * update that announced it (its `tool_call`), at that position.
   *
   * @since 0.1.0
   * @category utils
   */
  coalesce,
  /**
   * The default presenter: the tool name as title, kind `other`.
   *
   * @since 0.1.0
   * @category utils
   */
  defaultPresenter,
  /**
   * A fresh projector (replay uses a throwaway one, so nothing of history leaks into the live one).
   *
   * @since 0.1.0
   * @category constructors
   */
  makeProjector,
  /**
   * Options of a projection.
   *
   * @since 0.1.0
   * @category models
   */
  type ProjectionOptions,
  /**
   * The whole transcript of a log as replay updates (docs/acp.md §2.5): no cap, coalesced (`coalesce`), so
   * a tool call is one `tool_call` in its settled state.
   *
   * @since 0.1.0
   * @category utils
   */
  projectTranscript,
  /**
   * How a tool call is shown: a pure function of the tool's name and raw JSON arguments.
   *
   * @since 0.1.0
   * @category models
   */
  type ToolPresenter
} from "./AcpProjection.js"
export {
  /**
   * What `initialize` advertises: the baseline only.
   *
   * @since 0.1.0
   * @category constants
   */
  PROMPT_CAPABILITIES
} from "./AcpPrompt.js"
export {
  /**
   * Options of a session the adapter creates.
   *
   * @since 0.1.0
   * @category models
   */
  type CreateSessionOptions,
  /**
   * The factory from session constructors, over the provided store.
   *
   * @since 0.1.0
   * @category layers
   */
  layerSessionFactory,
  /**
   * Session constructors over the current `SessionStore` (pass `SessionLive.create` and `SessionLive.open`).
   *
   * @since 0.1.0
   * @category models
   */
  type SessionConstructors,
  /**
   * The adapter's session constructors.
   *
   * @since 0.1.0
   * @category tags
   */
  SessionFactory,
  /**
   * How the adapter creates and opens (resumes, with crash repair) sessions; handles live in the scope.
   *
   * @since 0.1.0
   * @category models
   */
  type SessionFactoryShape
} from "./AcpSessions.js"
export {
  /**
   * Serve the agent on stdin/stdout until the client disconnects.
   *
   * @since 0.1.0
   * @category utils
   */
  serveStdio
} from "./AcpStdio.js"
