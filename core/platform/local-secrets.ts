/**
 * Secrets of a local deployment (`npm start`, `npm run cluster`), generated on first start into one file under its
 * data dir (`secrets.json`, mode 0600) and reused after, so nothing runs on the public development defaults of
 * core/platform/config.ts (issue 27) and a restart decrypts what the last run encrypted. Only names the caller asks for are
 * generated (npm start: those its environment does not set; the environment wins).
 *
 * ENCRYPTION_KEY is the exception for data that predates the file: a data dir that already holds a database but no
 * secrets file was encrypted with the default key, so the default is kept (and written to the file, so the choice
 * stays the same on later starts) rather than making its stored credentials unreadable.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { envSets, EnvSchema, loadConfig, SECRET_VARS, type Config } from './config.js';

/** What `npm start` generates when its environment does not set them. */
export const LOCAL_SECRET_VARS = [...SECRET_VARS, 'SHELLCTL_AUTH_TOKEN'] as const;
export type LocalSecretVar = (typeof LOCAL_SECRET_VARS)[number];

export const SECRETS_FILE = 'secrets.json';

export function generateSecret(name: LocalSecretVar): string {
  // AES-256-GCM wants 32 bytes (hex); the rest are bearer tokens and HMAC keys.
  return crypto.randomBytes(name === 'ENCRYPTION_KEY' ? 32 : 24).toString('hex');
}

export interface LocalSecrets {
  file: string;
  /** The values of the names asked for (generated now or read from the file). */
  values: Partial<Record<LocalSecretVar, string>>;
  /** Names generated (or adopted) by this call. */
  generated: LocalSecretVar[];
  /** ENCRYPTION_KEY kept at its public default because the data predates the secrets file. */
  keptDefaultEncryptionKey: boolean;
}

function readFile(file: string): Record<string, string> {
  let raw: string;
  try {
    raw = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw err;
  }
  const parsed = JSON.parse(raw) as unknown;
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${file} is not a JSON object`);
  return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, string] => typeof e[1] === 'string' && e[1] !== ''));
}

/**
 * The secrets `names` from `<dataDir>/secrets.json`, generating those it lacks (the file is created 0600, or
 * rewritten 0600 with the additions). `existingData`: the data dir already holds a database (then a file that does not
 * exist yet keeps the default ENCRYPTION_KEY).
 */
export function ensureLocalSecrets(opts: {
  dataDir: string;
  names: readonly LocalSecretVar[];
  existingData?: boolean;
  /** Values to adopt instead of generating (the shellctl token file an earlier start wrote). */
  adopt?: Partial<Record<LocalSecretVar, string>>;
}): LocalSecrets {
  const file = path.join(opts.dataDir, SECRETS_FILE);
  const firstTime = !fs.existsSync(file);
  const stored = readFile(file);
  const generated: LocalSecretVar[] = [];
  let keptDefaultEncryptionKey = false;
  for (const name of opts.names) {
    if (stored[name]) continue;
    const adopted = opts.adopt?.[name]?.trim();
    if (adopted) {
      stored[name] = adopted;
      generated.push(name);
      continue;
    }
    if (name === 'ENCRYPTION_KEY' && firstTime && opts.existingData) {
      stored[name] = EnvSchema.parse({}).ENCRYPTION_KEY;
      keptDefaultEncryptionKey = true;
      continue;
    }
    stored[name] = generateSecret(name);
    generated.push(name);
  }
  if (firstTime || generated.length || keptDefaultEncryptionKey) {
    fs.mkdirSync(opts.dataDir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${JSON.stringify(stored, null, 2)}\n`, { mode: 0o600 });
    fs.renameSync(tmp, file);
  }
  fs.chmodSync(file, 0o600);
  if (stored.ENCRYPTION_KEY === EnvSchema.parse({}).ENCRYPTION_KEY && opts.names.includes('ENCRYPTION_KEY'))
    keptDefaultEncryptionKey = true;
  const values = Object.fromEntries(opts.names.map((n) => [n, stored[n]])) as Partial<Record<LocalSecretVar, string>>;
  return { file, values, generated, keptDefaultEncryptionKey };
}

/**
 * `npm start`'s configuration: `env`, plus this data dir's own secrets for every one of LOCAL_SECRET_VARS `env` does
 * not set (the environment wins). A database already there (embedded under DATA_DIR/pg, or DATABASE_URL) without a
 * secrets file keeps the default ENCRYPTION_KEY (see above).
 */
export function loadConfigWithLocalSecrets(env: NodeJS.ProcessEnv): { config: Config; secrets: LocalSecrets | null } {
  const base = loadConfig(env);
  const names = LOCAL_SECRET_VARS.filter((k) => !envSets(env, k));
  if (!names.length) return { config: base, secrets: null };
  const existingData = Boolean(base.DATABASE_URL) || fs.existsSync(path.join(base.dataDir, 'pg'));
  // shellctl's side of its token, from a start before secrets.json (SHELLCTL_AUTH_TOKEN set by hand): kept, so the two
  // still match (agent-backend/workspace/sandbox.ts writes the file only when it is missing).
  const tokenFile = base.SHELLCTL_TOKEN_FILE ?? path.join(base.dataDir, 'sandbox', 'shellctl.token');
  let shellToken: string | undefined;
  try {
    shellToken = fs.readFileSync(tokenFile, 'utf8').trim() || undefined;
  } catch {
    shellToken = undefined;
  }
  const secrets = ensureLocalSecrets({ dataDir: base.dataDir, names, existingData, adopt: { SHELLCTL_AUTH_TOKEN: shellToken } });
  return { config: loadConfig(env, secrets.values), secrets };
}
