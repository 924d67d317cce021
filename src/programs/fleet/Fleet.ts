/**
 * A fleet of agent runners on `@effect/cluster` (docs/fleet.md): the `AgentSession` entity — one
 * per session id, owned by one runner at a time — with its RPC protocol (`prompt`, `cancel`,
 * `status`, `load`) and its behaviour, which runs the `AgentLoop` on the session opened from the
 * `SessionStore` in context. The entity's state is the session log: a runner that takes a shard
 * over opens the session (repair closes a turn the dead runner left open) and serves the next
 * message; nothing is kept only in a runner's memory. Runner and client layers are in
 * `FleetRunner`. This module is the fleet's public API; it re-exports the protocol (`Protocol`),
 * the session factory (`SessionFactory`), the attempts and store-retry rules (`Attempts`), the
 * entity's behaviour (`EntityLayer`), the prompt tracker (`PromptTracker`) and the client side
 * (`PromptStream`).
 *
 * @since 0.2.0
 */
export {
  /**
   * A prompt for a session. `promptId` names it: the cluster stores the message under it (a prompt
   * sent twice with one id is run once), and the turn's user message carries it as its id
   * (`<promptId>` for the first attempt, `<promptId>#<n>` for a later one), so the log tells whether
   * the prompt was answered.
   *
   * @since 0.2.0
   * @category models
   */
  PromptRequest,
  /**
   * The answer to a prompt: the turn that answered it, how it ended, the assistant's text, which
   * attempt answered (1 unless a runner died or was moved mid-turn) and the runner that ran it.
   * `replayed` is true when the answer was read from the log (the turn had ended before the reply
   * could be sent) rather than produced by this delivery.
   *
   * @since 0.2.0
   * @category models
   */
  PromptAnswer,
  /**
   * What `status` reports: the owning runner, the log's length and turns, and whether a turn runs.
   *
   * @since 0.2.0
   * @category models
   */
  SessionStatus,
  /**
   * One entry of the transcript `load` returns: an append-origin message event and its text.
   *
   * @since 0.2.0
   * @category models
   */
  TranscriptEntry,
  /**
   * `prompt`: run a turn for the prompt (or answer it from the log when it was answered already).
   * Persisted: the message is stored in the cluster's SQL message storage before it is delivered,
   * and a runner that takes the session's shard over delivers it again when no reply was stored.
   * A client that stops waiting does not cancel it (uninterruptible for the client): `cancel` does.
   *
   * @since 0.2.0
   * @category rpcs
   */
  Prompt,
  /**
   * `cancel`: interrupt the turn in flight (it ends `aborted`); answers whether one was running.
   *
   * @since 0.2.0
   * @category rpcs
   */
  Cancel,
  /**
   * `status`: the owning runner and the session's size.
   *
   * @since 0.2.0
   * @category rpcs
   */
  Status,
  /**
   * `load`: the transcript (SPEC §4.7) as text entries.
   *
   * @since 0.2.0
   * @category rpcs
   */
  Load,
  /**
   * The `AgentSession` entity: one per session id.
   *
   * @since 0.2.0
   * @category entities
   */
  AgentSession
} from "./Protocol.js"
export {
  /**
   * How a session's appends reach its store (`SessionLive`'s `persistence` option).
   *
   * @since 0.2.0
   * @category models
   */
  type Persistence,
  /**
   * How the entity opens (with crash repair) and creates sessions; handles live in the given scope.
   *
   * @since 0.2.0
   * @category models
   */
  type SessionFactoryShape,
  /**
   * The entity's session constructors (the edge provides them from `SessionLive`).
   *
   * @since 0.2.0
   * @category services
   */
  SessionFactory,
  /**
   * Session constructors over the current `SessionStore` (pass `SessionLive.create` and `SessionLive.open`).
   *
   * @since 0.2.0
   * @category models
   */
  type SessionConstructors,
  /**
   * The factory from session constructors, over the provided store.
   *
   * @since 0.2.0
   * @category layers
   */
  layerSessionFactory
} from "./SessionFactory.js"
export {
  /**
   * One attempt at a prompt found in the log: its turn, the assistant's text in it and, once
   * written, how the turn ended (its `turn/end` reason's kind). `storeFailed` is the message of a
   * turn that ended `error` because a checkpoint could not be written for a transient store failure
   * (`CHECKPOINT_FAILED` of a `StoreFailure` without a rule id): such a turn did not answer its prompt.
   *
   * @since 0.2.0
   * @category models
   */
  type Attempt,
  /**
   * The attempts at `promptId` in a log, in order: each `user/message` whose id is the prompt's
   * (`<promptId>` or `<promptId>#<n>`), the turn it opened, the assistant text of that turn and its
   * `turn/end` reason.
   *
   * @since 0.2.0
   * @category utils
   */
  attemptsOf
} from "./Attempts.js"
export {
  /**
   * Options of the entity's behaviour: the agent loop's toolkit, system prompt and route, how the
   * sessions persist (default: the agent default, `batched`), and the entity's idle time before a
   * runner closes the session's handle.
   *
   * @since 0.2.0
   * @category models
   */
  type FleetOptions
} from "./EntityLayer.js"
export {
  /**
   * Whether an error is a transient failure of the store: a `StoreFailure` without a rule id (the
   * database could not be reached, a query timed out). A `StoreFailure` carrying a rule id is a
   * verdict on the data (a rule broken), as are the other errors: those are a prompt's answer.
   *
   * @since 0.2.0
   * @category utils
   */
  isTransientStoreFailure,
  /**
   * The default of `FleetOptions.storeRetry`: six retries, 100 ms apart then doubling (6.3 s of
   * waits, about 10 s in all with the failing attempts' own time).
   *
   * @since 0.2.0
   * @category constants
   */
  DEFAULT_STORE_RETRY,
  /**
   * The defect a prompt dies with when the store stayed unreachable through its retries. A defect
   * is not stored as the prompt's reply: the cluster restarts the entity and delivers the prompt
   * again (with its own backoff, at most 10 s apart) until the store answers.
   *
   * @since 0.2.0
   * @category errors
   */
  StoreUnavailable
} from "./Attempts.js"
export {
  /**
   * The `AgentSession` behaviour, registered with the `Sharding` in context. Prompts of a session
   * run one at a time, in arrival order; `cancel`, `status` and `load` are answered while a turn runs.
   *
   * @since 0.2.0
   * @category layers
   */
  layer
} from "./EntityLayer.js"
export {
  /**
   * A client of the fleet: `client(sessionId).prompt(new PromptRequest({ promptId, text }))` sends
   * to whichever runner owns the session.
   *
   * @since 0.2.0
   * @category constructors
   */
  client
} from "./PromptStream.js"
export {
  /**
   * One update of a streamed prompt (`promptStream`), each from a committed event of the session's
   * log (`seq`): the prompt's turn started (`TurnStarted`: its user message is stored), a text delta
   * of the assistant (`TextDelta`), a tool call (`ToolCall`) and its result (`ToolResult`), the turn
   * ended (`TurnEnded`, with its `turn/end` reason's kind: `interrupted` for a turn a dead runner
   * left open, closed by the new owner's repair), and last the prompt's answer (`Answered`).
   * `attempt` is the attempt the turn belongs to (1, then 2 when a runner died or was moved mid-turn).
   *
   * @since 0.2.0
   * @category models
   */
  PromptUpdate,
  /**
   * The attempt a user message's id names for `promptId`: 1 for `<promptId>`, n for
   * `<promptId>#<n>`, undefined for another prompt's message.
   *
   * @since 0.2.0
   * @category utils
   */
  attemptOf,
  /**
   * The state of `trackPrompt`: the turn the log is in (0 outside a turn, or when its `turn/start`
   * was not read) and the turns of the prompt's attempts.
   *
   * @since 0.2.0
   * @category models
   */
  type PromptTracker,
  /**
   * A tracker of `promptId`'s turns, for a log read from any seq on.
   *
   * @since 0.2.0
   * @category constructors
   */
  makePromptTracker,
  /**
   * The updates one committed event makes for the tracked prompt (none for another prompt's turns).
   * Fed the events of a log in seq order, in chunks of any size, it gives the same updates.
   *
   * @since 0.2.0
   * @category utils
   */
  trackPrompt
} from "./PromptTracker.js"
export {
  /**
   * No runner started the prompt in time: within `timeoutMs` of sending it (or of the session's last
   * committed event, while its log moves) neither the prompt's turn started nor its answer came, as
   * when no runner of the fleet is alive. The prompt stays stored in the cluster's message table: a
   * runner that starts later runs it, and sending it again with its `promptId` waits for that answer
   * (docs/fleet.md "No runner").
   *
   * @since 0.2.0
   * @category errors
   */
  FleetUnavailable,
  /**
   * Options of `promptStream`.
   *
   * @since 0.2.0
   * @category models
   */
  type PromptStreamOptions,
  /**
   * The default of `PromptStreamOptions.timeoutMs`.
   *
   * @since 0.2.0
   * @category constants
   */
  DEFAULT_PROMPT_TIMEOUT_MS,
  /**
   * Send a prompt and stream its updates: the turn's text deltas, tool calls and results as the
   * runner stores them, then the answer. The updates come from the session's log, followed through
   * the `SessionStore` in context (the fleet's database) from its length before the prompt was sent,
   * not from the runner: a runner's failover does not break the stream, every update is a committed
   * event (what the client saw is in the log), and the attempt a runner's death cut shows as its
   * updates, its `TurnEnded` with reason `interrupted`, then the next attempt's. The stream ends
   * with `Answered` once the answer came and the answering turn's end was delivered; a prompt
   * answered before (its `promptId` sent again) streams only `Answered`, its stored answer. Finding
   * where the log ends reads the session's log once (streamed, not kept).
   *
   * @since 0.2.0
   * @category constructors
   */
  promptStream
} from "./PromptStream.js"
