/**
 * Files the user sent with a turn, placed into the agent's workspace by the api side (issue 13, item 4),
 * so the model gets paths it can open with its shell instead of URLs it cannot fetch from the sandbox:
 * uploads are copied from DATA_DIR/uploads; remote_url files are downloaded by the SSRF guard's pinned fetch
 * (core/platform/net/ssrf.ts: it connects to the very address it checked, follows redirects only after checking each hop
 * the same way, and stops at a size cap). Files land in `uploads/<message id>/<name>`, written
 * through core/domain/workspace-fs.ts: never through a symlink the agent left at `uploads`, `uploads/<message id>` or
 * the file's name (issue 27 item 5: the write runs as root and would land wherever the link points).
 * Idempotent: a retried prepareTurn writes the same paths again.
 */
import fs from 'node:fs';
import path from 'node:path';
import { MB, safeName, UPLOAD_LIMITS, uploadsDir } from '../../core/domain/uploads.js';
import { fetchPinned, type PinnedFetchOptions } from '../../core/platform/net/ssrf.js';
import { placeWorkspaceFile, WorkspaceRefused } from '../../core/domain/workspace-fs.js';
import type { Config } from '../../core/platform/config.js';
import type { BucketIdentity, WorkspaceBucket } from '../../core/domain/workspace-bucket.js';
import type { ActivityDeps } from '../deps.js';
import type { PlacedFile } from '../../core/domain/soul-composition.js';

/** Where a turn's files go in the workspace: `uploads/<message id>/<name>`. */
export const UPLOADS_DIR = 'uploads';

export interface TurnFile {
  type: string;
  transfer_method: string;
  url: string | null;
  upload_file_id: string | null;
}

export async function placeTurnFiles(
  deps: Pick<ActivityDeps, 'db'> & { config: Pick<Config, 'dataDir'>; fetch?: PinnedFetchOptions },
  /** `owner`: the workspace's sandbox uid/gid (core/protocol/workspace-uid.ts), so the agent owns what is placed for it. */
  p: {
    workspaceDir: string;
    messageId: string;
    files: TurnFile[];
    owner?: { uid: number; gid: number };
    /**
     * WORKSPACE_STORE=s3: the files go into the bucket as a new version of the workspace (the backend that runs the turn
     * restores it, with the sandbox's owner); `workspaceDir` is never touched. `expectExisting`: the workspace had a
     * saved version; without one the files are not placed (the run then fails binding_lost, as the backend finds none).
     */
    bucket?: { bucket: WorkspaceBucket; id: BucketIdentity; expectExisting: boolean };
  },
): Promise<PlacedFile[]> {
  const dirs = [UPLOADS_DIR, p.messageId];
  const used = new Set<string>();
  const deadline = Date.now() + 20_000; // all files together, within one prepareTurn attempt
  const out: PlacedFile[] = [];
  const toBucket: { name: string; bytes: Buffer; at: number }[] = [];
  for (const [i, f] of p.files.entries()) {
    let name = `file-${i + 1}`;
    try {
      let bytes: Buffer;
      // Remote files were downloaded by the api when the message was sent: they are uploads too (issue 17 M3).
      if (f.upload_file_id) {
        const upload = await deps.db.uploadFile.findUnique({ where: { id: f.upload_file_id } });
        if (!upload) throw new Error('the upload no longer exists');
        name = safeName(upload.name, name);
        bytes = await fs.promises.readFile(path.join(uploadsDir(deps.config as Config), upload.storage_key));
      } else if (f.url) {
        name = safeName(decodeURIComponent(new URL(f.url).pathname), name);
        const left = deadline - Date.now();
        if (left < 500) throw new Error('no time left to download it in this turn');
        bytes = await fetchPinned(f.url, {
          maxBytes: UPLOAD_LIMITS.documentMb * MB,
          ...deps.fetch,
          timeoutMs: Math.min(deps.fetch?.timeoutMs ?? 15_000, left),
        });
      } else {
        throw new Error('the file has neither an upload nor a URL');
      }
      if (used.has(name)) name = `${i + 1}-${name}`;
      used.add(name);
      if (p.bucket) {
        toBucket.push({ name, bytes, at: out.length });
        out.push({ name, path: [...dirs, name].join('/') });
        continue;
      }
      // Never through a link the agent planted (uploads/ or uploads/<message>/ replaced by a symlink): core/domain/workspace-fs.ts.
      const placed = await placeWorkspaceFile(p.workspaceDir, dirs, name, bytes, { owner: p.owner }).catch((err: unknown) => {
        throw err instanceof WorkspaceRefused ? new WorkspaceRefused(`${err.message}; the file was not placed`) : err;
      });
      out.push({ name, path: placed });
    } catch (err) {
      out.push({ name, path: null, error: (err as Error).message });
    }
  }
  if (p.bucket && toBucket.length) {
    const { bucket, id, expectExisting } = p.bucket;
    const error = expectExisting && !(await bucket.latest(id)) ? 'the workspace has no saved version to place it in' : null;
    if (error) for (const f of toBucket) out[f.at] = { name: f.name, path: null, error };
    else await bucket.addFiles(id, dirs, toBucket);
  }
  return out;
}
