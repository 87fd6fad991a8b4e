/**
 * File upload (Dify's POST /v1/files/upload): multipart `file` + `user`, images ≤ 10 MB and documents
 * ≤ 15 MB, type checked by extension and by the content's leading bytes, stored under
 * DATA_DIR/uploads/<tenant>/<id>.<ext> with an UploadFile row. An upload belongs to its app and end user;
 * chat requests reference it by id (local_file). Also the previews: GET /v1/files/{id}/preview for the
 * uploading user, and a signed, key-less URL (/files/{id}/file-preview?sign=) the agent can download from.
 */
import busboy from 'busboy';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Router, type Request, type Response } from 'express';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { appCtx, type AppContext } from '../auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { FilePreviewQuery, UserId, Uuid } from '../schemas.js';
import { unixSeconds } from '../../core/platform/time.js';
import {
  ALLOWED_EXTENSIONS,
  FILE_TYPES,
  MAX_BYTES,
  maxBytes,
  MB,
  UPLOAD_LIMITS,
  uploadsDir,
  verifyFileSignature,
  type FileType,
  type Kind,
} from '../../core/domain/uploads.js';
import { checkUploadQuota, storeUnderQuota, uploadBytesLeft, UploadQuotaExceeded } from '../../core/domain/upload-quota.js';

const tooLarge = (kind?: Kind) =>
  new HttpError(
    413,
    'file_too_large',
    kind ? `File size exceeded: ${kind}s may be at most ${maxBytes(kind) / MB} MB.` : `File size exceeded: at most ${MAX_BYTES / MB} MB.`,
  );
/** A multipart body that ends before its closing boundary (the client stopped sending, or cut the body short). */
export const truncated = () =>
  new HttpError(400, 'invalid_multipart', 'The multipart body ended before its closing boundary (a truncated upload).');
/** The tenant's stored uploads past TENANT_MAX_UPLOAD_BYTES (core/domain/upload-quota.ts). */
export const quotaExceeded = (err: UploadQuotaExceeded) => new HttpError(413, 'storage_quota_exceeded', err.message);
const quotaExceededWhileStreaming = (left: number, max: number) =>
  new HttpError(
    413,
    'storage_quota_exceeded',
    `The workspace's uploads would exceed their quota: ${left} of ${max} bytes left (TENANT_MAX_UPLOAD_BYTES).`,
  );
/** UploadQuotaExceeded as its 413; anything else as it is. */
export async function orQuota413<T>(p: Promise<T>): Promise<T> {
  try {
    return await p;
  } catch (err) {
    throw err instanceof UploadQuotaExceeded ? quotaExceeded(err) : err;
  }
}
const unsupported = (why: string) =>
  new HttpError(415, 'unsupported_file_type', `File type not allowed: ${why} Allowed: ${ALLOWED_EXTENSIONS.join(', ')}.`);

function cleanName(raw: string | undefined, ext: string): string {
  const base = path.posix
    .basename((raw ?? '').replace(/\\/g, '/'))
    .replace(/[\u0000-\u001f\u007f]/g, '')
    .trim();
  return (base || `upload.${ext}`).slice(0, 200);
}

function extensionOf(filename: string | undefined, mime: string): string | null {
  const m = /\.([A-Za-z0-9]{1,10})$/.exec(filename ?? '');
  if (m) return m[1]!.toLowerCase();
  const byMime = Object.entries(FILE_TYPES).find(([, t]) => t.mime === mime.toLowerCase());
  return byMime ? byMime[0] : null;
}

interface Received {
  tmpPath: string;
  name: string;
  ext: string;
  type: FileType;
  size: number;
  hash: string;
  user: string | undefined;
}

/** Streams the one `file` part to a temp file, enforcing type, size and the tenant's upload quota (`quota.left`
 * bytes) as bytes arrive. */
