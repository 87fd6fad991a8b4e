/** Failures the workflow turns into client `error` events (docs/PROTOCOL.md §1 codes). */
import { ApplicationFailure } from '@temporalio/common';
import type { ErrorCode } from '../core/protocol/error-codes.js';

export const SESSION_CONFIG_CHANGED_MESSAGE =
  'The Agent configuration changed after this conversation started. Start a new conversation to continue.';

export interface TurnErrorDetails {
  code: ErrorCode;
  status: number;
  message: string;
}

/** A client-facing, non-retryable turn failure. */
export function turnFailure(code: ErrorCode, status: number, message: string): ApplicationFailure {
  return ApplicationFailure.create({
    type: code,
    message,
    nonRetryable: true,
    details: [{ code, status, message } satisfies TurnErrorDetails],
  });
}
