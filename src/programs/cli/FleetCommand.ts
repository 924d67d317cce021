/**
 * `session-log fleet runner` and `session-log fleet prompt` (docs/fleet.md): a runner of a fleet
 * of agent runners on one PostgreSQL database, and a client that sends a prompt to whichever
 * runner owns the session. The cluster and the entity are loaded on first use (`FleetMain`), so
 * that no other command parses them.
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { json, optionalInteger, resolveSpec, runCommand, store } from "./CommandSupport.js"
import { encodeJson, type Json } from "../../schema/Json.js"
import type * as Fleet from "../fleet/Fleet.js"
import { UsageError } from "./Target.js"

/** `host:port` (a usage error otherwise). */
const parseAddress = (option: string, value: string) => {
  const m = /^(.+):(\d{1,5})$/.exec(value)
  const port = m === null ? NaN : Number(m[2])
  return m === null || port > 65535
    ? Effect.fail(new UsageError({ detail: `--${option} ${value}: use host:port (e.g. 127.0.0.1:34431)` }))
    : Effect.succeed({ host: m[1], port })
}

/** The fleet's database: `--store` must be PostgreSQL (every runner and client reaches it). */
const fleetUrl = (storeOpt: string) =>
  Effect.flatMap(resolveSpec(storeOpt), (spec) =>
    spec.kind === "postgres"
      ? Effect.succeed(spec.url)
      : Effect.fail(new UsageError({ detail: "a fleet needs --store postgres://user@host:port/database (one database every runner reaches)" })))

const listen = Options.text("listen").pipe(
  Options.withPseudoName("<host:port>"),
  Options.withDescription("(runner) where the runner listens for the other runners and the clients")
)

const advertise = Options.text("advertise").pipe(
  Options.optional,
  Options.withPseudoName("<host:port>"),
  Options.withDescription("(runner) the address the others reach this runner at (default: --listen)")
)

const model = Options.text("model").pipe(
  Options.optional,
  Options.withPseudoName("<module>"),
  Options.withDescription(
    "(runner) a JavaScript module whose `layer` export provides an @effect/ai LanguageModel (as `acp --model`); default: the keyless scripted model"
  )
)

const lockExpiration = optionalInteger(
  "lock-expiration",
  "<ms>",
  "(runner) how long a silent runner keeps its sessions before they move to the others (default 10000)"
)

const role = Args.choice([["runner", "runner"], ["prompt", "prompt"]] as const, { name: "runner|prompt" }).pipe(
  Args.withDescription("runner: serve the sessions of this runner's shards until stopped; prompt: send <text> to <session>")
)

const sessionArg = Args.text({ name: "session" }).pipe(
  Args.withDescription("(prompt) the session id; created on first use"),
  Args.optional
)
const textArg = Args.text({ name: "text" }).pipe(Args.withDescription("(prompt) the prompt"), Args.optional)

const promptId = Options.text("prompt-id").pipe(
  Options.optional,
  Options.withPseudoName("<id>"),
  Options.withDescription("(prompt) the prompt's id: sent again with the same id, a prompt is answered once (default: a new id)")
)

const required = <A>(value: Option.Option<A>, what: string) =>
  Option.isSome(value) ? Effect.succeed(value.value) : Effect.fail(new UsageError({ detail: what }))

/** `fleet runner …`: serve until interrupted (with `--json` a failure is one error document on stdout). */
const runner = (o: {
  readonly store: string
  readonly json: boolean
  readonly listen: Option.Option<string>
  readonly advertise: Option.Option<string>
  readonly model: Option.Option<string>
  readonly lockExpiration: Option.Option<number>
}) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const url = yield* fleetUrl(o.store)
      const at = yield* parseAddress("listen", yield* required(o.listen, "fleet runner needs --listen <host:port>"))
      const adv = Option.isSome(o.advertise) ? yield* parseAddress("advertise", o.advertise.value) : at
      const { runRunner } = yield* Effect.promise(() => import("./FleetMain.js"))
      return yield* runRunner({
        url,
        listen: at,
        advertise: adv,
        model: Option.getOrUndefined(o.model),
        lockExpirationMs: Option.getOrUndefined(o.lockExpiration)
      })
    }),
    () => Effect.void
  )

