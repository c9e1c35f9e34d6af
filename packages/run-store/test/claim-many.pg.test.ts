import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { claimManySuite } from "./suites/claim-many.js"
import { postgresStack } from "./support/stack.js"

const url = TestDatabase.postgresTestUrl("run-store claimAndOwnMany")

describe.skipIf(url === undefined)("claimAndOwnMany (PostgreSQL)", () => claimManySuite(postgresStack(url!)))