function receive(req: Request, tmpDir: string, quota: { left: number; max: number }): Promise<Received> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const tmpPath = path.join(tmpDir, crypto.randomUUID());
    let out: fs.WriteStream | null = null;
    let bb: busboy.Busboy;
    const fail = (err: HttpError) => {
      if (settled) return;
      settled = true;
      req.unpipe(bb);
      req.resume(); // drain what the client still sends; the error response goes out now
      if (out) {
        out.destroy();
        fs.rm(tmpPath, { force: true }, () => undefined);
      }
      reject(err);
    };
    try {
      bb = busboy({
        headers: req.headers,
        limits: { files: 1, fileSize: MAX_BYTES, fields: 10, fieldSize: 4096, parts: 20, headerPairs: 50 },
      });
    } catch {
      reject(new HttpError(400, 'no_file_uploaded', 'Please upload your file as multipart/form-data with a `file` part.'));
      return;
    }
    let user: string | undefined;
    let file: { name: string; ext: string; type: FileType; written: Promise<void>; size: () => number; hash: crypto.Hash } | null = null;

    bb.on('file', (field, stream, info) => {
      // A body that ends inside this part (a truncated upload) destroys the part's stream with `Unexpected end of
      // form`: an error event without a listener would end the process (issue 28). Every part gets one, skipped too.
      stream.on('error', () => fail(truncated()));
      if (field !== 'file' || settled) {
        stream.resume();
        return;
      }
      const ext = extensionOf(info.filename, info.mimeType);
      const type = ext ? FILE_TYPES[ext] : undefined;
      if (!ext || !type) {
        stream.resume();
        fail(unsupported(ext ? `.${ext} files are not accepted.` : 'the file has no extension.'));
        return;
      }
      const limit = maxBytes(type.kind);
      const hash = crypto.createHash('sha256');
      let size = 0;
      let head = Buffer.alloc(0);
      const ws = fs.createWriteStream(tmpPath, { flags: 'wx', mode: 0o600 });
      out = ws;
      const written = new Promise<void>((res, rej) => {
        ws.on('finish', res);
        ws.on('error', rej);
      });
      written.catch(() => undefined);
      stream.on('data', (chunk: Buffer) => {
        if (settled) return;
        size += chunk.length;
        if (size > limit) {
          fail(tooLarge(type.kind));
          return;
        }
        if (size > quota.left) {
          fail(quotaExceededWhileStreaming(quota.left, quota.max));
          return;
        }
        if (head.length < 4096) head = Buffer.concat([head, chunk.subarray(0, 4096 - head.length)]);
        hash.update(chunk);
        if (!ws.write(chunk)) {
          stream.pause();
          ws.once('drain', () => stream.resume());
        }
      });
      stream.on('limit', () => fail(tooLarge(type.kind)));
      stream.on('end', () => {
        if (settled) return;
        if (!type.sniff(head)) {
          fail(unsupported(`the content is not a valid .${ext} file.`));
          return;
        }
        ws.end();
      });
      file = { name: cleanName(info.filename, ext), ext, type, written, size: () => size, hash };
    });
    bb.on('field', (name, value) => {
      if (name === 'user') user = value;
    });
    bb.on('filesLimit', () => fail(new HttpError(400, 'too_many_files', 'Only one file may be uploaded at a time.')));
    bb.on('fieldsLimit', () => fail(new HttpError(400, 'invalid_param', 'Too many form fields.')));
    bb.on('partsLimit', () => fail(new HttpError(400, 'invalid_param', 'Too many form parts.')));
    bb.on('error', (err: Error) =>
      fail(
        /end of form/i.test(err?.message ?? '')
          ? truncated()
          : new HttpError(400, 'invalid_multipart', 'The multipart body could not be parsed.'),
      ),
    );
    bb.on('close', async () => {
      if (settled) return;
      if (!file) return fail(new HttpError(400, 'no_file_uploaded', 'Please upload your file in the `file` part.'));
      if (file.size() === 0) return fail(new HttpError(400, 'invalid_param', 'file: is empty.'));
      try {
        await file.written;
      } catch {
        return fail(new HttpError(503, 'storage_unavailable', 'The file could not be stored; try again.'));
      }
      if (settled) return;
      settled = true;
      resolve({ tmpPath, name: file.name, ext: file.ext, type: file.type, size: file.size(), hash: file.hash.digest('hex'), user });
    });
    req.on('error', () => fail(new HttpError(400, 'request_aborted', 'The upload was interrupted.')));
    req.pipe(bb);
  });
}

type UploadRow = { id: string; name: string; mime_type: string; storage_key: string };

function sendUpload(config: Config, res: Response, file: UploadRow, asAttachment: boolean) {
  const disposition = `${asAttachment ? 'attachment' : 'inline'}; filename*=UTF-8''${encodeURIComponent(file.name)}`;
  return new Promise<void>((resolve, reject) => {
    res.sendFile(
      path.join(uploadsDir(config), file.storage_key),
      {
        dotfiles: 'allow', // DATA_DIR is often .data
        headers: {
          'Content-Type': file.mime_type,
          'Content-Disposition': disposition,
          'X-Content-Type-Options': 'nosniff',
          'Content-Security-Policy': "sandbox; default-src 'none'",
        },
      },
      (err) => (err ? reject(res.headersSent ? err : new HttpError(404, 'file_not_found', 'File not found.')) : resolve()),
    );
  });
}

export interface FileRouteDeps {
  db: Db;
  config: Config;
}

/** Who an upload belongs to: a service-API end user, or the console account that uploaded it in the studio. */
export type UploadOwner = { end_user_id: string } | { account_id: string };

/**
 * One multipart upload (`file`, and the form's `user` for `ownerOf`) stored as an upload of the app: type, size and
 * the tenant's quota checked as bytes arrive, the row written under the tenant's lock. Shared by POST /v1/files/upload
 * and the studio's debugger upload (api/console/debugger.ts).
 */
