/**
 * The stdio transport of the ACP agent (docs/acp.md §1.5): NDJSON frames on the process's stdin and
 * stdout — stdout carries protocol frames only, so everything else must log to stderr. Runs until
 * the client closes the connection (stdin ends), then the agent's scope tears everything down.
 */
import * as acp from "@agentclientprotocol/sdk"
import type * as Tool from "@effect/ai/Tool"
import * as Effect from "effect/Effect"
import { Readable, Writable } from "node:stream"
import { type AcpAgentOptions, type AcpRequirements, makeAgentApp } from "./AcpAgent.js"

/** Serve the agent on stdin/stdout until the client disconnects. */
export const serveStdio = <Tools extends Record<string, Tool.Any>>(
  options: AcpAgentOptions<Tools>
): Effect.Effect<void, never, AcpRequirements<Tools>> =>
  Effect.scoped(Effect.gen(function*() {
    const app = yield* makeAgentApp(options)
    const stream = acp.ndJsonStream(
      Writable.toWeb(process.stdout) as WritableStream<Uint8Array>,
      Readable.toWeb(process.stdin) as unknown as ReadableStream<Uint8Array>
    )
    const connection = app.connect(stream)
    const closed = connection.closed.then(() => undefined, () => undefined) // handled from the start
    yield* Effect.addFinalizer(() => Effect.sync(() => connection.close()))
    yield* Effect.promise(() => closed)
  }).pipe(Effect.withSpan("Acp.serveStdio")))
