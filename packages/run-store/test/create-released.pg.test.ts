import * as TestDatabase from "@baton/database/TestDatabase"
import { describe } from "@effect/vitest"
import { createReleasedSuite } from "./suites/create-released.js"
import { postgresStack } from "./support/stack.js"

const url = TestDatabase.postgresTestUrl("run-store createReleased")

describe.skipIf(url === undefined)("createReleased (PostgreSQL)", () => createReleasedSuite(postgresStack(url!)))
