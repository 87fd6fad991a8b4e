/**
 * The error table of docs/models.md "Errors a user can act on", one test per row (issue 41 item 3): each provider's
 * documented error body (status, headers, JSON as its API reference shows them) answered by its wire-format fake,
 * through the real provider package and the gateway router, becomes the error chunk's kind and `data.code` the row
 * names, retried as often as the row says. Then a cut stream and an unreachable host, which are not the same failure.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDefaultProviders, type ProviderConfig } from '../../../core/domain/llm/providers/index.js';
import { InvokeChunk } from '../../../core/protocol/inner-llm.js';
import {
  answerOf,
  captureLogger,
  createTenant,
  invokeBody,
  post,
  readChunks,
  serveRouter,
  startTestDb,
  type Served,
  type TestDb,
} from '../helpers.js';
import { helloFrames, startFakeProvider, type FakeProvider, type ScriptedAnswer, type Wire } from './fake-providers.js';

const SECRET = 'sk-error-table-0123456789abcdef';
const PROVIDERS: Record<string, { model: string; wire: Wire; config: (url: string) => Partial<ProviderConfig> }> = {
  openai: { model: 'gpt-4o-mini', wire: 'openai-responses', config: (u) => ({ OPENAI_API_KEY: SECRET, OPENAI_BASE_URL: `${u}/v1` }) },
  anthropic: {
    model: 'claude-3-5-haiku-20241022',
    wire: 'anthropic',
    config: (u) => ({ ANTHROPIC_API_KEY: SECRET, ANTHROPIC_BASE_URL: `${u}/v1` }),
  },
  google: {
    model: 'gemini-2.0-flash',
    wire: 'gemini',
    config: (u) => ({ GOOGLE_GENERATIVE_AI_API_KEY: SECRET, GOOGLE_BASE_URL: `${u}/v1beta` }),
  },
  azure: { model: 'gpt-4o', wire: 'openai-chat', config: (u) => ({ AZURE_API_KEY: SECRET, AZURE_BASE_URL: `${u}/openai` }) },
  bedrock: {
    model: 'anthropic.claude-3-5-haiku-20241022-v1:0',
    wire: 'bedrock',
    config: (u) => ({ AWS_ACCESS_KEY_ID: 'AKIAFAKEFAKE', AWS_SECRET_ACCESS_KEY: SECRET, AWS_REGION: 'us-east-1', BEDROCK_BASE_URL: u }),
  },
  ollama: { model: 'llama3.2', wire: 'ollama', config: (u) => ({ OLLAMA_BASE_URL: `${u}/api` }) },
};

const json = (status: number, body: unknown, headers: Record<string, string> = {}): ScriptedAnswer => ({
  status,
  headers,
  body: JSON.stringify(body),
});
const openAiError = (message: string, type: string, code: string | null) => ({ error: { message, type, param: null, code } });
const anthropicError = (type: string, message: string, details?: unknown) => ({
  type: 'error',
  error: { type, message, ...(details ? { details } : {}) },
  request_id: 'req_011CSHoEeqs5C35K2UUqR7Fy',
});
const geminiError = (code: number, status: string, message: string, details?: unknown[]) => ({
  error: { code, message, status, ...(details ? { details } : {}) },
});
const amzn = (type: string) => ({ 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` });

interface Row {
  provider: keyof typeof PROVIDERS;
  what: string;
  answer: ScriptedAnswer;
  chunk: number;
  code: string | undefined;
  /** Requests the call made: 1, or 3 when the row is retried (twice). */
  attempts: 1 | 3;
}

