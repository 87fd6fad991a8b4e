/**
 * Files in a chat request (`files: [{type, transfer_method, upload_file_id | url}]`): checked before the
 * turn's rows exist, stored as MessageFile rows with the Message. A local_file must be an upload of the
 * same app and caller (the end user; for a debugger turn, the console account: issue 43). What is accepted follows
 * the config the turn will run on: a new conversation's active version, an existing one's pinned version, a debugger
 * turn's draft. A remote_url is downloaded here, once, by the pinned fetcher (the connection
 * goes to the address that was checked, every redirect hop is checked the same way, size capped by kind,
 * type sniffed) and stored as an upload of that end user (issue 17 M3): from then on the turn, the prompt
 * and the model provider only ever see our signed URL of that copy, never the client's URL, so nobody
 * downstream re-resolves or follows it (DNS rebinding, redirects to internal addresses).
 */
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { findBuildDraft, findSharedDraft } from '../../core/domain/agent-configs.js';
import type { AppContext } from '../auth.js';
import { HttpError } from '../errors.js';
import { currentRequest } from '../request-log.js';
import { FILE_TYPES, signedFileUrl, type PreparedMessageFile } from '../../core/domain/uploads.js';
import type { ChatRequest } from '../schemas.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { maxBytes, safeName, type Kind, uploadsDir } from '../../core/domain/uploads.js';
import { AddressRefusedError, fetchPinned, RemoteFetchError, type Lookup, type PinnedFetchOptions } from '../../core/platform/net/ssrf.js';
import { reachableFileKinds, tenantVision, type ModelVision } from '../service/app-info.js';
import { checkUploadQuota, storeUnderQuota, UploadQuotaExceeded } from '../../core/domain/upload-quota.js';

/** 400 `invalid_remote_url`: a remote_url file the SSRF guard refused or that could not be downloaded, and why. */
export class RemoteUrlRefused extends HttpError {
  constructor(message: string) {
    super(400, 'invalid_remote_url', message);
  }
}

/** Whose files these are: a service-API end user, or a console account debugging a draft (its uploads are its own). */
export type FileCaller =
  { kind: 'end-user'; endUserId: string } | { kind: 'account'; accountId: string; draftType: 'DRAFT' | 'BUILD_DRAFT' };

const ownerOf = (c: FileCaller) => (c.kind === 'end-user' ? { end_user_id: c.endUserId } : { account_id: c.accountId });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Validates the request's files against the app's file_upload feature, ownership and the SSRF guard. */
export async function prepareMessageFiles(
  deps: {
    db: Db;
    config: Config;
    lookup?: Lookup;
    remoteFetch?: Omit<PinnedFetchOptions, 'maxBytes'>;
    modelSupportsVision?: ModelVision;
  },
  app: AppContext,
  caller: FileCaller,
  files: ChatRequest['files'],
  /** The conversation the message continues (its pinned version decides what is accepted). */
  conversationId?: string | null,
): Promise<PreparedMessageFile[]> {
  if (!files?.length) return [];
  const { db, config } = deps;
  const soul = await turnSoul(db, app, caller, conversationId ?? null);
  const { features, reach } = await fileUploadFeature(app, soul, deps.modelSupportsVision ?? defaultVision(db, config));
  if (!features.enabled) throw new HttpError(400, 'invalid_param', 'files: file upload is disabled for this app.');
  if (files.length > features.max_files)
    throw new HttpError(400, 'invalid_param', `files: at most ${features.max_files} files per message.`);
  // Files follow /v1/parameters (issue 31): a kind it does not offer would reach no one (a document without a
  // workspace to open it in, an image the model cannot see), so it is refused, naming the file.
  const notOffered = (i: number, name: string, kind: Kind) =>
    new HttpError(
      400,
      'invalid_param',
      `files.${i} (${name}): ${kind === 'image' ? 'images' : 'documents'} are not accepted by this app (GET /v1/parameters ` +
        `does not offer them: ${kind === 'image' ? 'its model does not take images and its agent has no workspace and shell to receive them' : 'its agent has no workspace and shell to open documents in'}).`,
    );

  const baseUrl = config.API_INTERNAL_URL ?? currentRequest()?.selfUrl ?? config.apiUrl;
  const out: PreparedMessageFile[] = [];
  const remoteDeadline = Date.now() + REMOTE_FETCH_TOTAL_MS;
  for (const [i, f] of files.entries()) {
    if (f.transfer_method === 'local_file') {
      if (!f.upload_file_id || !UUID.test(f.upload_file_id))
        throw new HttpError(400, 'invalid_param', `files.${i}.upload_file_id: is required for local_file and must be an upload id.`);
      const upload = await db.uploadFile.findFirst({
        where: { id: f.upload_file_id, tenant_id: app.tenantId, app_id: app.appId, ...ownerOf(caller) },
      });
      if (!upload) throw new HttpError(404, 'file_not_found', `files.${i}.upload_file_id: Upload file not found.`);
      // The upload's own kind is authoritative (clients guess `type`).
      const kind = FILE_TYPES[upload.extension]?.kind ?? 'document';
      if (kind === 'image' && !features.image_enabled)
        throw new HttpError(400, 'invalid_param', `files.${i}: image upload is disabled for this app.`);
      if (!reach[kind]) throw notOffered(i, upload.name, kind);
      out.push({ type: kind, transfer_method: 'local_file', url: signedFileUrl(config, baseUrl, upload.id), upload_file_id: upload.id });
    } else {
      if (!f.url) throw new HttpError(400, 'invalid_param', `files.${i}.url: is required for remote_url.`);
      if (f.type === 'image' && !features.image_enabled)
        throw new HttpError(400, 'invalid_param', `files.${i}: image upload is disabled for this app.`);
      const kind: Kind = f.type === 'image' ? 'image' : 'document';
      if (!reach[kind]) throw notOffered(i, remoteName(f.url), kind);
      const left = remoteDeadline - Date.now();
      if (left < 500) throw new RemoteUrlRefused(`files.${i}.url: no time left to download it with this message.`);
      const copy = await downloadRemoteFile(deps, app, caller, f.url, kind, `files.${i}.url`, Math.min(REMOTE_FETCH_TIMEOUT_MS, left));
      out.push({ type: kind, transfer_method: 'remote_url', url: signedFileUrl(config, baseUrl, copy.id), upload_file_id: copy.id });
    }
  }
  return out;
}

