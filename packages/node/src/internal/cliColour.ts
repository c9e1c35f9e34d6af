/**
 * Colour only on a terminal: @effect/cli renders help and usage errors with ANSI styles whatever the
 * stream is, so the CLI's console drops escape sequences from what goes to a pipe, a file, or any
 * stream when `NO_COLOR` is set (no-color.org: any non-empty value).
 */
import * as Console from "effect/Console"

/** Whether a stream may carry colour: it is a TTY and `NO_COLOR` is unset or empty. */
export const colourAllowed = (stream: { readonly isTTY?: boolean | undefined }, env: NodeJS.ProcessEnv = process.env): boolean =>
  stream.isTTY === true && (env["NO_COLOR"] ?? "") === ""

// CSI sequences (colours, cursor moves), OSC sequences (titles, links), then any other two-byte escape.
const escapes = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]/g

/** `text` without ANSI escape sequences. */
export const stripAnsi = (text: string): string => text.replace(escapes, "")

const plainArgs = (args: ReadonlyArray<unknown>): ReadonlyArray<unknown> =>
  args.map((arg) => (typeof arg === "string" ? stripAnsi(arg) : arg))

/**
 * `console` with escapes removed from its stdout methods (`log`, `info`, `debug`) unless `stdout` may
 * carry colour, and from its stderr methods (`error`, `warn`) unless `stderr` may.
 */
export const plainConsole = (
  console: Console.Console,
  allowed: { readonly stdout: boolean; readonly stderr: boolean }
): Console.Console => {
  if (allowed.stdout && allowed.stderr) return console
  type Method = (...args: ReadonlyArray<any>) => any
  const keep = <F extends Method>(method: F): F => method
  const strip = <F extends Method>(method: F): F => ((...args: ReadonlyArray<unknown>) => method(...plainArgs(args))) as F
  const out = allowed.stdout ? keep : strip
  const err = allowed.stderr ? keep : strip
  return {
    ...console,
    log: out(console.log),
    info: out(console.info),
    debug: out(console.debug),
    error: err(console.error),
    warn: err(console.warn)
  }
}
