import * as TestDatabase from "@baton/database/TestDatabase"
import { lifecycleSuite } from "./fixtures/facadeLifecycle.js"

lifecycleSuite("SQLite", () => TestDatabase.layer)
