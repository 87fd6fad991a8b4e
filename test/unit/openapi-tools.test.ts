/** OpenAPI 3 document → API tools (core/domain/tools/openapi.ts) and one tool call → HTTP request (core/domain/tools/invoke.ts). */
import { describe, expect, it } from 'vitest';
import { buildRequest } from '../../core/domain/tools/invoke.js';
import { openApiToTools, operationSlug, OpenApiError } from '../../core/domain/tools/openapi.js';

const doc = {
  openapi: '3.0.3',
  info: { title: 'Weather', description: 'Forecasts' },
  servers: [{ url: 'https://{region}.weather.example/v1', variables: { region: { default: 'eu' } } }],
  paths: {
    '/forecast/{city}': {
      parameters: [{ name: 'city', in: 'path', required: true, schema: { type: 'string' }, description: 'City name' }],
      get: {
        operationId: 'get_forecast',
        summary: 'Forecast for a city',
        parameters: [
          { name: 'days', in: 'query', schema: { type: 'integer', minimum: 1 } },
          { name: 'X-Units', in: 'header', schema: { type: 'string', enum: ['metric', 'imperial'] } },
          { name: 'session', in: 'cookie', schema: { type: 'string' } },
        ],
      },
    },
    '/alerts': {
      post: {
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/Alert' } } } },
      },
      put: { requestBody: { content: { 'text/csv': { schema: { type: 'string' } } } } },
    },
  },
  components: {
    schemas: {
      Alert: {
        type: 'object',
        required: ['level'],
        properties: { level: { type: 'string' }, area: { $ref: '#/components/schemas/Area' } },
      },
      Area: { type: 'object', properties: { name: { type: 'string' }, parent: { $ref: '#/components/schemas/Area' } } },
    },
  },
};

describe('openApiToTools', () => {
  const out = openApiToTools(doc, 'weather');

  it('makes one tool per operation, named by operationId or method and path', () => {
    expect(out.tools.map((t) => t.name)).toEqual(['get_forecast', 'post_alerts']);
    expect(out.serverUrl).toBe('https://eu.weather.example/v1');
    expect(out.description).toBe('Forecasts');
  });

  it('puts path, query and header parameters into the JSON schema (cookies left out), path parameters required', () => {
    const t = out.tools[0]!;
    expect(t.description).toBe('Forecast for a city');
    expect(t.parameters).toEqual({
      type: 'object',
      properties: {
        city: { type: 'string', description: 'City name' },
        days: { type: 'integer', minimum: 1 },
        'X-Units': { type: 'string', enum: ['metric', 'imperial'] },
      },
      required: ['city'],
    });
    expect(t.operation).toEqual({
      method: 'get',
      path: '/forecast/{city}',
      params: [
        { name: 'city', in: 'path' },
        { name: 'days', in: 'query' },
        { name: 'X-Units', in: 'header' },
      ],
      body: 'none',
    });
  });

  it('flattens a JSON body’s properties, resolving local $refs and ending a recursive one in an open schema', () => {
    const t = out.tools[1]!;
    const props = (t.parameters as { properties: Record<string, { properties?: Record<string, { description?: string }> }> }).properties;
    expect(Object.keys(props)).toEqual(['level', 'area']);
    expect((t.parameters as { required: string[] }).required).toEqual(['level']);
    expect(props.area!.properties!.parent!.description).toBe('recursive (#/components/schemas/Area)');
    expect(t.operation!.body).toBe('flat');
  });

  it('leaves out operations with a non-JSON body and says why', () => {
    expect(out.skipped).toEqual([{ operation: 'PUT /alerts', reason: 'only application/json request bodies are supported (text/csv)' }]);
  });

  it('accepts YAML text', () => {
    const yaml = `openapi: 3.1.0\ninfo: {title: T}\nservers: [{url: 'http://api.example'}]\npaths:\n  /ping:\n    get: {operationId: ping}\n`;
    expect(openApiToTools(yaml, 'p').tools.map((t) => t.name)).toEqual(['ping']);
  });

  it.each([
    [{ swagger: '2.0', paths: {} }, 'openapi'],
    [{ openapi: '3.0.0', paths: {} }, 'no operations'],
    [{ openapi: '3.0.0', paths: { '/a': { get: { operationId: 'has.dot' } } } }, 'not allowed'],
    [
      { openapi: '3.0.0', paths: { '/a': { get: { operationId: 'same' } }, '/b': { get: { operationId: 'same' } } } },
      'used by two operations',
    ],
    [{ openapi: '3.0.0', paths: { '/a': { get: { operationId: 'x'.repeat(60) } } } }, 'longer than 64'],
    [{ openapi: '3.0.0', paths: { '/a': { get: { parameters: [{ $ref: 'https://evil.example/p.json' }] } } } }, 'only local $refs'],
    ['{not json', 'neither valid JSON nor valid YAML'],
  ])('refuses %j', (input, message) => {
    expect(() => openApiToTools(input, 'weather')).toThrow(OpenApiError);
    expect(() => openApiToTools(input, 'weather')).toThrow(message);
  });

  it('slugs method and path when there is no operationId', () => {
    expect(operationSlug('get', '/users/{id}/posts')).toBe('get_users_id_posts');
  });
});

describe('buildRequest', () => {
  const [forecast, alerts] = openApiToTools(doc, 'weather').tools;

  it('fills the path, query and header arguments and adds an API key header', () => {
    const { url, init } = buildRequest(
      { server_url: 'https://api.example/v1/', auth: { type: 'api_key_header', name: 'X-Api-Key' } },
      forecast!.operation!,
      { city: 'São Paulo/x', days: 3, 'X-Units': 'metric' },
      { secret: 'k-123' },
    );
    expect(url.href).toBe('https://api.example/v1/forecast/S%C3%A3o%20Paulo%2Fx?days=3');
    expect(init.method).toBe('GET');
    expect(init.headers).toMatchObject({ 'x-api-key': 'k-123', 'x-units': 'metric' });
    expect(init.body).toBeUndefined();
  });

  it('sends the flat body arguments as JSON, a query key or a bearer token', () => {
    const q = buildRequest(
      { server_url: 'https://api.example', auth: { type: 'api_key_query', name: 'key' } },
      alerts!.operation!,
      { level: 'red' },
      { secret: 's' },
    );
    expect(q.url.href).toBe('https://api.example/alerts?key=s');
    expect(JSON.parse(q.init.body as string)).toEqual({ level: 'red' });
    const b = buildRequest({ server_url: 'https://api.example', auth: { type: 'bearer' } }, alerts!.operation!, {}, { secret: 't' });
    expect((b.init.headers as Record<string, string>).authorization).toBe('Bearer t');
  });

  it('refuses a call without its path argument', () => {
    expect(() => buildRequest({ server_url: 'https://a.example', auth: { type: 'none' } }, forecast!.operation!, {}, {})).toThrow('city');
  });
});
