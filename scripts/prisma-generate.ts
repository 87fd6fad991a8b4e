/**
 * `prisma generate` without network: the CLI wants its schema-engine binary even though generate never
 * runs it, so we point PRISMA_SCHEMA_ENGINE_BINARY at a placeholder file (ENVIRONMENT.md).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const placeholder = path.join(os.tmpdir(), 'prisma-schema-engine-placeholder');
if (!fs.existsSync(placeholder)) fs.writeFileSync(placeholder, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
const env = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? placeholder,
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
  CHECKPOINT_DISABLE: '1',
  PRISMA_GENERATE_SKIP_AUTOINSTALL: '1',
};
const r = spawnSync(process.execPath, [path.resolve('node_modules/prisma/build/index.js'), 'generate'], { stdio: 'inherit', env });
process.exit(r.status ?? 1);
