/**
 * The snapshot harness (SPEC §10.2, §10.3): runs a fixture in `replay` (the model derived from the
 * committed log, every derived artifact compared), `refresh` (the same run, artifacts rewritten) or
 * `record` (a live model — or the pretend-live one — writing the log too), with the checks every
 * mode makes (requests equal `Session.requestAt`, header-change count, scripts consumed, header
 * pinning) and the fixture-tree guards. Failures are precise strings, collected, never thrown.
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Layer from "effect/Layer"
import { type CallScript, makeScriptedLanguageModel } from "../../../src/layers/model/ScriptedLanguageModel.js"
import type { Event } from "../../../src/schema/Events.js"
import * as IdGenerator from "../../../src/services/IdGenerator.js"
import { encodePrompt, requestToPrompt } from "../../../src/services/PromptConversion.js"
import type { SessionStore } from "../../../src/services/SessionStore.js"
import { type CallRecord, modelOf, type RunResult, runScenario } from "./Driver.js"
import {
  document,
  FILES,
  type Fixture,
  line,
  parseLines,
  parsePrompts,
  parseSchemas,
  projectLog,
  readFixture,
  renderPrompts,
  renderSchemas,
  Tokens
} from "./Fixture.js"
import { harvestOverride, scriptsOf } from "./ModelScript.js"
import { renderRequests, renderWire } from "./Render.js"

type Rec = Record<string, any>

export type Mode = "replay" | "refresh" | "record"

/** The mode from `SNAPSHOT_MODE` (default replay); anything else is an error. */
export const modeOf = (value: string | undefined): Mode => {
  if (value === undefined || value === "" || value === "replay") return "replay"
  if (value === "refresh" || value === "record") return value
  throw new Error(`SNAPSHOT_MODE must be replay, refresh or record, not "${value}"`)
}

/** The model of a `record` run. */
export type LiveModel =
  | { readonly kind: "pretend"; readonly scripts: ReadonlyArray<CallScript> }
  | { readonly kind: "live"; readonly layer: Layer.Layer<LanguageModel.LanguageModel, unknown> }

const logName = (i: number) => (i === 0 ? FILES.log : `session.${i + 1}.expected.jsonl`)

/** The first line where two texts differ, for a failure message. */
export const firstDifference = (file: string, expected: string | undefined, actual: string): string | undefined => {
  if (expected === actual) return undefined
  if (expected === undefined) return `${file} is missing (the run produced ${actual.split("\n").length - 1} lines)`
  const a = expected.split("\n")
  const b = actual.split("\n")
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      return `${file} differs from the run at line ${i + 1}:\n  fixture: ${a[i] ?? "(end of file)"}\n  run:     ${b[i] ?? "(end of file)"}`
    }
  }
  return `${file} differs from the run`
}

/** Every model call received exactly `Session.requestAt` of its dispatch point (SPEC §5.4). */
export const checkRequests = (calls: ReadonlyArray<CallRecord>): Array<string> => {
  const failures: Array<string> = []
  for (const [i, c] of calls.entries()) {
    const at = c.snapshot
    const expected = requestToPrompt({ header: at.header, messages: at.messages })
    const where = `model call ${i + 1} (seq ${c.seq} of ${c.sessionId})`
    if (line(encodePrompt(c.request.prompt)) !== line(encodePrompt(expected))) {
      failures.push(`${where}: the prompt differs from Session.requestAt(${c.seq})`)
    }
    if (line(c.request.tools) !== line(at.header?.tools ?? [])) failures.push(`${where}: the tools differ from Session.requestAt(${c.seq})`)
    if (line(c.request.config) !== line(at.header?.config)) failures.push(`${where}: the config differs from Session.requestAt(${c.seq})`)
  }
  return failures
}

/** The written headers of a log: reason, system prompt and tools. */
const headersOf = (events: ReadonlyArray<Event>) =>
  events.filter((e) => e.type === "request/header").map((e) => {
    const d = e.data as Rec
    return { seq: e.seq, reason: d.reason as string, system: d.header.system as string, tools: d.header.tools as unknown }
  })

