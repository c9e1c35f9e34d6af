import { describe } from "@effect/vitest"
import { createReleasedSuite } from "./suites/create-released.js"
import { sqliteStack } from "./support/stack.js"

describe("createReleased (SQLite)", () => createReleasedSuite(sqliteStack))
