import { runtimeContract } from "./fixtures/runtimeContract.js"
import { memoryRuntime, sqliteRuntime } from "./fixtures/runtimeSupport.js"

runtimeContract("memory", () => memoryRuntime({ principal: { id: "local", kind: "operator" } }))
runtimeContract("sqlite", () => sqliteRuntime())
