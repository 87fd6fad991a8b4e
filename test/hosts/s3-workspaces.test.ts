/**
 * Issue 44 item 2, the workspace part: WORKSPACE_STORE=s3 across hosts with no directory shared between them. The S3
 * server (SeaweedFS) and two agent backends each run in a network namespace of their own (stack/netns.ts), each
 * backend with a DATA_DIR of its own; the api, the worker, PostgreSQL and Temporal run in this process's namespace
 * (not yet hosts of their own), and the api's and the worker's WORKSPACES_DIR is a regular file, so nothing of a
 * workspace can be on their disk. The backends reach PostgreSQL and the api's inner API over the bridge; the worker
 * reaches "the agent backend" through a switch that sends new connections to A or B.
 *
 * Shown: a file the shell writes in turn 1 on backend A is read in turn 2 on backend B; a backend SIGKILLed in the
 * middle of a turn (its shell has written a file that was never saved) fails that turn (`backend_restarted`, ended
 * by the other backend), and the next turn, on B, has the workspace as it was last saved: turn 1's file, not the
 * killed turn's.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSoulConfig, demoSoulConfig } from '../../core/domain/soul.js';
import { loadConfig } from '../../core/platform/config.js';
import { createLogger } from '../../core/platform/logger.js';
import { HostNetwork, netnsAvailable, type Host } from '../../stack/netns.js';
import { freePort } from '../../stack/ports.js';
import { S3Server } from '../../stack/s3-server.js';
import { configToEnv, ONE_CLIENT_LIMITS, startStack, type Stack } from '../../stack/start-stack.js';
import { chat, FrameReader, postChat, type ClientFrame } from '../support/sse.js';

const REPO = path.resolve(import.meta.dirname, '../..');
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hosts-s3-'));
const tag = crypto.randomBytes(3).toString('hex');
const hosts = new HostNetwork(tag, 100 + crypto.randomInt(100));

/** A TCP listener that forwards each connection to `to` (the current one for the switch). */
class Forward {
  private readonly sockets = new Set<net.Socket>();
  private constructor(
    readonly server: net.Server,
    public to: { host: string; port: number },
  ) {}
  static async start(listen: { host: string; port: number }, to: { host: string; port: number }): Promise<Forward> {
    const server = net.createServer();
    const f = new Forward(server, to);
    server.on('connection', (client) => {
      const upstream = net.connect(f.to);
      for (const sock of [client, upstream]) {
        f.sockets.add(sock);
        sock.on('error', () => undefined);
        sock.once('close', () => f.sockets.delete(sock));
      }
      client.pipe(upstream).pipe(client);
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => client.destroy());
    });
    await new Promise<void>((r) => server.listen(listen.port, listen.host, () => r()));
    return f;
  }
  /** New connections go to `to`; the open ones (kept-alive, to the old target) are cut. */
  retarget(to: { host: string; port: number }): void {
    this.to = to;
    for (const sock of this.sockets) sock.destroy();
  }
  close(): Promise<void> {
    for (const sock of this.sockets) sock.destroy();
    return new Promise((r) => this.server.close(() => r()));
  }
}

let s3: S3Server;
let stack: Stack;
let pgForward: Forward;
let sw: Forward;
let s3Host: Host;
const backends = new Map<string, { host: Host; child: ChildProcess; dataDir: string }>();
const BACKEND_PORT = 5002;

