/**
 * Issue 27, the escape suite through the real stack: files across workspaces. Reading another conversation's
 * workspace; the `uploads/` symlink the agent plants before a turn with a file (item 5: the api placed the file as
 * root wherever the link pointed, into another tenant's workspace); `outputs/` as a symlink to another workspace; a
 * forged run naming another conversation's workspace; the byte quota on files attached from outputs/.
 * Depends on: the new shellctl (uid per workspace) for the cross-workspace read; core/domain/workspace-fs.ts for the
 * symlinks; the backend's workspace authorization (helper B) for the forged run; core/domain/output-quota.ts.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachToolFiles } from '../../../activities/run-agent/tool-files.js';
import { createLogger } from '../../../core/platform/logger.js';
import { sha256 } from '../../../core/domain/workspace-outputs.js';
import { upload } from '../../api/helpers.js';
import { startSandboxStack, type SandboxStack } from './support.js';

let s: SandboxStack;
const TURN_QUOTA = 100_000;
const DAY_QUOTA = 150_000;
beforeAll(async () => {
  s = await startSandboxStack('sandbox_files', {
    OUTPUT_FILES_MAX_BYTES_PER_TURN: TURN_QUOTA,
    OUTPUT_FILES_MAX_BYTES_PER_TENANT_DAY: DAY_QUOTA,
  });
}, 300_000);
afterAll(async () => s?.stack.stop());

/** Every file under `dir` with its sha256 (symlinks as their target): what "unchanged" compares. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of fs.readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const p = path.join(e.parentPath, e.name);
    const st = fs.lstatSync(p);
    out[path.relative(dir, p)] = st.isSymbolicLink()
      ? `-> ${fs.readlinkSync(p)}`
      : st.isFile()
        ? crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex')
        : `<${st.isDirectory() ? 'dir' : 'other'} ${st.mode.toString(8)}>`;
  }
  return out;
}

/** The victim: another user's conversation with a secret in its workspace. */
async function victim(user: string) {
  const t = await s.sh('echo "victim secret 7f3a" > secret.txt && mkdir -p uploads notes && echo keep > notes/keep.txt', user);
  expect(t.answer).toContain('The command exited with code 0.');
  return { ...t, ...(await s.workspaceOf(t.conversationId)) };
}

