import * as TestControl from "../src/TestControl.js"
import { facadeContract } from "./fixtures/facadeContract.js"
import { flows } from "./fixtures/facadeFlows.js"

facadeContract("memory", () => TestControl.layer({ flows }))
