/**
 * OpenAPI 3 document → API tools (issue 14 §3, Dify's "custom tools"): each operation becomes a tool named by its
 * operationId (else `<method>_<path>` as a slug) whose JSON schema holds the path, query and header parameters and
 * the JSON request body (its properties at the top level when they do not clash with a parameter, else one `body`
 * argument). Pure: no I/O.
 *
 * Why no OpenAPI parser library: the well-kept ones (@apidevtools/swagger-parser and its json-schema-ref-parser)
 * resolve external `$ref`s by default, over HTTP too — a request to any URL a tenant writes into a document. Only
 * local `#/...` refs are resolved here; an external one is refused. Recursive schemas end in an open schema.
 */
import { parse as parseYaml } from 'yaml';
import { assertJsonDepth, DEFAULT_JSON_MAX_DEPTH, JsonGuardError } from '../../platform/json-guard.js';
import { z } from 'zod';
import { qualifiedNameProblem, ToolName } from '../../protocol/tool-names.js';
import type { ApiOperation, ParamLocation, ProviderTool } from './provider-tool.js';

/** A document that cannot become tools; the message is for the console user (400). */
export class OpenApiError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OpenApiError';
  }
}

export interface ConvertedDocument {
  /** The first server's URL (variables at their defaults), or null when the document has none usable. */
  serverUrl: string | null;
  title: string;
  description: string;
  tools: ProviderTool[];
  /** Operations left out, and why (e.g. a non-JSON request body). */
  skipped: { operation: string; reason: string }[];
}

export const MAX_TOOLS_PER_PROVIDER = 128;
const MAX_EXPANDED_NODES = 50_000;
const MAX_DESCRIPTION = 1_000;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Deepest a document may nest once its `$ref`s are inlined (a chain of refs nests too). */
export const MAX_RESOLVED_DEPTH = 128;

/**
 * JSON or YAML text (or an already parsed object) → the document object, nested at most `maxDepth` deep (the JSON
 * bodies' JSON_MAX_DEPTH): a document given as a string gets the depth guard an object body got on its raw bytes
 * (issue 28: a string nested thousands deep overflowed the stack later, in ref resolution, as a 500). JSON text is
 * checked on its bytes before parsing; YAML after parsing (a flow collection nested deeper than the parser's stack
 * is refused the same way).
 */
