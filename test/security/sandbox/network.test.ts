/**
 * Issue 27, the escape suite through the real stack: the network a sandboxed command reaches. TCP to every listener
 * of the stack (api, backend main listener, worker, Temporal, PostgreSQL) on loopback and on the host's own
 * addresses, the PostgreSQL unix socket, UDP to a listener this test owns, and the agent stub's unix socket, where
 * only stub routes answer. Each listener is first reached from the test itself (so a refusal inside means the
 * sandbox refused, not that nothing listened). Probes are python3 (`/bin/sh` is dash: no /dev/tcp).
 * Depends on the new shellctl (net namespace, seccomp) and the stub socket (DIFY_AGENT_STUB_SOCKET, helper B).
 */
import dgram from 'node:dgram';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { oneConversation, pythonProbe, refusalOf, startSandboxStack, type SandboxStack } from './support.js';

let s: SandboxStack;
beforeAll(async () => {
  s = await startSandboxStack('sandbox_network');
}, 300_000);
afterAll(async () => s?.stack.stop());

/** All probes of this file in one conversation (one workspace). */
const run = oneConversation(() => s, 'net');

/** The host's own non-loopback IPv4 addresses (a listener on 0.0.0.0 answers there too). */
const hostIps = () =>
  Object.values(os.networkInterfaces())
    .flat()
    .filter((a) => a && a.family === 'IPv4' && !a.internal)
    .map((a) => a!.address);

function portOf(url: string): number {
  return Number(new URL(url).port);
}

function canConnect(opts: net.NetConnectOpts): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(opts);
    c.setTimeout(3000, () => (c.destroy(), resolve(false)));
    c.once('connect', () => (c.destroy(), resolve(true)));
    c.once('error', () => resolve(false));
  });
}

const NET_REFUSALS = ['ECONNREFUSED', 'ENETUNREACH', 'EHOSTUNREACH', 'EACCES', 'EPERM'];

