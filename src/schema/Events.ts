/**
 * The event envelope (SPEC §1.1), the surface marker, and one payload Schema per known event
 * type (SPEC §1.3–§1.4). The known-type list is derived from the payload record, so there is one
 * source of truth for the vocabulary.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import { AssistantMessage, ContentBlock, TokenUsage, ToolResultMessage, UserMessage } from "./Messages.js"
import { HeaderReason, RequestContext, RequestHeader } from "./RequestHeader.js"

/**
 * How an event entered the surface.
 *
 * @since 0.1.0
 * @category models
 */
export type SurfaceOp = "append" | { readonly op: "replace"; readonly start: number; readonly end: number }
/**
 * The schema of `SurfaceOp`: `"append"`, or a replace of the surface range `[start, end]`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SurfaceOp = Schema.Union(
  Schema.Literal("append"),
  Schema.Struct({ op: Schema.Literal("replace"), start: Schema.Number, end: Schema.Number })
)

/**
 * One log entry. `data` is lossless JSON; the optional keys follow SPEC §1.1.
 *
 * @since 0.1.0
 * @category models
 */
export interface Event<T extends string = string, D = unknown> {
  readonly type: T
  readonly seq: number
  readonly time: number
  readonly data: D
  readonly sourceEventSeqs?: ReadonlyArray<number>
  readonly surfaceOp?: SurfaceOp
  readonly ignorable?: true
}

/**
 * The envelope keys in serialisation order (SPEC §1.1).
 *
 * @since 0.1.0
 * @category constants
 */
export const ENVELOPE_KEYS = ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"] as const

/**
 * Turn-end reasons: an open sum keyed by `kind`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TurnEndReason = Schema.Struct(
  { kind: Schema.String },
  Schema.Record({ key: Schema.String, value: Schema.Unknown })
)

const TurnStep = { turn: Schema.Number, step: Schema.Number }

/**
 * Payload Schemas of every known event type (Decision j).
 *
 * @since 0.1.0
 * @category utils
 */
