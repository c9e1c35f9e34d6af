import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { defineWorkspace } from "vitest/config"

const root = path.dirname(fileURLToPath(import.meta.url))
const packages = ["database", "journal", "run-store", "control", "node"] as const

// Tests import sibling packages by their public names; resolve them to sources so
// a test run never depends on a prior build.
const alias = packages.flatMap((name) => [
  { find: new RegExp(`^@baton/${name}$`), replacement: path.join(root, "packages", name, "src", "index.ts") },
  { find: new RegExp(`^@baton/${name}/(.*)$`), replacement: path.join(root, "packages", name, "src", "$1.ts") }
])

export default defineWorkspace(packages.map((name) => ({
  resolve: { alias },
  test: {
    name,
    root: path.join(root, "packages", name),
    include: ["test/**/*.test.ts"],
    testTimeout: 240_000,
    hookTimeout: 120_000
  }
})))
