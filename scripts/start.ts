/**
 * `pnpm start -- [dir] [options]`: the main job, a durable directory indexer
 * (packages/node/src/example). `pnpm start -- --help` lists the options.
 */
import { main } from "../packages/node/src/example/coordinator.js"

// `pnpm start | head`: a reader that went away must not end the job with an EPIPE trace; the run goes on
// and later lines are dropped.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error
  })
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`start: unexpected failure: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