describe('the network of a sandboxed command', () => {
  it('TCP to every port of the stack is refused, on loopback and on the host addresses', async () => {
    const { stack } = s;
    const temporalPort = Number(inject('temporalAddress').split(':').at(-1));
    const ports: Record<string, number> = {
      api: portOf(stack.apiUrl),
      backend: portOf(stack.agentBackendUrl),
      temporal: temporalPort,
      postgres: inject('pgPort'),
      ...(stack.workerHttpUrl ? { worker: portOf(stack.workerHttpUrl) } : {}),
    };
    const targets: { what: string; host: string; port: number }[] = [];
    for (const [name, port] of Object.entries(ports)) {
      targets.push({ what: `tcp-${name}-loopback`, host: '127.0.0.1', port });
      for (const ip of hostIps()) targets.push({ what: `tcp-${name}-${ip}`, host: ip, port });
    }
    // Control: each one answers the test itself.
    for (const t of targets) {
      if (t.host === '127.0.0.1') expect(await canConnect({ host: t.host, port: t.port }), t.what).toBe(true);
    }
    const probes = targets.map(
      (t) => `probe(${JSON.stringify(t.what)}, lambda: socket.create_connection((${JSON.stringify(t.host)}, ${t.port}), timeout=3))`,
    );
    const t = await run(pythonProbe(probes.join('\n')));
    for (const target of targets)
      expect(NET_REFUSALS, refusalOf(t.answer, target.what).line).toContain(refusalOf(t.answer, target.what).errno);
    expect(t.answer).not.toContain('ESCAPED');
  });

  it('the PostgreSQL unix socket is not reachable', async () => {
    const pgPort = inject('pgPort');
    const socketPath = ['/tmp', '/var/run/postgresql', '/run/postgresql']
      .map((d) => `${d}/.s.PGSQL.${pgPort}`)
      .find((p) => fs.existsSync(p));
    expect(socketPath, 'the test PostgreSQL has a unix socket').toBeDefined();
    expect(await canConnect({ path: socketPath! })).toBe(true);
    const t = await run(
      pythonProbe(
        `u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\nprobe("pg-unix", lambda: u.connect(${JSON.stringify(socketPath)}))`,
      ),
    );
    expect(['ENOENT', 'EACCES', 'EPERM', 'ECONNREFUSED']).toContain(refusalOf(t.answer, 'pg-unix').errno);
  });

  it('UDP to a listener the test owns on loopback and the host addresses: nothing arrives', async () => {
    const received: string[] = [];
    const server = dgram.createSocket('udp4');
    server.on('message', (m) => received.push(m.toString()));
    await new Promise<void>((resolve) => server.bind(0, '0.0.0.0', resolve));
    const port = server.address().port;
    try {
      // Control: the listener hears the test.
      const client = dgram.createSocket('udp4');
      await new Promise<void>((resolve, reject) => client.send('control', port, '127.0.0.1', (e) => (e ? reject(e) : resolve())));
      client.close();
      for (let i = 0; i < 50 && received.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
      expect(received).toEqual(['control']);
      received.length = 0;

      const hosts = ['127.0.0.1', ...hostIps()];
      const t = await run(
        pythonProbe(
          [
            'def udp(h):',
            '    try:',
            '        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)',
            `        for _ in range(5): u.sendto(b"from-the-sandbox", (h, ${port}))`,
            '        print("UDP", h, "sent", flush=True)',
            '    except OSError as e:',
            '        print("UDP", h, "REFUSED", errno.errorcode.get(e.errno, e.errno), flush=True)',
            ...hosts.map((h) => `udp(${JSON.stringify(h)})`),
          ].join('\n'),
        ),
      );
      // sendto inside a private network namespace may "succeed" (the datagram stays in the namespace): what counts
      // is that nothing reached the host's listener.
      for (const h of hosts) expect(t.answer).toMatch(new RegExp(`UDP ${h.replace(/\./g, '\\.')} (sent|REFUSED)`));
      await new Promise((r) => setTimeout(r, 1500));
      expect(received).toEqual([]);
    } finally {
      server.close();
    }
  });

  it('the stub channel answers only stub routes: POST /runs, GET /runs/<id>, /healthz, /modules are 404; no run is created', async () => {
    const runsBefore = await backendRunCount();
    const request = (label: string, method: string, target: string, body = '') =>
      `status(${JSON.stringify(label)}, ${JSON.stringify(method)}, ${JSON.stringify(target)}, ${JSON.stringify(body)})`;
    const t = await run(
      pythonProbe(
        [
          'path = os.environ.get("DIFY_AGENT_STUB_SOCKET", "")',
          'token = os.environ.get("DIFY_AGENT_STUB_TOKEN", "")',
          'print("STUB", path, bool(token), flush=True)',
          'def status(label, method, target, body):',
          '    try:',
          '        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)',
          '        c.settimeout(5)',
          '        c.connect(path)',
          '        req = f"{method} {target} HTTP/1.1\\r\\nHost: stub\\r\\nAuthorization: Bearer {token}\\r\\nContent-Type: application/json\\r\\nContent-Length: {len(body)}\\r\\nConnection: close\\r\\n\\r\\n{body}"',
          '        c.sendall(req.encode())',
          '        head = c.recv(4096).decode(errors="replace").split("\\r\\n")[0]',
          '        print("STATUS", label, head.split(" ")[1] if " " in head else head, flush=True)',
          '    except OSError as e:',
          '        print("STATUS", label, "error", errno.errorcode.get(e.errno, e.errno), flush=True)',
          request('runs-create', 'POST', '/runs', '{"composition":{"layers":[]}}'),
          request('runs-list', 'GET', '/runs/00000000-0000-0000-0000-000000000000'),
          request('healthz', 'GET', '/healthz'),
          request('modules', 'GET', '/modules'),
          request('validate', 'POST', '/compositions/validate', '{}'),
          request('stub-prompt', 'GET', '/agent-stub/config/prompt'),
        ].join('\n'),
      ),
    );
    expect(t.answer).toMatch(/STUB \/run\/dify-agent\/stub\.sock True/);
    const statusOf = (label: string) => new RegExp(`STATUS ${label} (\\S+)`).exec(t.answer)?.[1];
    // The channel works (a stub route answers with the run's token) ...
    expect(statusOf('stub-prompt')).toBe('200');
    // ... and nothing else is behind it.
    for (const label of ['runs-create', 'runs-list', 'healthz', 'modules', 'validate']) expect(statusOf(label), label).toBe('404');
    // Only this turn's own run exists beyond those before it.
    expect(await backendRunCount()).toBe(runsBefore + 1);
  });
});

async function backendRunCount(): Promise<number> {
  const [row] = await s.stack.db.$queryRawUnsafe<{ n: bigint }[]>('select count(*) as n from agent_backend.runs');
  return Number(row!.n);
}
