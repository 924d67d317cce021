/**
 * The cluster under a fleet (docs/fleet.md): `Sharding` for a runner (socket transport from
 * `@effect/platform-node`, ping health checks) or for a client only, with the runner registry,
 * the shard locks and the persisted messages in PostgreSQL (in a schema of their own, `session_log_fleet`,
 * beside the store's tables), on a connection pool of its own. Register the `Fleet` entity's
 * behaviour on it (`Fleet.layer`) to serve sessions.
 *
 * @since 0.2.0
 */
import * as MessageStorage from "@effect/cluster/MessageStorage"
import * as RunnerAddress from "@effect/cluster/RunnerAddress"
import * as RunnerHealth from "@effect/cluster/RunnerHealth"
import * as Runners from "@effect/cluster/Runners"
import type * as RunnerStorage from "@effect/cluster/RunnerStorage"
import type { Sharding } from "@effect/cluster/Sharding"
import * as ShardingConfig from "@effect/cluster/ShardingConfig"
import * as SocketRunner from "@effect/cluster/SocketRunner"
import * as SqlMessageStorage from "@effect/cluster/SqlMessageStorage"
import * as SqlRunnerStorage from "@effect/cluster/SqlRunnerStorage"
import * as NodeClusterSocket from "@effect/platform-node/NodeClusterSocket"
import * as RpcSerialization from "@effect/rpc/RpcSerialization"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import { StoreFailure } from "../../schema/Errors.js"

/**
 * A host and port.
 *
 * @since 0.2.0
 * @category models
 */
export interface Address {
  readonly host: string
  readonly port: number
}

/**
 * Options of a runner or a client (one interface for both layers).
 *
 * @since 0.2.0
 * @category models
 */
export interface FleetRunnerOptions {
  /** The PostgreSQL database of the fleet (`postgres://…`): runners, shard locks, messages. */
  readonly url: string | Redacted.Redacted<string>
  /** Where the runner listens (runners only). */
  readonly listen?: Address
  /** The address other runners reach it at (default: `listen`). */
  readonly advertise?: Address
  /** Connections of the cluster's pool (default 5). */
  readonly maxConnections?: number
  /** Shards (default 300); every runner and client of a fleet must agree. */
  readonly shards?: number
  /**
   * How long a runner's shard locks outlive its last refresh (default 10,000 ms), and a third of
   * it is the health check's ping timeout: a runner that stops answering four pings (half a
   * second apart) is reported unhealthy, its shards move to the live runners, which take each
   * shard once its lock expired.
   */
  readonly lockExpirationMs?: number
  /** How often a runner refreshes its locks and re-reads the runners (default 1,000 ms). */
  readonly refreshMs?: number
  /** The PostgreSQL schema of the cluster's tables (default `session_log_fleet`), created when missing. */
  readonly schema?: string
}

/** The ShardingConfig of `options`. */
const shardingConfig = (options: FleetRunnerOptions, runner: boolean): Partial<ShardingConfig.ShardingConfig["Type"]> => {
  const listen = options.listen
  const advertise = options.advertise ?? listen
  const refresh = Duration.millis(options.refreshMs ?? 1_000)
  return {
    runnerAddress: runner && advertise !== undefined ? Option.some(RunnerAddress.make(advertise.host, advertise.port)) : Option.none(),
    runnerListenAddress: runner && listen !== undefined ? Option.some(RunnerAddress.make(listen.host, listen.port)) : Option.none(),
    shardsPerGroup: options.shards ?? 300,
    shardLockRefreshInterval: refresh,
    shardLockExpiration: Duration.millis(options.lockExpirationMs ?? 10_000),
    // lock rows that expire, not PostgreSQL advisory locks: an advisory lock lives as long as its
    // connection, and a paused runner's connections stay open, so its shards would never move
    shardLockDisableAdvisory: true,
    refreshAssignmentsInterval: refresh,
    runnerHealthCheckInterval: refresh,
    entityMessagePollInterval: Duration.millis(500),
    entityReplyPollInterval: Duration.millis(50),
    sendRetryInterval: Duration.millis(50),
    entityTerminationTimeout: Duration.seconds(5)
  }
}

/** `url` with its connections' search_path set to `schema` (the `options` startup parameter). */
const inSchema = (url: string, schema: string): string => {
  const u = new URL(url)
  const options = [u.searchParams.get("options") ?? "", `-c search_path=${schema}`].filter((o) => o !== "").join(" ")
  u.searchParams.set("options", options)
  return u.toString()
}

/**
 * The cluster's storage: runners and shard locks, and persisted messages, in PostgreSQL, in a
 * schema of their own (the store refuses a schema holding tables that are not its own, S10).
 */
