/**
 * Fixtures of the ACP snapshot suite (SPEC §10.1): the driver script `scenario.json` (decoded with
 * Schema), canonical JSON, the placeholder tokens (`{{cwd}}`, `{{id:N}}` by first appearance), the
 * projected log (header line; events without `seq`/`time`; request-header bulk as `{{system}}` /
 * `{{tools}}`), the pin's sidecars, and reading a scenario directory.
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"
import { createHash } from "node:crypto"

// ---------------------------------------------------------------------------------------------
// scenario.json

const Permission = Schema.Literal("allow_once", "allow_always", "reject_once", "reject_always", "pending")

export const Step = Schema.Union(
  Schema.Struct({ do: Schema.Literal("new") }),
  Schema.Struct({
    do: Schema.Literal("prompt"),
    text: Schema.String,
    /** Answers to this prompt's permission requests, by option kind, in order (`pending`: never answered). */
    permissions: Schema.optional(Schema.Array(Permission)),
    /** Leave the prompt running once this point is reached (a `cancel` or `crash` step follows). */
    until: Schema.optional(Schema.Literal("model-hang", "tool-hang", "permission"))
  }),
  Schema.Struct({ do: Schema.Literal("cancel") }),
  Schema.Struct({ do: Schema.Literal("mode"), mode: Schema.String }),
  Schema.Struct({ do: Schema.Literal("crash") }),
  Schema.Struct({ do: Schema.Literal("reconnect") }),
  Schema.Struct({ do: Schema.Literal("load") }),
  Schema.Struct({ do: Schema.Literal("compact") }),
  Schema.Struct({ do: Schema.Literal("seed"), generator: Schema.String, turns: Schema.Int })
)
export type Step = typeof Step.Type

export const Scenario = Schema.Struct({
  description: Schema.String,
  headerClass: Schema.optionalWith(Schema.String, { default: () => "default" }),
  pinsHeader: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  expectedHeaderChanges: Schema.optionalWith(Schema.NonNegativeInt, { default: () => 0 }),
  authored: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  /** The source of the class's header bulk; pins naming one source must have equal sidecars (default: the class). */
  headerSource: Schema.optional(Schema.String),
  /** Tool calls that never return, as `tool:path` (a call cut off by a cancel or a crash). */
  hangOn: Schema.optionalWith(Schema.Array(Schema.String), { default: () => [] }),
  /** Whether the client advertises `session.compaction` (default true). */
  clientCompaction: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  steps: Schema.Array(Step)
})
export type Scenario = typeof Scenario.Type

/** `replay.override.json`: model behaviour the log cannot express, by 1-based call index. */
export const Override = Schema.Struct({
  calls: Schema.Record({
    key: Schema.String,
    value: Schema.Union(
      Schema.Struct({ hang: Schema.Literal(true) }),
      Schema.Struct({ throw: Schema.Struct({ message: Schema.String }) })
    )
  })
})
export type Override = typeof Override.Type

// ---------------------------------------------------------------------------------------------
// canonical JSON

/** A copy with object keys sorted (recursively); arrays keep their order. */
export const sortKeys = (v: unknown): unknown => {
  if (Array.isArray(v)) return v.map(sortKeys)
  if (typeof v === "object" && v !== null) {
    const out: Record<string, unknown> = {}
    for (const k of Object.keys(v).sort()) {
      const x = (v as Record<string, unknown>)[k]
      if (x !== undefined) out[k] = sortKeys(x)
    }
    return out
  }
  return v
}

/** One canonical line. */
export const line = (v: unknown): string => JSON.stringify(sortKeys(v))

/** A canonical JSON document (two-space indent, newline at the end). */
export const document = (v: unknown): string => `${JSON.stringify(sortKeys(v), null, 2)}\n`

export const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex")

// ---------------------------------------------------------------------------------------------
// placeholders

const ID = /\bid-\d+\b/g

/** Volatile values as placeholders: the working directory, and generated ids by first appearance. */
export class Tokens {
  private readonly ids = new Map<string, string>()
  constructor(readonly cwd: string) {}

  text(s: string): string {
    const replaced = this.cwd === "" ? s : s.split(this.cwd).join("{{cwd}}")
    return replaced.replace(ID, (id) => {
      let token = this.ids.get(id)
      if (token === undefined) {
        token = `{{id:${this.ids.size + 1}}}`
        this.ids.set(id, token)
      }
      return token
    })
  }

  value(v: unknown): unknown {
    if (typeof v === "string") return this.text(v)
    if (Array.isArray(v)) return v.map((x) => this.value(x))
    if (typeof v === "object" && v !== null) {
      const out: Record<string, unknown> = {}
      for (const [k, x] of Object.entries(v)) out[k] = this.value(x)
      return out
    }
    return v
  }
}

/** Back from placeholders to this run's values (`{{cwd}}` only: model output never names generated ids). */
export const untoken = (v: unknown, cwd: string): unknown => {
  if (typeof v === "string") return v.split("{{cwd}}").join(cwd)
  if (Array.isArray(v)) return v.map((x) => untoken(x, cwd))
  if (typeof v === "object" && v !== null) {
    const out: Record<string, unknown> = {}
    for (const [k, x] of Object.entries(v)) out[k] = untoken(x, cwd)
    return out
  }
  return v
}

// ---------------------------------------------------------------------------------------------
// the projected log

type Rec = Record<string, any>

/** A seeded prefix of a log, shown as one line. */
export interface SeedInfo {
  readonly generator: string
  readonly turns: number
  /** How many events the seed wrote (its events and the end-seed marker). */
  readonly events: number
}

