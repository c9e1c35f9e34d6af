#!/usr/bin/env node
/**
 * The `baton` executable: runs {@link Cli.run} over `process.argv` and exits with its code.
 *
 * @since 0.1.0
 */
import * as PlatformRuntime from "@effect/platform-node/NodeRuntime"
import * as Exit from "effect/Exit"
import * as Cli from "./Cli.js"

PlatformRuntime.runMain(Cli.run(process.argv), {
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? (exit.value as number) : 0)
})
