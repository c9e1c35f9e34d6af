/**
 * The `baton` command-line interface (docs/node.md, The CLI): `runs`, `run`, `plans`, `plan`, `approve`, `deny`,
 * `launch`, `cancel`, `resume`, `signal`, `journal`, `doctor`, `queue pause|resume|stats` (since 0.2.0), built on `@effect/cli` over a client-mode
 * {@link NodeRuntime}. Tables for people, `--json` for scripts, and the exit codes of docs/node.md:
 * 0 success, 1 unexpected, 2 usage, 3 not found, 4 refused by state, 5 database unavailable, 6 doctor
 * found a FAIL; `journal --follow` ends with the run's outcome, 0 completed, 7 failed, 8 cancelled.
 *
 * @since 0.1.0
 */
import * as Control from "@baton/control/Control"
import * as Migrations from "@baton/database/Migrations"
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import { colourAllowed, plainConsole } from "./internal/cliColour.js"
import * as Doctor from "./internal/cliDoctor.js"
import { CliFailure, fromError, locked, render, renderJson } from "./internal/cliFailure.js"
import * as Parse from "./internal/cliParse.js"
import * as Session from "./internal/cliSession.js"
import * as Verbs from "./internal/cliVerbs.js"

/**
 * The exit code a verb ended with, carried through @effect/cli's error channel.
 *
 * @since 0.1.0
 * @category models
 */
export class CliExit extends Data.TaggedError("@baton/node/CliExit")<{ readonly code: number }> {}

const globalOptions = {
  json: Options.boolean("json").pipe(Options.withDescription("print one JSON document (journal --follow: one entry per line)")),
  db: Options.text("db").pipe(Options.withDescription("SQLite database file (env BATON_DB; default ./baton.db)"), Options.optional),
  pg: Options.text("pg").pipe(Options.withDescription("PostgreSQL URL (env BATON_PG_URL)"), Options.optional),
  schema: Options.text("schema").pipe(Options.withDescription("PostgreSQL schema (default baton)"), Options.optional),
  lockWait: Options.text("lock-wait").pipe(Options.withDescription("how long writes retry a held lock: a number with a unit, e.g. 500ms, 90s, 15m, 2h, 3d (default 5s)"), Options.optional),
  config: Options.text("config").pipe(Options.withDescription("module exporting { flows, migrations } (env BATON_CONFIG)"), Options.optional),
  as: Options.text("as").pipe(Options.withDescription("principal: <id> or <kind>:<id> (default: the OS user)"), Options.optional)
}

type GlobalValues = {
  readonly json: boolean
  readonly db: Option.Option<string>
  readonly pg: Option.Option<string>
  readonly schema: Option.Option<string>
  readonly lockWait: Option.Option<string>
  readonly config: Option.Option<string>
  readonly as: Option.Option<string>
}

const u = <A>(o: Option.Option<A>): A | undefined => Option.getOrUndefined(o)

const lockedFailure = (globals: Session.Globals): CliFailure =>
  locked({ location: Session.location(globals), lockWaitMs: globals.lockWaitMs })

const tty = (): boolean => colourAllowed(process.stdout)

/**
 * Runs one verb: resolve the globals, pre-flight the file, load the catalog, build the client runtime,
 * run `body`, and turn every failure into a printed message and an exit code.
 */