describe('files across workspaces', () => {
  it('another workspace cannot be read, listed or written; its files stay unchanged', async () => {
    const v = await victim('files-victim-1');
    const before = snapshot(v.dir);
    const t = await s.sh(
      `cat ${v.dir}/secret.txt; ls ${v.dir}; ls ${path.dirname(v.dir)}; echo ESCAPED > ${v.dir}/planted.txt; cp /dev/null ${v.dir}/notes/keep.txt; echo done`,
      'files-attacker-1',
    );
    expect(t.answer).not.toContain('victim secret 7f3a');
    expect(t.answer).toMatch(new RegExp(`cat: ${v.dir}/secret.txt: (Permission denied|No such file or directory)`));
    expect(t.answer).toMatch(new RegExp(`ls: cannot (open directory|access) '${v.dir}'`));
    expect(t.answer).not.toContain(v.workspaceId.slice(0, 8) + '\n'); // the workspaces dir is not listed
    expect(fs.existsSync(path.join(v.dir, 'planted.txt'))).toBe(false);
    expect(snapshot(v.dir)).toEqual(before);
  });

  it('uploads/ replaced by a symlink to another workspace: the next turn’s file is not placed there, the prompt says why', async () => {
    const v = await victim('files-victim-2');
    const outside = fs.mkdtempSync(path.join(s.stack.config.dataDir, 'outside-'));
    const beforeVictim = snapshot(v.dir);
    // The attacker's conversation: its agent swaps uploads/ for a link into the victim's workspace.
    const a1 = await s.sh(`rm -rf uploads; ln -s ${v.dir}/uploads uploads && ls -l uploads`, 'files-attacker-2');
    expect(a1.answer).toContain('The command exited with code 0.');
    const attacker = await s.workspaceOf(a1.conversationId);
    expect(fs.lstatSync(path.join(attacker.dir, 'uploads')).isSymbolicLink()).toBe(true);

    const up = await upload(
      s.stack.apiUrl,
      s.key,
      new TextEncoder().encode('ESCAPED planted by the api\n'),
      'planted.txt',
      'files-attacker-2',
      'text/plain',
    );
    expect(up.status).toBe(201);
    const file = { type: 'document', transfer_method: 'local_file', upload_file_id: (up.body as { id: string }).id };
    const a2 = await s.sh('ls -l uploads/ uploads/*/ 2>&1; echo listed', 'files-attacker-2', {
      conversationId: a1.conversationId,
      files: [file],
    });
    expect(a2.end.event).toBe('message_end');
    // The model was told the file was not placed, and why.
    const run = await s.stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: a2.messageId } });
    const prompt = (run.request as { composition: { layers: { name: string; config: { text?: string } }[] } }).composition.layers.find(
      (l) => l.name === 'agent_app_user_prompt',
    )!;
    expect(prompt.config.text).toContain(
      'Attached files that could not be placed in your workspace:\n- planted.txt: uploads/ in the workspace is a symbolic link; the file was not placed',
    );
    // Nothing landed in the victim's workspace (nor anywhere outside the attacker's).
    expect(snapshot(v.dir)).toEqual(beforeVictim);
    expect(fs.readdirSync(outside)).toEqual([]);

    // The same with a directory the test owns outside every workspace.
    const a3 = await s.sh(`rm -f uploads; ln -s ${outside} uploads && echo linked`, 'files-attacker-2', {
      conversationId: a1.conversationId,
    });
    expect(a3.answer).toContain('linked');
    const a4 = await s.sh('echo next', 'files-attacker-2', { conversationId: a1.conversationId, files: [file] });
    expect(a4.end.event).toBe('message_end');
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(snapshot(v.dir)).toEqual(beforeVictim);
  });

  it('outputs/ replaced by a symlink to another workspace attaches nothing of it', async () => {
    const v = await victim('files-victim-3');
    const t1 = await s.sh(`rm -rf outputs; ln -s ${v.dir} outputs; echo linked`, 'files-attacker-3');
    expect(t1.answer).toContain('linked');
    // A command that "creates" a file through the link: whatever the sandbox lets it do, the api reads nothing there.
    const t2 = await s.sh('touch outputs/secret.txt 2>&1; cat outputs/secret.txt 2>&1; echo tried', 'files-attacker-3', {
      conversationId: t1.conversationId,
    });
    expect(t2.answer).not.toContain('victim secret 7f3a');
    expect(t2.frames.filter((f) => f.event === 'message_file')).toEqual([]);
    expect(await s.stack.db.messageFile.count({ where: { message_id: t2.messageId } })).toBe(0);
  });

  it('a FIFO and a unix socket in outputs/ attach nothing and hold nothing up: the turn ends, the plain file beside them is attached (issue 45)', async () => {
    const t = await s.sh(
      `mkfifo outputs/pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('outputs/sock')" && echo fine > outputs/ok.txt && ls -l outputs/`,
      'files-special-1',
    );
    expect(t.end.event).toBe('message_end');
    expect(t.answer).toContain('The command exited with code 0.');
    const ws = await s.workspaceOf(t.conversationId);
    expect(fs.lstatSync(path.join(ws.dir, 'outputs', 'pipe')).isFIFO()).toBe(true);
    expect(fs.lstatSync(path.join(ws.dir, 'outputs', 'sock')).isSocket()).toBe(true);
    const rows = await s.stack.db.messageFile.findMany({ where: { message_id: t.messageId }, include: { upload_file: true } });
    expect(rows.map((r) => r.upload_file?.name)).toEqual(['ok.txt']);
    expect(t.frames.filter((f) => f.event === 'message_file')).toHaveLength(1);
    // The next turn of the conversation runs as usual with them still there.
    const t2 = await s.sh('echo again', 'files-special-1', { conversationId: t.conversationId });
    expect(t2.end.event).toBe('message_end');
    expect(t2.answer).toContain('again');
  });

  for (const [kind, make] of [
    ['a FIFO', 'mkfifo uploads'],
    ['a unix socket', `python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('uploads')"`],
  ] as const) {
    it(`uploads/ replaced by ${kind}: the next turn’s file is not placed, the turn ends and the prompt says why (issue 45)`, async () => {
      const user = `files-special-${kind.length}`;
      const a1 = await s.sh(`rm -rf uploads; ${make} && ls -l uploads`, user);
      expect(a1.answer).toContain('The command exited with code 0.');
      const up = await upload(s.stack.apiUrl, s.key, new TextEncoder().encode('a document\n'), 'doc.txt', user, 'text/plain');
      expect(up.status).toBe(201);
      const file = { type: 'document', transfer_method: 'local_file', upload_file_id: (up.body as { id: string }).id };
      const a2 = await s.sh('echo next', user, { conversationId: a1.conversationId, files: [file] });
      expect(a2.end.event).toBe('message_end');
      expect(a2.answer).toContain('next');
      const run = await s.stack.db.agentBackendRun.findUniqueOrThrow({ where: { message_id: a2.messageId } });
      const prompt = (run.request as { composition: { layers: { name: string; config: { text?: string } }[] } }).composition.layers.find(
        (l) => l.name === 'agent_app_user_prompt',
      )!;
      expect(prompt.config.text).toMatch(/- doc\.txt: uploads\/ in the workspace is not a directory; the file was not placed/);
      const ws = await s.workspaceOf(a1.conversationId);
      expect(fs.lstatSync(path.join(ws.dir, 'uploads')).isDirectory()).toBe(false);
    });
  }

  it('a forged run naming another conversation’s workspace (real backend token, a copy of a real request) ends run_failed', async () => {
    const v = await victim('files-victim-4');
    const before = snapshot(v.dir);
    const own = await s.sh('echo mine', 'files-attacker-4');
    const [row] = await s.stack.db.$queryRawUnsafe<
      { request: { composition: { layers: { name: string; config: Record<string, unknown> }[] } } }[]
    >(`select request from agent_backend.runs where request::text like $1 order by created_at desc limit 1`, `%${own.messageId}%`);
    expect(row, 'the backend stored the real run').toBeDefined();
    const forged = structuredClone(row!.request) as Record<string, unknown> & typeof row.request;
    delete forged.idempotency_key;
    const layers = forged.composition.layers;
    const runtime = layers.find((l) => l.name === 'runtime')!;
    expect(runtime.config.workspace_id).not.toBe(v.workspaceId);
    runtime.config.workspace_id = v.workspaceId;
    layers.find((l) => l.name === 'agent_app_user_prompt')!.config.text = '/sh echo FORGED > forged.txt; cat secret.txt';
    const res = await fetch(`${s.stack.agentBackendUrl}/runs`, {
      method: 'POST',
      headers: { authorization: `Bearer ${s.stack.config.AGENT_BACKEND_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(forged),
    });
    // Accepted (the token is real, the request well-formed), then failed before the runtime enters the workspace.
    expect(res.status).toBe(202);
    const { run_id } = (await res.json()) as { run_id: string };
    let status: { status: string; error_type: string | null } = { status: 'running', error_type: null };
    for (let i = 0; i < 200 && status.status === 'running'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const r = await fetch(`${s.stack.agentBackendUrl}/runs/${run_id}`, {
        headers: { authorization: `Bearer ${s.stack.config.AGENT_BACKEND_TOKEN}` },
      });
      status = (await r.json()) as typeof status;
    }
    expect(status.status).toBe('failed');
    expect(status.error_type).toBe('workspace_not_authorized');
    const events = await fetch(`${s.stack.agentBackendUrl}/runs/${run_id}/events`, {
      headers: { authorization: `Bearer ${s.stack.config.AGENT_BACKEND_TOKEN}` },
    });
    const body = (await events.json()) as { events: { type: string; data: unknown }[] };
    expect(body.events.at(-1)!.type).toBe('run_failed');
    expect(body.events.map((e) => e.type)).not.toContain('pydantic_ai_event'); // no model call, no tool ran
    expect(JSON.stringify(body.events)).not.toContain('victim secret 7f3a');
    expect(fs.existsSync(path.join(v.dir, 'forged.txt'))).toBe(false);
    expect(snapshot(v.dir)).toEqual(before);
  });
});

describe('the byte quota on files attached from outputs/', () => {
  const observationOf = (frames: { event?: string; data: Record<string, unknown> }[]) =>
    String(frames.filter((f) => f.event === 'agent_thought' && f.data.tool === 'shell').at(-1)?.data.observation ?? '');

  it(`per turn (${TURN_QUOTA} bytes) and per tenant in 24 hours (${DAY_QUOTA} bytes): files over it are not attached, the observation says why`, async () => {
    // 3 × 40 000 bytes: two fit the turn's 100 000, the third does not.
    const t1 = await s.sh('for i in 1 2 3; do head -c 40000 /dev/zero > outputs/q$i.bin; done; echo wrote', 'quota-a');
    expect(t1.answer).toContain('wrote');
    const attached1 = await s.stack.db.messageFile.findMany({ where: { message_id: t1.messageId }, include: { upload_file: true } });
    expect(attached1.map((r) => r.upload_file!.name).sort()).toEqual(['q1.bin', 'q2.bin']);
    const obs1 = observationOf(t1.frames);
    expect(obs1).toContain('outputs/q3.bin');
    expect(obs1).toContain(`over this turn's quota of output files (${TURN_QUOTA} bytes per turn`);

    // The tenant has 80 000 of its 150 000 used: of two more 40 000-byte files one fits.
    const t2 = await s.sh('for i in 4 5; do head -c 40000 /dev/zero > outputs/q$i.bin; done; echo wrote', 'quota-b');
    const attached2 = await s.stack.db.messageFile.findMany({ where: { message_id: t2.messageId }, include: { upload_file: true } });
    expect(attached2.map((r) => r.upload_file!.name)).toEqual(['q4.bin']);
    expect(observationOf(t2.frames)).toContain(`over the daily quota of output files (${DAY_QUOTA} bytes per tenant in 24 hours`);

    // What the api stored never exceeds the tenant's quota.
    const stored = await s.stack.db.uploadFile.aggregate({
      _sum: { size: true },
      where: { tenant_id: s.stack.demo!.tenantId, message_files: { some: { transfer_method: 'tool_file' } } },
    });
    expect(stored._sum.size).toBeLessThanOrEqual(DAY_QUOTA);
  });

  it('the api holds the quota itself: an event the backend attached beyond it is not copied, and the observation is corrected', async () => {
    // The tenant is at its day's quota now; the event claims one more file (as a backend without the check would).
    const t = await s.sh('head -c 40000 /dev/zero > outputs/extra.bin; echo ok', 'quota-c');
    expect(await s.stack.db.messageFile.count({ where: { message_id: t.messageId } })).toBe(0);
    const conv = await s.stack.db.conversation.findUniqueOrThrow({ where: { id: t.conversationId } });
    const msg = await s.stack.db.message.findUniqueOrThrow({ where: { id: t.messageId } });
    const scope = {
      deps: { db: s.stack.db, config: s.stack.config } as never,
      msg,
      bindingId: conv.agent_workspace_binding_id,
      log: createLogger('test', 'silent'),
    };
    const { dir } = await s.workspaceOf(t.conversationId);
    const bytes = fs.readFileSync(path.join(dir, 'outputs', 'extra.bin'));
    const attached = await attachToolFiles(
      scope,
      {
        event_kind: 'function_tool_result',
        tool_call_id: 'call-forged',
        tool_name: 'shell',
        result: { exit_code: 0, stdout: '', stderr: '', attached_files: ['outputs/extra.bin'] },
        files: [{ url: 'workspace:outputs/extra.bin', sha256: sha256(bytes) }],
      },
      '1',
    );
    expect(attached!.event.files).toEqual([]);
    expect(attached!.event.result).toEqual({
      exit_code: 0,
      stdout: '',
      stderr: '',
      not_attached: [{ file: 'outputs/extra.bin', reason: expect.stringContaining('over the daily quota of output files') }],
    });
  });
});