/** The sidecars of a pin, parsed: prompts and schema sets (initial first), or why they are malformed. */
export const pinSidecars = (files: ReadonlyMap<string, string>) => {
  const prompts = parsePrompts(files.get(FILES.prompts) ?? "")
  const schemas = files.has(FILES.schemas) ? parseSchemas(files.get(FILES.schemas)!) : `${FILES.schemas} is missing`
  return { prompts, schemas }
}

/** What one run of a fixture produced, rendered as the fixture's files, and what its checks found. */
export interface Rendered {
  readonly files: Map<string, string>
  readonly failures: Array<string>
  readonly run: RunResult
}

/** Render a run as fixture files and check it (everything but the comparison with committed files). */
export const renderRun = (fixture: Fixture, run: RunResult, pin: { readonly name: string; readonly files: ReadonlyMap<string, string> }): Rendered => {
  const { scenario } = fixture
  const tokens = new Tokens(run.cwd)
  const files = new Map<string, string>()
  const failures: Array<string> = run.problems.map((p) => `driver: ${p}`)
  run.sessions.forEach((s, i) => files.set(logName(i), projectLog(s.header, s.events, tokens, run.seeds.get(s.id))))
  files.set(FILES.wire, renderWire(run.frames, tokens))
  const logs = new Map(run.sessions.map((s) => [s.id, s.events] as const))
  files.set(FILES.requests, renderRequests({
    name: fixture.name,
    description: scenario.description,
    headerClass: scenario.headerClass,
    pin: pin.name,
    pins: scenario.pinsHeader
  }, run.calls, logs, tokens))
  failures.push(...checkRequests(run.calls))

  // §10.3: the header-change count of every session log
  for (const s of run.sessions) {
    const changes = headersOf(s.events).filter((h) => h.reason === "change").length
    if (changes !== scenario.expectedHeaderChanges) {
      failures.push(`session ${s.id}: ${changes} request/header change(s), the scenario expects ${scenario.expectedHeaderChanges} (expectedHeaderChanges)`)
    }
  }

  // §10.3: header pinning
  if (scenario.pinsHeader) {
    const headers = run.sessions.flatMap((s) => headersOf(s.events))
    const prompts: Array<string> = []
    const schemas: Array<unknown> = []
    for (const h of headers) {
      if (h.reason === "initial" && prompts.length > 0) continue
      if (h.reason === "initial" || h.reason === "change") {
        prompts.push(tokens.text(h.system))
        schemas.push(tokens.value(h.tools))
      }
    }
    files.set(FILES.prompts, renderPrompts(prompts))
    files.set(FILES.schemas, renderSchemas(schemas))
  }
  const sidecars = pinSidecars(pin.files)
  if (typeof sidecars.prompts === "string" || typeof sidecars.schemas === "string") {
    if (!scenario.pinsHeader) failures.push(`the pin ${pin.name}: ${typeof sidecars.prompts === "string" ? sidecars.prompts : sidecars.schemas}`)
  } else {
    const prompts = sidecars.prompts
    const schemas = sidecars.schemas
    for (const s of run.sessions) {
      let k = 0
      for (const h of headersOf(s.events)) {
        // the pin: header k rebuilt from the log and the sidecars; others: the pin's initial header
        if (scenario.pinsHeader && h.reason === "change") k++
        const index = scenario.pinsHeader ? k : 0
        const where = scenario.pinsHeader ? `sidecar header ${index} of the pin` : `the initial header of the pin ${pin.name}`
        if (prompts[index] === undefined) {
          failures.push(`session ${s.id} event ${h.seq}: request/header ${h.reason} has no ${where} (the sidecars hold ${prompts.length})`)
          continue
        }
        if (tokens.text(h.system) !== prompts[index]) {
          failures.push(`session ${s.id} event ${h.seq}: the system prompt of request/header ${h.reason} differs from ${where}`)
        }
        if (line(tokens.value(h.tools)) !== line(schemas[index])) {
          failures.push(`session ${s.id} event ${h.seq}: the tools of request/header ${h.reason} differ from ${where}`)
        }
      }
    }
  }
  return { files, failures, run }
}