/** How long a chat request waits for one remote file (all hops and the body), and for all of them, ms. */
const REMOTE_FETCH_TIMEOUT_MS = 10_000;
const REMOTE_FETCH_TOTAL_MS = 20_000;

/** The file type of downloaded bytes: the URL's extension when the content matches it, else by content. */
function typeOf(url: string, head: Buffer): string | null {
  const ext = /\.([A-Za-z0-9]{1,10})$/.exec(new URL(url).pathname)?.[1]?.toLowerCase();
  if (ext && FILE_TYPES[ext]?.sniff(head)) return ext;
  const binary = Object.entries(FILE_TYPES).find(([e, t]) => !['txt', 'md', 'csv', 'json'].includes(e) && t.sniff(head));
  if (binary) return binary[0];
  return FILE_TYPES.txt!.sniff(head) ? 'txt' : null;
}

async function downloadRemoteFile(
  deps: { db: Db; config: Config; lookup?: Lookup; remoteFetch?: Omit<PinnedFetchOptions, 'maxBytes'> },
  app: AppContext,
  caller: FileCaller,
  raw: string,
  kind: Kind,
  field: string,
  timeoutMs: number,
): Promise<{ id: string }> {
  // The copy is an upload of the tenant: under TENANT_MAX_UPLOAD_BYTES like POST /v1/files/upload (413).
  const maxUpload = deps.config.TENANT_MAX_UPLOAD_BYTES;
  const quota413 = (err: unknown) =>
    err instanceof UploadQuotaExceeded ? new HttpError(413, 'storage_quota_exceeded', `${field}: ${err.message}`) : err;
  try {
    await checkUploadQuota(deps.db, app.tenantId, maxUpload, 1);
  } catch (err) {
    throw quota413(err);
  }
  let bytes: Buffer;
  try {
    new URL(raw);
    bytes = await fetchPinned(raw, { lookup: deps.lookup, timeoutMs, ...deps.remoteFetch, maxBytes: maxBytes(kind) });
  } catch (err) {
    if (err instanceof RemoteFetchError || err instanceof AddressRefusedError) throw new RemoteUrlRefused(`${field}: ${err.message}.`);
    if (err instanceof TypeError) throw new RemoteUrlRefused(`${field}: is not a valid URL.`);
    throw new RemoteUrlRefused(`${field}: the file could not be downloaded.`);
  }
  const ext = typeOf(raw, bytes.subarray(0, 4096));
  const type = ext ? FILE_TYPES[ext] : undefined;
  if (!ext || !type || bytes.length === 0) throw new RemoteUrlRefused(`${field}: the file is not of an accepted type.`);
  if (type.kind !== kind) throw new RemoteUrlRefused(`${field}: the file is not ${kind === 'image' ? 'an image' : 'a document'}.`);
  const id = crypto.randomUUID();
  const storageKey = `${app.tenantId}/${id}.${ext}`;
  const target = path.join(uploadsDir(deps.config), storageKey);
  await fs.promises.mkdir(path.dirname(target), { recursive: true });
  await fs.promises.writeFile(`${target}.part`, bytes, { mode: 0o600 });
  const name = safeName(decodeURIComponentSafe(new URL(raw).pathname), `remote.${ext}`);
  try {
    await storeUnderQuota(deps.db, app.tenantId, maxUpload, bytes.length, async (tx) => {
      await tx.uploadFile.create({
        data: {
          id,
          tenant_id: app.tenantId,
          app_id: app.appId,
          ...ownerOf(caller),
          name: name.endsWith(`.${ext}`) ? name : `${name}.${ext}`,
          size: bytes.length,
          extension: ext,
          mime_type: type.mime,
          storage_key: storageKey,
          hash: crypto.createHash('sha256').update(bytes).digest('hex'),
        },
      });
      await fs.promises.rename(`${target}.part`, target);
    });
  } catch (err) {
    await fs.promises.rm(`${target}.part`, { force: true });
    await fs.promises.rm(target, { force: true });
    throw quota413(err);
  }
  return { id };
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * The config the turn will run on, as resolveConfig will pick it (activities/prepare/resolve-config.ts): a debugger
 * turn's draft (the shared DRAFT or the caller's BUILD_DRAFT), an existing conversation's pinned version (its
 * binding's, even after a newer publish: issue 43 item 3), else the active published version. Null when there is none.
 */
