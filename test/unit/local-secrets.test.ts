/**
 * npm start's own secrets (issue 27 item 8, core/platform/local-secrets.ts): generated into DATA_DIR/secrets.json (0600) on
 * first start, reused after, only for what the environment does not set; a data dir with a database but no secrets
 * file keeps the default ENCRYPTION_KEY; and the shell is refused while the backend's secrets are the public defaults.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { devDefaultSecrets, EnvSchema, loadConfig } from '../../core/platform/config.js';
import { createLogger } from '../../core/platform/logger.js';
import { ensureLocalSecrets, LOCAL_SECRET_VARS, loadConfigWithLocalSecrets } from '../../core/platform/local-secrets.js';
import { Sandbox } from '../../agent-backend/workspace/sandbox.js';
import { fnv1a32, workspaceUid } from '../../core/protocol/workspace-uid.js';

const tmpDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'local-secrets-'));
const defaults = EnvSchema.parse({});

describe('npm start secrets', () => {
  it('first start writes every secret 0600 with random values; the second start reuses them', () => {
    const dataDir = tmpDir();
    const first = loadConfigWithLocalSecrets({ DATA_DIR: dataDir });
    const file = path.join(dataDir, 'secrets.json');
    expect(first.secrets!.file).toBe(file);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(first.secrets!.generated.sort()).toEqual([...LOCAL_SECRET_VARS].sort());
    const stored = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, string>;
    expect(stored.ENCRYPTION_KEY).toMatch(/^[0-9a-f]{64}$/);
    for (const k of ['INNER_API_KEY', 'AGENT_BACKEND_TOKEN', 'EXECUTION_CONTEXT_SIGNING_KEY', 'SHELLCTL_AUTH_TOKEN'])
      expect(stored[k]).toMatch(/^[0-9a-f]{48}$/);
    expect(new Set(Object.values(stored)).size).toBe(LOCAL_SECRET_VARS.length);
    expect(devDefaultSecrets(first.config)).toEqual([]);
    expect(first.config.SHELLCTL_AUTH_TOKEN).toBe(stored.SHELLCTL_AUTH_TOKEN);

    const second = loadConfigWithLocalSecrets({ DATA_DIR: dataDir });
    expect(second.secrets!.generated).toEqual([]);
    for (const k of LOCAL_SECRET_VARS) expect(second.config[k]).toBe(first.config[k]);
    // Another data dir, other secrets.
    expect(loadConfigWithLocalSecrets({ DATA_DIR: tmpDir() }).config.AGENT_BACKEND_TOKEN).not.toBe(first.config.AGENT_BACKEND_TOKEN);
  });

  it('the environment wins: what it sets is neither generated nor stored', () => {
    const dataDir = tmpDir();
    const keyFile = path.join(dataDir, 'inner.key');
    fs.writeFileSync(keyFile, 'inner-from-file\n');
    const { config } = loadConfigWithLocalSecrets({ DATA_DIR: dataDir, AGENT_BACKEND_TOKEN: 'from-env', INNER_API_KEY_FILE: keyFile });
    expect(config.AGENT_BACKEND_TOKEN).toBe('from-env');
    expect(config.INNER_API_KEY).toBe('inner-from-file');
    const stored = JSON.parse(fs.readFileSync(path.join(dataDir, 'secrets.json'), 'utf8')) as Record<string, string>;
    expect(Object.keys(stored).sort()).toEqual(['ENCRYPTION_KEY', 'EXECUTION_CONTEXT_SIGNING_KEY', 'SHELLCTL_AUTH_TOKEN']);
    // Everything set: no file at all.
    const all = tmpDir();
    const env = Object.fromEntries(LOCAL_SECRET_VARS.map((k) => [k, `${k}-own`]));
    expect(loadConfigWithLocalSecrets({ DATA_DIR: all, ...env }).secrets).toBeNull();
    expect(fs.existsSync(path.join(all, 'secrets.json'))).toBe(false);
  });

  it('a data dir whose database predates the secrets file keeps the default ENCRYPTION_KEY, on every later start too', () => {
    const dataDir = tmpDir();
    fs.mkdirSync(path.join(dataDir, 'pg'));
    const first = loadConfigWithLocalSecrets({ DATA_DIR: dataDir });
    expect(first.secrets!.keptDefaultEncryptionKey).toBe(true);
    expect(first.config.ENCRYPTION_KEY).toBe(defaults.ENCRYPTION_KEY);
    expect(first.config.AGENT_BACKEND_TOKEN).not.toBe(defaults.AGENT_BACKEND_TOKEN);
    const again = loadConfigWithLocalSecrets({ DATA_DIR: dataDir });
    expect(again.config.ENCRYPTION_KEY).toBe(defaults.ENCRYPTION_KEY);
    expect(again.secrets!.keptDefaultEncryptionKey).toBe(true);
    // A fresh data dir gets its own key.
    expect(ensureLocalSecrets({ dataDir: tmpDir(), names: ['ENCRYPTION_KEY'] }).values.ENCRYPTION_KEY).not.toBe(defaults.ENCRYPTION_KEY);
  });

  it('adopts the shellctl token file an earlier start wrote (SHELLCTL_AUTH_TOKEN set by hand then), so both still match', () => {
    const dataDir = tmpDir();
    fs.mkdirSync(path.join(dataDir, 'sandbox'));
    fs.writeFileSync(path.join(dataDir, 'sandbox', 'shellctl.token'), 'old-hand-made-token\n', { mode: 0o600 });
    const { config } = loadConfigWithLocalSecrets({ DATA_DIR: dataDir });
    expect(config.SHELLCTL_AUTH_TOKEN).toBe('old-hand-made-token');
    expect(loadConfigWithLocalSecrets({ DATA_DIR: dataDir }).config.SHELLCTL_AUTH_TOKEN).toBe('old-hand-made-token');
  });

  it('an added secret (a cluster file without the shell token) is generated and the rest kept', () => {
    const dataDir = tmpDir();
    const cluster = ensureLocalSecrets({ dataDir, names: ['INNER_API_KEY', 'AGENT_BACKEND_TOKEN'] });
    const later = ensureLocalSecrets({ dataDir, names: ['INNER_API_KEY', 'AGENT_BACKEND_TOKEN', 'SHELLCTL_AUTH_TOKEN'] });
    expect(later.generated).toEqual(['SHELLCTL_AUTH_TOKEN']);
    expect(later.values.INNER_API_KEY).toBe(cluster.values.INNER_API_KEY);
    expect(fs.statSync(later.file).mode & 0o777).toBe(0o600);
  });
});

describe('runtime and shell on the public default secrets', () => {
  const logger = createLogger('test', 'silent');
  it('are refused with a reason naming the secrets and where npm start puts its own', () => {
    const weak = new Sandbox(loadConfig({}, { SHELLCTL_AUTH_TOKEN: 'x' }), logger);
    expect(weak.unavailableReason).toContain('AGENT_BACKEND_TOKEN and INNER_API_KEY hold their public development default');
    expect(weak.unavailableReason).toContain('DATA_DIR/secrets.json');
    expect(weak.isolationReport()).toMatchObject({ shell: 'unavailable' });
    const one = new Sandbox(loadConfig({}, { SHELLCTL_AUTH_TOKEN: 'x', AGENT_BACKEND_TOKEN: 'own' }), logger);
    expect(one.unavailableReason).toContain('INNER_API_KEY holds its public development default');
    const own = new Sandbox(loadConfig({}, { SHELLCTL_AUTH_TOKEN: 'x', AGENT_BACKEND_TOKEN: 'own', INNER_API_KEY: 'own2' }), logger);
    expect(own.unavailableReason).toBeNull();
  });
});

describe('the per-workspace uid', () => {
  it('is SHELL_UID_BASE + FNV-1a 32 of the lowercase id modulo SHELL_UID_RANGE, gid the same', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
    const id = '0F8FAD5B-D9CB-469F-A165-70867728950E';
    const { uid, gid } = workspaceUid(id, { base: 200_000, range: 100_000 });
    expect(uid).toBe(200_000 + (fnv1a32(id.toLowerCase()) % 100_000));
    expect(gid).toBe(uid);
    expect(workspaceUid(id.toLowerCase(), { base: 200_000, range: 100_000 }).uid).toBe(uid);
  });
});