const ROWS: Row[] = [
  // OpenAI (platform.openai.com/docs/guides/error-codes)
  {
    provider: 'openai',
    what: '401 invalid_api_key',
    answer: json(401, openAiError('Incorrect API key provided: sk-proj-****abcd.', 'invalid_request_error', 'invalid_api_key')),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'openai',
    what: '429 insufficient_quota (billing, not a rate limit)',
    answer: json(
      429,
      openAiError(
        'You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.',
        'insufficient_quota',
        'insufficient_quota',
      ),
    ),
    chunk: -400,
    code: 'provider_billing_error',
    attempts: 1,
  },
  {
    provider: 'openai',
    what: '429 rate_limit_exceeded',
    answer: json(
      429,
      openAiError(
        'Rate limit reached for gpt-4o-mini in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.',
        'requests',
        'rate_limit_exceeded',
      ),
      { 'retry-after': '0' },
    ),
    chunk: -429,
    code: 'provider_rate_limited',
    attempts: 3,
  },
  {
    provider: 'openai',
    what: '404 model_not_found',
    answer: json(
      404,
      openAiError('The model `gpt-4o-mini` does not exist or you do not have access to it.', 'invalid_request_error', 'model_not_found'),
    ),
    chunk: -400,
    code: 'provider_model_not_found',
    attempts: 1,
  },
  {
    provider: 'openai',
    what: '400 context_length_exceeded',
    answer: json(
      400,
      openAiError(
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
        'invalid_request_error',
        'context_length_exceeded',
      ),
    ),
    chunk: -400,
    code: 'context_window_exceeded',
    attempts: 1,
  },
  {
    provider: 'openai',
    what: '503 engine overloaded',
    answer: json(503, openAiError('The engine is currently overloaded, please try again later', 'server_error', null)),
    chunk: -503,
    code: 'provider_overloaded',
    attempts: 3,
  },
  // Anthropic (docs.claude.com/en/api/errors)
  {
    provider: 'anthropic',
    what: '401 authentication_error',
    answer: json(401, anthropicError('authentication_error', 'invalid x-api-key')),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '403 permission_error',
    answer: json(403, anthropicError('permission_error', 'Your API key does not have permission to use the specified resource.')),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '529 overloaded_error',
    answer: json(529, anthropicError('overloaded_error', 'Overloaded')),
    chunk: -503,
    code: 'provider_overloaded',
    attempts: 3,
  },
  {
    provider: 'anthropic',
    what: '429 rate_limit_error',
    answer: json(429, anthropicError('rate_limit_error', 'Number of request tokens has exceeded your per-minute rate limit'), {
      'retry-after': '0',
    }),
    chunk: -429,
    code: 'provider_rate_limited',
    attempts: 3,
  },
  {
    provider: 'anthropic',
    what: '429 rate_limit_error with enforced_spend_limit_reached (billing)',
    answer: json(
      429,
      anthropicError('rate_limit_error', 'You have reached your monthly spend limit.', { error_code: 'enforced_spend_limit_reached' }),
    ),
    chunk: -400,
    code: 'provider_billing_error',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '402 billing_error',
    answer: json(402, anthropicError('billing_error', 'There is an issue with your billing or payment information.')),
    chunk: -400,
    code: 'provider_billing_error',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '400 credit balance too low',
    answer: json(
      400,
      anthropicError(
        'invalid_request_error',
        'Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.',
      ),
    ),
    chunk: -400,
    code: 'provider_billing_error',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '404 not_found_error',
    answer: json(404, anthropicError('not_found_error', 'model: claude-3-5-haiku-20241022')),
    chunk: -400,
    code: 'provider_model_not_found',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '400 prompt is too long',
    answer: json(400, anthropicError('invalid_request_error', 'prompt is too long: 250000 tokens > 200000 maximum')),
    chunk: -400,
    code: 'context_window_exceeded',
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: 'an `error` event (overloaded_error) in a 200 stream before any token',
    answer: {
      status: 200,
      headers: { 'content-type': 'text/event-stream' },
      body: [
        `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-3-5-haiku-20241022', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 10, output_tokens: 1 } } })}\n\n`,
        `event: error\ndata: ${JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })}\n\n`,
      ],
    },
    chunk: -503,
    code: 'provider_overloaded',
    attempts: 3,
  },
  // Gemini (ai.google.dev/gemini-api/docs/troubleshooting)
  {
    provider: 'google',
    what: '400 INVALID_ARGUMENT with reason API_KEY_INVALID (credentials, though a 400)',
    answer: json(
      400,
      geminiError(400, 'INVALID_ARGUMENT', 'API key not valid. Please pass a valid API key.', [
        {
          '@type': 'type.googleapis.com/google.rpc.ErrorInfo',
          reason: 'API_KEY_INVALID',
          domain: 'googleapis.com',
          metadata: { service: 'generativelanguage.googleapis.com' },
        },
        {
          '@type': 'type.googleapis.com/google.rpc.LocalizedMessage',
          locale: 'en-US',
          message: 'API key not valid. Please pass a valid API key.',
        },
      ]),
    ),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'google',
    what: '403 PERMISSION_DENIED',
    answer: json(
      403,
      geminiError(
        403,
        'PERMISSION_DENIED',
        "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.",
      ),
    ),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'google',
    what: '429 RESOURCE_EXHAUSTED',
    answer: json(429, geminiError(429, 'RESOURCE_EXHAUSTED', 'Resource has been exhausted (e.g. check quota).'), { 'retry-after': '0' }),
    chunk: -429,
    code: 'provider_rate_limited',
    attempts: 3,
  },
  {
    provider: 'google',
    what: '503 UNAVAILABLE (the model is overloaded)',
    answer: json(503, geminiError(503, 'UNAVAILABLE', 'The model is overloaded. Please try again later.')),
    chunk: -503,
    code: 'provider_overloaded',
    attempts: 3,
  },
  {
    provider: 'google',
    what: '404 NOT_FOUND',
    answer: json(
      404,
      geminiError(
        404,
        'NOT_FOUND',
        'models/gemini-2.0-flash is not found for API version v1beta, or is not supported for generateContent.',
      ),
    ),
    chunk: -400,
    code: 'provider_model_not_found',
    attempts: 1,
  },
  {
    provider: 'google',
    what: '400 input token count exceeds the maximum',
    answer: json(
      400,
      geminiError(400, 'INVALID_ARGUMENT', 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).'),
    ),
    chunk: -400,
    code: 'context_window_exceeded',
    attempts: 1,
  },
  // Azure OpenAI (learn.microsoft.com/azure/ai-foundry/openai/reference, content filtering)
  {
    provider: 'azure',
    what: '400 content_filter (ResponsibleAIPolicyViolation)',
    answer: json(400, {
      error: {
        message: "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
        type: null,
        param: 'prompt',
        code: 'content_filter',
        status: 400,
        innererror: { code: 'ResponsibleAIPolicyViolation', content_filter_result: { hate: { filtered: true, severity: 'high' } } },
      },
    }),
    chunk: -400,
    code: 'content_filtered',
    attempts: 1,
  },
  {
    provider: 'azure',
    what: '429 token rate limit of the pricing tier',
    answer: json(
      429,
      {
        error: {
          code: '429',
          message:
            'Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 0 seconds.',
        },
      },
      { 'retry-after': '0' },
    ),
    chunk: -429,
    code: 'provider_rate_limited',
    attempts: 3,
  },
  {
    provider: 'azure',
    what: '401 invalid subscription key',
    answer: json(401, {
      error: {
        code: '401',
        message:
          'Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.',
      },
    }),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'azure',
    what: '404 DeploymentNotFound',
    answer: json(404, {
      error: {
        code: 'DeploymentNotFound',
        message:
          'The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.',
      },
    }),
    chunk: -400,
    code: 'provider_model_not_found',
    attempts: 1,
  },
  // Bedrock (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html#API_runtime_ConverseStream_Errors)
  {
    provider: 'bedrock',
    what: '429 ThrottlingException',
    answer: json(429, { message: 'Too many requests, please wait before trying again.' }, amzn('ThrottlingException')),
    chunk: -429,
    code: 'provider_rate_limited',
    attempts: 3,
  },
  {
    provider: 'bedrock',
    what: '403 AccessDeniedException',
    answer: json(403, { message: "You don't have access to the model with the specified model ID." }, amzn('AccessDeniedException')),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'bedrock',
    what: '400 ValidationException: the model identifier is invalid',
    answer: json(400, { message: 'The provided model identifier is invalid.' }, amzn('ValidationException')),
    chunk: -400,
    code: 'provider_model_not_found',
    attempts: 1,
  },
  {
    provider: 'bedrock',
    what: '400 ValidationException: input is too long',
    answer: json(400, { message: 'Input is too long for requested model.' }, amzn('ValidationException')),
    chunk: -400,
    code: 'context_window_exceeded',
    attempts: 1,
  },
  {
    provider: 'bedrock',
    what: '503 ServiceUnavailableException',
    answer: json(503, { message: 'Bedrock is unable to process your request.' }, amzn('ServiceUnavailableException')),
    chunk: -503,
    code: 'provider_overloaded',
    attempts: 3,
  },
  {
    provider: 'bedrock',
    what: '403 UnrecognizedClientException',
    answer: json(403, { message: 'The security token included in the request is invalid.' }, amzn('UnrecognizedClientException')),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'bedrock',
    what: '403 ExpiredTokenException',
    answer: json(403, { message: 'The security token included in the request is expired' }, amzn('ExpiredTokenException')),
    chunk: -401,
    code: 'provider_auth_failed',
    attempts: 1,
  },
  {
    provider: 'bedrock',
    what: '429 ModelNotReadyException (the model is loading: overloaded, not a rate limit)',
    answer: json(
      429,
      { message: 'Model is not ready for inference. Wait and try your request again. Refer to the Bedrock User Guide.' },
      amzn('ModelNotReadyException'),
    ),
    chunk: -503,
    code: 'provider_overloaded',
    attempts: 3,
  },
  // The table's "another 5xx" row: retried, no code of its own.
  {
    provider: 'openai',
    what: '500 server_error',
    answer: json(500, openAiError('The server had an error while processing your request. Sorry about that!', 'server_error', null)),
    chunk: -503,
    code: undefined,
    attempts: 3,
  },
  {
    provider: 'anthropic',
    what: '500 api_error',
    answer: json(500, anthropicError('api_error', 'Internal server error')),
    chunk: -503,
    code: undefined,
    attempts: 3,
  },
  {
    provider: 'google',
    what: '500 INTERNAL',
    answer: json(
      500,
      geminiError(
        500,
        'INTERNAL',
        'An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting',
      ),
    ),
    chunk: -503,
    code: undefined,
    attempts: 3,
  },
  {
    provider: 'bedrock',
    what: '500 InternalServerException',
    answer: json(500, { message: 'The server encountered an internal error.' }, amzn('InternalServerException')),
    chunk: -503,
    code: undefined,
    attempts: 3,
  },
  // The table's "any other 4xx" row: not retried, no code of its own.
  {
    provider: 'openai',
    what: '400 invalid_request_error (another mistake in the request)',
    answer: json(
      400,
      openAiError("Invalid value: 'robot'. Supported values are: 'system', 'assistant', 'user'.", 'invalid_request_error', 'invalid_value'),
    ),
    chunk: -400,
    code: undefined,
    attempts: 1,
  },
  {
    provider: 'anthropic',
    what: '400 invalid_request_error (another mistake in the request)',
    answer: json(400, anthropicError('invalid_request_error', 'messages: roles must alternate between "user" and "assistant"')),
    chunk: -400,
    code: undefined,
    attempts: 1,
  },
  {
    provider: 'google',
    what: '400 INVALID_ARGUMENT (not a key)',
    answer: json(400, geminiError(400, 'INVALID_ARGUMENT', 'Invalid JSON payload received. Unknown name "foo": Cannot find field.')),
    chunk: -400,
    code: undefined,
    attempts: 1,
  },
  // The rest of the table's context-window and content-filter rows.
  {
    provider: 'ollama',
    what: '400 the input exceeds the context length',
    answer: json(400, { error: 'the input length exceeds the context length' }),
    chunk: -400,
    code: 'context_window_exceeded',
    attempts: 1,
  },
  {
    provider: 'openai',
    what: '400 content_policy_violation',
    answer: json(
      400,
      openAiError('Your request was rejected as a result of our safety system.', 'invalid_request_error', 'content_policy_violation'),
    ),
    chunk: -400,
    code: 'content_filtered',
    attempts: 1,
  },
  // Ollama (github.com/ollama/ollama/blob/main/docs/api.md "Errors")
  {
    provider: 'ollama',
    what: '404 model not found, try pulling it first',
    answer: json(404, { error: 'model "llama3.2" not found, try pulling it first' }),
    chunk: -400,
    code: 'provider_model_not_found',
    attempts: 1,
  },
];