export function parseOpenApiDocument(input: unknown, maxDepth = DEFAULT_JSON_MAX_DEPTH): Record<string, unknown> {
  let doc = input;
  if (typeof input === 'string') {
    const isJson = input.trimStart().startsWith('{');
    if (isJson) {
      try {
        assertJsonDepth(Buffer.from(input, 'utf8'), maxDepth);
      } catch (err) {
        if (err instanceof JsonGuardError) throw new OpenApiError(`the document is nested deeper than ${maxDepth} levels`);
        throw err;
      }
    }
    try {
      doc = isJson ? JSON.parse(input) : parseYaml(input, { maxAliasCount: 100 });
    } catch (err) {
      if (err instanceof RangeError || /call stack/i.test((err as Error)?.message ?? ''))
        throw new OpenApiError(`the document is nested deeper than ${maxDepth} levels`);
      throw new OpenApiError(`the document is neither valid JSON nor valid YAML: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  if (!isRecord(doc)) throw new OpenApiError('the document must be an object');
  if (depthOver(doc, maxDepth)) throw new OpenApiError(`the document is nested deeper than ${maxDepth} levels`);
  return doc;
}

/** Whether `value` nests (objects + arrays) deeper than `max`. Iterative; YAML aliases are walked once each. */
function depthOver(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  const seen = new Set<object>();
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (!v || typeof v !== 'object' || seen.has(v)) continue;
    if (d > max) return true;
    seen.add(v);
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (child && typeof child === 'object') stack.push([child, d + 1]);
  }
  return false;
}

const Doc = z.object({
  openapi: z.string().regex(/^3\.[01]\./, 'only OpenAPI 3.0 and 3.1 documents are supported'),
  info: z.looseObject({ title: z.string().optional(), description: z.string().optional() }).optional(),
  servers: z
    .array(z.looseObject({ url: z.string(), variables: z.record(z.string(), z.looseObject({ default: z.string() })).optional() }))
    .optional(),
  paths: z.record(z.string(), z.record(z.string(), z.unknown())),
});

const Parameter = z.looseObject({
  name: z.string().min(1),
  in: z.enum(['path', 'query', 'header', 'cookie']),
  required: z.boolean().optional(),
  description: z.string().optional(),
  schema: z.record(z.string(), z.unknown()).optional(),
});
type Parameter = z.infer<typeof Parameter>;

const Operation = z.looseObject({
  operationId: z.string().optional(),
  summary: z.string().optional(),
  description: z.string().optional(),
  parameters: z.array(z.unknown()).optional(),
  requestBody: z
    .looseObject({ required: z.boolean().optional(), content: z.record(z.string(), z.looseObject({ schema: z.unknown().optional() })) })
    .optional(),
});

export function openApiToTools(input: unknown, provider: string): ConvertedDocument {
  // An object was parsed (and depth-checked) by its caller or comes from storage; resolution has its own depth guard.
  const raw = isRecord(input) ? input : parseOpenApiDocument(input);
  const parsed = Doc.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new OpenApiError(`${i.path.length ? `${i.path.join('.')}: ` : ''}${i.message}`);
  }
  const doc = parsed.data;
  // Refs point into the whole document (components), which the schema above does not keep.
  const paths = resolveLocalRefs(raw, raw.paths) as Record<string, Record<string, unknown>>;
  const tools: ProviderTool[] = [];
  const skipped: ConvertedDocument['skipped'] = [];
  for (const [path, item] of Object.entries(paths)) {
    if (!isRecord(item)) continue;
    for (const method of METHODS) {
      if (!isRecord(item[method])) continue;
      const label = `${method.toUpperCase()} ${path}`;
      const op = Operation.safeParse(item[method]);
      if (!op.success) throw new OpenApiError(`${label}: ${op.error.issues[0]!.path.join('.')}: ${op.error.issues[0]!.message}`);
      const built = toolOf(method, path, op.data, [...(asArray(item.parameters) ?? []), ...(op.data.parameters ?? [])], label);
      if (typeof built === 'string') {
        skipped.push({ operation: label, reason: built });
        continue;
      }
      checkName(built.name, provider, label, tools);
      tools.push(built);
    }
  }
  if (tools.length === 0) throw new OpenApiError('the document has no operations that can become tools');
  if (tools.length > MAX_TOOLS_PER_PROVIDER)
    throw new OpenApiError(`the document has ${tools.length} operations; at most ${MAX_TOOLS_PER_PROVIDER}`);
  return {
    serverUrl: serverUrlOf(doc.servers?.[0]),
    title: doc.info?.title ?? '',
    description: doc.info?.description ?? doc.info?.title ?? '',
    tools,
    skipped,
  };
}

const asArray = (v: unknown): unknown[] | undefined => (Array.isArray(v) ? v : undefined);

function checkName(name: string, provider: string, label: string, tools: ProviderTool[]): void {
  const valid = ToolName.safeParse(name);
  if (!valid.success) throw new OpenApiError(`${label}: the tool name "${name}" is not allowed: ${valid.error.issues[0]!.message}`);
  const problem = qualifiedNameProblem(provider, name);
  if (problem) throw new OpenApiError(`${label}: ${problem}`);
  if (tools.some((t) => t.name === name)) throw new OpenApiError(`${label}: the tool name "${name}" is used by two operations`);
}

/** `get`, `/forecast/{city}` → `get_forecast_city`. */
export function operationSlug(method: string, path: string): string {
  const slug = `${method}_${path}`
    .replace(/[^A-Za-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 64);
  return slug || method;
}

/** The tool of one operation, or why it is left out. */
function toolOf(
  method: (typeof METHODS)[number],
  path: string,
  op: z.infer<typeof Operation>,
  rawParams: unknown[],
  label: string,
): ProviderTool | string {
  const params = new Map<string, Parameter>();
  for (const raw of rawParams) {
    const p = Parameter.safeParse(raw);
    if (!p.success)
      throw new OpenApiError(`${label}: a parameter is invalid: ${p.error.issues[0]!.path.join('.')}: ${p.error.issues[0]!.message}`);
    if (p.data.in !== 'cookie') params.set(`${p.data.in}:${p.data.name}`, p.data); // the operation's own overrides the path's
  }
  // No prototype: a parameter may be called `__proto__` or `toString`.
  const properties: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const required: string[] = [];
  const locations: { name: string; in: ParamLocation }[] = [];
  for (const p of params.values()) {
    if (Object.hasOwn(properties, p.name)) throw new OpenApiError(`${label}: two parameters are named "${p.name}"`);
    properties[p.name] = { ...(p.schema ?? { type: 'string' }), ...(p.description ? { description: p.description } : {}) };
    if (p.required || p.in === 'path') required.push(p.name);
    locations.push({ name: p.name, in: p.in as ParamLocation });
  }
  let body: ApiOperation['body'] = 'none';
  if (op.requestBody) {
    const json = Object.entries(op.requestBody.content).find(([type]) => /^application\/([\w.+-]+\+)?json\b/i.test(type));
    if (!json) return `only application/json request bodies are supported (${Object.keys(op.requestBody.content).join(', ') || 'none'})`;
    const schema = isRecord(json[1].schema) ? json[1].schema : {};
    const props = isRecord(schema.properties) ? schema.properties : null;
    if (props && Object.keys(props).every((k) => !Object.hasOwn(properties, k))) {
      body = 'flat';
      for (const [name, propSchema] of Object.entries(props)) {
        properties[name] = propSchema;
        locations.push({ name, in: 'body' });
      }
      if (Array.isArray(schema.required)) required.push(...schema.required.filter((r): r is string => typeof r === 'string'));
    } else {
      if (Object.hasOwn(properties, 'body')) throw new OpenApiError(`${label}: a parameter named "body" clashes with the request body`);
      body = 'whole';
      properties.body = schema;
      if (op.requestBody.required) required.push('body');
    }
  }
  const description = [op.summary, op.description].filter(Boolean).join(' — ') || label;
  return {
    name: op.operationId ?? operationSlug(method, path),
    description: description.slice(0, MAX_DESCRIPTION),
    parameters: { type: 'object', properties: { ...properties }, ...(required.length ? { required: [...new Set(required)] } : {}) },
    operation: { method, path, params: locations, body },
  };
}

function serverUrlOf(server: { url: string; variables?: Record<string, { default: string }> } | undefined): string | null {
  if (!server) return null;
  const url = server.url.replace(/\{([^}]+)\}/g, (_, v: string) => server.variables?.[v]?.default ?? `{${v}}`);
  return /^https?:\/\//i.test(url) ? url : null;
}

/** Local `$ref`s inlined (a copy); external ones refused; a ref met again inside itself becomes an open schema. */
export function resolveLocalRefs(root: Record<string, unknown>, node: unknown): unknown {
  let budget = MAX_EXPANDED_NODES;
  let depth = 0;
  const walk = (n: unknown, stack: string[]): unknown => {
    if (--budget < 0) throw new OpenApiError('the document is too large once its $refs are expanded');
    if (!Array.isArray(n) && !isRecord(n)) return n;
    if (++depth > MAX_RESOLVED_DEPTH)
      throw new OpenApiError(`the document nests deeper than ${MAX_RESOLVED_DEPTH} levels once its $refs are expanded`);
    try {
      return walkObject(n, stack);
    } finally {
      depth--;
    }
  };
  const walkObject = (n: unknown[] | Record<string, unknown>, stack: string[]): unknown => {
    if (Array.isArray(n)) return n.map((x) => walk(x, stack));
    if (typeof n.$ref === 'string') {
      const ref = n.$ref;
      if (!ref.startsWith('#/')) throw new OpenApiError(`only local $refs (#/...) are supported, not ${ref}`);
      const { $ref: _ignored, ...siblings } = n;
      if (stack.includes(ref)) return { description: `recursive (${ref})`, ...siblings };
      const target = pointer(root, ref);
      if (target === undefined) throw new OpenApiError(`$ref ${ref} points at nothing in the document`);
      const resolved = walk(target, [...stack, ref]);
      return isRecord(resolved) ? { ...resolved, ...(walk(siblings, stack) as Record<string, unknown>) } : resolved;
    }
    return Object.fromEntries(Object.entries(n).map(([k, v]) => [k, walk(v, stack)]));
  };
  return walk(node, []);
}

function pointer(root: unknown, ref: string): unknown {
  let cur: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isRecord(cur) && !Array.isArray(cur)) return undefined;
    cur = (cur as Record<string, unknown>)[key];
    if (cur === undefined) return undefined;
  }
  return cur;
}