async function turnSoul(db: Db, app: AppContext, caller: FileCaller, conversationId: string | null): Promise<unknown> {
  if (!app.agentId) return null;
  if (caller.kind === 'account') {
    const draft =
      caller.draftType === 'BUILD_DRAFT' ? await findBuildDraft(db, app.agentId, caller.accountId) : await findSharedDraft(db, app.agentId);
    return draft?.config ?? null;
  }
  const conv = conversationId
    ? await db.conversation.findFirst({
        where: { id: conversationId, app_id: app.appId, end_user_id: caller.endUserId, deleted_at: null },
        select: { agent_workspace_binding_id: true },
      })
    : null;
  const binding = conv?.agent_workspace_binding_id
    ? await db.agentWorkspaceBinding.findUnique({
        where: { id: conv.agent_workspace_binding_id },
        select: { agent_config_version_id: true },
      })
    : null;
  const versionId =
    binding?.agent_config_version_id ??
    (await db.agent.findUnique({ where: { id: app.agentId }, select: { active_config_snapshot_id: true } }))?.active_config_snapshot_id;
  if (!versionId) return null;
  return (await db.agentConfigVersion.findUnique({ where: { id: versionId }, select: { config_snapshot: true } }))?.config_snapshot ?? null;
}

async function fileUploadFeature(app: AppContext, raw: unknown, vision: ModelVision) {
  const soul = AgentSoulConfig.safeParse(raw);
  if (!soul.success) return { features: { enabled: false, image_enabled: false, max_files: 0 }, reach: { image: false, document: false } };
  return {
    features: soul.data.features.file_upload,
    reach: reachableFileKinds(soul.data, await vision(soul.data.model.provider, soul.data.model.model, app.tenantId)),
  };
}

/** The deployment's model providers' word on vision (as GET /v1/parameters asks them, tenant declarations included), built once per config. */
const visionByConfig = new WeakMap<Config, ModelVision>();
function defaultVision(db: Db, config: Config): ModelVision {
  let v = visionByConfig.get(config);
  if (!v) visionByConfig.set(config, (v = tenantVision(db, config)));
  return v;
}

/** The file name a remote URL names (for messages). */
function remoteName(raw: string): string {
  try {
    return safeName(decodeURIComponentSafe(new URL(raw).pathname), 'remote file');
  } catch {
    return 'remote file';
  }
}