let tdb: TestDb;
let api: Served;
const fakes = new Map<string, FakeProvider>();
/** A port nothing listens on (the unreachable host). */
let deadPort: number;
let deadApi: Served;

beforeAll(async () => {
  tdb = await startTestDb();
  let config: ProviderConfig = {
    DEMO_MODEL_TOKEN_DELAY_MS: 0,
    OPENAI_COMPATIBLE_BASE_URL: undefined,
    OPENAI_COMPATIBLE_API_KEY: undefined,
    OPENAI_COMPATIBLE_MODEL: undefined,
  };
  for (const [name, p] of Object.entries(PROVIDERS)) {
    const fake = await startFakeProvider(p.wire);
    fakes.set(name, fake);
    config = { ...config, ...p.config(fake.url) };
  }
  const retry = { baseDelayMs: 5, maxDelayMs: 2_000 };
  api = await serveRouter({ db: tdb.db, logger: captureLogger().logger, providers: createDefaultProviders(config, { retry }) });
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  deadPort = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  deadApi = await serveRouter({
    db: tdb.db,
    logger: captureLogger().logger,
    providers: createDefaultProviders({ ...config, ANTHROPIC_BASE_URL: `http://127.0.0.1:${deadPort}/v1` }, { retry }),
  });
}, 180_000);