const verb = (
  raw: GlobalValues,
  access: Session.Access,
  // The body's requirements are the client runtime's services (NodeRuntime's Provided).
  body: (ctx: Verbs.VerbContext) => Effect.Effect<void | number, unknown, any>,
  options: {
    readonly onEmpty?: (ctx: Verbs.VerbContext) => Effect.Effect<void | number, unknown>
    /** Checks the verb's id arguments (throws a usage `CliFailure`) before anything is opened. */
    readonly ids?: ReadonlyArray<readonly [argument: string, value: string]>
    /** Any other argument check that throws a usage `CliFailure`, run with `ids`. */
    readonly check?: () => unknown
    /** The verb's `--key`, checked with `ids` (an empty key is usage naming --key). */
    readonly key?: Option.Option<string>
    /**
     * The run the verb acts on. A catalog without that run's flow does not know its code, which is not
     * drift (the catalog serves `plan`; drift checks are then left to hosts): the verb
     * runs without the catalog's flows.
     */
    readonly runOf?: string | undefined
    /** Argument checks that need the catalog or read input; run before the database is looked at. */
    readonly before?: (catalog: Session.Catalog | undefined) => Effect.Effect<unknown, unknown>
  } = {}
): Effect.Effect<void, CliExit> =>
  Effect.gen(function*() {
    let json = raw.json
    const program = Effect.gen(function*() {
      const globals = yield* Effect.try({
        try: () =>
          Session.resolveGlobals({
            json: raw.json,
            db: u(raw.db),
            pg: u(raw.pg),
            schema: u(raw.schema),
            lockWait: u(raw.lockWait),
            config: u(raw.config),
            as: u(raw.as)
          }),
        catch: (e) => e
      })
      json = globals.json
      yield* Effect.try({
        try: () => {
          options.ids?.forEach(([argument, value]) => Parse.id(argument, value))
          if (options.key !== undefined) Option.map(options.key, Parse.key)
          options.check?.()
        },
        catch: (e) => e
      })
      // Arguments (and the catalog they name) are checked before the database: a bad argument is usage
      // (2) even when the file is missing (5).
      const catalog = yield* Session.loadCatalog(globals)
      if (options.before !== undefined) yield* options.before(catalog)
      const state = yield* Effect.try({ try: () => Session.preflight(globals, access), catch: (e) => e })
      const ctx: Verbs.VerbContext = { globals, catalog, tty: tty() }
      if (state === "empty") {
        if (options.onEmpty === undefined) return undefined
        return yield* options.onEmpty(ctx)
      }
      // Opening waits on a held lock on the database package's fixed open ladder (about 18 s read-only);
      // --lock-wait bounds that wait for every verb, like it bounds write retries.
      const within = <A>(how: Session.Access, withCatalog: Session.Catalog | undefined, effect: Effect.Effect<A, unknown, any>) =>
        Effect.scoped(
          Layer.build(Session.layer(globals, how, withCatalog)).pipe(
            Effect.timeoutFail({
              duration: Duration.millis(globals.lockWaitMs),
              onTimeout: () => lockedFailure(globals)
            }),
            Effect.flatMap((context) => Effect.provide(effect, context))
          )
        ) as Effect.Effect<A, unknown>
      const runOf = options.runOf
      const flows = catalog?.flows ?? []
      const sets = catalog?.migrations ?? []
      // A mutating verb on PostgreSQL also looks first: like a missing SQLite file, a missing schema is
      // not created by the CLI (an existing empty one is initialised, like a 0-byte file).
      const needsProbe = (catalog !== undefined && (sets.length > 0 || (runOf !== undefined && flows.length > 0))) ||
        (access === "write" && globals.pg !== undefined)
      // A read-only look first (creates and migrates nothing): which application blocks the database
      // already has, and the flow of the run the verb names.
      const probe = !needsProbe || Session.isEmptyFile(globals) ? undefined : yield* within(
        "read",
        { ...catalog, flows: [], migrations: [] },
        Effect.all({
          ledger: Migrations.status(Session.librarySets).pipe(Effect.option),
          flowId: runOf === undefined
            ? Effect.succeed(undefined)
            // Not found and the like are the verb's own answer, given below.
            : Effect.flatMap(Control.Control, (control) => control.getRun(runOf)).pipe(
              Effect.map((summary): string | undefined => summary.flowId),
              Effect.orElseSucceed(() => undefined)
            )
        })
      ).pipe(Effect.catchIf(
        (error) => access === "write" && isMissingSchema(error),
        () => Effect.fail(missingSchema(globals))
      ))
      const effective = catalog === undefined ? undefined : {
        ...catalog,
        flows: runOf === undefined || flows.some((f) => f.id === probe?.flowId) ? flows : [],
        migrations: Session.applicableSets(sets, probe?.ledger)
      }
      const effectiveCtx: Verbs.VerbContext = { ...ctx, catalog: effective }
      const checked = access === "read" && options.onEmpty !== undefined
        ? Effect.zipRight(Session.requireCurrentSchema(globals), body(effectiveCtx))
        : body(effectiveCtx)
      return yield* within(access, effective, checked)
    })
    const exit = yield* Effect.exit(
      program.pipe(Effect.catchAllDefect((defect) => Effect.fail(defect instanceof CliFailure ? defect : new CliFailure({ exitCode: 1, code: "defect", message: String(defect) }))))
    )
    if (Exit.isSuccess(exit)) {
      const code = typeof exit.value === "number" ? exit.value : 0
      if (code !== 0) return yield* new CliExit({ code })
      return
    }
    if (Cause.isInterruptedOnly(exit.cause)) return
    const error = Cause.squash(exit.cause)
    const target = {
      location: (() => {
        try {
          return Session.location(Session.resolveGlobals({ json: raw.json, db: u(raw.db), pg: u(raw.pg), schema: u(raw.schema), lockWait: undefined, config: undefined, as: undefined }))
        } catch {
          return "the database"
        }
      })(),
      lockWaitMs: (() => {
        try {
          return u(raw.lockWait) === undefined ? 5_000 : Parse.durationMs("--lock-wait", u(raw.lockWait)!)
        } catch {
          return 5_000
        }
      })()
    }
    const failure = fromError(error, target)
    if (json) yield* Console.log(renderJson(failure))
    else yield* Console.error(render(failure))
    return yield* new CliExit({ code: failure.exitCode })
  })

