/**
 * Helpers of the fleet tests: a fresh database of the shared PostgreSQL server per test file (the
 * cluster's tables and the store's live in it: two files never share a fleet), runner processes
 * of the CLI bundle (`session-log fleet runner`), started, awaited until they serve, killed,
 * stopped and resumed; and `fleet prompt` clients.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { bundleScript, childEnv } from "../helpers/processes.js"
import { sharedServer, withClient } from "../helpers/postgres.js"
import { BIN } from "../cli/helpers.js"

let databases = 0

/** A new database owned by the login role; its URL. */
export const freshDatabase = async (): Promise<string> => {
  const { url, adminUrl } = await sharedServer()
  const name = `fleet_${process.pid}_${++databases}_${Math.floor(Math.random() * 1e9).toString(36)}`
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name} OWNER session_log`))
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}

/** A free TCP port on 127.0.0.1. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })

const env = (bundle: string) => ({ ...process.env, NO_COLOR: "1", SESSION_LOG_BUNDLE: bundle })

/** A runner process. */
export interface Runner {
  readonly address: string
  readonly child: ChildProcess
  /** Resolves once it serves ("runner <address> ready" on stderr). */
  readonly ready: Promise<void>
  readonly exited: Promise<number | null>
  stderr: string
}

/** Start `session-log fleet runner` on a free port. */
export const startRunner = async (bundle: string, url: string, lockExpirationMs = 3_000): Promise<Runner> => {
  const port = await freePort()
  const address = `127.0.0.1:${port}`
  const child = spawn(
    process.execPath,
    [BIN, "fleet", "runner", "--store", url, "--listen", address, "--lock-expiration", String(lockExpirationMs)],
    { env: env(bundle), stdio: ["ignore", "ignore", "pipe"] }
  )
  let onReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (onReady = resolve))
  const runner: Runner = {
    address,
    child,
    ready,
    exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))),
    stderr: ""
  }
  child.stderr!.setEncoding("utf8").on("data", (text: string) => {
    runner.stderr += text
    if (runner.stderr.includes(`runner ${address} ready`)) onReady()
  })
  // a runner that dies before it is ready must not hang the test
  void runner.exited.then(() => onReady())
  return runner
}

/** Stop a runner (SIGTERM, then SIGKILL if it does not end) and wait for its exit. */
export const stopRunner = async (runner: Runner): Promise<void> => {
  if (runner.child.exitCode !== null || runner.child.signalCode !== null) return
  runner.child.kill("SIGCONT")
  runner.child.kill("SIGTERM")
  const timer = setTimeout(() => runner.child.kill("SIGKILL"), 10_000)
  await runner.exited
  clearTimeout(timer)
}

/** What `fleet prompt --json` printed: its updates, one per line, and its answer (or its failure). */
export interface Answer {
  readonly code: number | null
  /** The answer (the last line's, `Answered`), else the error document or what stdout held. */
  readonly answer: any
  /** Every line but an error document: the updates, `Answered` last. */
  readonly updates: Array<any>
  readonly stderr: string
}

/** The lines of `fleet prompt --json` output, parsed. */
export const parseUpdates = (stdout: string): { answer: any; updates: Array<any> } => {
  try {
    const lines = stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
    const last = lines[lines.length - 1]
    if (last?._tag === "Answered") return { answer: last.answer, updates: lines }
    if (last?.ok === false) return { answer: last, updates: lines.slice(0, -1) }
    return { answer: stdout, updates: lines }
  } catch {
    return { answer: stdout, updates: [] }
  }
}

/** `session-log fleet prompt --json --store <url> --prompt-id <id> [...extra] <session> <text>`. */
export const prompt = (
  bundle: string,
  url: string,
  session: string,
  text: string,
  promptId: string,
  extra: ReadonlyArray<string> = []
): Promise<Answer> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, "fleet", "prompt", "--json", "--store", url, "--prompt-id", promptId, ...extra, session, text],
      { encoding: "utf8", env: env(bundle) },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
        resolve({ code, ...parseUpdates(stdout), stderr })
      }
    )
  })

/** Run `session-log <args>` (a reading command on the store); its exit code and stdout. */
export const cli = (bundle: string, args: ReadonlyArray<string>): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { encoding: "utf8", env: env(bundle), maxBuffer: 1 << 26 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : null, stdout, stderr })
    })
  })

/** The stored events of a session, read with `session-log show --json` (nothing written). */
export const eventsOf = async (bundle: string, url: string, session: string): Promise<Array<{ seq: number; type: string; data: any }>> => {
  const r = await cli(bundle, ["show", "--json", "--store", url, "--session", session])
  return r.code === 0 ? JSON.parse(r.stdout) : []
}

/** One client process's plan: each session's prompts, sent in order. */
export type Plan = ReadonlyArray<{ readonly session: string; readonly prompts: ReadonlyArray<{ readonly promptId: string; readonly text: string }> }>

let clientScript: string | undefined

/** Run a client process (test/fleet/client.ts, bundled once) over `plan`; its answers by prompt id. */
export const runClient = async (url: string, plan: Plan): Promise<Map<string, Array<any>>> => {
  const dir = mkdtempSync(join(tmpdir(), "fleet-client-"))
  clientScript ??= bundleScript("test/fleet/client.ts", join(mkdtempSync(join(tmpdir(), "fleet-client-bundle-")), "client.cjs"))
  const planFile = join(dir, "plan.json")
  writeFileSync(planFile, JSON.stringify(plan))
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(process.execPath, [clientScript!, url, planFile], { encoding: "utf8", env: childEnv(), maxBuffer: 1 << 26 }, (error, out, err) =>
      error === null ? resolve(out) : reject(new Error(`client failed: ${err}`)))
  )
  rmSync(dir, { recursive: true, force: true })
  const answers = new Map<string, Array<any>>()
  for (const line of stdout.split("\n").filter((l) => l !== "")) {
    const parsed = JSON.parse(line)
    const key = `${parsed.session}/${parsed.promptId}`
    answers.set(key, [...(answers.get(key) ?? []), parsed.answer ?? parsed])
  }
  return answers
}
