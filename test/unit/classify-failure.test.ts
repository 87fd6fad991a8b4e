/** A failed agent run as the client sees it: error_type first, then the reason, then a generic error. */
import { describe, expect, it } from 'vitest';
import { classifyFailure } from '../../activities/classify-failure.js';

describe('classifyFailure', () => {
  it.each([
    ['InvokeRateLimitError', 'rate_limit_error', 429],
    ['InvokeAuthorizationError', 'completion_request_error', 400],
    ['InvokeBadRequestError', 'completion_request_error', 400],
    ['InvokeConnectionError', 'completion_request_error', 400],
    ['InvokeServerUnavailableError', 'completion_request_error', 400],
    ['InvokeError', 'completion_request_error', 400],
    ['agent_llm_quota_exceeded', 'provider_quota_exceeded', 400],
    ['run_timeout', 'agent_run_timeout', 504],
    ['provider_auth_failed', 'provider_auth_failed', 400],
    ['provider_rate_limited', 'provider_rate_limited', 429],
    ['context_window_exceeded', 'context_window_exceeded', 400],
    ['content_filtered', 'content_filtered', 400],
  ])('maps the reason %s to %s (%i) and keeps the run error as the message', (reason, code, status) => {
    expect(classifyFailure({ error: 'the run said why', reason })).toEqual({ code, status, message: 'the run said why' });
  });

  it('maps error_type agent_run_limit_exceeded to a 400 whatever the reason', () => {
    expect(
      classifyFailure({ error: 'too many tool calls', error_type: 'agent_run_limit_exceeded', reason: 'InvokeRateLimitError' }),
    ).toEqual({
      code: 'agent_run_limit_exceeded',
      status: 400,
      message: 'too many tool calls',
    });
  });

  it('falls back to the reason when the error_type is unknown', () => {
    expect(classifyFailure({ error: 'slow down', error_type: 'something_new', reason: 'InvokeRateLimitError' })).toMatchObject({
      code: 'rate_limit_error',
      status: 429,
    });
  });

  it('treats an unknown or missing reason as a completion_request_error', () => {
    expect(classifyFailure({ error: 'the backend restarted', reason: 'backend_restarted' })).toEqual({
      code: 'completion_request_error',
      status: 400,
      message: 'the backend restarted',
    });
    expect(classifyFailure({ error: 'no reason given', error_type: null, reason: null })).toMatchObject({
      code: 'completion_request_error',
      status: 400,
    });
  });

  it('does not map names inherited from Object.prototype', () => {
    expect(classifyFailure({ error: 'odd', error_type: 'constructor', reason: 'toString' })).toEqual({
      code: 'completion_request_error',
      status: 400,
      message: 'odd',
    });
  });

  it('gives a failure without an error text a generic message', () => {
    expect(classifyFailure({ error: '' })).toEqual({ code: 'completion_request_error', status: 400, message: 'The agent run failed.' });
  });
});
