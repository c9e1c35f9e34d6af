import * as TestControl from "../src/TestControl.js"
import { facadeAdmission } from "./fixtures/facadeAdmission.js"
import { flows } from "./fixtures/facadeFlows.js"

facadeAdmission("memory", () => TestControl.layer({ flows }))
