/**
 * Console API for model providers (`/console/api/model-providers`, docs/models.md): the providers this
 * deployment offers with their catalogue models (features, bounds, prices: what a model picker shows), whether
 * the deployment hosts each (billed through the credit pool), and the workspace's own credentials per provider —
 * several providers at once, encrypted at rest, shown masked: add or rotate (checked with a real minimal call
 * first unless `validate: false`, the provider's own error shown), check again, delete. A tenant's own
 * credentials make its calls unbilled.
 */
import { Router, type Request } from 'express';
import { z } from 'zod';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import { BaseUrlError, checkModelBaseUrl } from '../../core/domain/llm/base-url.js';
import { deleteCredentials, loadCredentials, saveCredentials } from '../../core/domain/llm/credentials.js';
import { toInvokeError } from '../../core/domain/llm/errors.js';
import type { LlmProvider, ModelInfo, ProviderRegistry } from '../../core/domain/llm/provider.js';
import { createDefaultProviders, type ProviderConfig } from '../../core/domain/llm/providers/index.js';
import { modelParameters, REASONING_EFFORTS } from '../../core/domain/llm/model-check.js';
import { isFree } from '../../core/domain/llm/pricing.js';
import { redactSecrets } from '../../core/domain/llm/redact.js';
import { tenantCredentials } from '../../core/domain/llm/tenant-model.js';
import type { Logger } from '../../core/platform/logger.js';
import { unixSeconds } from '../../core/platform/time.js';
import { consoleAuth } from './auth.js';
import { HttpError, parseOr400 } from '../errors.js';

export interface ModelProviderRouteDeps {
  db: Db;
  config: Pick<Config, 'ENCRYPTION_KEY' | 'JSON_MAX_DEPTH'> & ProviderConfig;
  logger: Logger;
  /** Default: the deployment's providers (createDefaultProviders). */
  providers?: ProviderRegistry;
}

export const SaveModelCredentialsBody = z
  .object({
    credentials: z.record(z.string(), z.unknown()),
    /** Check with a real minimal call before saving (default true). */
    validate: z.boolean().default(true),
    /** The model the check calls (default: the provider's cheapest usual model). */
    model: z.string().min(1).max(200).optional(),
  })
  .strict();
export const CheckModelCredentialsBody = z
  .object({ credentials: z.record(z.string(), z.unknown()).optional(), model: z.string().min(1).max(200).optional() })
  .strict();

const Range = (what: string) =>
  z.object({ min: z.number(), max: z.number().nullable().describe(`The largest ${what} (null: no bound known).`) });

/** A catalogue model as the console shows it (the studio's model picker and its settings fields). */
export const CatalogueModelView = z.object({
  model: z.string(),
  label: z.string(),
  context_window: z.number().int(),
  max_output: z.number().int().nullable(),
  features: z.object({
    vision: z.boolean(),
    documents: z.boolean(),
    tool_calls: z.boolean(),
    reasoning: z.boolean(),
    structured_output: z.boolean(),
    temperature: z.boolean().describe('Takes a temperature (reasoning models often do not: a set one is dropped from its calls).'),
  }),
  parameters: z
    .object({
      temperature: Range('temperature').nullable(),
      max_tokens: Range('max_tokens: the model’s max output'),
      top_p: Range('top_p').nullable().describe('null: the model takes none (one that takes no temperature: the AI SDK drops both).'),
      stop_sequences: z
        .object({ max: z.number().int() })
        .nullable()
        .describe('null: the provider’s API takes none (openai: the Responses API).'),
      thinking_budget: Range('thinking budget (below max output)')
        .extend({
          excludes: z
            .array(z.enum(['temperature', 'top_p']))
            .describe(
              'The settings the model takes no more while a thinking budget is set (anthropic, bedrock: temperature and top P; the provider drops them): the studio disables them, a save with both is a 400.',
            ),
        })
        .nullable()
        .describe('A reasoning model of anthropic, bedrock or google; null: the model takes none.'),
      reasoning_effort: z
        .array(z.enum(REASONING_EFFORTS))
        .nullable()
        .describe('A reasoning model of openai or azure; null: the model takes none.'),
    })
    .describe('The `model_settings` the model takes and their bounds (a save outside them is a 400 invalid_agent_config).'),
  prices: z
    .object({ input: z.string(), output: z.string(), cached_input: z.string().optional(), currency: z.string(), per: z.string() })
    .describe('Decimal strings per 1M tokens.'),
  custom: z.boolean(),
});

export function modelView(provider: string, m: ModelInfo): z.infer<typeof CatalogueModelView> {
  const e = m.entry;
  return {
    model: m.model,
    label: m.label,
    context_window: m.context_window,
    max_output: e?.max_output ?? null,
    features: {
      vision: m.supports_vision,
      documents: e?.documents ?? false,
      tool_calls: m.supports_tools,
      reasoning: e?.reasoning ?? false,
      structured_output: e?.structured_output ?? false,
      temperature: e?.temperature ?? true,
    },
    parameters: modelParameters(provider, m),
    prices: { ...m.pricing, per: '1M tokens' },
    custom: e?.custom ?? false,
  };
}