/** The database package's refusal of a read-only PostgreSQL open whose schema does not exist. */
const isMissingSchema = (error: unknown): boolean => {
  const e = error as { readonly _tag?: unknown; readonly reason?: unknown } | null
  return typeof e === "object" && e !== null && e._tag === "@baton/database/DatabaseOpenError" && e.reason === "not_found"
}

/** A mutating verb on a missing PostgreSQL schema (exit 5): the CLI never creates a database or schema. */
const missingSchema = (globals: Session.Globals): CliFailure =>
  new CliFailure({
    exitCode: 5,
    code: "not_found",
    message: `no Baton schema at ${Session.location(globals)}: the schema does not exist, and baton commands never create a database or schema`,
    hint: "a host start creates it (pnpm start with the same --pg/--schema), or pass --schema <an existing Baton schema>"
  })

// ---------------------------------------------------------------------------------------------

const runsCommand = Command.make("runs", {
  ...globalOptions,
  status: Options.text("status").pipe(Options.withDescription(`one of ${Parse.runStatuses.join(", ")}`), Options.optional),
  flow: Options.text("flow").pipe(Options.optional),
  parent: Options.text("parent").pipe(Options.optional),
  lineage: Options.text("lineage").pipe(Options.optional),
  launchedBy: Options.text("launched-by").pipe(Options.optional),
  queue: Options.text("queue").pipe(Options.withDescription("only runs of this queue"), Options.optional),
  since: Options.text("since").pipe(Options.withDescription("ISO 8601, epoch ms, or 90s/15m/2h/3d back from now"), Options.optional),
  until: Options.text("until").pipe(Options.optional),
  terminal: Options.boolean("terminal"),
  live: Options.boolean("live"),
  order: Options.choice("order", ["newest", "oldest"]).pipe(Options.withDefault("newest" as const)),
  limit: Options.text("limit").pipe(Options.withDefault("50")),
  cursor: Options.text("cursor").pipe(Options.optional),
  all: Options.boolean("all")
}, (o) =>
  verb(o, "read", (ctx) =>
    Verbs.runs(ctx, {
      status: u(o.status),
      flow: u(o.flow),
      parent: u(o.parent),
      lineage: u(o.lineage),
      launchedBy: u(o.launchedBy),
      queue: u(o.queue),
      since: u(o.since),
      until: u(o.until),
      terminal: o.terminal,
      live: o.live,
      order: o.order,
      limit: Parse.limit(o.limit),
      cursor: u(o.cursor),
      all: o.all
    }), {
    // Filters, limit and cursor are usage errors (2) before the database is looked at (5 when missing);
    // the time only matters for the value of a relative --since, not whether it parses.
    check: () => {
      Verbs.runFilters({
        status: u(o.status), flow: undefined, parent: undefined, lineage: undefined, launchedBy: undefined, queue: u(o.queue),
        since: u(o.since), until: u(o.until), terminal: o.terminal, live: o.live, order: o.order, limit: Parse.limit(o.limit),
        cursor: undefined, all: false
      }, 0)
      Option.map(o.cursor, Parse.runsCursor)
    },
    onEmpty: (ctx) => Console.log(ctx.globals.json ? JSON.stringify({ _tag: "runs", items: [] }) : "No runs.")
  })).pipe(Command.withDescription("list runs, newest first"))

