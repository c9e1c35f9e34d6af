#!/usr/bin/env node
/**
 * The `baton` executable: runs {@link Cli.run} over `process.argv` and exits with its code.
 *
 * @since 0.1.0
 */
import * as PlatformRuntime from "@effect/platform-node/NodeRuntime"
import * as Exit from "effect/Exit"
import * as Cli from "./Cli.js"

// A reader that went away (`baton journal run-1 | head -1`) ends the CLI quietly with 0, as `head` users
// expect of Unix tools; any other stream error is still a crash.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0)
    throw error
  })
}

PlatformRuntime.runMain(Cli.run(process.argv), {
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? (exit.value as number) : 0)
})
