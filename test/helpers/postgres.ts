/**
 * PostgreSQL for the tests and the bench: a throwaway cluster (initdb into a temporary directory,
 * a server on 127.0.0.1 only, a free port, a login role and its database), run as the `postgres`
 * system user when we are root (initdb refuses root). The tests share one cluster, started by the
 * first test that asks (`serverUrl`) and stopped by the global teardown (`postgres.setup.ts`); a
 * server named by SESSION_LOG_PG_URL is used instead. Each test gets a fresh schema of its own.
 */
import { execFile, execFileSync, spawn, spawnSync } from "node:child_process"
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

/** Where the PostgreSQL server binaries are (initdb, pg_ctl, postgres), or why there are none. */
export const findBinaries = (): { readonly dir: string } | { readonly missing: string } => {
  // SESSION_LOG_PG_BIN names the directory (and only it); else Debian's layout, then the PATH
  const candidates: Array<string> = []
  const debian = "/usr/lib/postgresql"
  if (process.env.SESSION_LOG_PG_BIN) candidates.push(process.env.SESSION_LOG_PG_BIN)
  else {
    if (existsSync(debian)) {
      for (const v of readdirSync(debian).sort((a, b) => Number(b) - Number(a))) candidates.push(join(debian, v, "bin"))
    }
    const onPath = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" }).stdout.trim()
    if (onPath !== "") candidates.push(join(onPath, ".."))
  }
  const dir = candidates.find((d) => ["initdb", "pg_ctl", "postgres", "psql"].every((b) => existsSync(join(d, b))))
  if (dir === undefined) {
    return { missing: `no PostgreSQL server binaries (initdb, pg_ctl, postgres, psql) in ${candidates.join(", ") || "/usr/lib/postgresql/*/bin or the PATH"}` }
  }
  if (process.getuid?.() === 0 && spawnSync("id", ["-u", "postgres"]).status !== 0) {
    return { missing: "running as root and there is no `postgres` system user to run the server as" }
  }
  return { dir }
}

/** Whether the PostgreSQL tests can run here: a server URL, or binaries to start one with. */
export const availability = (): { readonly ok: true } | { readonly ok: false; readonly reason: string } => {
  if (process.env.SESSION_LOG_PG_URL) return { ok: true }
  const found = findBinaries()
  return "dir" in found
    ? { ok: true }
    : { ok: false, reason: `${found.missing}; install PostgreSQL or set SESSION_LOG_PG_URL=postgres://...` }
}

/** A free TCP port on 127.0.0.1. */
const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })

/** A cluster started by `startCluster`. */
export interface Cluster {
  readonly dir: string
  readonly port: number
  /** The login role's URL (not a superuser; owns its database). */
  readonly url: string
  /** The superuser's URL (for test set-up: terminating backends, inspecting catalogues). */
  readonly adminUrl: string
  /** Stop the server (`immediate` is a crash: no checkpoint, recovery on the next start). */
  readonly stop: (mode?: "fast" | "immediate") => Promise<void>
  readonly start: () => Promise<void>
  /** Stop the server if it runs and remove its directory. */
  readonly remove: () => void
}

/** The command line that runs a server binary, as `postgres` when we are root. */
const asServerUser = (bin: string, args: ReadonlyArray<string>): [string, Array<string>] =>
  process.getuid?.() === 0 ? ["runuser", ["-u", "postgres", "--", bin, ...args]] : [bin, [...args]]

/** Runs a server binary and waits for it, blocking. */
const runAs = (bin: string, args: ReadonlyArray<string>): string => {
  const [command, argv] = asServerUser(bin, args)
  return execFileSync(command, argv, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] })
}

/** Runs a server binary without blocking the event loop (connections see the server go away meanwhile). */
const runAsAsync = (bin: string, args: ReadonlyArray<string>): Promise<void> =>
  new Promise((resolve, reject) => {
    const [command, argv] = asServerUser(bin, args)
    execFile(command, argv, (error, _stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve()))
  })

/**
 * A detached shell that, should `owner` die without removing the cluster (a killed test run),
 * stops the server and removes `dir` and `alsoRemove`: nothing is left running or on disk.
 */