const storage = (options: FleetRunnerOptions) => {
  const schema = options.schema ?? "session_log_fleet"
  const url = typeof options.url === "string" ? options.url : Redacted.value(options.url)
  const pg = PgClient.layer({
    url: Redacted.make(inSchema(url, schema)),
    maxConnections: options.maxConnections ?? 5,
    applicationName: "session-log fleet"
  })
  // several runners may start at once: a lost race to create the schema is no failure (the
  // migrations that follow fail loudly if it really is missing)
  const withSchema = Layer.effect(
    SqlClient.SqlClient,
    Effect.tap(SqlClient.SqlClient, (sql) => Effect.ignore(sql`CREATE SCHEMA IF NOT EXISTS ${sql(schema)}`))
  ).pipe(Layer.provide(pg))
  const prefix = "cluster"
  // runners (and clients) that start together on a new database run the cluster's migrations at
  // once, and PostgreSQL refuses one of two concurrent `CREATE TABLE IF NOT EXISTS` ("relation …
  // already exists"): the loser builds its storage again (the tables are there by then); a
  // failure that persists (a wrong URL, no permission) still fails after a few tries
  return Layer.merge(SqlMessageStorage.layerWith({ prefix }), SqlRunnerStorage.layerWith({ prefix })).pipe(
    Layer.provide(withSchema),
    Layer.retry(Schedule.intersect(Schedule.recurs(4), Schedule.spaced(250)))
  )
}

/**
 * Runner health by ping, with a timeout scaled to the lock expiration (a third of it; the
 * cluster's own `layerPing` waits 10 s per ping, so a paused runner, whose socket still accepts
 * connections, would keep its sessions for a minute): four pings, half a second apart, must all
 * fail before a runner is reported unhealthy and its shards move.
 */
const layerHealth = (options: FleetRunnerOptions) =>
  Layer.effect(
    RunnerHealth.RunnerHealth,
    Effect.map(Runners.Runners, (runners) =>
      RunnerHealth.RunnerHealth.of({
        isAlive: (address) =>
          runners.ping(address).pipe(
            Effect.timeout(Math.max(500, Math.floor((options.lockExpirationMs ?? 10_000) / 3))),
            Effect.retry({ times: 3, schedule: Schedule.spaced(500) }),
            Effect.isSuccess
          )
      }))
  )

const failure = (method: string) => (cause: unknown) => new StoreFailure({ method, cause })

/**
 * `Sharding` for a runner: listens on `options.listen`, takes its share of the shards, serves the
 * entities registered on it and checks the other runners' health (a runner that does not answer
 * a ping is marked unhealthy, and its shards move when its locks expire).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerRunner = (
  options: FleetRunnerOptions
): Layer.Layer<Sharding | Runners.Runners | MessageStorage.MessageStorage, StoreFailure> => {
  const config = ShardingConfig.layer(shardingConfig(options, true))
  const store = storage(options).pipe(Layer.provide(config))
  const health = layerHealth(options).pipe(
    Layer.provide(Runners.layerRpc),
    Layer.provide(NodeClusterSocket.layerClientProtocol)
  )
  return SocketRunner.layer.pipe(
    Layer.provide([NodeClusterSocket.layerSocketServer, NodeClusterSocket.layerClientProtocol]),
    Layer.provide(health),
    Layer.provideMerge(store),
    Layer.provide(config),
    Layer.provide(RpcSerialization.layerMsgPack),
    Layer.mapError(failure("fleet runner"))
  ) as Layer.Layer<Sharding | Runners.Runners | MessageStorage.MessageStorage | RunnerStorage.RunnerStorage, StoreFailure>
}

/**
 * `Sharding` for a client only: sends to whichever runner owns a session, through the same
 * database (it owns no shards and serves nothing).
 *
 * @since 0.2.0
 * @category layers
 */
export const layerClient = (
  options: FleetRunnerOptions
): Layer.Layer<Sharding | Runners.Runners | MessageStorage.MessageStorage, StoreFailure> => {
  const config = ShardingConfig.layer(shardingConfig(options, false))
  const store = storage(options).pipe(Layer.provide(config))
  return SocketRunner.layerClientOnly.pipe(
    Layer.provide(NodeClusterSocket.layerClientProtocol),
    Layer.provideMerge(store),
    Layer.provide(config),
    Layer.provide(RpcSerialization.layerMsgPack),
    Layer.mapError(failure("fleet client"))
  ) as Layer.Layer<Sharding | Runners.Runners | MessageStorage.MessageStorage | RunnerStorage.RunnerStorage, StoreFailure>
}
