/**
 * Duplicate `create` on PostgreSQL (see suites/duplicate-create.ts).
 */
import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { duplicateCreateSuite } from "./suites/duplicate-create.js"
import { postgresStack } from "./support/stack.js"

const url = TestDatabase.postgresTestUrl("run-store errors")

describe.skipIf(url === undefined)("duplicate create (PostgreSQL)", () => duplicateCreateSuite(postgresStack(url ?? "")))
