import { APICallError } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { retryAfterMs, toProviderInvokeError } from './provider-errors.js';

const apiError = (statusCode: number | undefined, body: string, headers: Record<string, string> = {}) =>
  new APICallError({
    message: 'call failed',
    url: 'http://x',
    requestBodyValues: {},
    statusCode,
    responseBody: body,
    responseHeaders: headers,
  });

describe('error mapping', () => {
  it('names what the user can act on', () => {
    expect(
      toProviderInvokeError(apiError(401, '{"error":{"message":"Incorrect API key provided: sk-abcdefghijkl"}}'), ['sk-abcdefghijkl']),
    ).toMatchObject({
      errorType: 'InvokeAuthorizationError',
      reason: 'provider_auth_failed',
      message: 'provider answered 401: Incorrect API key provided: [redacted]',
    });
    expect(toProviderInvokeError(apiError(403, '{"error":{"message":"API key not valid"}}'))).toMatchObject({
      reason: 'provider_auth_failed',
    });
    expect(toProviderInvokeError(apiError(429, '{}', { 'retry-after': '3' }))).toMatchObject({
      errorType: 'InvokeRateLimitError',
      reason: 'provider_rate_limited',
      retryAfterMs: 3000,
    });
    for (const body of [
      '{"error":{"message":"This model\'s maximum context length is 128000 tokens","code":"context_length_exceeded"}}',
      '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}',
      '{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}}',
      '{"message":"Input is too long for requested model."}',
    ]) {
      expect(toProviderInvokeError(apiError(400, body))).toMatchObject({
        errorType: 'InvokeBadRequestError',
        reason: 'context_window_exceeded',
      });
    }
    expect(toProviderInvokeError(apiError(400, '{"error":{"code":"content_filter","message":"The response was filtered"}}'))).toMatchObject(
      {
        reason: 'content_filtered',
      },
    );
    expect(toProviderInvokeError(apiError(400, '{"error":{"message":"bad temperature"}}'))).toMatchObject({
      errorType: 'InvokeBadRequestError',
      reason: undefined,
    });
  });

  it('maps server, transport and stream failures', () => {
    expect(toProviderInvokeError(apiError(529, 'overloaded')).errorType).toBe('InvokeServerUnavailableError');
    expect(toProviderInvokeError(apiError(503, '')).errorType).toBe('InvokeServerUnavailableError');
    expect(toProviderInvokeError(apiError(200, '')).errorType).toBe('InvokeConnectionError');
    expect(toProviderInvokeError(apiError(undefined, '')).errorType).toBe('InvokeConnectionError');
    expect(toProviderInvokeError(new TypeError('fetch failed')).errorType).toBe('InvokeConnectionError');
    expect(toProviderInvokeError(new Error('something odd')).errorType).toBe('InvokeError');
  });

  it('reads Retry-After as seconds, an HTTP date, or retry-after-ms', () => {
    expect(retryAfterMs({ 'Retry-After': '2' })).toBe(2000);
    expect(retryAfterMs({ 'retry-after-ms': '150' })).toBe(150);
    expect(retryAfterMs({ 'retry-after': new Date(10_000).toUTCString() }, 4_000)).toBe(6_000);
    expect(retryAfterMs({ 'retry-after': 'soon' })).toBeUndefined();
    expect(retryAfterMs(undefined)).toBeUndefined();
  });
});
