/**
 * The upload policy shared by the upload route, chat requests and /v1/parameters: accepted types (checked by
 * extension and by the content's leading bytes), size limits, where uploads are stored, and the signed
 * key-less preview URL the agent can download from.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import type { Config } from '../platform/config.js';
import type { Db } from '../platform/db.js';

export const MB = 1024 * 1024;

export const UPLOAD_LIMITS = {
  imageMb: 10,
  documentMb: 15,
  /** Bytes of multipart framing tolerated above the largest file before refusing by Content-Length. */
  overheadBytes: 64 * 1024,
} as const;

export type Kind = 'image' | 'document';

export interface FileType {
  mime: string;
  kind: Kind;
  /** Does the content start like this type? */
  sniff: (head: Buffer) => boolean;
}

const startsWith =
  (sig: number[] | string, at = 0) =>
  (head: Buffer) => {
    const bytes = typeof sig === 'string' ? Buffer.from(sig, 'latin1') : Buffer.from(sig);
    return head.length >= at + bytes.length && head.subarray(at, at + bytes.length).equals(bytes);
  };
const isText = (head: Buffer) => !head.includes(0);
const jpeg = startsWith([0xff, 0xd8, 0xff]);

export const FILE_TYPES: Record<string, FileType> = {
  png: { mime: 'image/png', kind: 'image', sniff: startsWith([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]) },
  jpg: { mime: 'image/jpeg', kind: 'image', sniff: jpeg },
  jpeg: { mime: 'image/jpeg', kind: 'image', sniff: jpeg },
  webp: { mime: 'image/webp', kind: 'image', sniff: (h) => startsWith('RIFF')(h) && startsWith('WEBP', 8)(h) },
  gif: { mime: 'image/gif', kind: 'image', sniff: (h) => startsWith('GIF87a')(h) || startsWith('GIF89a')(h) },
  pdf: { mime: 'application/pdf', kind: 'document', sniff: startsWith('%PDF-') },
  txt: { mime: 'text/plain', kind: 'document', sniff: isText },
  md: { mime: 'text/markdown', kind: 'document', sniff: isText },
  csv: { mime: 'text/csv', kind: 'document', sniff: isText },
  json: { mime: 'application/json', kind: 'document', sniff: isText },
  docx: {
    mime: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    kind: 'document',
    sniff: startsWith([0x50, 0x4b, 0x03, 0x04]),
  },
};

export const ALLOWED_EXTENSIONS = Object.keys(FILE_TYPES);
export const maxBytes = (kind: Kind) => (kind === 'image' ? UPLOAD_LIMITS.imageMb : UPLOAD_LIMITS.documentMb) * MB;
export const MAX_BYTES = Math.max(maxBytes('image'), maxBytes('document'));

export function uploadsDir(config: Config): string {
  return path.join(config.dataDir, 'uploads');
}

/** Seconds a signed file link stays valid when the caller does not say (FILE_LINK_TTL_S). */
export const DEFAULT_FILE_LINK_TTL_S = 3_600;

function fileLinkKey(config: Pick<Config, 'ENCRYPTION_KEY'>): Buffer {
  return crypto.createHash('sha256').update(`file-preview:${config.ENCRYPTION_KEY}`).digest();
}

/**
 * Signature of the key-less preview URL of an upload (a capability: whoever has it may read the file until
 * `expires`, unix seconds; issue 17 L5). The route also refuses it once every conversation that used the
 * file is deleted.
 */
export function signFileId(config: Pick<Config, 'ENCRYPTION_KEY'>, fileId: string, expires: number): string {
  return crypto.createHmac('sha256', fileLinkKey(config)).update(`${fileId}:${expires}`).digest('base64url');
}

/** Whether `sign` is the signature of `fileId` until `expires` and that time has not passed. */
export function verifyFileSignature(
  config: Pick<Config, 'ENCRYPTION_KEY'>,
  fileId: string,
  expires: unknown,
  sign: unknown,
  now = Date.now(),
): boolean {
  if (typeof expires !== 'string' || !/^\d{1,12}$/.test(expires) || typeof sign !== 'string') return false;
  const want = Buffer.from(signFileId(config, fileId, Number(expires)));
  const got = Buffer.from(sign);
  return got.length === want.length && crypto.timingSafeEqual(got, want) && Number(expires) * 1000 > now;
}

export function signedFileUrl(
  config: Pick<Config, 'ENCRYPTION_KEY'> & { FILE_LINK_TTL_S?: number },
  baseUrl: string,
  fileId: string,
  opts: { ttlS?: number; now?: number } = {},
): string {
  const expires = Math.floor((opts.now ?? Date.now()) / 1000) + (opts.ttlS ?? config.FILE_LINK_TTL_S ?? DEFAULT_FILE_LINK_TTL_S);
  return `${baseUrl.replace(/\/+$/, '')}/files/${fileId}/file-preview?expires=${expires}&sign=${signFileId(config, fileId, expires)}`;
}

/** A fresh link to the same upload on the same origin as a stored one (history, a turn built later). */
export function resignFileUrl(
  config: Pick<Config, 'ENCRYPTION_KEY'> & { FILE_LINK_TTL_S?: number },
  storedUrl: string | null,
  fileId: string,
): string | null {
  if (!storedUrl) return storedUrl;
  try {
    return signedFileUrl(config, new URL(storedUrl).origin, fileId);
  } catch {
    return storedUrl;
  }
}

/** A file name safe inside the workspace: no directories, no leading dots, bounded. */
export function safeName(raw: string, fallback: string): string {
  const base = raw.split(/[\\/]/).pop() ?? '';
  const clean = base
    .replace(/[^\p{L}\p{N}._ -]/gu, '_')
    .replace(/^[.\s]+/, '')
    .slice(0, 120)
    .trim();
  return clean || fallback;
}

/** A chat request's file once checked (api/turns/message-files.ts): the MessageFile row it becomes. */
export interface PreparedMessageFile {
  type: string;
  transfer_method: 'local_file' | 'remote_url';
  url: string;
  upload_file_id: string | null;
}

/** Inserts the prepared rows for the message (inside the turn's transaction). */
export async function createMessageFiles(tx: Pick<Db, 'messageFile'>, messageId: string, files: PreparedMessageFile[]): Promise<void> {
  if (!files.length) return;
  await tx.messageFile.createMany({ data: files.map((f) => ({ message_id: messageId, belongs_to: 'user', ...f })) });
}
