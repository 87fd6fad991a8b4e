/**
 * /openapi.json is a valid OpenAPI 3.1 document: the required structure, every route of docs/PROTOCOL.md §1,
 * every $ref resolvable, every component a valid JSON Schema 2020-12 (Ajv) — and it describes what
 * the api really sends: live responses and every SSE frame of a turn validate against it.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../api/openapi/index.js';
import { WEBHOOK_EVENTS } from '../../api/console/webhooks.js';
import type { Stack } from '../../stack/start-stack.js';
import { chat, type ClientFrame } from '../support/sse.js';
import { startTestStack } from '../support/stack.js';
import { api, tinyPng, upload } from './helpers.js';

type Json = Record<string, unknown>;
interface Doc {
  openapi: string;
  jsonSchemaDialect: string;
  info: { title: string; version: string };
  paths: Record<
    string,
    Record<string, { operationId: string; parameters?: { name: string; in: string }[]; responses: Record<string, unknown> }>
  >;
  components: { schemas: Record<string, Json>; responses: Record<string, Json>; securitySchemes: Record<string, Json> };
}

let stack: Stack;
let key: string;
let doc: Doc;

beforeAll(async () => {
  stack = await startTestStack('api_openapi');
  key = stack.demo!.apiKey;
  const res = await fetch(`${stack.apiUrl}/openapi.json`);
  expect(res.status).toBe(200);
  doc = (await res.json()) as Doc;
});
afterAll(async () => stack?.stop());

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
/** Fixed fields of OpenAPI 3.1 objects (plus `x-` extensions): anything else makes the document invalid. */
const FIELDS = {
  operation: [
    'tags',
    'summary',
    'description',
    'externalDocs',
    'operationId',
    'parameters',
    'requestBody',
    'responses',
    'callbacks',
    'deprecated',
    'security',
    'servers',
  ],
  parameter: [
    'name',
    'in',
    'description',
    'required',
    'deprecated',
    'allowEmptyValue',
    'schema',
    'content',
    'style',
    'explode',
    'allowReserved',
    'example',
    'examples',
  ],
  response: ['description', 'headers', 'content', 'links'],
  mediaType: ['schema', 'encoding', 'example', 'examples'],
  requestBody: ['description', 'content', 'required'],
};
function expectFields(kind: keyof typeof FIELDS, obj: object, where: string) {
  for (const k of Object.keys(obj))
    if (!k.startsWith('x-') && k !== '$ref') expect(FIELDS[kind], `${where}: ${kind} field ${k}`).toContain(k);
}
function expectResponse(res: Json, where: string) {
  const r = (res.$ref ? resolvePointer(doc, res.$ref as string) : res) as Json;
  expectFields('response', r, where);
  expect(r.description, where).toBeTypeOf('string');
  for (const [type, media] of Object.entries((r.content ?? {}) as Record<string, Json>)) {
    expect(type, where).toMatch(/^[a-z]+\/[a-z0-9.+-]+$/);
    expectFields('mediaType', media, `${where} ${type}`);
  }
}

/** The routes of docs/PROTOCOL.md §1, each with its method. */
const PROTOCOL_ROUTES = [
  'post /v1/chat-messages',
  'post /v1/chat-messages/{task_id}/stop',
  'get /v1/chat-messages/{task_id}/events',
  'get /v1/messages',
  'get /v1/conversations',
  'post /v1/conversations/{conversation_id}/name',
  'delete /v1/conversations/{conversation_id}',
  'post /v1/messages/{message_id}/feedbacks',
  'get /v1/parameters',
  'get /v1/info',
  'post /v1/files/upload',
  'get /v1/form/human_input/{form_token}',
  'post /v1/form/human_input/{form_token}',
];

function resolvePointer(root: unknown, ref: string): unknown {
  return ref
    .slice(2)
    .split('/')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((node, key) => (node && typeof node === 'object' ? (node as Json)[key] : undefined), root);
}

function collectRefs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => collectRefs(n, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else collectRefs(v, out);
    }
  }
  return out;
}

/** Ajv over the component schemas, with the document's refs pointed at them. */
function validators(d: Doc): (id: string) => ValidateFunction {
  const ajv = new Ajv2020({ strict: true, allErrors: true, formats: { uuid: true, uri: true } });
  const defs = JSON.parse(JSON.stringify(d.components.schemas).replaceAll('"#/components/schemas/', '"components#/$defs/')) as Json;
  ajv.addSchema({ $id: 'components', $defs: defs });
  return (id) => ajv.getSchema(`components#/$defs/${id}`)!;
}

