/**
 * Test layer for code that calls `Control`: the facade over the in-memory
 * control runtime, the journal's in-memory SQLite test layer and an executor
 * (`ControlExecutor.makeNoop()` by default). Node only.
 *
 * @since 0.1.0
 */
import type { DatabaseError } from "@baton/database/DurableWriter"
import type { MigrationError } from "@baton/database/Migrations"
import type * as Journal from "@baton/journal/Journal"
import * as TestJournal from "@baton/journal/TestJournal"
import { Layer } from "effect"
import * as Control from "./Control.js"
import * as ControlExecutor from "./ControlExecutor.js"
import * as ControlRuntime from "./ControlRuntime.js"

/**
 * Provides `Control`, `ControlRuntime.layerMemory(options)` (reading the
 * journal for cancel attribution), an in-memory `Journal` and
 * `ControlExecutor` (`executor`, default `makeNoop()`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: ControlRuntime.MemoryOptions,
  executor?: ControlExecutor.Service
): Layer.Layer<
  Control.Control | ControlRuntime.ControlRuntime | ControlExecutor.ControlExecutor | Journal.Journal,
  Journal.JournalError | MigrationError | DatabaseError
> =>
  Layer.provideMerge(
    Control.layer,
    Layer.merge(
      // The memory runtime reads the journal's cancel entries to attribute cancellations.
      Layer.provideMerge(ControlRuntime.layerMemory(options), TestJournal.layer()),
      ControlExecutor.layer(executor ?? ControlExecutor.makeNoop())
    )
  )