afterAll(async () => {
  await api?.close();
  await deadApi?.close();
  for (const f of fakes.values()) await f.close();
  await tdb?.close();
});

async function call(base: string, provider: string) {
  const tenant = await createTenant(tdb.db, { limit: 10_000_000n });
  const p = PROVIDERS[provider]!;
  const res = await post(
    base,
    invokeBody(tenant, { provider, model: p.model, prompt_messages: [{ role: 'user', content: 'SCN:hello Hi' }] }),
  );
  expect(res.status).toBe(200);
  const chunks = await readChunks(res);
  for (const ch of chunks) InvokeChunk.parse(ch);
  return { tenant, chunks };
}

describe.each(ROWS)('$provider $what', (row) => {
  it(`→ ${row.chunk} ${row.code} (${row.attempts === 1 ? 'not retried' : 'retried twice'})`, async () => {
    const fake = fakes.get(row.provider)!;
    fake.respondNext(row.answer, row.attempts);
    const before = fake.requests.length;
    const { chunks } = await call(api.url, row.provider);
    const end = chunks.at(-1)!;
    expect(end.code, JSON.stringify(end)).toBe(row.chunk);
    expect(end.data.code).toBe(row.code);
    // The user-facing message names the code; the key never appears.
    if (row.code) expect(end.message).toContain(row.code);
    expect(JSON.stringify(end)).not.toContain(SECRET);
    expect(fake.requests.length - before).toBe(row.attempts);
  });
});