export const EventPayloads = {
  "turn/start": Schema.Struct({ turn: Schema.Number }),
  "turn/end": Schema.Struct({ turn: Schema.Number, reason: TurnEndReason }),
  "step/start": Schema.Struct(TurnStep),
  "step/end": Schema.Struct(TurnStep),
  "user/message": UserMessage,
  "assistant/chunk": Schema.Struct({
    ...TurnStep,
    chunk: Schema.Struct({ type: Schema.String }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
  }),
  "assistant/message": Schema.Struct({
    ...TurnStep,
    message: AssistantMessage,
    usage: Schema.optional(TokenUsage),
    interrupted: Schema.optional(Schema.Literal(true))
  }),
  "tool/call": Schema.Struct({ ...TurnStep, callId: Schema.String, name: Schema.String, arguments: Schema.String }),
  "context/message": Schema.Struct({
    id: Schema.NonEmptyString,
    role: Schema.Literal("user"),
    content: Schema.Array(ContentBlock),
    // H11: a context message's source is never the user
    source: Schema.Struct({ kind: Schema.NonEmptyString }, Schema.Record({ key: Schema.String, value: Schema.Unknown }))
      .pipe(Schema.filter((source) => source.kind !== "user", { message: () => "source.kind must not be \"user\"" })),
    meta: Schema.optional(Schema.Unknown)
  }),
  "tool/result": Schema.Struct({
    ...TurnStep,
    message: ToolResultMessage,
    error: Schema.optional(Schema.Struct({ name: Schema.String, code: Schema.String })),
    meta: Schema.optional(Schema.Unknown)
  }),
  "todo/write": Schema.Struct({
    todos: Schema.Array(
      Schema.Struct({ content: Schema.String, status: Schema.Literal("pending", "in_progress", "completed") })
    )
  }),
  "request/header": Schema.Struct({ header: RequestHeader, reason: HeaderReason }),
  "request/context": RequestContext,
  "session/end-seed": Schema.Struct({}),
  "llm/retry": Schema.Struct({
    retryId: Schema.String,
    ...TurnStep,
    provider: Schema.String,
    mode: Schema.Literal("normal", "always"),
    policyKey: Schema.String,
    retry: Schema.Number,
    maxRetries: Schema.optional(Schema.Number),
    delayMs: Schema.Number,
    failure: Schema.Unknown
  }),
  "llm/retry-started": Schema.Struct({ retryId: Schema.String, ...TurnStep, retry: Schema.Number }),
  "compaction/start": Schema.Struct({
    compactionId: Schema.String,
    sourceCommandId: Schema.optional(Schema.String),
    turn: Schema.NullOr(Schema.Number)
  }),
  "compaction/summary": Schema.Struct({
    compactionId: Schema.String,
    sourceCommandId: Schema.optional(Schema.String),
    summary: Schema.Array(ContentBlock),
    shadowedRange: Schema.Struct({ start: Schema.Number, end: Schema.Number }),
    shadowedSeqs: Schema.Array(Schema.Number),
    shadowedTokenCount: Schema.Number,
    provider: Schema.String,
    model: Schema.String,
    maxTokens: Schema.optional(Schema.Number),
    usage: Schema.optional(TokenUsage),
    rawOutput: Schema.optional(Schema.Array(ContentBlock)),
    llmStreamCall: Schema.optional(Schema.Literal(true))
  }),
  "compaction/end": Schema.Struct({
    compactionId: Schema.String,
    sourceCommandId: Schema.optional(Schema.String),
    turn: Schema.NullOr(Schema.Number),
    error: Schema.optional(Schema.String)
  }),
  "compaction/prune": Schema.Struct({
    shadowedRange: Schema.Struct({ start: Schema.Number, end: Schema.Number }),
    shadowedSeqs: Schema.Array(Schema.Number),
    shadowedTokenCount: Schema.Number
  })
} as const

/**
 * A known event type.
 *
 * @since 0.1.0
 * @category models
 */
export type KnownEventType = keyof typeof EventPayloads

/**
 * The payload type of a known event type.
 *
 * @since 0.1.0
 * @category models
 */
export type PayloadOf<T extends KnownEventType> = (typeof EventPayloads)[T]["Type"]

/**
 * Every known event, typed by its payload.
 *
 * @since 0.1.0
 * @category models
 */
export type KnownEvent = { [T in KnownEventType]: Event<T, PayloadOf<T>> }[KnownEventType]

/**
 * The tagged union of known events (validator of typed payloads for programs).
 *
 * @since 0.1.0
 * @category schemas
 */
export const KnownEventSchema = Schema.Union(
  ...(Object.keys(EventPayloads) as Array<KnownEventType>).map((type) =>
    Schema.Struct({
      type: Schema.Literal(type),
      seq: Schema.Number,
      time: Schema.Number,
      data: EventPayloads[type] as Schema.Schema<unknown>,
      sourceEventSeqs: Schema.optional(Schema.Array(Schema.Number)),
      surfaceOp: Schema.optional(SurfaceOp),
      ignorable: Schema.optional(Schema.Literal(true))
    })
  )
)

/**
 * The known event types (SPEC §1.4), derived from the payload record.
 *
 * @since 0.1.0
 * @category constants
 */
export const KNOWN_EVENT_TYPES: ReadonlySet<string> = new Set(Object.keys(EventPayloads))

/**
 * Message-producing types.
 *
 * @since 0.1.0
 * @category constants
 */
export const SURFACE_TYPES = ["user/message", "assistant/message", "tool/result", "context/message"] as const
/**
 * One of the message-producing types (`SURFACE_TYPES`).
 *
 * @since 0.1.0
 * @category models
 */
export type SurfaceEventType = (typeof SURFACE_TYPES)[number]
const surfaceTypeSet: ReadonlySet<string> = new Set(SURFACE_TYPES)

/**
 * True for the four surface-eligible types.
 *
 * @since 0.1.0
 * @category utils
 */
export const isSurfaceEligibleType = (type: string): type is SurfaceEventType => surfaceTypeSet.has(type)

/**
 * *is surface event*: eligible type and a marker present (SPEC §4.7).
 *
 * @since 0.1.0
 * @category utils
 */
export const isSurfaceEvent = (e: Event): boolean => isSurfaceEligibleType(e.type) && e.surfaceOp !== undefined

/**
 * *is append surface event*.
 *
 * @since 0.1.0
 * @category utils
 */
export const isAppendSurfaceEvent = (e: Event): boolean => isSurfaceEligibleType(e.type) && e.surfaceOp === "append"

/**
 * *is replacement surface event*.
 *
 * @since 0.1.0
 * @category utils
 */
export const isReplacementSurfaceEvent = (e: Event): boolean =>
  isSurfaceEligibleType(e.type) && typeof e.surfaceOp === "object" && e.surfaceOp !== null

/**
 * The options of a surface-eligible append.
 *
 * @since 0.1.0
 * @category models
 */
export interface SurfaceIntent {
  readonly surfaceOp: SurfaceOp
  readonly sourceEventSeqs?: ReadonlyArray<number> | undefined
}

/**
 * The options of a log-only append.
 *
 * @since 0.1.0
 * @category models
 */
export interface LogOnlyIntent {
  readonly ignorable?: true
}

/**
 * Any append options, as seen by the runtime checks (widened or loaded values).
 *
 * @since 0.1.0
 * @category models
 */
export interface AppendOptions {
  readonly surfaceOp?: unknown
  readonly sourceEventSeqs?: unknown
  readonly ignorable?: unknown
}
