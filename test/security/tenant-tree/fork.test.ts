/**
 * Issues 45 and 47, fork through the real stack over HTTP (api → PostgreSQL; the workspaces made by real shell turns in
 * shellctl's sandbox). The tenant builds the racer with the sandbox's own cc in a shell turn; while a turn runs it the
 * fork is refused (409 `conversation_busy`); then the racer keeps running in the source workspace as its uid — a
 * process the turn left behind — while the conversation is forked again and again: no byte of a root-only file or
 * directory may reach a fork, every fork answers 201 (entries swapped under the copy listed in `workspace_copy`), none
 * leaves a directory behind. Deleting the conversation with the racer still running removes its workspace without
 * touching the target. A FIFO and a unix socket in a workspace (500 and a partial copy before) are skipped and
 * reported. Forks count against the tenant's quota on workspace copies (413 `workspace_quota_exceeded`, nothing kept;
 * a deleted fork frees its share) and a copy against WORKSPACE_QUOTA_BYTES.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chat } from '../../support/sse.js';
import { createLogger } from '../../../core/platform/logger.js';
import { removeTree } from '../../../core/domain/workspace-tree.js';
import { TurnSweeper } from '../../../worker/sweeper.js';
import { startSandboxStack, type SandboxStack } from '../sandbox/support.js';
import { leaks, repeatFor, rootOnlyTarget, startRacer, targetIntact, type Target } from './racer.js';
import { MARKERS_DIR } from '../../../core/domain/workspace-marker.js';

const MiB = 1024 * 1024;
let s: SandboxStack;
let target: Target;
beforeAll(async () => {
  s = await startSandboxStack('tree_fork', {
    WORKSPACE_QUOTA_BYTES: 8 * MiB,
    TENANT_MAX_WORKSPACE_COPY_BYTES: 7 * MiB,
    SHELL_TIMEOUT_MS: 60_000,
  });
  // Root-only, in the deployment's data directory, like DATA_DIR/secrets.json.
  target = rootOnlyTarget(path.join(s.stack.config.dataDir, 'host-secrets'));
}, 300_000);
afterAll(async () => s?.stack.stop());

interface ForkAnswer {
  status: number;
  body: {
    id?: string;
    code?: string;
    message?: string;
    workspace_copy?: { bytes: number; entries: number; skipped: { path: string; reason: string }[]; skipped_total: number } | null;
  };
}

async function fork(conversationId: string, messageId: string, user: string): Promise<ForkAnswer> {
  const res = await fetch(`${s.stack.apiUrl}/v1/conversations/${conversationId}/fork`, {
    method: 'POST',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user, message_id: messageId }),
  });
  return { status: res.status, body: (await res.json()) as ForkAnswer['body'] };
}

async function remove(conversationId: string, user: string): Promise<number> {
  const res = await fetch(`${s.stack.apiUrl}/v1/conversations/${conversationId}`, {
    method: 'DELETE',
    headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ user }),
  });
  return res.status;
}

/** Names in WORKSPACES_DIR that are not workspaces (a partial copy or a trash left behind). */
const leftovers = () => fs.readdirSync(s.stack.config.workspacesDir).filter((n) => n.startsWith('.') && n !== MARKERS_DIR);

const sha = (p: string) => crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');

const RACER_SOURCE = fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), 'racer.c'));
const SPECS = [...Array.from({ length: 6 }, (_, i) => `f:f${i}`), ...Array.from({ length: 6 }, (_, i) => `d:d${i}`)];