describe('GET /openapi.json', () => {
  it('is served without a key and equals the generated document', async () => {
    expect(doc).toEqual(JSON.parse(JSON.stringify(openApiDocument())));
  });

  it('has the required OpenAPI 3.1 structure', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/);
    expect(doc.jsonSchemaDialect).toBe('https://json-schema.org/draft/2020-12/schema');
    expect(doc.info.title).toBeTypeOf('string');
    expect(doc.info.version).toBeTypeOf('string');
    expect(doc.components.securitySchemes.AppApiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
    const operationIds: string[] = [];
    for (const [path, item] of Object.entries(doc.paths)) {
      expect(path.startsWith('/'), path).toBe(true);
      for (const [method, op] of Object.entries(item)) {
        expect(METHODS, `${path}: ${method}`).toContain(method);
        operationIds.push(op.operationId);
        expect(Object.keys(op.responses).length, `${method} ${path}`).toBeGreaterThan(0);
        expectFields('operation', op, `${method} ${path}`);
        for (const p of op.parameters ?? []) {
          expectFields('parameter', p, `${method} ${path}`);
          expect(['query', 'header', 'path', 'cookie']).toContain(p.in);
        }
        const body = (op as { requestBody?: Json }).requestBody;
        if (body) {
          expectFields('requestBody', body, `${method} ${path}`);
          for (const media of Object.values(body.content as Record<string, Json>))
            expectFields('mediaType', media, `${method} ${path} body`);
        }
        for (const [status, res] of Object.entries(op.responses)) {
          expect(status, `${method} ${path}`).toMatch(/^([1-5]\d\d|[1-5]XX|default)$/);
          expectResponse(res as Json, `${method} ${path} ${status}`);
        }
        // every {param} of the template is declared as a required path parameter
        for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) {
          expect(
            op.parameters?.find((p) => p.in === 'path' && p.name === name),
            `${method} ${path}: path parameter ${name}`,
          ).toMatchObject({ required: true });
        }
      }
    }
    expect(new Set(operationIds).size).toBe(operationIds.length);
  });

  it('documents every route of docs/PROTOCOL.md §1', () => {
    const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m} ${path}`));
    expect(documented).toEqual(expect.arrayContaining(PROTOCOL_ROUTES));
  });

  it('documents every SSE event of a turn beside the streaming routes', () => {
    const stream = doc.paths['/v1/chat-messages']!.post!.responses['200'] as {
      content: Record<string, { schema: Json; 'x-sse-events': Record<string, Json> }>;
    };
    const events = stream.content['text/event-stream']!;
    expect(events.schema).toEqual({ $ref: '#/components/schemas/SseEvent' });
    expect(Object.keys(events['x-sse-events']).sort()).toEqual(
      [
        'AgentMessageEvent',
        'AgentThoughtEvent',
        'ErrorEvent',
        'HumanInputRequiredEvent',
        'MessageEndEvent',
        'MessageEvent',
        'MessageFileEvent',
        'MessageReplaceEvent',
        'MessageQueuedEvent',
        'PingEvent',
      ].sort(),
    );
    const names = Object.values(events['x-sse-events']).map(
      (r) => (resolvePointer(doc, r.$ref as string) as { properties: { event: { const: string } } }).properties.event.const,
    );
    expect(names.sort()).toEqual([
      'agent_message',
      'agent_thought',
      'error',
      'human_input_required',
      'message',
      'message_end',
      'message_file',
      'message_queued',
      'message_replace',
      'ping',
    ]);
  });

  it('has every $ref resolvable', () => {
    const refs = collectRefs(doc);
    expect(refs.length).toBeGreaterThan(20);
    for (const ref of refs) {
      expect(ref.startsWith('#/'), ref).toBe(true);
      expect(resolvePointer(doc, ref), ref).toBeDefined();
    }
  });

  it('has every component schema valid JSON Schema 2020-12 (Ajv meta-validation and strict compile)', () => {
    const ajv = new Ajv2020({ strict: true });
    for (const [id, schema] of Object.entries(doc.components.schemas)) {
      expect(ajv.validateSchema(schema), `${id}: ${ajv.errorsText(ajv.errors)}`).toBe(true);
    }
    const compile = validators(doc);
    for (const id of Object.keys(doc.components.schemas)) expect(compile(id), id).toBeTypeOf('function');
  });

  it('generates request schemas from the zod schemas the routes use (defaults optional, required fields required)', () => {
    expect(doc.components.schemas.ChatRequest!.required).toEqual(['query', 'user']);
    expect(doc.components.schemas.FeedbackRequest!.required).toEqual(expect.arrayContaining(['rating', 'user']));
    const params = doc.paths['/v1/conversations']!.get!.parameters!.map((p) => p.name);
    expect(params).toEqual(['user', 'last_id', 'limit', 'sort_by']);
  });
});

describe('the document describes what the api sends', () => {
  let check: (id: string, value: unknown) => void;
  beforeAll(() => {
    const compile = validators(doc);
    check = (id, value) => {
      const validate = compile(id);
      const ok = validate(value);
      expect(ok, `${id}: ${JSON.stringify(validate.errors)}\n${JSON.stringify(value).slice(0, 500)}`).toBe(true);
    };
  });

  it('every SSE frame of a turn (with a tool thought, and one asking a human) matches SseEvent', async () => {
    const frames: ClientFrame[] = (await chat(stack.apiUrl, key, { query: '/calc 6*7', user: 'spec' })).frames;
    expect(frames.at(-1)?.event).toBe('message_end');
    expect(frames.map((f) => f.event)).toContain('agent_thought');
    for (const f of frames) check('SseEvent', f.data);
    const ask = await chat(stack.apiUrl, key, { query: '/ask Your name?', user: 'spec-ask' });
    for (const f of ask.frames) check('SseEvent', f.data);
    expect(ask.frames.map((f) => f.event)).toContain('human_input_required');
  });

  it('live responses of every JSON route match their response schemas', async () => {
    const blocking = await api(stack.apiUrl, key, 'POST', '/v1/chat-messages', {
      body: { query: 'blocking please', user: 'spec3', response_mode: 'blocking', inputs: {} },
      timeoutMs: 30_000,
    });
    expect(blocking.status).toBe(200);
    check('ChatBlockingResponse', blocking.body);
    const conversationId = (blocking.body as { conversation_id: string }).conversation_id;
    const messageId = (blocking.body as { message_id: string }).message_id;

    const list = await api(stack.apiUrl, key, 'GET', '/v1/conversations?user=spec3');
    check('ConversationListResponse', list.body);
    const msgs = await api(stack.apiUrl, key, 'GET', `/v1/messages?conversation_id=${conversationId}&user=spec3`);
    check('MessageListResponse', msgs.body);
    const renamed = await api(stack.apiUrl, key, 'POST', `/v1/conversations/${conversationId}/name`, {
      body: { auto_generate: true, user: 'spec3' },
    });
    check('ConversationResponse', renamed.body);
    check(
      'SuccessResponse',
      (await api(stack.apiUrl, key, 'POST', `/v1/messages/${messageId}/feedbacks`, { body: { rating: 'like', user: 'spec3' } })).body,
    );
    check(
      'SuccessResponse',
      (await api(stack.apiUrl, key, 'POST', `/v1/chat-messages/${messageId}/stop`, { body: { user: 'spec3' } })).body,
    );
    check('ParametersResponse', (await api(stack.apiUrl, key, 'GET', '/v1/parameters?user=spec3')).body);
    check('AppInfoResponse', (await api(stack.apiUrl, key, 'GET', '/v1/info')).body);
    check('BuiltinToolListResponse', (await api(stack.apiUrl, stack.demo!.consoleKey, 'GET', '/console/api/builtin-tools')).body);
    const events = await api(stack.apiUrl, stack.demo!.consoleKey, 'GET', '/console/api/webhook-events');
    check('WebhookEventListResponse', events.body);
    expect(events.body).toEqual({ data: [...WEBHOOK_EVENTS] });
    const up = await upload(stack.apiUrl, key, tinyPng(), 'spec.png', 'spec3');
    expect(up.status).toBe(201);
    check('UploadFileResponse', up.body);
    for (const bad of [
      await api(stack.apiUrl, key, 'GET', '/v1/messages?user=spec3'),
      await api(stack.apiUrl, null, 'GET', '/v1/info'),
      await api(stack.apiUrl, key, 'DELETE', `/v1/conversations/${messageId}`, { body: { user: 'spec3' } }),
    ]) {
      expect(bad.status).toBeGreaterThanOrEqual(400);
      check('ErrorResponse', bad.body);
    }
  });
});
