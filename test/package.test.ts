/**
 * The published shape of the package: one `exports` subpath per namespace of src/index.ts, each
 * pointing at that module's built JavaScript and declarations, and a README install line that
 * names every peer dependency with its range. (scripts/consumer-check.mjs checks the packed
 * tarball itself; this test only reads files, so it stays fast.)
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readFileSync } from "node:fs"
import * as path from "node:path"

const root = path.resolve(__dirname, "..")
const read = (file: string) => readFileSync(path.join(root, file), "utf8")

interface Target {
  readonly types: string
  readonly import: string
  readonly default: string
}

const pkg = JSON.parse(read("package.json")) as {
  readonly types: string
  readonly engines: { readonly node: string }
  readonly files: ReadonlyArray<string>
  readonly repository?: unknown
  readonly homepage?: string
  readonly bugs?: unknown
  readonly keywords?: ReadonlyArray<string>
  readonly dependencies: Record<string, string>
  readonly exports: Record<string, Target | string>
  readonly peerDependencies: Record<string, string>
}

/** `export * as Name from "./dir/Module.js"` lines of src/index.ts: Name -> "dir/Module". */
const namespaces = (): Map<string, string> => {
  const found = new Map<string, string>()
  for (const [, name, module] of read("src/index.ts").matchAll(/^export \* as (\w+) from "\.\/(.+)\.js"$/gm)) {
    found.set(name!, module!)
  }
  return found
}

/** Entry points outside the root on purpose (their dependencies are optional peers): Name -> "dir/Module". */
const SEPARATE: ReadonlyMap<string, string> = new Map([
  ["Acp", "programs/acp/Acp"],
  // the fleet needs @effect/cluster, @effect/rpc and @effect/sql-pg
  ["Fleet", "programs/fleet/Fleet"],
  ["FleetRunner", "layers/fleet/FleetRunner"]
])

describe("package.json exports", () => {
  it("has one subpath per namespace of src/index.ts and per separate entry point, plus the root and ./package.json", () => {
    const names = [...namespaces().keys(), ...SEPARATE.keys()]
    const expected = [".", "./package.json", ...names.map((name) => `./${name}`)].sort()
    assert.deepStrictEqual(Object.keys(pkg.exports).sort(), expected)
  })

  it("keeps separate entry points out of the root: src/index.ts imports none of them", () => {
    const index = read("src/index.ts")
    for (const module of SEPARATE.values()) {
      assert.isTrue(existsSync(path.join(root, "src", `${module}.ts`)), `src/${module}.ts`)
      assert.notInclude(index, path.dirname(module) === "programs" ? module : path.dirname(module))
    }
  })

  it("points each subpath at the built module of the namespace's source file", () => {
    const modules = new Map([...namespaces(), ...SEPARATE])
    assert.isAbove(modules.size, 0)
    for (const [name, module] of modules) {
      assert.isTrue(existsSync(path.join(root, "src", `${module}.ts`)), `src/${module}.ts`)
      assert.deepStrictEqual(pkg.exports[`./${name}`], {
        types: `./dist/${module}.d.ts`,
        import: `./dist/${module}.js`,
        default: `./dist/${module}.js`
      }, name)
    }
    assert.deepStrictEqual(pkg.exports["."], { types: "./dist/index.d.ts", import: "./dist/index.js", default: "./dist/index.js" })
    assert.strictEqual(pkg.exports["./package.json"], "./package.json")
    assert.strictEqual(pkg.types, "./dist/index.d.ts")
  })

  it("README's install line names every peer dependency with its range", () => {
    const line = read("README.md").match(/^npm install effect-session-log .*$/m)?.[0]
    assert.isDefined(line)
    const specs = line!.split(/\s+/).slice(3).sort()
    assert.deepStrictEqual(specs, Object.entries(pkg.peerDependencies).map(([name, range]) => `${name}@${range}`).sort())
  })
})

describe("package.json metadata (issue 26)", () => {
  it("names its repository, homepage, issue tracker and keywords", () => {
    assert.isDefined(pkg.repository)
    assert.match(pkg.homepage ?? "", /^https:\/\//)
    assert.isDefined(pkg.bugs)
    assert.isAbove(pkg.keywords?.length ?? 0, 3)
  })

  it("declares the Node floor the code needs: zlib.crc32 (compressed JSONL) is in Node 20.15", () => {
    assert.isTrue(read("src/layers/jsonl/Compression.ts").includes("Zlib.crc32"))
    assert.strictEqual(pkg.engines.node, ">=20.15.0")
  })

  it("ships the sources its source and declaration maps point at, and its changelog and docs", () => {
    const build = read("tsconfig.build.json")
    assert.match(build, /"declarationMap": true/)
    assert.include(pkg.files, "src/")
    assert.include(pkg.files, "CHANGELOG.md")
    assert.isTrue(existsSync(path.join(root, "CHANGELOG.md")))
  })

  it("depends on no package that compiles on install but better-sqlite3 (the JSONL lock ships prebuilt binaries)", () => {
    assert.deepStrictEqual(Object.keys(pkg.dependencies).sort(), ["better-sqlite3", "fs-native-extensions"])
    const lock = JSON.parse(read("package-lock.json")) as { packages: Record<string, { hasInstallScript?: boolean }> }
    assert.isUndefined(lock.packages["node_modules/fs-native-extensions"]?.hasInstallScript)
    assert.isUndefined(lock.packages["node_modules/fs-ext"])
  })
})