export async function receiveUpload(
  deps: FileRouteDeps,
  req: Request,
  app: Pick<AppContext, 'tenantId' | 'appId'>,
  ownerOf: (user: string | undefined) => Promise<UploadOwner>,
) {
  const { db, config } = deps;
  if (!req.is('multipart/form-data'))
    throw new HttpError(400, 'no_file_uploaded', 'Please upload your file as multipart/form-data with a `file` part.');
  const declared = Number(req.header('content-length'));
  if (Number.isFinite(declared) && declared > MAX_BYTES + UPLOAD_LIMITS.overheadBytes) {
    req.resume();
    throw tooLarge();
  }
  // The tenant's upload quota, before anything is stored: by the declared size (less the multipart framing), then
  // on the bytes as they arrive, then under the tenant's lock when the row is written (concurrent uploads).
  const max = config.TENANT_MAX_UPLOAD_BYTES;
  if (max) {
    const declaredFile = Number.isFinite(declared) ? Math.max(1, declared - UPLOAD_LIMITS.overheadBytes) : 1;
    try {
      await checkUploadQuota(db, app.tenantId, max, declaredFile);
    } catch (err) {
      req.resume();
      throw err instanceof UploadQuotaExceeded ? quotaExceeded(err) : err;
    }
  }
  const left = await uploadBytesLeft(db, app.tenantId, max);
  const tmpDir = path.join(uploadsDir(config), 'tmp');
  await fs.promises.mkdir(tmpDir, { recursive: true });
  const got = await receive(req, tmpDir, { left, max });
  try {
    const owner = await ownerOf(got.user);
    const id = crypto.randomUUID();
    const storageKey = `${app.tenantId}/${id}.${got.ext}`;
    const target = path.join(uploadsDir(config), storageKey);
    await fs.promises.mkdir(path.join(uploadsDir(config), app.tenantId), { recursive: true });
    return await orQuota413(
      storeUnderQuota(db, app.tenantId, max, got.size, async (tx) => {
        const created = await tx.uploadFile.create({
          data: {
            id,
            tenant_id: app.tenantId,
            app_id: app.appId,
            ...owner,
            name: got.name,
            size: got.size,
            extension: got.ext,
            mime_type: got.type.mime,
            storage_key: storageKey,
            hash: got.hash,
          },
        });
        await fs.promises.rename(got.tmpPath, target);
        return created;
      }),
    ).catch(async (err: unknown) => {
      await fs.promises.rm(target, { force: true }); // a commit that failed after the rename
      throw err;
    });
  } finally {
    await fs.promises.rm(got.tmpPath, { force: true });
  }
}

/** The upload as Dify answers it (201). */
export function uploadJson(
  row: { id: string; name: string; size: number; extension: string; mime_type: string; created_at: Date },
  createdBy: string,
) {
  return {
    id: row.id,
    name: row.name,
    size: row.size,
    extension: row.extension,
    mime_type: row.mime_type,
    created_by: createdBy,
    created_at: unixSeconds(row.created_at),
  };
}

/** /v1 routes (app key). */
export function fileRoutes(deps: FileRouteDeps): Router {
  const r = Router();
  const { db, config } = deps;

  r.post('/files/upload', async (req, res) => {
    const app: AppContext = appCtx(req);
    const row = await receiveUpload(deps, req, app, async (raw) => {
      const user = parseOr400(UserId, raw, 'user');
      const endUser = await db.endUser.upsert({
        where: { app_id_session_id: { app_id: app.appId, session_id: user } },
        update: {},
        create: { tenant_id: app.tenantId, app_id: app.appId, session_id: user },
      });
      return { end_user_id: endUser.id };
    });
    res.status(201).json(uploadJson(row, row.end_user_id!));
  });

  r.get('/files/:file_id/preview', async (req, res) => {
    const app = appCtx(req);
    const fileId = parseOr400(Uuid, req.params.file_id, 'file_id');
    const q = parseOr400(FilePreviewQuery, req.query, 'query');
    const endUser = await db.endUser.findUnique({ where: { app_id_session_id: { app_id: app.appId, session_id: q.user } } });
    const file = endUser
      ? await db.uploadFile.findFirst({ where: { id: fileId, tenant_id: app.tenantId, app_id: app.appId, end_user_id: endUser.id } })
      : null;
    if (!file) throw new HttpError(404, 'file_not_found', 'File not found.');
    await sendUpload(config, res, file, q.as_attachment === 'true');
  });

  return r;
}

/** The key-less signed preview (outside /v1): what MessageFile.url of a local_file points at. */
export function signedFileRoutes(deps: FileRouteDeps): Router {
  const r = Router();
  r.get('/files/:file_id/file-preview', async (req, res) => {
    const fileId = parseOr400(Uuid, req.params.file_id, 'file_id');
    if (!verifyFileSignature(deps.config, fileId, req.query.expires, req.query.sign))
      throw new HttpError(403, 'forbidden', 'Invalid, expired or missing file signature.');
    // Revoked with its conversations: a link serves only while a conversation that used the file is not deleted.
    const file = await deps.db.uploadFile.findFirst({
      where: { id: fileId, message_files: { some: { message: { conversation: { deleted_at: null } } } } },
    });
    if (!file) throw new HttpError(404, 'file_not_found', 'File not found.');
    await sendUpload(deps.config, res, file, req.query.as_attachment === 'true');
  });
  return r;
}