const runCommand = Command.make("run", {
  ...globalOptions,
  runId: Args.text({ name: "runId" }),
  tail: Options.text("tail").pipe(Options.withDescription("how many journal entries to show (0 or more)"), Options.withDefault("20"))
}, (o) =>
  verb(o, "read", (ctx) => Verbs.run(ctx, o.runId, Parse.tail(o.tail)), {
    ids: [["runId", o.runId]],
    check: () => Parse.tail(o.tail),
    onEmpty: (ctx) => Effect.fail(new CliFailure({ exitCode: 3, code: "run_not_found", message: `run "${o.runId}" not found in ${Session.location(ctx.globals)}` }))
  })).pipe(Command.withDescription("show a run: summary, attempts, open waits, journal tail"))

const plansCommand = Command.make("plans", {
  ...globalOptions,
  flow: Options.text("flow").pipe(Options.optional),
  decision: Options.text("decision").pipe(Options.optional),
  limit: Options.text("limit").pipe(Options.withDefault("50")),
  cursor: Options.text("cursor").pipe(Options.optional)
}, (o) =>
  verb(o, "read", (ctx) => Verbs.plans(ctx, { flow: u(o.flow), decision: u(o.decision), limit: Parse.limit(o.limit), cursor: u(o.cursor) }), {
    check: () => {
      Option.map(o.decision, Parse.decision)
      Parse.limit(o.limit)
      Option.map(o.cursor, Parse.plansCursor)
    },
    onEmpty: (ctx) => Console.log(ctx.globals.json ? JSON.stringify({ _tag: "plans", items: [] }) : "No plans.")
  })).pipe(Command.withDescription("list plans"))

const planCommand = Command.make("plan", {
  ...globalOptions,
  flow: Args.text({ name: "flow" }),
  input: Options.text("input").pipe(Options.withDescription("the flow's input as JSON"), Options.optional),
  inputFile: Options.text("input-file").pipe(Options.withDescription("read the input JSON from a file, or - for stdin"), Options.optional),
  key: Options.text("key").pipe(Options.optional)
}, (o) => {
  let input: unknown = {}
  return verb(o, "write", (ctx) => Verbs.plan(ctx, o.flow, input, u(o.key)), {
    key: o.key,
    before: (catalog) =>
      Verbs.requireFlow(catalog, o.flow).pipe(
        Effect.zipRight(Verbs.readInput(u(o.input), u(o.inputFile))),
        Effect.tap((read) => Verbs.checkInput(catalog, o.flow, read)),
        Effect.map((read) => void (input = read))
      )
  })
}).pipe(Command.withDescription("plan a run of a flow; prints the card to approve"))

/** The run of an `approve`/`deny` target `runId:requestId`; plans have none. */
const runOfTarget = (target: string): string | undefined => {
  const colon = target.indexOf(":")
  return colon < 0 ? undefined : target.slice(0, colon)
}

const decideOptions = {
  ...globalOptions,
  target: Args.text({ name: "planId | runId:requestId" }),
  scope: Options.choice("scope", ["once", "run", "remembered"]).pipe(Options.optional),
  reason: Options.text("reason").pipe(Options.withDescription("why (1 to 1000 characters), stored with the decision"), Options.optional),
  key: Options.text("key").pipe(Options.optional)
}

const decideCommand = (decision: "approve" | "deny", description: string) =>
  Command.make(decision, decideOptions, (o) =>
    verb(o, "write", (ctx) => Verbs.decide(ctx, decision, o.target, { scope: u(o.scope), reason: u(o.reason), key: u(o.key) }), {
      check: () => {
        Parse.approvalTarget(o.target)
        Option.map(o.reason, Parse.reason)
      },
      key: o.key,
      runOf: runOfTarget(o.target)
    }))
    .pipe(Command.withDescription(description))

const approveCommand = decideCommand("approve", "approve a plan or a run's approval request")

const denyCommand = decideCommand("deny", "deny a plan or a run's approval request")

const launchCommand = Command.make("launch", {
  ...globalOptions,
  planId: Args.text({ name: "planId" }),
  key: Options.text("key").pipe(Options.optional)
}, (o) => verb(o, "write", (ctx) => Verbs.launch(ctx, o.planId, u(o.key)), { ids: [["planId", o.planId]], key: o.key }))
  .pipe(Command.withDescription("launch an approved plan; a host picks the run up"))

