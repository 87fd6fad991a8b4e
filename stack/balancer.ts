/**
 * A small TCP round-robin load balancer for `npm run cluster`: the api replicas sit behind one address (what
 * clients and the agent backends call), the agent backends behind another (what the apis and workers call).
 * Each new connection goes to the next upstream; one that refuses the connection (a replica killed or
 * restarting) is skipped, so a dead replica costs its open connections, never new ones. Connections are
 * not moved: an SSE stream cut by a replica's death ends, and the client re-attaches (Last-Event-ID), which
 * is what a production proxy (nginx, an ingress, a cloud load balancer) does too.
 */
import net from 'node:net';

export interface Balancer {
  url: string;
  port: number;
  /** Connections handed to each upstream so far (by index), for the logs and the tests. */
  counts: number[];
  close: () => Promise<void>;
}

export async function startBalancer(opts: { port: number; upstreams: number[]; host?: string }): Promise<Balancer> {
  const host = opts.host ?? '127.0.0.1';
  const counts = opts.upstreams.map(() => 0);
  const sockets = new Set<net.Socket>();
  let next = 0;
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  };
  /** Tries the upstreams from the next one on; the first that accepts gets the connection. */
  const connect = (client: net.Socket, tried = 0): void => {
    if (tried >= opts.upstreams.length || client.destroyed) {
      client.destroy();
      return;
    }
    const i = next;
    next = (next + 1) % opts.upstreams.length;
    const upstream = net.connect({ port: opts.upstreams[i]!, host });
    track(upstream);
    // `on`, not `once`: a second error event on a socket without a listener would end this process (issue 28).
    let failed = false;
    upstream.on('error', () => {
      if (failed) return;
      failed = true;
      upstream.destroy();
      if (!connected) connect(client, tried + 1);
      else client.destroy();
    });
    let connected = false;
    upstream.once('connect', () => {
      connected = true;
      counts[i]!++;
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
      client.resume();
    });
  };
  const server = net.createServer({ pauseOnConnect: true }, (client) => {
    track(client);
    client.on('error', () => client.destroy());
    connect(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, host, () => resolve());
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://${host}:${port}`,
    port,
    counts,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      }),
  };
}
