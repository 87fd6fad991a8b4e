import net from 'node:net';

/**
 * A free TCP port on loopback, for a server a test, benchmark or stack starts later. It is picked outside the
 * kernel's ephemeral range (32768..60999 on Linux): a port from `listen(0)` is only free until the probe
 * closes, and any other process's `listen(0)` or outbound socket may be handed it before our server binds it
 * (a CI run's worker health check was answered by another file's server that way).
 */
export function freePort(): Promise<number> {
  return stablePort();
}

const handedOut = new Set<number>();

/**
 * A free port outside the kernel's ephemeral range (32768+ on Linux), for a server that must come back on
 * the same port after a restart: an ephemeral port freed by a stop can be handed to any other socket.
 */
export async function stablePort(from = 20_000, to = 32_000): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = from + Math.floor(Math.random() * (to - from));
    // Never the same port twice in one process: several picked before any is bound would otherwise collide.
    if (handedOut.has(port)) continue;
    const ok = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.unref();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (ok) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port in ${from}..${to}`);
}
