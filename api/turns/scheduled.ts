/**
 * A scheduled run's turn, created by the chat request's own records code (createTurnRecords): the startScheduledTurn
 * activity (activities/scheduled-turn.ts) receives this as its `createTurn` from the worker, so a scheduled turn gets
 * the same admission, end user, lock and Message as a chat request, and the activities never import the api.
 */
import type { CreateScheduledTurn } from '../../core/protocol/workflow-contract.js';
import { CodedError } from '../../core/protocol/error-codes.js';
import { HttpError } from '../errors.js';
import { ChatRequest } from '../schemas.js';
import { createTurnRecords, type TurnServiceDeps } from './start.js';

export function scheduledTurnCreator(deps: Pick<TurnServiceDeps, 'db' | 'config'>): CreateScheduledTurn {
  return async (request) => {
    const body = ChatRequest.parse({
      query: request.query,
      inputs: request.inputs,
      user: request.user,
      response_mode: 'blocking',
      conversation_id: request.conversationId,
    });
    try {
      const records = await createTurnRecords(
        deps,
        request.app,
        body,
        'service-api',
        { kind: 'end-user' },
        {
          messageId: request.messageId,
          metadata: request.metadata,
        },
      );
      return { kind: 'created', conversationId: records.conversationId, input: records.input };
    } catch (err) {
      // The client-facing refusals of a chat request (busy conversation, server at capacity, a full queue, …).
      if (err instanceof HttpError || err instanceof CodedError) return { kind: 'refused', error: `${err.code}: ${err.message}` };
      throw err;
    }
  };
}
