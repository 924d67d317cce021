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
