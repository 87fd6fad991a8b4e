/**
 * The containers built and run (issue 44 item 3; docs/deploying.md "Containers built and run here"):
 * deploy/containers/run.ts builds every image from a debootstrap rootfs and the project's own binaries, runs the
 * docker-compose.yml we ship, provisions with the admin CLI and streams one turn whose shell command runs in the
 * agent backend's container, over HTTP+SSE through the proxy. Its report is checked here: every service up and
 * healthy, the jobs done, the shell isolated in the container (namespaces, a fresh /proc, Landlock), and the same
 * backend without docker-compose.yml's security_opt refusing the shell with the advice that fixes it.
 * Runs where Docker is (a daemon answering, or dockerd to start as root); `npm run test:containers`.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CONTAINER_SANDBOX_ADVICE } from '../../agent-backend/workspace/sandbox.js';
import type { ContainersReport } from '../../deploy/containers/run.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

function dockerAvailable(): boolean {
  if (spawnSync('docker', ['info'], { stdio: 'ignore', timeout: 20_000 }).status === 0) return true;
  const dockerd = ['/usr/sbin/dockerd', '/usr/bin/dockerd'].some((p) => fs.existsSync(p));
  const ok = dockerd && process.getuid?.() === 0 && fs.existsSync('/usr/sbin/debootstrap');
  if (!ok)
    console.warn(
      'containers.test.ts skipped: no Docker daemon answers and dockerd/debootstrap are not installed (apt-get install -y docker.io debootstrap), or not root',
    );
  return ok;
}

describe.runIf(dockerAvailable())('docker-compose.yml built and run here', () => {
  let report: ContainersReport;

  it('builds the images and brings the compose project up, every service healthy and every job done', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'deploy', 'containers', 'run.ts')], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 64 * 1024 * 1024,
      timeout: 85 * 60_000,
    });
    report = JSON.parse(r.stdout) as ContainersReport;
    expect((report as unknown as { error?: string }).error).toBeUndefined();
    expect(r.status).toBe(0);
    const state = (name: string) => report.services.filter((s) => s.name === name);
    expect(state('api')).toEqual([
      { name: 'api', state: 'running', health: 'healthy' },
      { name: 'api', state: 'running', health: 'healthy' },
    ]);
    for (const name of ['worker', 'agent-backend', 'postgres'])
      expect(state(name), name).toEqual([{ name, state: 'running', health: 'healthy' }]);
    for (const name of ['temporal', 'temporal-ui', 'proxy'])
      expect(
        state(name).map((s) => s.state),
        name,
      ).toEqual(['running']);
    for (const name of ['migrate', 'temporal-schema', 'temporal-setup'])
      expect(
        state(name).map((s) => s.state),
        name,
      ).toEqual(['exited']);
    for (const tag of ['dify-agent-temporal:local', 'dify-local/debian:bookworm'])
      expect(Number(report.images[tag]), tag).toBeGreaterThan(0);
  });

  it('runs the shell isolated inside the agent backend container (namespaces, a fresh /proc, Landlock)', () => {
    expect(report.isolation).toMatchObject({ shell: 'available', isolation: 'on', namespaces: true, proc: true, missing: [] });
    expect(report.isolation.landlock_abi).toBeGreaterThanOrEqual(1);
  });

  it('streams one turn whose shell command ran in the container, over HTTP+SSE through the proxy', () => {
    expect(report.turn.status).toBe(200);
    expect(report.turn.events).toEqual(expect.arrayContaining(['message', 'agent_thought', 'message_end']));
    expect(report.turn.events.at(-1)).toBe('message_end');
    // The command's own output (uname, the sandbox's uid, the file it wrote) in the answer the demo model streams.
    expect(report.turn.answer).toMatch(/The command exited with code 0\./);
    expect(report.turn.answer).toMatch(/Linux/);
    expect(report.turn.answer).toMatch(/made in sandbox/);
    expect(report.turn.shellOutput).toMatch(/made in sandbox/);
  });

  it('refuses the shell where the security_opt is missing, naming what is missing and what to set', () => {
    const { isolation } = report.withoutSecurityOpt;
    expect(isolation).toMatchObject({ shell: 'refused', namespaces: false, missing: ['Linux namespaces (mount, PID, network, IPC, UTS)'] });
    expect(String(isolation.reason)).toContain(CONTAINER_SANDBOX_ADVICE);
  });
});
