/**
 * A separate OS process for the interrupted-migration test (docs/formats.md "SQL schema version 2"): opens
 * the SQLite store at argv[2] for writing, which migrates a version-1 database in one write
 * transaction, and prints `opened` once the open completed. The parent SIGKILLs it mid-migration.
 * Usage: npx tsx test/sqlite/child-migrate.ts <file>
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import { makeSqliteStore } from "../../src/layers/sql/sqlite/SqliteStore.js"

const [filename] = process.argv.slice(2)

NodeRuntime.runMain(Effect.scoped(Effect.zipRight(makeSqliteStore({ filename }), Console.log("opened"))))
