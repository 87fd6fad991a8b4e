/**
 * Files in a chat request (`files: [{type, transfer_method, upload_file_id | url}]`): checked before the
 * turn's rows exist, stored as MessageFile rows with the Message. A local_file must be an upload of the
 * same app and end user; a remote_url must pass the SSRF guard. Every MessageFile gets a URL the agent
 * can fetch: the remote URL, or the signed preview URL of the upload.
 */
import type { Config } from '../core/config.js';
import type { Db } from '../core/db.js';
import { AgentSoulConfig } from '../core/soul.js';
import type { AppContext } from './auth.js';
import { HttpError } from './errors.js';
import { currentRequest } from './request-log.js';
import { FILE_TYPES, signedFileUrl } from '../core/uploads.js';
import type { ChatRequest } from './schemas.js';
import { assertPublicUrl, type Lookup } from './ssrf.js';

export interface PreparedMessageFile {
  type: string;
  transfer_method: 'local_file' | 'remote_url';
  url: string;
  upload_file_id: string | null;
}

type Tx = Pick<Db, 'messageFile'>;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Validates the request's files against the app's file_upload feature, ownership and the SSRF guard. */
export async function prepareMessageFiles(
  deps: { db: Db; config: Config; lookup?: Lookup },
  app: AppContext,
  endUserId: string,
  files: ChatRequest['files'],
): Promise<PreparedMessageFile[]> {
  if (!files?.length) return [];
  const { db, config } = deps;
  const features = await fileUploadFeature(db, app);
  if (!features.enabled) throw new HttpError(400, 'invalid_param', 'files: file upload is disabled for this app.');
  if (files.length > features.max_files) throw new HttpError(400, 'invalid_param', `files: at most ${features.max_files} files per message.`);

  const baseUrl = config.API_INTERNAL_URL ?? currentRequest()?.selfUrl ?? config.apiUrl;
  const out: PreparedMessageFile[] = [];
  for (const [i, f] of files.entries()) {
    if (f.transfer_method === 'local_file') {
      if (!f.upload_file_id || !UUID.test(f.upload_file_id)) throw new HttpError(400, 'invalid_param', `files.${i}.upload_file_id: is required for local_file and must be an upload id.`);
      const upload = await db.uploadFile.findFirst({ where: { id: f.upload_file_id, tenant_id: app.tenantId, app_id: app.appId, end_user_id: endUserId } });
      if (!upload) throw new HttpError(404, 'file_not_found', `files.${i}.upload_file_id: Upload file not found.`);
      // The upload's own kind is authoritative (clients guess `type`).
      const kind = FILE_TYPES[upload.extension]?.kind ?? 'document';
      if (kind === 'image' && !features.image_enabled) throw new HttpError(400, 'invalid_param', `files.${i}: image upload is disabled for this app.`);
      out.push({ type: kind, transfer_method: 'local_file', url: signedFileUrl(config, baseUrl, upload.id), upload_file_id: upload.id });
    } else {
      if (!f.url) throw new HttpError(400, 'invalid_param', `files.${i}.url: is required for remote_url.`);
      if (f.type === 'image' && !features.image_enabled) throw new HttpError(400, 'invalid_param', `files.${i}: image upload is disabled for this app.`);
      const url = await assertPublicUrl(f.url, { field: `files.${i}.url`, lookup: deps.lookup });
      out.push({ type: f.type, transfer_method: 'remote_url', url: url.href, upload_file_id: null });
    }
  }
  return out;
}

/** Inserts the prepared rows for the message (inside the turn's transaction). */
export async function createMessageFiles(tx: Tx, messageId: string, files: PreparedMessageFile[]): Promise<void> {
  if (!files.length) return;
  await tx.messageFile.createMany({ data: files.map((f) => ({ message_id: messageId, belongs_to: 'user', ...f })) });
}

async function fileUploadFeature(db: Db, app: AppContext) {
  const agent = app.agentId ? await db.agent.findUnique({ where: { id: app.agentId }, include: { active_config_snapshot: true } }) : null;
  const soul = AgentSoulConfig.safeParse(agent?.active_config_snapshot?.config_snapshot ?? null);
  return soul.success ? soul.data.features.file_upload : { enabled: false, image_enabled: false, max_files: 0 };
}
