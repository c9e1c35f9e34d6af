/**
 * `pnpm bench control`: control-plane benchmarks. The listing part (queryRuns page latency at 10k, 100k
 * and 1M runs on SQLite and PostgreSQL) lives beside the package's tests so it resolves the package's
 * dependencies.
 */
await import("../../packages/control/test/fixtures/runtimeBench.js")
