/**
 * Console API for tool providers (`/console/api/tool-providers`, docs/tools.md): add an API tool provider from an
 * OpenAPI 3 document (JSON or YAML) with its auth, or an MCP server (its tools are listed when it is added and on
 * refresh); list and read them (secrets masked), replace their credentials, delete them (refused while an agent's
 * draft or published config uses them). Server URLs pass the SSRF guard (TOOL_ALLOW_PRIVATE_NETWORK opens it).
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import type { Logger } from '../../core/platform/logger.js';
import { AddressRefusedError, checkUrl, createGuardedFetch, type FetchLike } from '../../core/platform/net/ssrf.js';
import { ProviderName } from '../../core/protocol/tool-names.js';
import { listMcpTools } from '../../core/domain/tools/mcp.js';
import { OpenApiError, openApiToTools, parseOpenApiDocument } from '../../core/domain/tools/openapi.js';
import {
  ApiAuthInput,
  apiAuthColumns,
  findProvider,
  McpHeadersInput,
  mcpAuthColumns,
  providerView,
  secretsOf,
  toolsOf,
} from '../../core/domain/tools/providers.js';
import { hasUserinfo, headerParamProblem } from '../../core/domain/tools/reserved-headers.js';
import { consoleAuth } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';
import { pageJson, pageOf } from '../pagination.js';

const Description = z.string().max(2_000);
/** No `user:password@`: it would be stored and shown in clear; credentials go in `auth` / `headers` (issue 28). */
const ServerUrl = z
  .url({ protocol: /^https?$/, error: 'must be an http(s) URL' })
  .max(2_000)
  .refine((u) => !hasUserinfo(u), 'must not carry user:password@ (put credentials in auth or headers, which are encrypted)');

export const CreateToolProviderBody = z.discriminatedUnion('kind', [
  z
    .object({
      kind: z.literal('api'),
      name: ProviderName,
      description: Description.optional(),
      /** The OpenAPI 3 document: an object, or its JSON or YAML text. */
      openapi: z.union([z.string().min(1).max(1_000_000), z.record(z.string(), z.unknown())]),
      /** Overrides the document's first server (required when it has none, or a relative one). */
      server_url: ServerUrl.optional(),
      auth: ApiAuthInput.default({ type: 'none' }),
    })
    .strict(),
  z
    .object({
      kind: z.literal('mcp'),
      name: ProviderName,
      description: Description.optional(),
      server_url: ServerUrl,
      headers: McpHeadersInput.default({}),
    })
    .strict(),
]);
export const ToolProviderCredentialsBody = z.union([
  z.object({ auth: ApiAuthInput }).strict(),
  z.object({ headers: McpHeadersInput }).strict(),
]);

export interface ToolProviderRouteDeps {
  db: Db;
  config: Config;
  logger: Logger;
  /** Tests: a fetch of their own; default the guarded fetch with TOOL_ALLOW_PRIVATE_NETWORK. */
  toolFetch?: FetchLike;
}

