import * as TestDatabase from "@baton/database/TestDatabase"
import { facadeAdmission } from "./fixtures/facadeAdmission.js"
import { flows } from "./fixtures/facadeFlows.js"
import { sqlControl } from "./fixtures/facadeLayers.js"

facadeAdmission("SqlControlRuntime on SQLite", () => sqlControl(TestDatabase.layer, { flows }))
