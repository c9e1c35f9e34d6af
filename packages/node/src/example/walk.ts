/**
 * The indexer's directory walk (the flow's first step): depth-first, children sorted by name in UTF-16
 * code-unit order, regular files only; symlinks, special files and unreadable directories are skipped
 * and counted.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as fs from "node:fs/promises"
import * as nodePath from "node:path"
import type { ListedFile } from "./batches.js"
import type { Glob } from "./glob.js"

/**
 * The walk's outcome, stored as the `walk` step's result (the file-list checkpoint).
 *
 * @since 0.1.0
 * @category models
 */
export interface Listing {
  readonly files: ReadonlyArray<ListedFile>
  readonly skipped: number
  readonly totalBytes: number
}

/**
 * The walk found more files than the indexer accepts.
 *
 * @since 0.1.0
 * @category errors
 */
export class TooManyFiles extends Error {
  readonly _tag = "TooManyFiles"
}

/**
 * The largest listing the indexer accepts.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxFiles = 500_000

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0)

/**
 * Lists the regular files under `root` (an absolute directory). `pattern`, when given, filters the
 * relative paths. Fails with `TooManyFiles` past `limit` (default 500 000) files.
 *
 * @since 0.1.0
 * @category walking
 */
export const walk = (
  root: string,
  options: { readonly pattern?: Glob | undefined; readonly limit?: number } = {}
): Effect.Effect<Listing, TooManyFiles> =>
  Effect.promise(async () => {
    const limit = options.limit ?? maxFiles
    const files: Array<ListedFile> = []
    let skipped = 0
    let totalBytes = 0
    const visit = async (relative: string): Promise<void> => {
      const absolute = relative === "" ? root : nodePath.join(root, relative)
      let names: Array<string>
      try {
        names = await fs.readdir(absolute)
      } catch {
        skipped++
        return
      }
      names.sort(byCodeUnit)
      for (const name of names) {
        const childRelative = relative === "" ? name : `${relative}/${name}`
        let stat: Awaited<ReturnType<typeof fs.lstat>>
        try {
          stat = await fs.lstat(nodePath.join(root, childRelative))
        } catch {
          skipped++
          continue
        }
        if (stat.isDirectory()) {
          await visit(childRelative)
        } else if (stat.isFile()) {
          if (options.pattern !== undefined && !options.pattern.matches(childRelative)) continue
          files.push({ path: childRelative, size: stat.size, mtimeMs: Math.floor(stat.mtimeMs) })
          totalBytes += stat.size
          if (files.length > limit) {
            throw new TooManyFiles(`the directory holds more than ${limit} files; narrow it with --pattern`)
          }
        } else {
          skipped++
        }
      }
    }
    try {
      await visit("")
      return { _tag: "ok" as const, listing: { files, skipped, totalBytes } }
    } catch (error) {
      if (error instanceof TooManyFiles) return { _tag: "too-many" as const, error }
      throw error
    }
  }).pipe(Effect.flatMap((r) => r._tag === "ok" ? Effect.succeed(r.listing) : Effect.fail(r.error)))