/** One event without `seq` and `time`, its request-header bulk tokenised. */
export const projectEvent = (event: Rec, tokens: Tokens): string => {
  const { data, seq: _seq, time: _time, type, ...envelope } = event
  let shown = data
  if (type === "request/header" && typeof data === "object" && data !== null) {
    shown = { ...data, header: { ...data.header, system: "{{system}}", tools: "{{tools}}" } }
  }
  // type first, then the envelope, data last
  const body = tokens.value(sortKeys({ ...envelope, data: shown })) as Rec
  const { data: d, ...rest } = body
  return JSON.stringify({ type, ...rest, data: d })
}

/** The projected log of one session (SPEC §10.1), newline-terminated. */
export const projectLog = (header: Rec, events: ReadonlyArray<Rec>, tokens: Tokens, seed?: SeedInfo): string => {
  const lines = [JSON.stringify({ type: "session", ...(tokens.value(sortKeys(header)) as Rec) })]
  let from = 0
  if (seed !== undefined) {
    const seeded = events.slice(0, seed.events).map((e) => projectEvent(e, tokens))
    lines.push(JSON.stringify({
      seeded: { generator: seed.generator, turns: seed.turns, events: seed.events, sha256: sha256(seeded.join("\n")) }
    }))
    from = seed.events
  }
  for (const e of events.slice(from)) lines.push(projectEvent(e, tokens))
  return `${lines.join("\n")}\n`
}

/** The lines of a projected log as values (the header line first). */
export const parseLines = (text: string): Array<Rec> =>
  text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as Rec)

// ---------------------------------------------------------------------------------------------
// the pin's sidecars

const CHANGE = /\n\n<!-- request\/header change (\d+) -->\n/

/** `system-prompt.expected.md`: the initial prompt, then each changed prompt after its marker. */
export const renderPrompts = (prompts: ReadonlyArray<string>): string =>
  prompts.map((p, i) => (i === 0 ? p : `\n<!-- request/header change ${i} -->\n${p}`)).join("\n") + "\n"

/** The prompts of a `system-prompt.expected.md` (the inverse of `renderPrompts`), or why it is malformed. */
export const parsePrompts = (text: string): ReadonlyArray<string> | string => {
  if (!text.endsWith("\n")) return "system-prompt.expected.md must end with a newline"
  const parts = text.slice(0, -1).split(CHANGE)
  const prompts = [parts[0]!]
  for (let i = 1; i < parts.length; i += 2) {
    if (Number(parts[i]) !== prompts.length) {
      return `system-prompt.expected.md: change marker ${parts[i]} out of order (expected ${prompts.length})`
    }
    prompts.push(parts[i + 1]!)
  }
  return renderPrompts(prompts) === text ? prompts : "system-prompt.expected.md is not in the canonical layout"
}

/** `tool-schemas.expected.json`. */
export const renderSchemas = (sets: ReadonlyArray<unknown>): string =>
  document({ initial: sets[0] ?? [], changes: sets.slice(1) })

/** The schema sets of a `tool-schemas.expected.json`, or why it is malformed. */
export const parseSchemas = (text: string): ReadonlyArray<unknown> | string => {
  let parsed: Rec
  try {
    parsed = JSON.parse(text)
  } catch {
    return "tool-schemas.expected.json is not JSON"
  }
  if (document(parsed) !== text) return "tool-schemas.expected.json is not canonical JSON (sorted keys, two-space indent, final newline)"
  if (!Array.isArray(parsed.initial) || !Array.isArray(parsed.changes)) {
    return "tool-schemas.expected.json must hold { initial: [...], changes: [[...], ...] }"
  }
  return [parsed.initial, ...parsed.changes]
}

// ---------------------------------------------------------------------------------------------
// scenario directories

export const FILES = {
  scenario: "scenario.json",
  log: "session.expected.jsonl",
  requests: "requests.md",
  wire: "acp.expected.jsonl",
  override: "replay.override.json",
  prompts: "system-prompt.expected.md",
  schemas: "tool-schemas.expected.json",
  workspace: "workspace"
} as const

/** A scenario directory as committed. */
export interface Fixture {
  readonly name: string
  readonly dir: string
  readonly scenario: Scenario
  /** Committed files by name (text), absent when missing. */
  readonly files: ReadonlyMap<string, string>
  readonly override: Override | undefined
}

/** Read one scenario directory (files at its top level; `workspace/` is read when the run seeds it). */
export const readFixture = (root: string, name: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const dir = `${root}/${name}`
    const files = new Map<string, string>()
    for (const entry of (yield* fs.readDirectory(dir)).sort()) {
      const info = yield* fs.stat(`${dir}/${entry}`)
      if (info.type === "File") files.set(entry, yield* fs.readFileString(`${dir}/${entry}`))
      else files.set(entry, "")
    }
    const raw = files.get(FILES.scenario)
    if (raw === undefined) return yield* Effect.fail(`${name}: ${FILES.scenario} is missing`)
    const scenario = yield* Schema.decodeUnknown(Schema.parseJson(Scenario))(raw).pipe(
      Effect.mapError((e) => `${name}/${FILES.scenario}: ${e.message}`)
    )
    const overrideText = files.get(FILES.override)
    const override = overrideText === undefined ? undefined : yield* Schema.decodeUnknown(Schema.parseJson(Override))(overrideText).pipe(
      Effect.mapError((e) => `${name}/${FILES.override}: ${e.message}`)
    )
    return { name, dir, scenario, files, override } satisfies Fixture
  })