describe('fork under a racer, over HTTP', () => {
  it('refuses while the racer’s turn runs; with the racer left running, every fork is 201 and holds no byte of the target; delete removes the workspace and not the target', async () => {
    const user = 'fork-racer';
    // The tenant's own build of the racer, with the sandbox's cc.
    const build = await s.sh(
      `echo ${RACER_SOURCE.toString('base64')} | base64 -d > racer.c && cc -O2 -o racer racer.c && ./racer 0.1 /nowhere /nowhere f:probe && mkdir -p notes && echo mine > notes/a.txt`,
      user,
      { timeoutMs: 60_000 },
    );
    expect(build.answer).toContain('swaps');
    expect(build.answer).toContain('The command exited with code 0.');
    const ws = await s.workspaceOf(build.conversationId);
    const owner = { uid: fs.statSync(ws.dir).uid, gid: fs.statSync(ws.dir).gid };
    expect(owner.uid).toBeGreaterThanOrEqual(s.stack.config.SHELL_UID_BASE); // the workspace's own uid, not root

    // A turn running the racer: the fork is refused while it is in flight.
    const running = chat(s.stack.apiUrl, s.key, {
      query: `/tool shell ${JSON.stringify({ command: `./racer 8 ${target.file} ${target.dir} ${SPECS.join(' ')}`, timeout_ms: 30_000 })}`,
      user,
      conversation_id: build.conversationId,
    });
    for (let i = 0; i < 400 && !fs.existsSync(path.join(ws.dir, 'd5~')); i++) await new Promise((r) => setTimeout(r, 50));
    expect(fs.existsSync(path.join(ws.dir, 'd5~')), 'the racer started in the sandbox').toBe(true);
    const busy = await fork(build.conversationId, build.messageId, user);
    expect(busy.status).toBe(409);
    expect(busy.body.code).toBe('conversation_busy');
    const ran = await running;
    expect(ran.status).toBe(200);
    const ranEnd = ran.frames.at(-1)!;
    expect(ranEnd.event).toBe('message_end');
    const forkPoint = ranEnd.data.message_id as string;

    // The racer left running in the source workspace (as its uid, cwd in it), the conversation forked again and again.
    const racer = await startRacer({ cwd: ws.dir, owner, target, specs: SPECS });
    const answers: ForkAnswer[] = [];
    const leaked: string[] = [];
    let swaps = 0;
    let forks = 0;
    try {
      forks = await repeatFor(5_000, 8, async () => {
        const a = await fork(build.conversationId, forkPoint, user);
        answers.push(a);
        expect(a.status, JSON.stringify(a.body)).toBe(201);
        const copy = await s.workspaceOf(a.body.id!);
        leaked.push(...leaks(copy.dir, target.token));
        expect(fs.readFileSync(path.join(copy.dir, 'notes', 'a.txt'), 'utf8')).toBe('mine\n');
        expect(leftovers()).toEqual([]);
        expect(await remove(a.body.id!, user)).toBe(204); // frees its share of the copy quota
      });
      // Deleting the source with the racer still running in it: its workspace goes, the target stays.
      expect(await remove(build.conversationId, user)).toBe(204);
      expect(fs.existsSync(ws.dir)).toBe(false);
    } finally {
      swaps = await racer.stop();
    }
    // A removal under a process still writing in the tree may leave it as a trash for the sweeper (removeTree);
    // nothing else may be left. With the racer stopped it goes, so the tests below start from an empty directory.
    for (const name of leftovers()) {
      expect(name).toMatch(/^\.trash-/);
      expect(await removeTree(path.join(s.stack.config.workspacesDir, name))).toBe(true);
    }
    expect(leftovers()).toEqual([]);
    const skipped = answers.reduce((n, a) => n + (a.body.workspace_copy?.skipped_total ?? 0), 0);
    console.log(`fork over HTTP: ${forks} forks under ${swaps} swaps, ${skipped} entries skipped as changed, ${leaked.length} leaked`);
    expect(swaps).toBeGreaterThan(1000);
    expect(leaked).toEqual([]);
    for (const a of answers)
      for (const e of a.body.workspace_copy!.skipped) expect(['changed_during_copy', 'not_readable']).toContain(e.reason);
    targetIntact(target);
  }, 240_000);
});

