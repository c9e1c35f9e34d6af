/**
 * Test layer for code that calls `Control`: the facade and `Queues` over `ControlRuntime.layerMemory`
 * (the SQL control runtime over an in-memory SQLite database, with that database's journal and run
 * store) and an executor (`ControlExecutor.makeNoop()` by default). Node only.
 *
 * @since 0.1.0
 */
import type * as DurableWriter from "@baton/database/DurableWriter"
import type * as Journal from "@baton/journal/Journal"
import type * as RunStore from "@baton/run-store/RunStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import { Layer } from "effect"
import * as Control from "./Control.js"
import * as ControlExecutor from "./ControlExecutor.js"
import * as ControlRuntime from "./ControlRuntime.js"
import * as Queues from "./Queues.js"

/**
 * Provides `Control` and `Queues` over `ControlRuntime.layerMemory(options)` (a fresh in-memory
 * database per build: queue order, delays, retries, limits and pauses, fences, lineage and cancel
 * attribution behave as on SQL), the `Journal` and `RunStore` of that database, its `SqlClient` and
 * `DurableWriter`, and `ControlExecutor` (`executor`, default `makeNoop()`). `options.now` is the
 * runtime's clock; `Control` and `Queues` read Effect's `Clock`. Building fails with
 * `ControlRuntime.MemoryError`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options?: ControlRuntime.MemoryOptions,
  executor?: ControlExecutor.Service
): Layer.Layer<
  | Control.Control
  | Queues.Queues
  | ControlRuntime.ControlRuntime
  | ControlExecutor.ControlExecutor
  | Journal.Journal
  | RunStore.RunStore
  | SqlClient.SqlClient
  | DurableWriter.DurableWriter,
  ControlRuntime.MemoryError
> =>
  Layer.provideMerge(
    Layer.merge(Control.layer, Queues.layer),
    Layer.merge(ControlRuntime.layerMemory(options), ControlExecutor.layer(executor ?? ControlExecutor.makeNoop()))
  )