async function startBackend(name: string): Promise<{ host: Host; child: ChildProcess; dataDir: string }> {
  const host = hosts.hosts.get(name)!;
  const dataDir = path.join(root, name);
  fs.mkdirSync(dataDir, { recursive: true });
  const pg = new URL(stack.databaseUrl);
  pg.hostname = hosts.bridgeIp;
  pg.port = String((pgForward.server.address() as net.AddressInfo).port);
  const env = {
    ...configToEnv(stack.config),
    ...s3.env(),
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    DATABASE_URL: pg.toString(),
    DATA_DIR: dataDir,
    WORKSPACES_DIR: path.join(dataDir, 'workspaces'),
    AGENT_BACKEND_HOST: host.ip,
    AGENT_BACKEND_PORT: String(BACKEND_PORT),
    API_INTERNAL_URL: stack.apiUrl,
  };
  const log = fs.openSync(path.join(root, `${name}.log`), 'a');
  const child = spawn('ip', ['netns', 'exec', host.ns, process.execPath, '--import', 'tsx', path.join(REPO, 'agent-backend/main.ts')], {
    cwd: REPO,
    env,
    stdio: ['ignore', log, log],
  });
  fs.closeSync(log);
  const b = { host, child, dataDir };
  backends.set(name, b);
  // Up when its /healthz answers over the bridge.
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null)
      throw new Error(
        `backend ${name} exited (${child.exitCode}): ${fs.readFileSync(path.join(root, `${name}.log`), 'utf8').slice(-2000)}`,
      );
    const ok = await fetch(`http://${host.ip}:${BACKEND_PORT}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return b;
    if (Date.now() > deadline) throw new Error(`backend ${name} did not answer /healthz`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

const to = (name: string) => ({ host: backends.get(name)!.host.ip, port: BACKEND_PORT });

beforeAll(async () => {
  const why = netnsAvailable();
  expect(why, why ?? '').toBeNull();
  s3Host = hosts.add('s3');
  hosts.add('backend-a');
  hosts.add('backend-b');
  s3 = await S3Server.start({
    dataDir: path.join(root, 's3'),
    bucket: 'workspaces',
    accessKeyId: 'hosts-access',
    secretAccessKey: `hosts-secret-${crypto.randomBytes(8).toString('hex')}`,
    host: s3Host.ip,
    wrap: hosts.wrap(s3Host),
  });
  // The api's and the worker's WORKSPACES_DIR: a regular file (s3 mode never uses it).
  const apiData = path.join(root, 'api');
  fs.mkdirSync(apiData, { recursive: true });
  fs.writeFileSync(path.join(apiData, 'no-workspaces'), 'not a directory\n');
  sw = await Forward.start({ host: '127.0.0.1', port: await freePort() }, { host: '127.0.0.1', port: 1 });
  const config = loadConfig(
    {},
    {
      ...s3.env(),
      ...ONE_CLIENT_LIMITS,
      DATA_DIR: apiData,
      WORKSPACES_DIR: path.join(apiData, 'no-workspaces'),
      EMBEDDED_PG_PORT: await freePort(),
      EMBEDDED_PG_DURABLE: false,
      TEMPORAL_DEV_PORT: await freePort(),
      TEMPORAL_UI_PORT: await freePort(),
      TEMPORAL_TASK_QUEUE: `tq-hosts-s3-${tag}`,
      API_HOST: hosts.bridgeIp,
      API_PORT: await freePort(),
      AGENT_BACKEND_URL: `http://127.0.0.1:${(sw.server.address() as net.AddressInfo).port}`,
      LOG_LEVEL: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent',
      DEMO_MODEL_TOKEN_DELAY_MS: 0,
      SHELLCTL_AUTH_TOKEN: `hosts-shellctl-${crypto.randomBytes(8).toString('hex')}`,
      AGENT_BACKEND_TOKEN: `hosts-backend-${crypto.randomBytes(12).toString('hex')}`,
      INNER_API_KEY: `hosts-inner-${crypto.randomBytes(12).toString('hex')}`,
      EXECUTION_CONTEXT_SIGNING_KEY: `hosts-context-${crypto.randomBytes(12).toString('hex')}`,
      MODEL_ALLOW_PRIVATE_NETWORK: true,
    },
  );
  stack = await startStack({ config, logger: createLogger('hosts-s3', config.LOG_LEVEL), worker: 'in-process', headlessTemporal: true });
  // PostgreSQL listens on loopback here: the backends' run store reaches it through the bridge.
  pgForward = await Forward.start(
    { host: hosts.bridgeIp, port: await freePort() },
    { host: '127.0.0.1', port: Number(new URL(stack.databaseUrl).port) },
  );
  await startBackend('backend-a');
  await startBackend('backend-b');

  const soul = demoSoulConfig();
  soul.runtime = { enabled: true };
  soul.shell = { enabled: true, timeout_ms: 60_000 };
  const consoleFetch = (p: string, body: unknown, method: string) =>
    fetch(`${stack.apiUrl}/console/api/apps/${stack.demo!.appId}${p}`, {
      method,
      headers: { authorization: `Bearer ${stack.demo!.consoleKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
  expect((await consoleFetch('/agent/draft', { config: AgentSoulConfig.parse(soul) }, 'PUT')).status).toBe(200);
  expect((await consoleFetch('/agent/publish', { from: 'draft' }, 'POST')).status).toBe(201);
}, 600_000);

afterAll(async () => {
  for (const b of backends.values()) if (b.child.exitCode === null && b.child.signalCode === null) b.child.kill('SIGKILL');
  await stack?.stop();
  await sw?.close();
  await pgForward?.close();
  await s3?.stop();
  hosts.destroy();
  expect(spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout).not.toContain(`h${tag}-`);
  fs.rmSync(root, { recursive: true, force: true });
});

const user = 'hosts-s3';
const answerOf = (frames: ClientFrame[]) => (frames.find((f) => f.event === 'message')?.data.answer as string) ?? '';

async function turn(query: string, conversationId?: string) {
  const { status, frames } = await chat(stack.apiUrl, stack.demo!.apiKey, {
    query,
    user,
    ...(conversationId ? { conversation_id: conversationId } : {}),
  });
  expect(status).toBe(200);
  const end = frames.at(-1)!;
  return { end, answer: answerOf(frames), conversationId: end.data.conversation_id as string };
}

async function workspaceIdOf(conversationId: string): Promise<string> {
  const conv = await stack.db.conversation.findUniqueOrThrow({ where: { id: conversationId } });
  const b = await stack.db.agentWorkspaceBinding.findUniqueOrThrow({ where: { id: conv.agent_workspace_binding_id! } });
  return b.workspace_id.toLowerCase();
}

describe('WORKSPACE_STORE=s3 across hosts, no shared directory', () => {
  it('turn 2 on backend B reads the file turn 1 wrote on A; a backend killed mid-turn leaves the last saved workspace', async () => {
    sw.retarget(to('backend-a'));
    const t1 = await turn('/sh echo written-on-a > notes.txt && echo ok');
    expect(t1.end.event, JSON.stringify(t1.end.data)).toBe('message_end');
    const ws = await workspaceIdOf(t1.conversationId);
    const onA = path.join(backends.get('backend-a')!.dataDir, 'workspaces', ws);
    const onB = path.join(backends.get('backend-b')!.dataDir, 'workspaces', ws);
    expect(fs.readFileSync(path.join(onA, 'notes.txt'), 'utf8')).toBe('written-on-a\n');
    expect(fs.existsSync(onB)).toBe(false);

    sw.retarget(to('backend-b'));
    const t2 = await turn('/sh cat notes.txt', t1.conversationId);
    expect(t2.end.event, JSON.stringify(t2.end.data)).toBe('message_end');
    expect(t2.answer).toContain('written-on-a');
    expect(fs.readFileSync(path.join(onB, 'notes.txt'), 'utf8')).toBe('written-on-a\n');

    // Failover: turn 3 on A writes a file and keeps running; A is killed while it runs.
    sw.retarget(to('backend-a'));
    const res = await postChat(stack.apiUrl, stack.demo!.apiKey, {
      query: '/sh echo never-saved > draft.txt && sleep 50',
      user,
      conversation_id: t1.conversationId,
    });
    expect(res.status).toBe(200);
    const reader = new FrameReader(res);
    const deadline = Date.now() + 60_000;
    while (!fs.existsSync(path.join(onA, 'draft.txt'))) {
      if (Date.now() > deadline) throw new Error('turn 3 never wrote draft.txt on A');
      await new Promise((r) => setTimeout(r, 100));
    }
    const a = backends.get('backend-a')!;
    spawnSync('ip', ['netns', 'pids', a.host.ns], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .forEach((pid) => {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          /* gone */
        }
      });
    sw.retarget(to('backend-b'));
    const frames = await reader.read();
    const end3 = frames.at(-1)!;
    expect(end3.event, JSON.stringify(end3.data)).toBe('error');

    const t4 = await turn('/sh ls; cat notes.txt', t1.conversationId);
    expect(t4.end.event, JSON.stringify(t4.end.data)).toBe('message_end');
    expect(t4.answer).toContain('written-on-a');
    expect(t4.answer).not.toContain('draft.txt');
    expect(await workspaceIdOf(t1.conversationId)).toBe(ws);
  });
});
