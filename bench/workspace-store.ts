/**
 * `npx tsx bench/workspace-store.ts [files] [bytes-per-file]`: what the S3 workspace store (agent-backend/workspace/
 * store.ts) moves and how long it takes on a real S3 server (SeaweedFS, stack/s3-server.ts) on this machine: a first
 * save, a save after one file changed, a restore on a host that has nothing, a restore of an unchanged copy, and a
 * restore of a copy one version behind. Bytes are counted at the client (every PutObject / GetObject body).
 * Default 200 files of 1 MiB (a 200 MiB workspace).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { S3Server } from '../stack/s3-server.js';
import { S3WorkspaceStore } from '../agent-backend/workspace/store.js';

const files = Number(process.argv[2] ?? 200);
const size = Number(process.argv[3] ?? 1024 * 1024);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-ws-store-'));
const server = await S3Server.start({
  dataDir: path.join(tmp, 's3'),
  bucket: 'bench',
  accessKeyId: 'bench',
  secretAccessKey: 'bench-secret',
});
const client = new S3Client({
  endpoint: server.endpoint,
  region: 'us-east-1',
  forcePathStyle: true,
  credentials: { accessKeyId: 'bench', secretAccessKey: 'bench-secret' },
});
let requests = 0;
const send = client.send.bind(client) as (c: unknown) => Promise<unknown>;
(client as unknown as { send: (c: unknown) => Promise<unknown> }).send = (c: unknown) => {
  requests += 1;
  return send(c);
};
const store = new S3WorkspaceStore({ client, bucket: 'bench' });
const id = { workspaceId: crypto.randomUUID(), generation: 1 };
const dirOn = (h: string) => {
  fs.mkdirSync(path.join(tmp, h), { recursive: true });
  return path.join(tmp, h, id.workspaceId);
};
const a = dirOn('a');
fs.mkdirSync(path.join(a, 'data'), { recursive: true });
for (let i = 0; i < files; i++) fs.writeFileSync(path.join(a, 'data', `f${i}.bin`), crypto.randomBytes(size));

async function step(name: string, fn: () => Promise<object>) {
  requests = 0;
  const t = performance.now();
  const r = await fn();
  console.log(
    `${name.padEnd(44)} ${(performance.now() - t).toFixed(0).padStart(6)} ms  ${String(requests).padStart(4)} requests  ${JSON.stringify(r)}`,
  );
}
console.log(`${files} files of ${size} bytes (${((files * size) / 2 ** 20).toFixed(0)} MiB)`);
try {
  await step('first save (A)', () => store.save(a, id));
  fs.appendFileSync(path.join(a, 'data/f7.bin'), 'one change');
  await step('save after one file changed (A)', () => store.save(a, id));
  await step('restore on a host with nothing (B)', () => store.restore(dirOn('b'), id));
  await step('restore of an unchanged copy (A)', () => store.restore(a, id));
  fs.appendFileSync(path.join(tmp, 'b', id.workspaceId, 'data/f9.bin'), 'changed on b');
  await step('save after one file changed (B)', () => store.save(path.join(tmp, 'b', id.workspaceId), id));
  await step('restore of a copy one version behind (A)', () => store.restore(a, id));
} finally {
  client.destroy();
  await server.stop();
  fs.rmSync(tmp, { recursive: true, force: true });
}
