/**
 * `pnpm bench -- journal` (issue 3): durable appends per second versus a raw
 * single-row INSERT transaction on the same driver (ratio), and lossy events
 * per second with peak memory. The measurement lives in the journal package so
 * that it resolves that package's dependencies; see
 * packages/journal/test/fixtures/bench-journal.ts.
 */
import "../../packages/journal/test/fixtures/bench-journal.js"