describe('special files', () => {
  it('a FIFO and a unix socket in the workspace are skipped and reported; the fork is 201 with the rest copied, nothing left behind', async () => {
    const user = 'fork-special';
    const t = await s.sh(
      `mkfifo pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('sock')" && mkdir -p data && head -c 2000000 /dev/urandom > data/blob && ls -l pipe sock`,
      user,
    );
    expect(t.answer).toContain('The command exited with code 0.');
    const src = await s.workspaceOf(t.conversationId);
    const a = await fork(t.conversationId, t.messageId, user);
    expect(a.status, JSON.stringify(a.body)).toBe(201);
    expect(a.body.workspace_copy!.skipped).toEqual(
      expect.arrayContaining([
        { path: 'pipe', reason: 'fifo' },
        { path: 'sock', reason: 'socket' },
      ]),
    );
    expect(a.body.workspace_copy!.skipped_total).toBe(2);
    const copy = await s.workspaceOf(a.body.id!);
    expect(sha(path.join(copy.dir, 'data', 'blob'))).toBe(sha(path.join(src.dir, 'data', 'blob')));
    expect(fs.existsSync(path.join(copy.dir, 'pipe'))).toBe(false);
    expect(leftovers()).toEqual([]);
    // The fork answers from its copy.
    const next = await s.sh('ls; wc -c data/blob', user, { conversationId: a.body.id! });
    expect(next.answer).toContain('2000000 data/blob');
    expect(await remove(a.body.id!, user)).toBe(204);
    expect(await remove(t.conversationId, user)).toBe(204);
  }, 120_000);
});

describe('quota on workspace copies', () => {
  it('counts every live fork against TENANT_MAX_WORKSPACE_COPY_BYTES (413, nothing kept), a deleted fork frees its share, and one copy is bounded by WORKSPACE_QUOTA_BYTES', async () => {
    const user = 'fork-quota';
    const t = await s.sh('head -c 3000000 /dev/urandom > data.bin && echo ok', user);
    expect(t.answer).toContain('The command exited with code 0.');
    const conversations = () => s.stack.db.conversation.count({ where: { deleted_at: null } });
    const first = await fork(t.conversationId, t.messageId, user);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body.workspace_copy!.bytes).toBeGreaterThan(3_000_000);
    const second = await fork(t.conversationId, t.messageId, user);
    expect(second.status).toBe(201);
    const before = await conversations();
    const third = await fork(t.conversationId, t.messageId, user); // 3 × 3 MB > 7 MiB
    expect(third.status).toBe(413);
    expect(third.body.code).toBe('workspace_quota_exceeded');
    expect(third.body.message).toContain('TENANT_MAX_WORKSPACE_COPY_BYTES');
    expect(await conversations()).toBe(before);
    expect(leftovers()).toEqual([]);
    expect(await remove(first.body.id!, user)).toBe(204);
    const again = await fork(t.conversationId, t.messageId, user);
    expect(again.status).toBe(201);

    // A workspace holding more than one workspace may (files put there by anyone: the tenant's command would have been
    // cut at its quota): refused whole.
    const big = await s.sh('echo small', 'fork-quota-big');
    const ws = await s.workspaceOf(big.conversationId);
    fs.writeFileSync(path.join(ws.dir, 'huge.bin'), Buffer.alloc(9 * MiB, 1));
    const huge = await fork(big.conversationId, big.messageId, 'fork-quota-big');
    expect(huge.status).toBe(413);
    expect(huge.body.code).toBe('workspace_quota_exceeded');
    expect(huge.body.message).toMatch(/WORKSPACE_QUOTA_BYTES|TENANT_MAX_WORKSPACE_COPY_BYTES/);
    expect(leftovers()).toEqual([]);
  }, 120_000);
});

describe('the sweeper', () => {
  it('removes a partial copy and a trash a crash left in WORKSPACES_DIR once they are an hour old, in the worker’s sweeper pass', async () => {
    const dir = s.stack.config.workspacesDir;
    const uuid = crypto.randomUUID();
    const old = `.partial-${Date.now() - 3_700_000}-${uuid}`;
    const recent = `.partial-${Date.now()}-${uuid}`;
    const trash = `.trash-${Date.now() - 3_700_000}-${uuid}`;
    fs.mkdirSync(path.join(dir, old, 'a', 'b'), { recursive: true });
    fs.writeFileSync(path.join(dir, old, 'a', 'b', 'f'), 'left by a crash');
    fs.symlinkSync(target.dir, path.join(dir, old, 'a', 'link'));
    fs.mkdirSync(path.join(dir, trash));
    fs.mkdirSync(path.join(dir, recent));
    const sweeper = new TurnSweeper({ db: s.stack.db, temporal: () => null, logger: createLogger('test', 'silent'), workspacesDir: dir });
    const result = await sweeper.sweep();
    expect(result.leftovers?.sort()).toEqual([old, trash].sort());
    expect(leftovers()).toEqual([recent]);
    fs.rmdirSync(path.join(dir, recent));
    targetIntact(target);
  });
});
