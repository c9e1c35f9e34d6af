/**
 * Command-line options of the main job (`pnpm start -- [dir] [options]`).
 */
import { createRequire } from "node:module"
import * as nodePath from "node:path"

/** Parsed options. */
export interface StartOptions {
  readonly dir: string
  readonly dirGiven: boolean
  readonly yes: boolean
  readonly workers: number
  readonly pattern: string | undefined
  readonly batchFiles: number
  readonly batchBytes: number
  readonly db: string
  readonly crashDemo: boolean
  readonly resume: string | undefined
  readonly compare: boolean
  readonly json: boolean
  readonly verbose: boolean
}

/** A usage problem: printed, exit 2. */
export class UsageError extends Error {
  readonly _tag = "UsageError"
}

/** The `dist` folder of the `effect` package installed for `@baton/node`. */
export const defaultDirectory = (): string => {
  const require = createRequire(import.meta.url)
  return nodePath.join(nodePath.dirname(require.resolve("effect/package.json")), "dist")
}

const sizePattern = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|k|mb|mib|m|gb|gib|g)?$/i

/** `64MiB`, `64m`, `1048576` → bytes (binary units). */
export const parseSize = (option: string, value: string): number => {
  const match = sizePattern.exec(value.trim())
  if (match === null) throw new UsageError(`${option} expects a size such as 64MiB or 1048576, got "${value}"`)
  const unit = (match[2] ?? "b").toLowerCase()
  const factor = unit.startsWith("g") ? 1024 ** 3 : unit.startsWith("m") ? 1024 ** 2 : unit.startsWith("k") ? 1024 : 1
  return Math.round(Number(match[1]) * factor)
}

const MiB = 1024 ** 2
const GiB = 1024 ** 3

/** `--batch-bytes`: a size within the flow's range, refused here before any database is opened. */
const batchBytes = (value: string): number => {
  const bytes = parseSize("--batch-bytes", value)
  if (bytes < MiB || bytes > GiB) {
    throw new UsageError(`--batch-bytes expects a size between 1 MiB and 1 GiB, got "${value}"`)
  }
  return bytes
}

/** The default database file; commands printed for the user name `--db` only when another was given. */
export const defaultDb = "./baton.db"

/** `value` as one shell word: quoted only when it holds a character the shell would read. */
export const shellQuote = (value: string): string =>
  /^[A-Za-z0-9_./:=@%+,-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`

/** ` --db <file>` for a command printed for the user, or "" with the default database. */
export const dbSuffix = (db: string): string =>
  nodePath.resolve(db) === nodePath.resolve(defaultDb) ? "" : ` --db ${shellQuote(db)}`

const integer = (option: string, value: string | undefined, min: number, max: number): number => {
  const n = Number(value)
  if (value === undefined || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new UsageError(`${option} expects an integer between ${min} and ${max}, got "${value ?? ""}"`)
  }
  return n
}

const nonEmpty = (option: string, value: string, expected: string): string => {
  if (value.trim() === "") throw new UsageError(`${option} expects ${expected}, got "${value}"`)
  return value
}

/** Usage text. */
export const usage = `usage: pnpm start -- [dir] [options]

Indexes a directory durably with Baton: plans the flow index-dir, asks for approval, runs worker
processes on one SQLite file and shows progress. Default dir: the installed effect package's dist.

  --yes                 approve without asking
  --workers <n>         worker processes (1..8, default 2)
  --pattern <glob>      only files matching the glob (relative to dir; *, ?, **)
  --batch-files <n>     files per batch step (1..10000, default 200)
  --batch-bytes <size>  bytes per batch step (1MiB..1GiB, default 64MiB)
  --db <file>           database file (default ./baton.db)
  --crash-demo          SIGKILL the owning worker mid-run and watch another take over
                        (needs --workers 2 or more)
  --resume <runId>      serve an unfinished run instead of planning a new one
  --compare             time the plain single-process loop first
  --json                print the summary as JSON
  --verbose             show worker logs`

/** Parses `argv` (without node and the script). A leading `--` is ignored. */
export const parse = (argv: ReadonlyArray<string>): StartOptions | "help" => {
  const args = argv[0] === "--" ? argv.slice(1) : [...argv]
  let dir: string | undefined
  const o = {
    yes: false,
    workers: 2,
    pattern: undefined as string | undefined,
    batchFiles: 200,
    batchBytes: 64 * 1024 * 1024,
    db: defaultDb,
    crashDemo: false,
    resume: undefined as string | undefined,
    compare: false,
    json: false,
    verbose: false
  }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const [name, inline] = arg.startsWith("--") && arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined]
    const value = (): string => {
      if (inline !== undefined) return inline
      const next = args[i + 1]
      // `--pattern --yes` must not make "--yes" the pattern: an option in the value's place means the value
      // is missing (a value that starts with "-" can be given inline, `--pattern=-x*`).
      if (next === undefined || (next.startsWith("-") && next !== "-" && !/^-\d/.test(next))) {
        throw new UsageError(`${name} needs a value${next === undefined ? "" : `; got the option ${next} (write ${name}=<value> for a value starting with -)`}`)
      }
      i++
      return next
    }
    switch (name) {
      case "--":
        break
      case "-h":
      case "--help":
        return "help"
      case "--yes":
      case "-y":
        o.yes = true
        break
      case "--workers":
        o.workers = integer("--workers", value(), 1, 8)
        break
      case "--pattern":
        o.pattern = nonEmpty(name, value(), "a glob such as **/*.js")
        break
      case "--batch-files":
        o.batchFiles = integer("--batch-files", value(), 1, 10_000)
        break
      case "--batch-bytes":
        o.batchBytes = batchBytes(value())
        break
      case "--db":
        o.db = nonEmpty(name, value(), "a database file such as ./baton.db")
        break
      case "--crash-demo":
        o.crashDemo = true
        break
      case "--resume":
        o.resume = nonEmpty(name, value(), "a run id such as run-1")
        break
      case "--compare":
        o.compare = true
        break
      case "--json":
        o.json = true
        break
      case "--verbose":
        o.verbose = true
        break
      default:
        if (arg.startsWith("-")) throw new UsageError(`unknown option ${arg}\n${usage}`)
        if (dir !== undefined) throw new UsageError(`one directory only; got "${dir}" and "${arg}"`)
        dir = arg
    }
  }
  // The demo SIGKILLs the owner; with a single worker nobody is left to take over and the run stalls.
  if (o.crashDemo && o.workers < 2) {
    throw new UsageError(`--crash-demo needs --workers 2 or more (got ${o.workers}): another worker must take over the killed one`)
  }
  return { ...o, dir: nodePath.resolve(dir ?? defaultDirectory()), dirGiven: dir !== undefined }
}
