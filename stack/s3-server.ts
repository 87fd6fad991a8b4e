/**
 * A real S3 server for the workspace store (issue 44 item 1): SeaweedFS (`github.com/seaweedfs/seaweedfs`, Apache-2.0)
 * run as `weed mini`, its master, volume server, filer and S3 gateway in one process, on loopback ports of the shared
 * port helper, its data under a directory of the caller's. Tests start one per file (test/workspace/s3-store.test.ts,
 * test/integration/workspace-s3.test.ts); `npm start` can point WORKSPACE_STORE=s3 at it or at any S3.
 *
 * Lookup order: SEAWEEDFS_WEED_PATH → the project cache (.cache/seaweedfs/<version>/weed) → built from the Go module
 * proxy into that cache. Not `go install`: the module's go.mod has replace directives, which `go install pkg@version`
 * refuses; `go mod download` fetches the module and `go build ./weed` runs inside it, as its main module (measured on
 * this 2-core machine at a load average of ~10: see docs/workspace.md "Workspaces on object storage").
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './ports.js';
import { goBinary } from './temporal-server.js';
import { logTail } from './service-process.js';

export const SEAWEEDFS_MODULE = 'github.com/seaweedfs/seaweedfs';
export const SEAWEEDFS_VERSION = 'v0.0.0-20261109003541-7506e5f91cd6';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CACHE_DIR = path.join(ROOT, '.cache', 'seaweedfs', SEAWEEDFS_VERSION);

function works(bin: string): boolean {
  try {
    return spawnSync(bin, ['version'], { encoding: 'utf8', timeout: 20_000 }).status === 0;
  } catch {
    return false;
  }
}

/** The `weed` binary: SEAWEEDFS_WEED_PATH, the cache, else built into the cache (minutes the first time). */
export function locateWeed(opts: { log?: (m: string) => void } = {}): string {
  const explicit = process.env.SEAWEEDFS_WEED_PATH;
  if (explicit) {
    if (!works(explicit)) throw new Error(`SEAWEEDFS_WEED_PATH=${explicit} is not a working weed binary (\`weed version\` failed)`);
    return explicit;
  }
  const bin = path.join(CACHE_DIR, 'weed');
  if (works(bin)) return bin;
  const go = goBinary(process.env.GO_BIN);
  if (!go) throw new Error('Cannot build SeaweedFS: Go was not found (apt-get install golang-go, GO_BIN, or SEAWEEDFS_WEED_PATH).');
  opts.log?.(`building SeaweedFS ${SEAWEEDFS_VERSION} (weed) from the Go module proxy into ${CACHE_DIR} ...`);
  const dl = spawnSync(go, ['mod', 'download', '-json', `${SEAWEEDFS_MODULE}@${SEAWEEDFS_VERSION}`], { encoding: 'utf8' });
  const dir = dl.status === 0 ? (JSON.parse(dl.stdout) as { Dir?: string }).Dir : undefined;
  if (!dir)
    throw new Error(`go mod download ${SEAWEEDFS_MODULE}@${SEAWEEDFS_VERSION} failed: ${dl.stderr.trim().split('\n').slice(-2).join(' ')}`);
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  const tmp = `${bin}.partial-${process.pid}`;
  const r = spawnSync(go, ['build', '-o', tmp, './weed'], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
  if (r.status !== 0) throw new Error(`go build ./weed in ${dir} failed (exit ${r.status ?? r.signal})`);
  fs.renameSync(tmp, bin);
  return bin;
}

export interface S3ServerOptions {
  /** Where the server keeps its data (created if missing). */
  dataDir: string;
  /** The bucket created at start. */
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  logFile?: string;
  /** The address every listener binds and announces (default 127.0.0.1): a test host's, with `wrap`. */
  host?: string;
  /** Runs weed inside something, e.g. a test host's network namespace (stack/netns.ts HostNetwork.wrap). */
  wrap?: (argv: string[]) => string[];
}

/** A running `weed mini`: its S3 endpoint and the credentials of its one identity. */
export class S3Server {
  private constructor(
    readonly child: ChildProcess,
    readonly endpoint: string,
    readonly opts: S3ServerOptions,
    readonly logFile: string,
  ) {}

  /** Environment of a process that uses this server as its workspace store (core/platform/config.ts). */
  env(): Record<string, string> {
    return {
      WORKSPACE_STORE: 's3',
      S3_ENDPOINT: this.endpoint,
      S3_BUCKET: this.opts.bucket,
      S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: this.opts.accessKeyId,
      S3_SECRET_ACCESS_KEY: this.opts.secretAccessKey,
      S3_FORCE_PATH_STYLE: 'true',
    };
  }

  static async start(opts: S3ServerOptions): Promise<S3Server> {
    const weed = locateWeed({ log: (m) => console.error(`[s3] ${m}`) });
    fs.mkdirSync(opts.dataDir, { recursive: true });
    const logFile = opts.logFile ?? path.join(opts.dataDir, 'weed.log');
    const host = opts.host ?? '127.0.0.1';
    // Every listener on a port of ours (the defaults, and port + 10000 for gRPC, would collide between files).
    const [master, masterGrpc, volume, volumeGrpc, filer, filerGrpc, s3, s3Grpc] = await Promise.all(
      Array.from({ length: 8 }, () => freePort()),
    );
    const args = [
      'mini',
      `-dir=${opts.dataDir}`,
      `-ip=${host}`,
      `-ip.bind=${host}`,
      `-master.port=${master}`,
      `-master.port.grpc=${masterGrpc}`,
      `-volume.port=${volume}`,
      `-volume.port.grpc=${volumeGrpc}`,
      `-filer.port=${filer}`,
      `-filer.port.grpc=${filerGrpc}`,
      `-s3.port=${s3}`,
      `-s3.port.grpc=${s3Grpc}`,
      '-s3.port.iceberg=0',
      '-s3.port.lance=0',
      '-webdav=false',
      '-admin.ui=false',
      '-admin.port.legacy=0',
      '-master.telemetry=false',
      `-filer.localSocket=${path.join(opts.dataDir, 'filer.sock')}`,
      `-s3.localSocket=${path.join(opts.dataDir, 's3.sock')}`,
    ];
    const fd = fs.openSync(logFile, 'a');
    // weed mini creates its admin identity and the bucket from these (weed/command/mini.go).
    const [cmd, ...argv] = opts.wrap ? opts.wrap([weed, ...args]) : [weed, ...args];
    const child = spawn(cmd!, argv, {
      stdio: ['ignore', fd, fd],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: opts.dataDir,
        AWS_ACCESS_KEY_ID: opts.accessKeyId,
        AWS_SECRET_ACCESS_KEY: opts.secretAccessKey,
        S3_BUCKET: opts.bucket,
      },
    });
    fs.closeSync(fd);
    const server = new S3Server(child, `http://${host}:${s3}`, opts, logFile);
    await server.waitReady();
    return server;
  }

  /** Up when the bucket answers an authenticated HEAD (the S3 gateway is the last part to start). */
  private async waitReady(): Promise<void> {
    const { S3Client, HeadBucketCommand } = await import('@aws-sdk/client-s3');
    const client = new S3Client({
      endpoint: this.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: this.opts.accessKeyId, secretAccessKey: this.opts.secretAccessKey },
      maxAttempts: 1,
    });
    const deadline = Date.now() + 120_000;
    try {
      for (;;) {
        if (this.child.exitCode !== null) throw new Error(`weed mini exited at start (${this.child.exitCode}):\n${logTail(this.logFile)}`);
        try {
          await client.send(new HeadBucketCommand({ Bucket: this.opts.bucket }));
          return;
        } catch {
          /* not up yet, or the bucket not made yet */
        }
        if (Date.now() > deadline)
          throw new Error(`weed mini did not serve bucket ${this.opts.bucket} at ${this.endpoint}:\n${logTail(this.logFile)}`);
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      client.destroy();
    }
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const gone = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
  }
}

// `npx tsx stack/s3-server.ts` prints the weed binary it would use (building it if needed; .ci/run runs it).
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  try {
    console.log(locateWeed({ log: (m) => console.error(m) }));
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
}
