import type { ErrorCode } from '../../protocol/error-codes.js';

/** A knowledge operation refused for the caller's input: the api answers `status` with `{code, message}`. */
export class KnowledgeError extends Error {
  constructor(
    readonly status: 400 | 403 | 404 | 409 | 413 | 415 | 422 | 502,
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'KnowledgeError';
  }
}
