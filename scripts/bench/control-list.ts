/**
 * `pnpm bench control-list`: one `Control.list` page of 50 runs at 1,000,000 runs, side by side with the
 * same keyset SELECT through the raw driver (better-sqlite3, node-postgres). The database is seeded in
 * bulk with control runs (flows_runs + control_runs, valid summaries; four in five completed, one in five
 * live and owned), then, for the first page and a deep page (90 %), each iteration times one facade page
 * and one raw SELECT in turn; medians in ms, and the facade's statements per page. The measurement is
 * `control-list/listPage.ts`, which the queue bench runs too.
 *
 * SQLite file always; PostgreSQL when BATON_TEST_PG_URL is set (a fresh schema, dropped afterwards).
 * Usage: `pnpm bench control-list [-- --json] [-- --explain]` (env BATON_BENCH_LIST_RUNS, default
 * 1000000; BATON_BENCH_LIST_ITERATIONS, default 300). `--explain` prints the plan of each page's
 * statements. `--json` ends with one line
 * `{"listPageMs":{"sqlite":x,"pg":x},"listRawMs":{"sqlite":x,"pg":x}}`: medians over the samples of both
 * pages (`pg` is null when skipped).
 */
import { Effect } from "effect"
import * as os from "node:os"
import * as ListPage from "./control-list/listPage.js"

const runs = Number(process.env["BATON_BENCH_LIST_RUNS"] ?? "1000000")
const iterations = Number(process.env["BATON_BENCH_LIST_ITERATIONS"] ?? "300")
const json = process.argv.includes("--json")
const explain = process.argv.includes("--explain")

const main = Effect.gen(function*() {
  process.stdout.write(
    `Control.list page of 50 vs the same keyset SELECT through the raw driver (load average ${
      os.loadavg().map((l) => l.toFixed(1)).join(" ")
    } on ${os.cpus().length} cores):\n`
  )
  const url = process.env["BATON_TEST_PG_URL"]
  const pgUrl = url === undefined || url === "" ? undefined : url
  const figures = yield* ListPage.both({ runs, iterations, explain }, { sqlite: true, pgUrl })
  if (pgUrl === undefined) process.stdout.write("\n  PostgreSQL skipped (BATON_TEST_PG_URL is unset)\n")
  if (json) process.stdout.write(`${JSON.stringify(figures)}\n`)
})

Effect.runPromise(main).then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${String(error)}\n`)
    process.exit(1)
  }
)