export function modelProviderRoutes(deps: ModelProviderRouteDeps): Router {
  const { db, config } = deps;
  let registry = deps.providers;
  const providers = () => (registry ??= createDefaultProviders(config));
  const r = Router();
  r.use(consoleAuth(db));
  r.use(jsonBody({ limit: '256kb', maxDepth: config.JSON_MAX_DEPTH, rejectNul: true }));

  const providerOf = (req: Request): LlmProvider => {
    const name = String(req.params.provider ?? '');
    const p = providers().get(name);
    if (!p) {
      const known = providers()
        .list()
        .map((x) => x.name)
        .join(', ');
      throw new HttpError(404, 'model_provider_not_found', `No model provider named ${name} (this deployment has: ${known}).`);
    }
    return p;
  };
  const parseCredentials = (p: LlmProvider, raw: unknown) => {
    try {
      return p.parseCredentials(raw);
    } catch (err) {
      throw new HttpError(400, 'invalid_param', (err as Error).message);
    }
  };
  const mask = (p: LlmProvider, c: Record<string, unknown>) => (p.maskCredentials ? p.maskCredentials(c) : {});

  /** The provider's verdict on credentials: null when a real call worked, else its error (redacted). */
  async function check(p: LlmProvider, credentials: Record<string, unknown>, model?: string) {
    if (!p.checkCredentials) return null;
    try {
      await p.checkCredentials(credentials, { model, signal: AbortSignal.timeout(30_000) });
      return null;
    } catch (err) {
      const e = toInvokeError(err);
      const secrets = Object.values(credentials).filter((v): v is string => typeof v === 'string' && v.length >= 6);
      const message = redactSecrets(secrets.reduce((t, s) => t.split(s).join('[redacted]'), e.message));
      deps.logger.info({ provider: p.name, error_type: e.errorType, reason: e.reason }, 'model providers: credential check failed');
      return { code: e.reason ?? 'provider_check_failed', error_type: e.errorType, message };
    }
  }

  r.get('/', async (req, res) => {
    const tenantId = req.consoleCtx!.tenantId;
    const rows = await db.modelProviderCredential.findMany({ where: { tenant_id: tenantId } });
    const data = await Promise.all(
      providers()
        .list()
        .map(async (p) => {
          const row = rows.find((x) => x.provider === p.name);
          const creds = row ? await loadCredentials(db, config.ENCRYPTION_KEY, tenantId, p.name).catch(() => null) : null;
          return {
            provider: p.name,
            system_hosted: p.hasSystemCredentials(),
            credentials: row ? (creds ? mask(p, creds) : { error: 'cannot be decrypted with this ENCRYPTION_KEY' }) : null,
            credentials_updated_at: row ? unixSeconds(row.updated_at) : null,
            usable: Boolean(row) || p.hasSystemCredentials(),
            // Billed through the credit pool: system-hosted, and not free (a deployment's own Ollama costs nothing).
            billed: !row && p.hasSystemCredentials() && p.models().some((m) => !isFree(m.pricing)),
            models: p.models().length,
          };
        }),
    );
    res.json({ data });
  });

  /** The catalogue's models, and the ones the workspace's own credentials declare (`custom: true`, with their declared features and prices). */
  r.get('/:provider/models', async (req, res) => {
    const p = providerOf(req);
    const creds = await tenantCredentials(db, config.ENCRYPTION_KEY, req.consoleCtx!.tenantId, p.name);
    res.json({ provider: p.name, data: p.models(creds).map((m) => modelView(p.name, m)) });
  });

  /** Add or rotate the workspace's credentials (replaces what was saved). */
  r.put('/:provider/credentials', async (req, res) => {
    const p = providerOf(req);
    const body = parseOr400(SaveModelCredentialsBody, req.body);
    const credentials = parseCredentials(p, body.credentials);
    // The SSRF guard at save, whatever `validate` says (core/domain/llm/base-url.ts): 400 invalid_base_url saying why.
    if (typeof credentials.base_url === 'string') {
      try {
        await checkModelBaseUrl(credentials.base_url, { allowPrivate: config.MODEL_ALLOW_PRIVATE_NETWORK === true });
      } catch (err) {
        if (err instanceof BaseUrlError) throw new HttpError(400, 'invalid_base_url', `credentials.base_url: ${err.message}.`);
        throw err;
      }
    }
    if (body.validate) {
      const failed = await check(p, credentials, body.model);
      if (failed)
        throw new HttpError(400, 'provider_credentials_invalid', `The ${p.name} credentials did not work: ${failed.message}`, {
          provider_error: failed,
        });
    }
    await saveCredentials(db, config.ENCRYPTION_KEY, req.consoleCtx!.tenantId, p.name, credentials);
    res.json({ provider: p.name, credentials: mask(p, credentials), validated: body.validate });
  });

  /** Check credentials (the given ones, else the saved ones) with a real minimal call; nothing is saved. */
  r.post('/:provider/credentials/validate', async (req, res) => {
    const p = providerOf(req);
    const body = parseOr400(CheckModelCredentialsBody, req.body ?? {});
    const tenantId = req.consoleCtx!.tenantId;
    const credentials = body.credentials
      ? parseCredentials(p, body.credentials)
      : await loadCredentials(db, config.ENCRYPTION_KEY, tenantId, p.name);
    if (!credentials) throw new HttpError(404, 'model_credentials_not_found', `This workspace has no ${p.name} credentials.`);
    const failed = await check(p, credentials, body.model);
    res.json(failed ? { provider: p.name, valid: false, error: failed } : { provider: p.name, valid: true });
  });

  r.delete('/:provider/credentials', async (req, res) => {
    const p = providerOf(req);
    const count = await deleteCredentials(db, req.consoleCtx!.tenantId, p.name);
    if (count === 0) throw new HttpError(404, 'model_credentials_not_found', `This workspace has no ${p.name} credentials.`);
    res.status(204).end();
  });

  return r;
}
