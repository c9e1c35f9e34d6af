/**
 * `pnpm start -- [dir] [options]`: the main job, a durable directory indexer
 * (packages/node/src/example). `pnpm start -- --help` lists the options.
 */
import { main } from "../packages/node/src/example/coordinator.js"

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`start: unexpected failure: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