const timeout = optionalInteger(
  "timeout",
  "<ms>",
  "(prompt) how long to wait for a runner to start the prompt's turn before failing with FleetUnavailable (default 60000)"
)

const write = (stream: NodeJS.WriteStream, text: string) =>
  Effect.sync(() => {
    stream.write(text)
  })

/**
 * Wait until stdout has handed every queued write to the system: a full pipe queues them, and the
 * process may exit at once after the command (a failure ends it through runMain), which would
 * drop the updates printed last.
 */
const drained = Effect.async<void>((resume) => {
  if (process.stdout.writableLength === 0) return resume(Effect.void)
  const done = () => resume(Effect.void)
  process.stdout.once("drain", done)
  return Effect.sync(() => void process.stdout.off("drain", done))
})

/**
 * How `fleet prompt` prints a streamed prompt for people: the text deltas on stdout as they come,
 * an attempt a runner's death cut and the tool calls on stderr, and the answer's text when nothing
 * of it streamed (a prompt answered before).
 */
const humanPrinter = () => {
  let streamed = new Set<number>()
  let open = false
  const newline = () =>
    Effect.suspend(() => open ? Effect.zipRight(write(process.stdout, "\n"), Effect.sync(() => (open = false))) : Effect.void)
  return (u: Fleet.PromptUpdate): Effect.Effect<void> => {
    switch (u._tag) {
      case "TextDelta":
        streamed.add(u.turn)
        open = true
        return write(process.stdout, u.text)
      case "ToolCall":
        return Effect.zipRight(newline(), write(process.stderr, `[tool ${u.name} ${u.arguments}]\n`))
      case "TurnEnded":
        return u.reason === "completed"
          ? Effect.void
          : Effect.zipRight(newline(), write(process.stderr, `[turn ${u.turn} (attempt ${u.attempt}) ended ${u.reason}]\n`))
      case "Answered": {
        const a = u.answer
        const text = streamed.has(a.turn) ? Effect.void : write(process.stdout, a.text)
        streamed = new Set()
        return Effect.zipRight(text, Effect.zipRight(Effect.sync(() => (open = true)), newline()))
      }
      default:
        return Effect.void
    }
  }
}

/** `fleet prompt … <session> <text>`: one prompt, its updates printed as they stream. */
const promptOnce = (o: {
  readonly store: string
  readonly json: boolean
  readonly promptId: Option.Option<string>
  readonly timeout: Option.Option<number>
  readonly session: Option.Option<string>
  readonly text: Option.Option<string>
}) =>
  runCommand(
    o.json,
    Effect.gen(function*() {
      const url = yield* fleetUrl(o.store)
      const sessionId = yield* required(o.session, "fleet prompt needs <session> <text>")
      const text = yield* required(o.text, "fleet prompt needs <session> <text>")
      const timeoutMs = Option.getOrUndefined(o.timeout)
      if (timeoutMs !== undefined && timeoutMs <= 0) return yield* new UsageError({ detail: `--timeout ${timeoutMs}: use a number of milliseconds above 0` })
      const { runPrompt } = yield* Effect.promise(() => import("./FleetMain.js"))
      return yield* runPrompt({
        url,
        sessionId,
        text,
        promptId: Option.getOrUndefined(o.promptId),
        timeoutMs,
        onUpdate: o.json ? (u) => write(process.stdout, `${encodeJson(u as unknown as Json)}\n`) : humanPrinter()
      }).pipe(Effect.ensuring(drained))
    }),
    () => Effect.void
  )

/** `fleet`. */
export const fleetCommand = Command.make(
  "fleet",
  {
    role,
    store,
    json,
    listen: Options.optional(listen),
    advertise,
    model,
    lockExpiration,
    promptId,
    timeout,
    session: sessionArg,
    text: textArg
  },
  (o) => o.role === "runner" ? runner(o) : promptOnce(o)
).pipe(
  Command.withDescription(
    "a fleet of agent runners on one PostgreSQL database (docs/fleet.md): fleet runner --listen <host:port> serves sessions; " +
      "fleet prompt <session> <text> sends a prompt to whichever runner owns the session and prints the answer as it streams"
  )
)
