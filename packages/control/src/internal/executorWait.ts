/**
 * Wait-token encoding shared by the executor port and FiberHost.
 */
const encodeBase64 = (text: string): string => {
  const bytes = new TextEncoder().encode(text)
  let binary = ""
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary)
}

const decodeBase64 = (token: string): string | undefined => {
  try {
    const binary = atob(token)
    const bytes = new Uint8Array(binary.length)
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  } catch {
    return undefined
  }
}

/** The token of the wait point `name` (optionally its `attempt`, a positive
 * integer) of `runId` in flow `flowId`: base64 of the UTF-8 JSON array
 * `[flowId, runId, "WaitFor/<name>[#<attempt>]"]`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const waitToken = (flowId: string, runId: string, name: string, attempt?: number): string =>
  encodeBase64(JSON.stringify([flowId, runId, `WaitFor/${name}${attempt !== undefined ? `#${attempt}` : ""}`]))

/**
 * The wait point a token names: `name` and, for a `#n` suffix with `n` a
 * positive safe integer, `attempt`. Any other suffix stays part of the name;
 * an undecodable token names nothing (`{}`) but still travels.
 *
 * @since 0.1.0
 * @category constructors
 */
export const waitPointOf = (token: string): { readonly name?: string; readonly attempt?: number } => {
  const text = decodeBase64(token)
  if (text === undefined) return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return {}
  }
  if (!Array.isArray(parsed)) return {}
  const point: unknown = parsed[2]
  if (typeof point !== "string" || !point.startsWith("WaitFor/")) return {}
  const rest = point.slice("WaitFor/".length)
  const hash = rest.lastIndexOf("#")
  if (hash >= 0) {
    const suffix = rest.slice(hash + 1)
    if (/^[1-9][0-9]*$/.test(suffix)) {
      const attempt = Number(suffix)
      if (Number.isSafeInteger(attempt)) return { name: rest.slice(0, hash), attempt }
    }
  }
  return { name: rest }
}