const watchdog = (owner: number, dir: string, pgCtl: string, stopArgs: ReadonlyArray<string>, alsoRemove: string) => {
  const [command, argv] = asServerUser(pgCtl, stopArgs)
  const script = `owner="$1"; dir="$2"; extra="$3"; shift 3
while kill -0 "$owner" 2>/dev/null && [ -d "$dir" ]; do sleep 1; done
if [ -d "$dir" ]; then "$@" >/dev/null 2>&1; rm -rf "$dir" "$extra"; fi`
  spawn("sh", ["-c", script, "watchdog", String(owner), dir, alsoRemove, command, ...argv], {
    detached: true,
    stdio: "ignore"
  }).unref()
}

/**
 * initdb a new cluster in a temporary directory and start it on 127.0.0.1 (no Unix socket), with a
 * role `session_log` owning a database `session_log`. `fsync: false` for tests (synchronous_commit
 * stays on); the bench keeps fsync on.
 */
export const startCluster = async (options: {
  readonly fsync: boolean
  readonly maxConnections?: number
  /** The process whose death removes the cluster (default: this one); see `watchdog`. */
  readonly owner?: number
  /** A directory the watchdog removes with the cluster. */
  readonly alsoRemove?: string
}): Promise<Cluster> => {
  const found = findBinaries()
  if (!("dir" in found)) throw new Error(found.missing)
  const bin = (name: string) => join(found.dir, name)
  const dir = mkdtempSync(join(tmpdir(), "session-log-pg-"))
  if (process.getuid?.() === 0) chownSync(dir, Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" })), 0)
  const data = join(dir, "data")
  const superuser = "postgres"
  runAs(bin("initdb"), ["-D", data, "-U", superuser, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"])
  const port = await freePort()
  const settings = [
    "listen_addresses=127.0.0.1",
    `port=${port}`,
    "unix_socket_directories=",
    `fsync=${options.fsync ? "on" : "off"}`,
    `full_page_writes=${options.fsync ? "on" : "off"}`,
    `max_connections=${options.maxConnections ?? 300}`
  ].map((s) => `-c ${s}`).join(" ")
  const startArgs = ["-D", data, "-l", join(dir, "server.log"), "-w", "-t", "60", "-o", settings, "start"]
  const stopArgs = (mode: string) => ["-D", data, "-m", mode, "-w", "-t", "60", "stop"]
  const running = () => existsSync(join(data, "postmaster.pid"))
  runAs(bin("pg_ctl"), startArgs)
  watchdog(options.owner ?? process.pid, dir, bin("pg_ctl"), stopArgs("immediate"), options.alsoRemove ?? dir)
  const adminUrl = `postgres://${superuser}@127.0.0.1:${port}/postgres`
  execFileSync(bin("psql"), [
    "-q",
    "-v",
    "ON_ERROR_STOP=1",
    "-d",
    adminUrl,
    "-c",
    "CREATE ROLE session_log LOGIN",
    "-c",
    "CREATE DATABASE session_log OWNER session_log"
  ])
  return {
    dir,
    port,
    url: `postgres://session_log@127.0.0.1:${port}/session_log`,
    adminUrl: `postgres://${superuser}@127.0.0.1:${port}/session_log`,
    stop: (mode = "fast") => runAsAsync(bin("pg_ctl"), stopArgs(mode)),
    start: () => runAsAsync(bin("pg_ctl"), startArgs),
    remove: () => {
      if (running()) runAs(bin("pg_ctl"), stopArgs("immediate"))
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The shared server of a test run

/**
 * The state directory of this test run, where the shared cluster is recorded (named by the global
 * set-up, made by the first test that starts the cluster), and the pid of the test run's main
 * process, whose death removes the cluster.
 */
export const STATE_ENV = "SESSION_LOG_PG_STATE"
export const OWNER_ENV = "SESSION_LOG_PG_OWNER"

export interface SharedRecord {
  readonly url: string
  readonly adminUrl: string
  readonly dir: string
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let shared: Promise<SharedRecord> | undefined

/**
 * The shared server: SESSION_LOG_PG_URL, or the cluster of this test run, started by the first
 * test file that asks (an mkdir lock keeps concurrent test files from starting two).
 */
export const sharedServer = (): Promise<SharedRecord> =>
  shared ??= (async () => {
    const external = process.env.SESSION_LOG_PG_URL
    if (external) return { url: external, adminUrl: process.env.SESSION_LOG_PG_ADMIN_URL ?? external, dir: "" }
    const state = process.env[STATE_ENV]
    if (!state) throw new Error(`${STATE_ENV} is not set: run the tests through vitest (test/postgres.setup.ts)`)
    const lock = join(state, "lock")
    const record = join(state, "cluster.json")
    mkdirSync(state, { recursive: true })
    for (;;) {
      try {
        mkdirSync(lock)
        break
      } catch {
        await sleep(50)
      }
    }
    try {
      if (existsSync(record)) return JSON.parse(readFileSync(record, "utf8")) as SharedRecord
      const cluster = await startCluster({ fsync: false, owner: Number(process.env[OWNER_ENV] ?? process.pid), alsoRemove: state })
      const rec: SharedRecord = { url: cluster.url, adminUrl: cluster.adminUrl, dir: cluster.dir }
      writeFileSync(record, JSON.stringify(rec))
      return rec
    } finally {
      rmSync(lock, { recursive: true, force: true })
    }
  })()

/** Stop and remove the shared cluster recorded in `state`, if one was started. */
export const stopShared = (state: string): void => {
  const record = join(state, "cluster.json")
  if (existsSync(record)) {
    const rec = JSON.parse(readFileSync(record, "utf8")) as SharedRecord
    const data = join(rec.dir, "data")
    const found = findBinaries()
    if ("dir" in found && existsSync(join(data, "postmaster.pid"))) {
      runAs(join(found.dir, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "-t", "60", "stop"])
    }
    rmSync(rec.dir, { recursive: true, force: true })
  }
  rmSync(state, { recursive: true, force: true })
}

// ---------------------------------------------------------------------------------------------
// Schemas and raw access

let schemas = 0

/** `url` with more server settings for its connections (the `options` startup parameter). */
export const withSettings = (url: string, settings: Record<string, string>): string => {
  const u = new URL(url)
  const more = Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`)
  const options = [u.searchParams.get("options") ?? "", ...more].filter((o) => o !== "").join(" ")
  if (options !== "") u.searchParams.set("options", options)
  return u.toString()
}

/** `url` with its connections' search_path set to `schema`. */
export const withSchema = (url: string, schema: string): string => withSettings(url, { search_path: schema })

/** Run `f` on a raw `pg` client connected to `url`. */
export const withClient = async <A>(url: string, f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** A new, empty schema in the database of `url` (owned by its role); returns the URL that uses it. */
export const createSchema = async (url: string): Promise<{ readonly url: string; readonly schema: string }> => {
  const schema = `t_${process.pid}_${++schemas}_${Math.floor(Math.random() * 1e9).toString(36)}`
  await withClient(url, (c) => c.query(`CREATE SCHEMA ${schema}`))
  return { url: withSchema(url, schema), schema }
}

/** Drop a schema made by `createSchema`, with everything in it. */
export const dropSchema = (url: string, schema: string): Promise<unknown> =>
  withClient(url, (c) => c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`))

/** Everything a schema holds, as text: its catalogue and every row of every table (for "nothing modified"). */
export const snapshot = (url: string): Promise<string> =>
  withClient(url, async (c) => {
    const tables = await c.query<{ relname: string }>(
      `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY c.relname`
    )
    const catalogue = await c.query(
      `SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
        WHERE n.nspname = current_schema() ORDER BY c.relname, a.attnum`
    )
    const rows: Array<unknown> = []
    for (const { relname } of tables.rows) {
      rows.push(relname, (await c.query(`SELECT * FROM "${relname}" ORDER BY 1`)).rows)
    }
    return JSON.stringify({ catalogue: catalogue.rows, rows })
  })