/** The workspace files of a fixture (`workspace/`, flat). */
const workspaceOf = (fixture: Fixture) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const out = new Map<string, string>()
    if (!fixture.files.has(FILES.workspace)) return out
    for (const name of (yield* fs.readDirectory(`${fixture.dir}/${FILES.workspace}`)).sort()) {
      out.set(name, yield* fs.readFileString(`${fixture.dir}/${FILES.workspace}/${name}`))
    }
    return out
  })

/** Options of one scenario run in a mode. */
export interface RunOptions {
  readonly root: string
  readonly name: string
  readonly mode: Mode
  /** Record only: the model. */
  readonly live?: LiveModel
  /** Record only: record `authored` scenarios too (their first authoring, with the pretend-live model). */
  readonly authored?: boolean
}

/**
 * Run one fixture in a mode over the provided store. Replay compares; refresh and record write
 * the fixture's files. Returns the failures (empty: the scenario passed) and what was written.
 */
export const runFixture = (options: RunOptions) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const fixture = yield* readFixture(options.root, options.name)
    const { scenario } = fixture
    if (options.mode === "record" && scenario.authored && options.authored !== true) return { failures: [], skipped: true as const, written: [] as Array<string>, run: undefined }
    const pinName = yield* pinOf(options.root, scenario.headerClass, options.name, scenario.pinsHeader)
    const cwd = yield* fs.makeTempDirectoryScoped({ prefix: "snapshot-cwd-" })
    const hang = yield* Deferred.make<void>()
    const failures: Array<string> = []

    let scripts: ReadonlyArray<CallScript> | undefined
    let model: LanguageModel.Service
    let remaining: Effect.Effect<number> = Effect.succeed(0)
    if (options.mode === "record" && options.live?.kind === "live") {
      model = yield* modelOf(options.live.layer)
    } else {
      if (options.mode === "record") {
        if (options.live === undefined) return yield* Effect.dieMessage("record mode needs a live (or pretend-live) model")
        scripts = options.live.kind === "pretend"
          ? options.live.scripts.map((s) => s.map((p) => (p.type === "hang" ? { type: "hang" as const, reached: hang } : p)))
          : []
      } else {
        const derived = scriptsOf(parseLines(fixture.files.get(FILES.log) ?? ""), fixture.override, cwd, hang)
        if (typeof derived === "string") return { failures: [`${options.name}: ${derived}`], skipped: false as const, written: [], run: undefined }
        scripts = derived
      }
      const scripted = yield* makeScriptedLanguageModel({ scripts, requireConsumed: false })
      model = scripted.model
      remaining = scripted.handle.remaining
    }

    const run = yield* runScenario({
      scenario,
      workspace: yield* workspaceOf(fixture),
      model,
      modelHang: hang,
      cwd,
      // SPEC §10.2: a recording persists durably, so everything it saw is in the log it writes
      ...(options.mode === "record" ? { persistence: { mode: "durable" } as const } : {})
    }).pipe(
      Effect.provide(IdGenerator.layerCounter("id-"))
    )
    if (scripts !== undefined) {
      if (run.calls.length > scripts.length) {
        failures.push(`the model script is exhausted: the run made ${run.calls.length} model calls, the fixture's log holds ${scripts.length}`)
      }
      const left = yield* remaining
      if (left > 0) failures.push(`${left} model call script(s) left unconsumed: the run made ${run.calls.length} of ${scripts.length} calls`)
    }
    const pinFiles = pinName === options.name ? fixture.files : (yield* readFixture(options.root, pinName)).files
    // a refreshing or recording pin checks its headers against what it writes
    const rendered = renderRun(fixture, run, {
      name: pinName,
      files: options.mode !== "replay" && scenario.pinsHeader ? new Map() : pinFiles
    })
    if (options.mode !== "replay" && scenario.pinsHeader) {
      const again = renderRun(fixture, run, { name: pinName, files: rendered.files })
      failures.push(...again.failures)
    } else failures.push(...rendered.failures)

    const written: Array<string> = []
    if (options.mode === "replay") {
      for (const [file, text] of rendered.files) {
        const diff = firstDifference(file, fixture.files.get(file), text)
        if (diff !== undefined) failures.push(diff)
      }
      for (const file of fixture.files.keys()) {
        if (/^session\.\d+\.expected\.jsonl$/.test(file) && !rendered.files.has(file)) failures.push(`${file}: the run has no such session`)
      }
    } else {
      for (const [file, text] of rendered.files) {
        if (fixture.files.get(file) !== text) {
          yield* fs.writeFileString(`${fixture.dir}/${file}`, text)
          written.push(file)
        }
      }
      if (options.mode === "record") {
        const override = scripts === undefined ? undefined : harvestOverride(scripts, run.calls.length)
        const text = override === undefined ? undefined : document(override)
        if (text !== undefined && fixture.files.get(FILES.override) !== text) {
          yield* fs.writeFileString(`${fixture.dir}/${FILES.override}`, text)
          written.push(FILES.override)
        } else if (text === undefined && fixture.files.has(FILES.override)) {
          yield* fs.remove(`${fixture.dir}/${FILES.override}`)
          written.push(`-${FILES.override}`)
        }
      }
    }
    return { failures: failures.map((f) => `${options.name}: ${f}`), skipped: false as const, written, run: run as RunResult | undefined }
  })

