/**
 * `npm run bench` (see bench/README.md). A fresh clone has no generated Prisma client yet (`npm start` and
 * `npm test` generate it in their pre-scripts): generate it first, then load the benchmark, whose imports
 * need it.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
if (!fs.existsSync(path.join(ROOT, 'core', 'generated', 'prisma'))) {
  console.log('generating the Prisma client (first run in this checkout) ...');
  const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'scripts', 'prisma-generate.ts')], {
    cwd: ROOT,
    stdio: 'inherit',
  });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
await import('./main.js');
