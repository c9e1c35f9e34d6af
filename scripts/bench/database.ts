/**
 * `pnpm bench -- database` (issue 2): one-statement write transactions per second
 * through `DurableWriter` vs the same statement raw through better-sqlite3 and
 * node-postgres, as ratios. The measurement lives in the database package (so it
 * resolves that package's drivers); see packages/database/test/fixtures/bench-writes.ts.
 */
import "../../packages/database/test/fixtures/bench-writes.js"
