/** Parent-side reader of a fixture's JSON lines. */
import type { ChildProcess } from "node:child_process"

export const lines = (child: ChildProcess) => {
  const seen: Array<Record<string, unknown>> = []
  const listeners: Array<() => void> = []
  let buffer = ""
  child.stdout?.on("data", (chunk) => {
    buffer += String(chunk)
    for (let newline = buffer.indexOf("\n"); newline >= 0; newline = buffer.indexOf("\n")) {
      const line = buffer.slice(0, newline)
      buffer = buffer.slice(newline + 1)
      try {
        seen.push(JSON.parse(line) as Record<string, unknown>)
      } catch {
        continue
      }
      for (const listener of listeners.splice(0)) listener()
    }
  })
  let stderr = ""
  let exited: number | null | undefined
  child.stderr?.on("data", (chunk) => (stderr += String(chunk)))
  child.once("exit", (code) => {
    exited = code
    for (const listener of listeners.splice(0)) listener()
  })
  const until = (predicate: (value: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> =>
    new Promise((resolve, reject) => {
      const check = () => {
        const found = seen.find(predicate)
        if (found !== undefined) return resolve(found)
        if (exited !== undefined) return reject(new Error(`fixture exited (${exited}) first: ${stderr}`))
        listeners.push(check)
      }
      check()
    })
  return { seen, until, event: (name: string) => until((value) => value["event"] === name) }
}
