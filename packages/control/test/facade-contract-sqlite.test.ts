import * as TestDatabase from "@baton/database/TestDatabase"
import { facadeContract } from "./fixtures/facadeContract.js"
import { flows } from "./fixtures/facadeFlows.js"
import { sqlControl } from "./fixtures/facadeLayers.js"

facadeContract("SqlControlRuntime on SQLite", () => sqlControl(TestDatabase.layer, { flows }))
