/**
 * Test support: a TCP proxy on 127.0.0.1 between a client and a local server
 * that can be switched to black-holing: from then on every byte in both
 * directions is dropped and no socket is closed, as when the network between a
 * host and its database goes silent. The proxy is bounded (a few connections,
 * a lifetime after which it closes everything by itself) so a failing test
 * cannot leave it running.
 */
import * as net from "node:net"
import { Effect, type Scope } from "effect"

/** A running proxy. */
export interface BlackHoleProxy {
  /** The proxy's port on 127.0.0.1. */
  readonly port: number
  /** Drop every byte from now on, on current and new connections, without closing any. */
  readonly blackHole: () => void
  /** Client connections accepted so far. */
  readonly accepted: () => number
}

export interface BlackHoleProxyOptions {
  /** Upstream port on 127.0.0.1; default 5432. */
  readonly upstreamPort?: number
  /** Connections accepted at most (more are refused); default 16. */
  readonly maxConnections?: number
  /** Lifetime in milliseconds after which the proxy closes itself; default 120 000. */
  readonly lifetimeMs?: number
}

/** Start a proxy; it stops when the scope closes or its lifetime ends, whichever is first. */
export const make = (options: BlackHoleProxyOptions = {}): Effect.Effect<BlackHoleProxy, never, Scope.Scope> => {
  const upstreamPort = options.upstreamPort ?? 5432
  const maxConnections = options.maxConnections ?? 16
  const lifetimeMs = options.lifetimeMs ?? 120_000
  return Effect.acquireRelease(
    Effect.async<{ readonly proxy: BlackHoleProxy; readonly stop: () => void }>((resume) => {
      const sockets = new Set<net.Socket>()
      let blackHoled = false
      let accepted = 0
      const track = (socket: net.Socket) => {
        sockets.add(socket)
        // A socket error (a reset by the other side) only ends that socket.
        socket.on("error", () => socket.destroy())
        socket.on("close", () => sockets.delete(socket))
      }
      const server = net.createServer((client) => {
        accepted += 1
        if (accepted > maxConnections) return client.destroy()
        track(client)
        const upstream = net.connect({ host: "127.0.0.1", port: upstreamPort })
        track(upstream)
        const forward = (from: net.Socket, to: net.Socket) => {
          from.on("data", (chunk) => {
            if (!blackHoled) to.write(chunk)
          })
          // A close passes through only while the link is up: a silent network carries no FIN.
          from.on("end", () => {
            if (!blackHoled) to.end()
          })
          from.on("close", () => {
            if (!blackHoled) to.destroy()
          })
        }
        forward(client, upstream)
        forward(upstream, client)
      })
      const stop = () => {
        clearTimeout(lifetime)
        server.close()
        for (const socket of sockets) socket.destroy()
        sockets.clear()
      }
      const lifetime = setTimeout(stop, lifetimeMs)
      lifetime.unref()
      server.listen(0, "127.0.0.1", () => {
        const address = server.address() as net.AddressInfo
        resume(Effect.succeed({
          proxy: {
            port: address.port,
            blackHole: () => {
              blackHoled = true
            },
            accepted: () => accepted
          },
          stop
        }))
      })
    }),
    ({ stop }) => Effect.sync(stop)
  ).pipe(Effect.map(({ proxy }) => proxy))
}
