import { freshLayer, runtimeContract } from "./fixtures/runtimeContract.js"
import { memoryRuntime, sqliteRuntime } from "./fixtures/runtimeSupport.js"

runtimeContract("memory", freshLayer(() => memoryRuntime({ principal: { id: "local", kind: "operator" } })))
runtimeContract("sqlite", freshLayer(() => sqliteRuntime()))
