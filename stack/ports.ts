/** A free TCP port on loopback (for stacks started on ephemeral ports: tests, benchmarks). */
import net from 'node:net';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * A free port outside the kernel's ephemeral range (32768+ on Linux), for a server that must come back on
 * the same port after a restart: an ephemeral port freed by a stop can be handed to any other socket.
 */
export async function stablePort(from = 20_000, to = 32_000): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = from + Math.floor(Math.random() * (to - from));
    const ok = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.unref();
      srv.once('error', () => resolve(false));
      srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (ok) return port;
  }
  throw new Error(`no free port in ${from}..${to}`);
}