export function toolProviderRoutes(deps: ToolProviderRouteDeps): Router {
  const { db, config } = deps;
  const key = config.ENCRYPTION_KEY;
  const guard = { allowPrivate: config.TOOL_ALLOW_PRIVATE_NETWORK };
  const fetch = deps.toolFetch ?? createGuardedFetch(guard);
  const r = Router();
  r.use(consoleAuth(db));
  r.use(jsonBody({ limit: '2mb', maxDepth: config.JSON_MAX_DEPTH, rejectNul: true }));

  async function providerOf(req: Request) {
    const name = parseOr400(ProviderName, req.params.name, 'name');
    const row = await findProvider(db, req.consoleCtx!.tenantId, name);
    if (!row) throw new HttpError(404, 'tool_provider_not_found', `No tool provider named ${name}.`);
    return row;
  }

  async function assertReachable(url: string, field: string) {
    try {
      await checkUrl(url, guard);
    } catch (err) {
      if (err instanceof AddressRefusedError) throw new HttpError(400, 'invalid_server_url', `${field}: ${err.message}.`);
      throw err;
    }
  }

  async function mcpTools(name: string, url: string, headers: Record<string, string>) {
    try {
      return await listMcpTools({ url, headers }, name, { fetch, timeoutMs: config.TOOL_TIMEOUT_MS });
    } catch (err) {
      if (err instanceof AddressRefusedError) throw new HttpError(400, 'invalid_server_url', `server_url: ${err.message}.`);
      // The server's own words may echo a header; only say what kind of failure it was.
      deps.logger.info({ provider: name, err: (err as Error).name }, 'tool providers: MCP server could not list its tools');
      throw new HttpError(400, 'mcp_server_unreachable', `The MCP server at server_url did not list its tools: ${shortReason(err)}.`);
    }
  }

  r.get('/', async (req, res) => {
    const page = pageOf(req.query);
    const where = { tenant_id: req.consoleCtx!.tenantId };
    const [total, rows] = await Promise.all([
      db.toolProvider.count({ where }),
      db.toolProvider.findMany({ where, orderBy: { name: 'asc' }, skip: page.skip, take: page.take }),
    ]);
    res.json(
      pageJson(
        page,
        total,
        rows.map((row) => providerView(key, row)),
      ),
    );
  });

  r.post('/', async (req, res) => {
    const body = parseOr400(CreateToolProviderBody, req.body);
    const tenantId = req.consoleCtx!.tenantId;
    if (await findProvider(db, tenantId, body.name))
      throw new HttpError(409, 'tool_provider_exists', `A tool provider named ${body.name} already exists.`);
    let data;
    let skipped: unknown[];
    if (body.kind === 'api') {
      const doc = convert(body.openapi, body.name, config.JSON_MAX_DEPTH);
      const serverUrl = body.server_url ?? doc.serverUrl;
      if (!serverUrl)
        throw new HttpError(400, 'invalid_openapi', 'The document has no absolute server URL (servers[0].url); give server_url.');
      if (hasUserinfo(serverUrl))
        throw new HttpError(
          400,
          'invalid_openapi',
          'servers[0].url: must not carry user:password@ (give server_url and put credentials in auth).',
        );
      const headerProblem = headerParamProblem(doc.tools, body.auth);
      if (headerProblem) throw new HttpError(400, 'invalid_openapi', `openapi: ${headerProblem}.`);
      await assertReachable(serverUrl, body.server_url ? 'server_url' : 'servers[0].url');
      skipped = doc.skipped;
      data = {
        kind: 'api',
        description: body.description ?? doc.description,
        server_url: serverUrl,
        openapi_schema: doc.document as object,
        tools: doc.tools as object[],
        ...apiAuthColumns(key, body.auth),
      };
    } else {
      await assertReachable(body.server_url, 'server_url');
      const listed = await mcpTools(body.name, body.server_url, body.headers);
      if (listed.tools.length === 0) throw new HttpError(400, 'mcp_no_tools', 'The MCP server lists no tools that can be offered.');
      skipped = listed.skipped;
      data = {
        kind: 'mcp',
        description: body.description ?? '',
        server_url: body.server_url,
        tools: listed.tools as object[],
        ...mcpAuthColumns(key, body.headers),
      };
    }
    const row = await db.toolProvider
      .create({ data: { tenant_id: tenantId, name: body.name, ...data } })
      .catch((err: { code?: string }) => {
        if (err?.code === 'P2002') throw new HttpError(409, 'tool_provider_exists', `A tool provider named ${body.name} already exists.`);
        throw err;
      });
    res.status(201).json({ ...providerView(key, row), skipped });
  });

  r.get('/:name', async (req, res) => {
    res.json(providerView(key, await providerOf(req)));
  });

  r.put('/:name/credentials', async (req, res) => {
    const row = await providerOf(req);
    const body = parseOr400(ToolProviderCredentialsBody, req.body);
    let columns;
    if (row.kind === 'api') {
      if (!('auth' in body)) throw new HttpError(400, 'invalid_param', 'auth: an API tool provider takes {auth}.');
      const headerProblem = headerParamProblem(toolsOf(row), body.auth);
      if (headerProblem) throw new HttpError(400, 'invalid_param', `auth: ${headerProblem}.`);
      columns = apiAuthColumns(key, body.auth);
    } else {
      if (!('headers' in body)) throw new HttpError(400, 'invalid_param', 'headers: an MCP tool provider takes {headers}.');
      columns = mcpAuthColumns(key, body.headers);
    }
    const updated = await db.toolProvider.update({ where: { id: row.id }, data: columns });
    res.json(providerView(key, updated));
  });

  r.post('/:name/refresh', async (req, res) => {
    const row = await providerOf(req);
    if (row.kind !== 'mcp')
      throw new HttpError(400, 'refresh_not_supported', 'Only an MCP tool provider lists its tools again; re-add an API provider.');
    const listed = await mcpTools(row.name, row.server_url, secretsOf(key, row).headers ?? {});
    const updated = await db.toolProvider.update({ where: { id: row.id }, data: { tools: listed.tools as object[] } });
    res.json({ ...providerView(key, updated), skipped: listed.skipped });
  });

  r.delete('/:name', async (req, res) => {
    const row = await providerOf(req);
    const users = await agentsUsing(db, row.tenant_id, row.name);
    if (users.length) {
      throw new HttpError(
        409,
        'tool_provider_in_use',
        `The tool provider ${row.name} is used by the config of ${users.length} agent(s); remove its tools from them first.`,
        { agent_ids: users },
      );
    }
    await db.toolProvider.delete({ where: { id: row.id } });
    res.status(204).end();
  });

  return r;
}

function convert(openapi: unknown, name: string, maxDepth: number) {
  try {
    // Stored as JSON whatever the input was (YAML included); a string gets the body's depth guard (issue 28).
    const document = parseOpenApiDocument(openapi, maxDepth);
    return { ...openApiToTools(document, name), document };
  } catch (err) {
    if (err instanceof OpenApiError) throw new HttpError(400, 'invalid_openapi', `openapi: ${err.message}.`);
    throw err;
  }
}

/** Agents whose shared/build draft or active published config names this provider. */
async function agentsUsing(db: Db, tenantId: string, provider: string): Promise<string[]> {
  const ref = JSON.stringify([{ provider }]);
  const rows = await db.$queryRaw<{ agent_id: string }[]>`
    select d.agent_id from agent_config_drafts d
     where d.tenant_id = ${tenantId}::uuid and d.config->'tools'->'plugin' @> ${ref}::jsonb
    union
    select a.id from agents a join agent_config_versions v on v.id = a.active_config_snapshot_id
     where a.tenant_id = ${tenantId}::uuid and v.config_snapshot->'tools'->'plugin' @> ${ref}::jsonb`;
  return rows.map((r) => r.agent_id);
}

function shortReason(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string } };
  if (e.cause?.code) return e.cause.code;
  const m = (e.message ?? String(err)).split('\n')[0]!;
  return m.length > 200 ? `${m.slice(0, 200)}…` : m;
}