const cancelCommand = Command.make("cancel", {
  ...globalOptions,
  runId: Args.text({ name: "runId" }),
  reason: Options.text("reason").pipe(Options.optional),
  key: Options.text("key").pipe(Options.optional)
}, (o) =>
  verb(o, "write", (ctx) => Verbs.cancel(ctx, o.runId, { reason: u(o.reason), key: u(o.key) }), {
    ids: [["runId", o.runId]],
    key: o.key,
    runOf: o.runId,
    check: () => Option.map(o.reason, Parse.reason)
  }))
  .pipe(Command.withDescription("cancel a run"))

const resumeCommand = Command.make("resume", {
  ...globalOptions,
  runId: Args.text({ name: "runId" }),
  allowCodeDrift: Options.boolean("allow-code-drift"),
  key: Options.text("key").pipe(Options.optional)
}, (o) => verb(o, "write", (ctx) => Verbs.resume(ctx, o.runId, { allowCodeDrift: o.allowCodeDrift, key: u(o.key) }), { ids: [["runId", o.runId]], key: o.key, runOf: o.runId }))
  .pipe(Command.withDescription("resume a released or parked run"))

const signalCommand = Command.make("signal", {
  ...globalOptions,
  runId: Args.text({ name: "runId" }),
  name: Args.text({ name: "name" }),
  payload: Args.text({ name: "json" }).pipe(Args.optional),
  key: Options.text("key").pipe(Options.optional),
  wait: Options.boolean("wait").pipe(
    Options.withDescription("wait for the host's verdict: exit 0 delivered, 4 refused or the run ended, 9 none within --timeout")
  ),
  timeout: Options.text("timeout").pipe(Options.withDescription("how long --wait waits, e.g. 10s, 2m (default 30s)"), Options.optional)
}, (o) =>
  verb(o, "write", (ctx) =>
    Verbs.signal(ctx, o.runId, o.name, u(o.payload), {
      key: u(o.key),
      waitMs: o.wait ? signalTimeoutMs(o.timeout) : undefined,
      pollMs: 200
    }), {
    ids: [["runId", o.runId]],
    key: o.key,
    runOf: o.runId,
    check: () => {
      Option.map(o.payload, (text) => Parse.json("signal payload", text))
      if (!o.wait && Option.isSome(o.timeout)) {
        throw new CliFailure({ exitCode: 2, code: "usage", message: "--timeout applies to --wait: pass both, or neither" })
      }
      signalTimeoutMs(o.timeout)
    }
  }))
  .pipe(Command.withDescription("send a signal to a run's wait; --wait for the verdict"))

/** `signal --timeout` in ms (default 30 s); a malformed value is usage naming --timeout. */
const signalTimeoutMs = (timeout: Option.Option<string>): number =>
  Option.match(timeout, { onNone: () => 30_000, onSome: (text) => Parse.durationMs("--timeout", text) })

const journalCommand = Command.make("journal", {
  ...globalOptions,
  runId: Args.text({ name: "runId" }),
  follow: Options.boolean("follow").pipe(Options.withAlias("f")),
  after: Options.text("after").pipe(
    Options.withDescription(
      "only the run's entries with SEQ above this (0 or more); ownership facts (~N, numbered in their own stream) emitted from that entry on"
    ),
    Options.optional
  ),
  // Optional and repeatable: `[--type text]...` in the synopsis, not a required `--type text...`.
  type: Options.text("type").pipe(Options.withDescription("only entries of this type (repeatable)"), Options.repeated, Options.optional),
  noOwnership: Options.boolean("no-ownership")
}, (o) =>
  verb(o, "read", (ctx) =>
    Verbs.journal(ctx, o.runId, {
      follow: o.follow,
      after: u(Option.map(o.after, Parse.after)),
      types: Option.getOrElse(o.type, () => []),
      noOwnership: o.noOwnership,
      pollMs: 500
    }), {
    ids: [["runId", o.runId]],
    check: () => Option.map(o.after, Parse.after),
    onEmpty: (ctx) => Effect.fail(new CliFailure({ exitCode: 3, code: "run_not_found", message: `run "${o.runId}" not found in ${Session.location(ctx.globals)}` }))
  })).pipe(Command.withDescription("print a run's journal; --follow until it ends, exiting 0 completed, 7 failed, 8 cancelled"))

