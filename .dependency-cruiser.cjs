/**
 * The import direction of DESIGN.md §1, checked by `npm test` (`npm run lint:deps`):
 * schema ← services ← layers; programs need only services and schema; only the edge
 * (src/programs/cli/, the ACP entry point) composes layers; no cycles.
 */
module.exports = {
  forbidden: [
    {
      name: "schema-imports-nothing-of-ours",
      comment: "src/schema holds data and pure checks: it imports no other part of src",
      severity: "error",
      from: { path: "^src/schema/" },
      to: { path: "^src/(services|layers|programs)/" }
    },
    {
      name: "services-import-schema-only",
      comment: "src/services holds Tags and the pure core: it imports src/schema only",
      severity: "error",
      from: { path: "^src/services/" },
      to: { path: "^src/(layers|programs)/" }
    },
    {
      name: "layers-import-services-and-schema",
      comment: "src/layers holds implementations: they import services and schema, never programs",
      severity: "error",
      from: { path: "^src/layers/" },
      to: { path: "^src/programs/" }
    },
    {
      name: "programs-need-only-tags",
      comment: "src/programs run on any backend: they import services and schema, never layers (only the edge composes layers)",
      severity: "error",
      from: { path: "^src/programs/", pathNot: "^src/programs/(cli|acp)/" },
      to: { path: "^src/layers/" }
    },
    {
      name: "a-backend-is-reached-through-its-store-module",
      comment: "outside its folder, the JSONL store is reached only through jsonl/JsonlStore.ts, the memory store through memory/MemoryStore.ts",
      severity: "error",
      from: { pathNot: "^src/layers/(jsonl|memory)/" },
      to: { path: "^src/layers/(jsonl|memory)/", pathNot: "^src/layers/(jsonl/JsonlStore|memory/MemoryStore)\\.ts$" }
    },
    {
      name: "the-sql-store-is-reached-through-its-store-modules",
      comment: "outside src/layers/sql/, the SQL stores are reached only through SqlStore.ts, sqlite/SqliteStore.ts and postgres/PostgresStore.ts",
      severity: "error",
      from: { pathNot: "^src/layers/sql/" },
      to: { path: "^src/layers/sql/", pathNot: "^src/layers/sql/(SqlStore|sqlite/SqliteStore|postgres/PostgresStore)\\.ts$" }
    },
    {
      name: "no-arrow-between-backends",
      comment: "each backend stands alone: JSONL, memory and SQL import none of each other; SQLite and PostgreSQL are dialects of the shared SQL store and import none of each other",
      severity: "error",
      from: { path: "^src/layers/(jsonl|memory|sql)/" },
      to: { path: "^src/layers/(jsonl|memory|sql)/", pathNot: "^src/layers/$1/" }
    },
    {
      name: "no-arrow-between-dialects",
      comment: "the SQLite and PostgreSQL dialects share the SQL store, not each other",
      severity: "error",
      from: { path: "^src/layers/sql/(sqlite|postgres)/" },
      to: { path: "^src/layers/sql/(sqlite|postgres)/", pathNot: "^src/layers/sql/$1/" }
    },
    {
      name: "no-cycles",
      comment: "no module of src reaches itself through its imports",
      severity: "error",
      from: { path: "^src/" },
      to: { circular: true }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js"] }
  }
}