describe('a cut stream is not an unreachable host', () => {
  it('a 200 stream cut after its first words: provider_stream_interrupted, the words streamed, not retried', async () => {
    const fake = fakes.get('anthropic')!;
    const { contentType, frames } = helloFrames('anthropic');
    const upTo = frames.findIndex((f) => String(f).includes('Hello'));
    fake.respondNext({ status: 200, headers: { 'content-type': contentType }, body: frames.slice(0, upTo + 1), cut: true });
    const before = fake.requests.length;
    const { chunks } = await call(api.url, 'anthropic');
    expect(answerOf(chunks)).toBe('Hello ');
    expect(chunks.at(-1)).toMatchObject({ code: -502, data: { code: 'provider_stream_interrupted' } });
    expect(chunks.at(-1)!.message).toContain('cut off');
    expect(fake.requests.length - before).toBe(1);
  });

  it('a 200 stream cut before any token: retried (and the retry answers)', async () => {
    const fake = fakes.get('openai')!;
    const { contentType, frames } = helloFrames('openai-responses');
    fake.respondNext({ status: 200, headers: { 'content-type': contentType }, body: frames.slice(0, 1), cut: true });
    const before = fake.requests.length;
    const { chunks } = await call(api.url, 'openai');
    expect(answerOf(chunks)).toBe('Hello there!');
    expect(fake.requests.length - before).toBe(2);
  });

  it('nothing listening at the base URL: provider_unreachable at once, not retried', async () => {
    const started = Date.now();
    const { chunks } = await call(deadApi.url, 'anthropic');
    expect(chunks.at(-1)).toMatchObject({ code: -502, data: { code: 'provider_unreachable' } });
    expect(chunks.at(-1)!.message).toContain('could not be reached');
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
