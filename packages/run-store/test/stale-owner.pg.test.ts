import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { freshSchema } from "./support/pgSchema.js"
import { staleOwnerSuite } from "./suites/stale-owner.js"

const url = TestDatabase.postgresTestUrl("run-store stale owner")

describe.skipIf(url === undefined)("stale owner fenced out (PostgreSQL, real time)", () =>
  staleOwnerSuite(() => freshSchema(url!)))
