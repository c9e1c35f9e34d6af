// The flow catalog `pnpm baton` loads in this repository (BATON_CONFIG, set by the root script) (node.md 6.1, 7.1): the example's flow
// `index-dir` and its migration set, so `pnpm baton plan index-dir --input '{"root":"."}'` works here.
// `pnpm baton` runs under tsx, which loads the TypeScript sources imported below; the built bin
// (plain node) cannot, and then runs without a catalog.
const IndexDir = await import("../packages/node/src/example/IndexDir.ts").catch(() => undefined)

export const flows = IndexDir === undefined ? [] : [IndexDir.flow]
export const migrations = IndexDir === undefined ? [] : [IndexDir.migrations]
