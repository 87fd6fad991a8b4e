/**
 * What a shell command hands back from `outputs/` (core/domain/workspace-outputs.ts, the shell module's withOutputFiles):
 * new or changed regular files only, at most MAX_OUTPUT_FILES, each under the cap, never through a link.
 * Plain files in a temp directory; the real-stack turns are in output-files-turns.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withOutputFiles } from '../../agent-backend/modules/context.js';
import { OutputQuota } from '../../core/domain/output-quota.js';
import {
  changedOutputs,
  listOutputs,
  MAX_OUTPUT_FILES,
  OutputRefused,
  readOutputFile,
  sha256,
} from '../../core/domain/workspace-outputs.js';

let ws: string;
let outside: string;
const out = (name: string) => path.join(ws, 'outputs', name);

beforeEach(() => {
  ws = fs.mkdtempSync(path.join(os.tmpdir(), 'ws-outputs-'));
  outside = fs.mkdtempSync(path.join(os.tmpdir(), 'ws-outside-'));
  fs.mkdirSync(path.join(ws, 'outputs'));
  fs.writeFileSync(path.join(outside, 'secret.txt'), 'secret\n');
});
afterEach(() => {
  fs.rmSync(ws, { recursive: true, force: true });
  fs.rmSync(outside, { recursive: true, force: true });
});

const ok = { kind: 'result' as const, result: { exit_code: 0, stdout: '', stderr: '' } };

async function attach(before: Awaited<ReturnType<typeof listOutputs>>, maxBytes = 1024) {
  return withOutputFiles(ok, ws, changedOutputs(before, await listOutputs(ws)), maxBytes);
}

describe('files a command leaves in outputs/', () => {
  it('attaches new and changed files with their sha256, not the ones it left alone', async () => {
    fs.writeFileSync(out('old.txt'), 'old');
    fs.writeFileSync(out('changed.txt'), 'v1');
    const before = await listOutputs(ws);
    fs.writeFileSync(out('report.txt'), 'hi\n');
    fs.writeFileSync(out('changed.txt'), 'version 2');
    const r = await attach(before);
    expect(r.kind === 'result' && r.files?.map((f) => f.name)).toEqual(['changed.txt', 'report.txt']);
    expect(r.kind === 'result' && r.files?.[1]).toEqual({
      url: 'workspace:outputs/report.txt',
      name: 'report.txt',
      mime_type: 'text/plain',
      size: 3,
      sha256: sha256(Buffer.from('hi\n')),
    });
    expect(r.kind === 'result' && r.result).toMatchObject({ attached_files: ['outputs/changed.txt', 'outputs/report.txt'] });
  });

  it('never attaches a symlink (outside or inside), a directory, a hard link or a file over the cap', async () => {
    const before = await listOutputs(ws);
    fs.symlinkSync(path.join(outside, 'secret.txt'), out('link.txt'));
    fs.writeFileSync(path.join(ws, 'note.txt'), 'note');
    fs.symlinkSync('../note.txt', out('inside.txt'));
    fs.mkdirSync(out('dir'));
    fs.writeFileSync(path.join(out('dir'), 'nested.txt'), 'nested');
    fs.writeFileSync(out('big.bin'), Buffer.alloc(2048));
    fs.writeFileSync(out('a.txt'), 'a');
    fs.linkSync(out('a.txt'), out('b.txt'));
    fs.writeFileSync(out('fine.txt'), 'fine');
    const r = await attach(before);
    if (r.kind !== 'result') throw new Error('unexpected');
    expect(r.files?.map((f) => f.name)).toEqual(['fine.txt']);
    expect(r.result).toMatchObject({
      not_attached: [
        { file: 'outputs/a.txt', reason: 'a hard link' },
        { file: 'outputs/b.txt', reason: 'a hard link' },
        { file: 'outputs/big.bin', reason: 'larger than 1024 bytes' },
      ],
    });
    await expect(readOutputFile(ws, 'link.txt', 1024)).rejects.toThrow(OutputRefused);
    await expect(readOutputFile(ws, '../note.txt', 1024)).rejects.toThrow('not a plain file name');
  });

  it('attaches nothing when outputs/ itself is a symlink out of the workspace', async () => {
    fs.rmSync(path.join(ws, 'outputs'), { recursive: true });
    fs.symlinkSync(outside, path.join(ws, 'outputs'));
    expect(await listOutputs(ws)).toEqual(new Map());
    await expect(readOutputFile(ws, 'secret.txt', 1024)).rejects.toThrow('outputs/ is not a directory');
  });

  it(`attaches at most ${MAX_OUTPUT_FILES} files per command and says which were left out`, async () => {
    const before = await listOutputs(ws);
    for (let i = 0; i < MAX_OUTPUT_FILES + 2; i++) fs.writeFileSync(out(`f${String(i).padStart(2, '0')}.txt`), `${i}`);
    const r = await attach(before);
    if (r.kind !== 'result') throw new Error('unexpected');
    expect(r.files).toHaveLength(MAX_OUTPUT_FILES);
    expect((r.result as { not_attached: unknown[] }).not_attached).toHaveLength(2);
  });

  it('attaches files within the byte quota of the turn and of the tenant day; the rest is reported with the reason', async () => {
    const quota = new OutputQuota({ turn_bytes: 250, turn_used_bytes: 0, tenant_day_bytes: 1000, tenant_day_used_bytes: 700 });
    let before = await listOutputs(ws);
    for (const n of ['a', 'b', 'c']) fs.writeFileSync(out(`${n}.bin`), Buffer.alloc(100));
    let r = await withOutputFiles(ok, ws, changedOutputs(before, await listOutputs(ws)), 1024, quota);
    if (r.kind !== 'result') throw new Error('unexpected');
    expect(r.files?.map((f) => f.name)).toEqual(['a.bin', 'b.bin']);
    expect(r.result).toMatchObject({
      not_attached: [{ file: 'outputs/c.bin', reason: "over this turn's quota of output files (250 bytes per turn, 50 left)" }],
    });
    // The same run's next command: the count goes on (50 left of the turn, 100 of the tenant's day).
    before = await listOutputs(ws);
    fs.writeFileSync(out('d.bin'), Buffer.alloc(40));
    r = await withOutputFiles(ok, ws, changedOutputs(before, await listOutputs(ws)), 1024, quota);
    expect(r.kind === 'result' && r.files?.map((f) => f.name)).toEqual(['d.bin']);
    const day = new OutputQuota({ turn_bytes: 10_000, turn_used_bytes: 0, tenant_day_bytes: 1000, tenant_day_used_bytes: 950 });
    expect(day.refuse(100)).toBe('over the daily quota of output files (1000 bytes per tenant in 24 hours, 50 left)');
    expect(day.refuse(50)).toBeNull();
  });
});
