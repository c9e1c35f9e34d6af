/** Host presence rows on PostgreSQL: live by the lease stale cutoff, refreshed, pruned, removed, read-only read. */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { hostPresenceSuite } from "./fixtures/hostPresence.js"

const url = TestDatabase.postgresTestUrl("control host presence")

describe.skipIf(url === undefined)("HostPresence on PostgreSQL", () => {
  hostPresenceSuite(() => TestDatabase.layerPostgres(url!))
})
