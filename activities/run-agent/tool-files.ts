/**
 * Files a tool left in the run's workspace (`workspace:outputs/<name>` on a function_tool_result, issue 13 item 4)
 * become the assistant's message files: the api copies each one from the binding's workspace into uploads (the
 * same checks the backend applied, and only the content whose sha256 the backend announced), creates its
 * UploadFile and MessageFile rows in the commit that stores the tool's thought row, and the thought's
 * message_files get the MessageFile ids (Dify's shape). Ids are derived from (message, tool call, name), so a
 * retried attempt that replays the event writes the same rows and the same storage key again: never a second row.
 * The byte quota per turn and per tenant-day (core/domain/output-quota.ts) is checked here against the stored rows;
 * files over it are not attached and the thought's observation says why.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { NewClientEvent } from '../../core/protocol/client-events.js';
import { turnEventBase } from '../../core/protocol/client-events.js';
import type { AgentStreamEvent } from '../../core/protocol/run.js';
import { signedFileUrl, uploadsDir } from '../../core/domain/uploads.js';
import { bucketOf } from '../../core/domain/workspace-bucket.js';
import { OutputQuota, outputQuotaLimits } from '../../core/domain/output-quota.js';
import { OUTPUTS_DIR, OutputRefused, outputFileType, parseOutputRef, readOutputFile, sha256 } from '../../core/domain/workspace-outputs.js';
import type { Tx } from './commit.js';
import type { RunScope } from './scope.js';

/** A UUID derived from `key` (RFC 4122 version 5 layout over sha256): stable across attempts. */
export function derivedUuid(key: string): string {
  const h = crypto.createHash('sha256').update(key).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

export interface ToolFiles {
  /** The event with each attached file's url replaced by its MessageFile id (what the thought row stores). */
  event: AgentStreamEvent;
  /** Rows to write in the commit of this event; returns the `message_file` client events. */
  write: (tx: Tx) => Promise<NewClientEvent[]>;
}

type Scope = Pick<RunScope, 'deps' | 'msg' | 'bindingId' | 'log'>;

/** Copies a tool result's workspace files into uploads; null when the event attaches none. */
export async function attachToolFiles(scope: Scope, ev: AgentStreamEvent, sourceId: string): Promise<ToolFiles | null> {
  if (ev.event_kind !== 'function_tool_result' || !ev.files?.length) return null;
  const { deps, msg, log } = scope;
  const workspace = await bindingWorkspace(scope);
  const workspaceDir = workspace?.dir ?? null;
  const bucket = bucketOf(deps.config);
  const toolCall = ev.tool_call_id ?? `index-${ev.index ?? 0}`;
  const rows: { upload: UploadRow; file: FileRow }[] = [];
  // The byte quota (core/domain/output-quota.ts). Rows this event already wrote (a replayed attempt) were admitted then:
  // they are attached again whatever the quota says now, and count against the rest.
  const keyOf = (name: string) => `${toolCall}:${name}`;
  const candidates = ev.files.map((f) => parseOutputRef(f.url)).filter((n): n is string => n !== null);
  const uploadIds = candidates.map((n) => uploadIdOf(msg.id, keyOf(n)));
  const stored = new Set((await deps.db.uploadFile.findMany({ where: { id: { in: uploadIds } }, select: { id: true } })).map((r) => r.id));
  const quota = new OutputQuota(
    await outputQuotaLimits(deps.db, deps.config, { tenantId: msg.tenant_id, messageId: msg.id, except: uploadIds }),
  );
  const refused: { file: string; reason: string }[] = [];
  for (const f of ev.files) {
    const name = parseOutputRef(f.url);
    if (!name || !workspaceDir) {
      log.warn({ url: f.url, workspace: Boolean(workspaceDir) }, 'tool file not attached: not a workspace output of this run');
      continue;
    }
    let bytes: Buffer;
    try {
      if (bucket) {
        // s3: the worker never reads the workspace's disk; the backend put this content in the bucket before announcing it.
        const blob = f.sha256 ? await bucket.getBlob(workspace!.id, f.sha256, deps.config.WORKSPACE_OUTPUT_MAX_BYTES) : null;
        if (!blob) {
          log.warn({ file: name }, 'tool file not attached: its content is not in the workspace bucket');
          continue;
        }
        bytes = blob;
      } else bytes = await readOutputFile(workspaceDir, name, deps.config.WORKSPACE_OUTPUT_MAX_BYTES);
    } catch (err) {
      if (!(err instanceof OutputRefused) && (err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      log.warn({ file: name, reason: (err as Error).message }, 'tool file not attached');
      continue;
    }
    // The workspace may have moved on since the command (a later command, a replay much later): only the content
    // the tool produced is attached.
    if (f.sha256 && sha256(bytes) !== f.sha256) {
      log.warn({ file: name }, 'tool file not attached: it changed after the tool produced it');
      continue;
    }
    const over = stored.has(uploadIdOf(msg.id, keyOf(name))) ? null : quota.refuse(bytes.length);
    if (over) {
      log.warn({ file: name, size: bytes.length, reason: over }, 'tool file not attached: output file quota');
      refused.push({ file: `${OUTPUTS_DIR}/${name}`, reason: over });
      continue;
    }
    quota.take(bytes.length);
    rows.push(await storeUpload(scope, keyOf(name), name, bytes));
  }
  const ids = rows.map((r) => r.file.id);
  return {
    event: {
      ...ev,
      ...(refused.length ? { result: withRefusals(ev.result, refused) } : {}),
      files: rows.map((r) => ({ url: r.file.id, name: r.upload.name, mime_type: r.upload.mime_type })),
    },
    write: async (tx) => {
      for (const r of rows) {
        await tx.uploadFile.upsert({ where: { id: r.upload.id }, create: r.upload, update: {} });
        await tx.messageFile.upsert({ where: { id: r.file.id }, create: r.file, update: {} });
      }
      return rows.map((r, i) => ({
        event: 'message_file' as const,
        sourceKey: `be:${sourceId}:message_file:${ids[i]}`,
        data: {
          ...turnEventBase(msg),
          event: 'message_file' as const,
          id: r.file.id,
          type: r.file.type,
          belongs_to: 'assistant' as const,
          url: r.file.url,
        },
      }));
    },
  };
}

/**
 * The observation the thought row keeps, corrected for the files the api refused after the backend attached them
 * (the quota counted here is the one that holds): moved from `attached_files` to `not_attached` with the reason.
 */
function withRefusals(result: unknown, refused: { file: string; reason: string }[]): unknown {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) return result;
  const r = result as { attached_files?: unknown; not_attached?: unknown };
  const gone = new Set(refused.map((x) => x.file));
  const attached = Array.isArray(r.attached_files) ? (r.attached_files as unknown[]).filter((f) => !gone.has(f as string)) : undefined;
  const { attached_files: _drop, ...rest } = r;
  return {
    ...rest,
    ...(attached?.length ? { attached_files: attached } : {}),
    not_attached: [...(Array.isArray(r.not_attached) ? r.not_attached : []), ...refused],
  };
}

const uploadIdOf = (messageId: string, key: string) => derivedUuid(`tool-upload:${messageId}:${key}`);

async function bindingWorkspace(scope: Scope): Promise<{ id: string; dir: string } | null> {
  if (!scope.bindingId) return null;
  const b = await scope.deps.db.agentWorkspaceBinding.findUnique({ where: { id: scope.bindingId }, select: { workspace_id: true } });
  return b ? { id: b.workspace_id, dir: path.join(scope.deps.config.workspacesDir, b.workspace_id) } : null;
}

type UploadRow = {
  id: string;
  tenant_id: string;
  app_id: string;
  end_user_id: string | null;
  name: string;
  size: number;
  extension: string;
  mime_type: string;
  storage_key: string;
  hash: string;
};
type FileRow = {
  id: string;
  message_id: string;
  type: string;
  transfer_method: string;
  url: string;
  upload_file_id: string;
  belongs_to: string;
};

/** Writes the bytes under their derived storage key (temp file + rename: a replay overwrites with the same bytes). */
async function storeUpload(scope: Scope, key: string, name: string, bytes: Buffer): Promise<{ upload: UploadRow; file: FileRow }> {
  const { deps, msg } = scope;
  const uploadId = uploadIdOf(msg.id, key);
  const type = outputFileType(name, bytes);
  const storageKey = `${msg.tenant_id}/${uploadId}.${type.ext}`;
  const target = path.join(uploadsDir(deps.config), storageKey);
  await fs.promises.mkdir(path.dirname(target), { recursive: true });
  const part = `${target}.${crypto.randomUUID()}.part`;
  await fs.promises.writeFile(part, bytes, { mode: 0o600 });
  await fs.promises.rename(part, target);
  return {
    upload: {
      id: uploadId,
      tenant_id: msg.tenant_id,
      app_id: msg.app_id,
      end_user_id: msg.end_user_id,
      name,
      size: bytes.length,
      extension: type.ext,
      mime_type: type.mime,
      storage_key: storageKey,
      hash: sha256(bytes),
    },
    file: {
      id: derivedUuid(`tool-message-file:${msg.id}:${key}`),
      message_id: msg.id,
      type: type.kind,
      transfer_method: 'tool_file',
      url: signedFileUrl(deps.config, deps.config.apiUrl, uploadId),
      upload_file_id: uploadId,
      belongs_to: 'assistant',
    },
  };
}
