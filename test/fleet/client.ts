/**
 * A fleet client process of the tests (bundled by test/fleet/helpers.ts): `node client.cjs <url>
 * <plan.json>` sends each session's prompts in order, every session at once, through a
 * client-only `Sharding` (`FleetRunner.layerClient`), and prints one JSON line per answer:
 * `{ session, promptId, answer }` or `{ session, promptId, error }`.
 */
import * as Effect from "effect/Effect"
import { readFileSync } from "node:fs"
import { layerClient } from "../../src/layers/fleet/FleetRunner.js"
import * as Fleet from "../../src/programs/fleet/Fleet.js"

const [url, planFile] = process.argv.slice(2)
const plan = JSON.parse(readFileSync(planFile!, "utf8")) as ReadonlyArray<{
  readonly session: string
  readonly prompts: ReadonlyArray<{ readonly promptId: string; readonly text: string }>
}>

const program = Effect.gen(function*() {
  const client = yield* Fleet.client
  yield* Effect.forEach(plan, ({ session, prompts }) =>
    Effect.forEach(prompts, ({ promptId, text }) =>
      client(session).prompt(new Fleet.PromptRequest({ promptId, text })).pipe(
        Effect.match({
          onSuccess: (answer) => ({ session, promptId, answer }),
          onFailure: (error) => ({ session, promptId, error: String(error) })
        }),
        Effect.tap((line) => Effect.sync(() => process.stdout.write(`${JSON.stringify(line)}\n`)))
      )), { concurrency: "unbounded", discard: true })
}).pipe(Effect.scoped, Effect.provide(layerClient({ url: url! })))

Effect.runPromise(program).then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(`${String(e)}\n`)
    process.exit(1)
  }
)
