/**
 * A TCP proxy in front of PostgreSQL for one service (the agent backend): a network fault from outside the process.
 * `loseAnswerOf(needle)` arms it: the next statement whose text contains `needle` reaches the server and commits, and
 * the server's answer to it never arrives — the connection is cut the moment that answer (its CommandComplete) comes
 * back. The client sees a dropped connection after a committed write: "the insert committed, the answer was lost".
 */
import net from 'node:net';

export class PgProxy {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  private armed: { needle: Buffer; resolve: () => void } | null = null;
  port = 0;

  constructor(private readonly upstreamPort: () => number) {}

  async start(port: number): Promise<void> {
    this.server = net.createServer((client) => this.pipe(client));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = port;
  }

  /** Resolves once a statement containing `needle` committed and its answer was dropped. */
  loseAnswerOf(needle: string): Promise<void> {
    return new Promise<void>((resolve) => (this.armed = { needle: Buffer.from(needle), resolve }));
  }

  private pipe(client: net.Socket): void {
    const upstream = net.connect(this.upstreamPort(), '127.0.0.1');
    this.sockets.add(client).add(upstream);
    let cutOnAnswer: (() => void) | null = null;
    const close = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    client.on('data', (chunk) => {
      if (this.armed && chunk.includes(this.armed.needle)) {
        const { resolve } = this.armed;
        this.armed = null;
        cutOnAnswer = resolve;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      // The statement's CommandComplete (`INSERT 0 1`) with the ReadyForQuery of its implicit transaction: committed.
      if (cutOnAnswer && chunk.includes('INSERT 0 1')) {
        const done = cutOnAnswer;
        cutOnAnswer = null;
        close();
        done();
        return;
      }
      client.write(chunk);
    });
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = null;
  }
}

/**
 * The agent backend replicas behind one address, as a load balancer with health-by-connect puts them: each connection
 * goes to the first replica that accepts it (the primary while it is up, else the next). A killed replica's clients
 * reconnect to a live one, which serves the run's events from the shared database.
 */
export class FailoverFront {
  private server: net.Server | null = null;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly targets: () => number[]) {}

  async start(port: number): Promise<void> {
    this.server = net.createServer((client) => {
      client.pause();
      this.sockets.add(client);
      client.on('close', () => this.sockets.delete(client));
      client.on('error', () => client.destroy());
      const attempt = (i: number) => {
        const ports = this.targets();
        if (i >= ports.length) return client.destroy();
        const upstream = net.connect(ports[i]!, '127.0.0.1');
        upstream.once('error', () => (upstream.destroy(), attempt(i + 1)));
        upstream.once('connect', () => {
          upstream.removeAllListeners('error');
          this.sockets.add(upstream);
          upstream.on('error', () => client.destroy());
          upstream.on('close', () => (this.sockets.delete(upstream), client.destroy()));
          client.on('close', () => upstream.destroy());
          client.pipe(upstream);
          upstream.pipe(client);
          client.resume();
        });
      };
      attempt(0);
    });
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    this.port = port;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server = null;
  }
}
