/** Host presence rows on SQLite: live by the lease stale cutoff, refreshed, pruned, removed, read-only read. */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { hostPresenceSuite } from "./fixtures/hostPresence.js"

describe("HostPresence on SQLite", () => {
  hostPresenceSuite(() => TestDatabase.layer)
})