const doctorCommand = Command.make("doctor", {
  ...globalOptions,
  fix: Options.boolean("fix").pipe(Options.withDescription("recover orphaned claims whose claimant is dead"))
}, (o) =>
  verb(o, o.fix ? "write" : "read", (ctx) =>
    Doctor.doctor(ctx.globals, ctx.catalog, o.fix).pipe(Effect.flatMap((findings) => Doctor.report(findings, ctx.globals.json))), {
    onEmpty: (ctx) => Doctor.report([{ check: "file", level: "OK", message: `${Session.location(ctx.globals)} is an empty database` }], ctx.globals.json)
  })).pipe(Command.withDescription("check the database and the runs in it"))

const queueArg = { queue: Args.text({ name: "queue" }) }

const queueSwitchCommand = (action: "pause" | "resume", description: string) =>
  Command.make(action, { ...globalOptions, ...queueArg }, (o) =>
    verb(o, "write", (ctx) => Verbs.queueSwitch(ctx, action, o.queue), { check: () => Parse.queue(o.queue) }))
    .pipe(Command.withDescription(description))

// Bare `baton queue` names its own subcommands (the parser alone would list the top-level verbs).
const queueCommand = Command.make("queue", {}, () =>
  Console.error("baton: queue needs a subcommand: pause <queue>, resume <queue> or stats").pipe(
    Effect.zipRight(Effect.fail(new CliExit({ code: 2 })))
  )).pipe(
  Command.withDescription("pause, resume and inspect queues"),
  Command.withSubcommands([
    queueSwitchCommand("pause", "stop hosts claiming a queue's runs; running runs go on"),
    queueSwitchCommand("resume", "let hosts claim a paused queue's runs again"),
    Command.make("stats", globalOptions, (o) =>
      verb(o, "read", (ctx) => Verbs.queueStats(ctx), {
        onEmpty: (ctx) => Console.log(ctx.globals.json ? JSON.stringify({ _tag: "queues", items: [] }) : "No queues.")
      })).pipe(Command.withDescription("per queue: available, delayed, running, failed, paused, limit"))
  ])
)

/**
 * The `baton` command tree.
 *
 * @since 0.1.0
 * @category commands
 */
export const command = Command.make("baton").pipe(
  Command.withDescription("Baton: durable runs with fenced ownership"),
  Command.withSubcommands([
    runsCommand,
    runCommand,
    plansCommand,
    planCommand,
    approveCommand,
    denyCommand,
    launchCommand,
    cancelCommand,
    resumeCommand,
    signalCommand,
    journalCommand,
    doctorCommand,
    queueCommand
  ])
)

/**
 * The verbs, for argument hoisting and help.
 *
 * @since 0.1.0
 * @category commands
 */
export const verbs: ReadonlyArray<string> = [
  "runs", "run", "plans", "plan", "approve", "deny", "launch", "cancel", "resume", "signal", "journal", "doctor", "queue"
]

/** The package's own version (package.json sits one level above both src/ and dist/). */
const version = ((): string => {
  try {
    const pkg = JSON.parse(fs.readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version?: unknown }
    return typeof pkg.version === "string" ? pkg.version : "unknown"
  } catch {
    return "unknown"
  }
})()

const cli = Command.run(command, { name: "baton", version })

/**
 * Runs the CLI over `argv` (`process.argv`: the first two entries are node and the script) and answers
 * the exit code. Never fails: errors are printed (`baton: …` on stderr, or a JSON error document with
 * `--json`) and become the code.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (argv: ReadonlyArray<string>): Effect.Effect<number> => {
  const [node = "node", script = "baton", ...rest] = argv
  const args = [node, script, ...Parse.hoistGlobals(rest, verbs)]
  const program = cli(args).pipe(
    Effect.as(0),
    Effect.catchAll((error) =>
      error instanceof CliExit
        ? Effect.succeed(error.code)
        : ValidationError.isValidationError(error)
        ? Effect.succeed(2)
        : Console.error(`baton: ${String(error)}`).pipe(Effect.as(1))
    ),
    Effect.catchAllDefect((defect) => Console.error(`baton: unexpected failure: ${String(defect)}`).pipe(Effect.as(1))),
    Effect.provide(NodeContext.layer)
  )
  // Help and usage errors come styled from @effect/cli; a pipe, a file or NO_COLOR gets them plain.
  return Effect.flatMap(Effect.console, (console) =>
    Effect.withConsole(
      program,
      plainConsole(console, { stdout: colourAllowed(process.stdout), stderr: colourAllowed(process.stderr) })
    ))
}