/** The pin of a header class: the one scenario of the class with `pinsHeader` (the guards check there is one). */
const pinOf = (root: string, headerClass: string, self: string, selfPins: boolean) =>
  Effect.gen(function*() {
    if (selfPins) return self
    const fs = yield* FileSystem.FileSystem
    for (const name of (yield* fs.readDirectory(root)).sort()) {
      if (!(yield* fs.exists(`${root}/${name}/${FILES.scenario}`))) continue
      const f = yield* Effect.either(readFixture(root, name))
      if (f._tag === "Right" && f.right.scenario.pinsHeader && f.right.scenario.headerClass === headerClass) return name
    }
    return yield* Effect.fail(`header class ${headerClass} has no pin`)
  })

// ---------------------------------------------------------------------------------------------
// guards (SPEC §10.3)

const REQUIRED = [FILES.scenario, FILES.log, FILES.requests, FILES.wire]
const OPTIONAL = [FILES.override, FILES.workspace]

/** Every guard of the fixture tree: the failures, one string each (empty: the tree is sound). */
export const guardTree = (root: string, registered: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const failures: Array<string> = []
    const dirs: Array<string> = []
    for (const name of (yield* fs.readDirectory(root)).sort()) {
      if (name === "harness") continue
      const info = yield* fs.stat(`${root}/${name}`)
      if (info.type === "Directory") dirs.push(name)
      else failures.push(`stray file ${name} at the top of the fixture tree`)
    }
    for (const d of dirs) if (!registered.includes(d)) failures.push(`orphan scenario directory ${d}/ (not registered in SCENARIOS)`)
    for (const r of registered) if (!dirs.includes(r)) failures.push(`scenario ${r} is registered but ${r}/ is missing`)

    const fixtures: Array<Fixture> = []
    for (const d of dirs.filter((d) => registered.includes(d))) {
      const f = yield* Effect.either(readFixture(root, d))
      if (f._tag === "Left") failures.push(typeof f.left === "string" ? f.left : `${d}: ${f.left.message}`)
      else fixtures.push(f.right)
    }
    const pins = new Map<string, Array<Fixture>>()
    for (const f of fixtures) {
      const { scenario } = f
      if (!pins.has(scenario.headerClass)) pins.set(scenario.headerClass, [])
      if (scenario.pinsHeader) pins.get(scenario.headerClass)!.push(f)
      const expected = scenario.pinsHeader ? [...REQUIRED, FILES.prompts, FILES.schemas] : REQUIRED
      for (const file of expected) if (!f.files.has(file)) failures.push(`${f.name}: ${file} is missing`)
      for (const file of f.files.keys()) {
        if (expected.includes(file as never) || OPTIONAL.includes(file as never)) continue
        if (/^session\.([2-9]|[1-9]\d+)\.expected\.jsonl$/.test(file)) continue
        failures.push(
          file === FILES.prompts || file === FILES.schemas
            ? `${f.name}: stray ${file} (sidecars belong to the pin of class ${scenario.headerClass} only)`
            : `${f.name}: stray file ${file}`
        )
      }
      for (const [file, text] of f.files) {
        if (file === FILES.workspace || file === FILES.scenario) continue
        if (!text.endsWith("\n")) failures.push(`${f.name}: ${file} must end with a newline`)
      }
      if (f.files.has(FILES.override) && f.files.get(FILES.override) !== document(JSON.parse(f.files.get(FILES.override)!))) {
        failures.push(`${f.name}: ${FILES.override} is not canonical JSON`)
      }
      // unscrubbed header bulk in any log (pins keep it in their sidecars)
      for (const [file, text] of f.files) {
        if (!/^session(\.\d+)?\.expected\.jsonl$/.test(file)) continue
        text.split("\n").forEach((l, i) => {
          if (l.trim() === "") return
          const e = JSON.parse(l) as Rec
          if (e.type === "request/header" && (e.data?.header?.system !== "{{system}}" || e.data?.header?.tools !== "{{tools}}")) {
            failures.push(`${f.name}: ${file} line ${i + 1}: unscrubbed request/header (system and tools must be {{system}} and {{tools}})`)
          }
        })
      }
      if (scenario.pinsHeader && f.files.has(FILES.prompts)) {
        const { prompts, schemas } = pinSidecars(f.files)
        if (typeof prompts === "string") failures.push(`${f.name}: ${prompts}`)
        else if (prompts.length !== 1 + scenario.expectedHeaderChanges) {
          failures.push(`${f.name}: ${FILES.prompts} holds ${prompts.length} prompt(s), expected 1 + expectedHeaderChanges = ${1 + scenario.expectedHeaderChanges}`)
        }
        if (typeof schemas === "string") failures.push(`${f.name}: ${schemas}`)
        else if (schemas.length !== 1 + scenario.expectedHeaderChanges) {
          failures.push(`${f.name}: ${FILES.schemas} holds ${schemas.length} schema set(s), expected ${1 + scenario.expectedHeaderChanges}`)
        }
      }
    }
    for (const [headerClass, list] of pins) {
      if (list.length === 0) failures.push(`header class ${headerClass} has no pin (exactly one scenario must have pinsHeader: true)`)
      if (list.length > 1) failures.push(`header class ${headerClass} has ${list.length} pins: ${list.map((f) => f.name).join(", ")}`)
    }
    // pins of one header source must agree
    const bySource = new Map<string, Fixture>()
    for (const f of fixtures.filter((f) => f.scenario.pinsHeader)) {
      const source = f.scenario.headerSource ?? f.scenario.headerClass
      const other = bySource.get(source)
      if (other === undefined) bySource.set(source, f)
      else if (other.files.get(FILES.prompts) !== f.files.get(FILES.prompts) || other.files.get(FILES.schemas) !== f.files.get(FILES.schemas)) {
        failures.push(`the sidecars of ${other.name} and ${f.name} disagree for their shared header source ${source}`)
      }
    }
    return failures
  })

/** Run `runFixture` for every backend layer, the store provided fresh per run. */
export const withStore = <A, E, R>(effect: Effect.Effect<A, E, R>, store: Layer.Layer<SessionStore>) =>
  Effect.provide(effect, store)
