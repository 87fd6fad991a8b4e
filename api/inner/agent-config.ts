/**
 * GET|PUT /inner/api/agent-config/{agent_id}/prompt (docs/PROTOCOL.md §3, docs/seeds/004): the Agent Soul system prompt,
 * and GET …/manifest: the rest of the saved config (without the prompt).
 * raw (mention markers unexpanded). Scope comes only from the signed execution context the agent stub
 * forwards: reads follow the run's own scope (snapshot, shared draft or build draft); writes go only to the
 * calling account's own BUILD_DRAFT and replace only `prompt.system_prompt`, checked as a save checks it (issue 43: an
 * unknown mention is the studio's 400 `invalid_agent_config`, naming it, and nothing is stored).
 */
import express, { type Request, type Router } from 'express';
import { z } from 'zod';
import { findBuildDraft, findSharedDraft, findVersion, saveBuildDraft } from '../../core/domain/agent-configs.js';
import type { Db } from '../../core/platform/db.js';
import { jsonBody } from '../../core/platform/json-guard.js';
import { checkExecutionContext } from '../../core/protocol/exec-context.js';
import { ExecutionContextLayerConfig, type ExecutionContextLayerConfig as Ctx } from '../../core/protocol/run.js';
import { AgentSoulConfig } from '../../core/domain/soul.js';
import { mentionIssues } from '../../core/domain/mention-resolver.js';
import { invalidAgentConfig } from '../console/agent-config-validation.js';
import { HttpError, parseOr400 } from '../errors.js';
import { Uuid } from '../schemas.js';
import { requireInnerApiKey } from './auth.js';

const PromptBody = z.object({ prompt: z.string().max(100_000) }).strict();

export interface InnerAgentConfigDeps {
  db: Db;
  innerApiKey: string;
  /** EXECUTION_CONTEXT_SIGNING_KEY: verifies the forwarded context (the backend does not hold it). */
  signingKey: string;
  maxJsonDepth?: number;
}

/** The verified context and the run's scope: the account whose BUILD_DRAFT the run uses, if it runs on one. */
type RunCtx = Ctx & { buildDraftOf: string | null };

/** The header the agent stub names its run with (the run its stub token was minted for). */
export const AGENT_RUN_ID_HEADER = 'x-agent-run-id';

const IN_PROGRESS = new Set(['pending', 'running']);

/** Where a run's config is read from: its build draft, the shared draft, or a published version. */
type ConfigSource = { kind: 'build_draft' | 'draft'; id: string } | { kind: 'version'; id: string; version: number };

export function innerAgentConfigRoutes(deps: InnerAgentConfigDeps): Router {
  const r = express.Router();
  const { db } = deps;
  r.use(requireInnerApiKey(deps.innerApiKey));
  r.use(jsonBody({ limit: '1mb', maxDepth: deps.maxJsonDepth, rejectNul: true }));

  /**
   * The forwarded context, if its signature (strict lowercase hex, EXECUTION_CONTEXT_SIGNING_KEY) holds, it
   * has not expired, its turn is still in progress and — once the api recorded the backend run of that
   * turn — the caller names that run (issue 17 L2: a finished run's context cannot be replayed).
   */
  async function context(req: Request): Promise<RunCtx> {
    const raw = req.header('x-agent-execution-context');
    if (!raw) throw new HttpError(401, 'execution_context_required', 'X-Agent-Execution-Context is required.');
    let ctx: Ctx;
    try {
      ctx = ExecutionContextLayerConfig.parse(JSON.parse(Buffer.from(raw, 'base64').toString('utf8')));
    } catch {
      throw new HttpError(400, 'invalid_execution_context', 'X-Agent-Execution-Context is not a valid execution context.');
    }
    const verdict = checkExecutionContext(ctx, deps.signingKey);
    if (!verdict.ok) {
      if (verdict.reason === 'expired') throw new HttpError(403, 'execution_context_expired', 'The execution context has expired.');
      throw new HttpError(403, 'invalid_execution_context', 'The execution context signature is invalid.');
    }
    if (ctx.agent_id !== req.params.agent_id)
      throw new HttpError(403, 'agent_scope_mismatch', 'The execution context belongs to another agent.');
    const ended = () => new HttpError(403, 'execution_context_ended', 'The run this execution context belongs to is not in progress.');
    const messageId = Uuid.safeParse(ctx.message_id);
    if (!messageId.success) throw ended();
    const message = await db.message.findUnique({
      where: { id: messageId.data },
      select: { tenant_id: true, app_id: true, status: true, account_id: true, metadata: true },
    });
    if (!message || message.tenant_id !== ctx.tenant_id || message.app_id !== ctx.app_id || !IN_PROGRESS.has(message.status)) throw ended();
    const run = await db.agentBackendRun.findUnique({ where: { message_id: messageId.data }, select: { backend_run_id: true } });
    if (run?.backend_run_id && run.backend_run_id !== req.header(AGENT_RUN_ID_HEADER)) throw ended();
    const onBuildDraft = (message.metadata as { draft_type?: unknown } | null)?.draft_type === 'BUILD_DRAFT';
    return { ...ctx, buildDraftOf: onBuildDraft ? message.account_id : null };
  }

  async function agentOf(ctx: Ctx) {
    const agent = await db.agent.findUnique({ where: { id: ctx.agent_id } });
    if (!agent || agent.tenant_id !== ctx.tenant_id) throw new HttpError(404, 'agent_not_found', 'Agent not found.');
    return agent;
  }

  /**
   * The config of the run's own scope: a debugger run on a build draft reads that build draft, one on the shared
   * DRAFT reads the shared draft (even when its account has a build draft: that is not what the run uses), others
   * their pinned version. A build draft gone since the run started reads as the shared draft, which a push would
   * start it from again.
   */
  async function readable(ctx: RunCtx): Promise<{ config: unknown; source: ConfigSource }> {
    const agent = await agentOf(ctx);
    if (ctx.invoke_from === 'debugger') {
      if (ctx.buildDraftOf) {
        const own = await findBuildDraft(db, agent.id, ctx.buildDraftOf);
        if (own) return { config: own.config, source: { kind: 'build_draft', id: own.id } };
      }
      const shared = await findSharedDraft(db, agent.id);
      if (!shared) throw new HttpError(404, 'agent_draft_not_found', 'The agent has no draft.');
      return { config: shared.config, source: { kind: 'draft', id: shared.id } };
    }
    const versionId = ctx.agent_config_version_id ?? agent.active_config_snapshot_id;
    const version = versionId ? await findVersion(db, agent.id, versionId) : null;
    if (!version) throw new HttpError(404, 'agent_config_not_found', 'No configuration for this run.');
    return { config: version.config_snapshot, source: { kind: 'version', id: version.id, version: version.version } };
  }

  r.get('/:agent_id/prompt', async (req, res) => {
    const config = AgentSoulConfig.parse((await readable(await context(req))).config);
    res.json({ prompt: config.prompt.system_prompt });
  });

  /**
   * The config manifest (issue 31, docs/seeds/004 "The prompt is fetched separately and is not included in the config
   * manifest"): the saved AgentSoulConfig of the run's own scope, read by the same rules as the prompt, without
   * `prompt`. Nothing in a soul config is a credential (provider secrets live with the providers).
   */
  r.get('/:agent_id/manifest', async (req, res) => {
    const { config, source } = await readable(await context(req));
    const { prompt: _prompt, ...manifest } = AgentSoulConfig.parse(config);
    res.json({ source, manifest });
  });

  r.put('/:agent_id/prompt', async (req, res) => {
    const ctx = await context(req);
    const { prompt } = parseOr400(PromptBody, req.body);
    if (ctx.user_from !== 'account')
      throw new HttpError(403, 'agent_config_write_forbidden', 'Only an account may edit its own build draft.');
    // Issue 31 item 6: a write goes only to the account's build draft, and reads follow the run's scope; a run that
    // does not read that build draft (the shared DRAFT, a published version) would pull its own scope right after the
    // push and see the edit lost. So only a run on the account's build draft may push.
    if (ctx.invoke_from !== 'debugger' || ctx.buildDraftOf !== ctx.user_id)
      throw new HttpError(
        403,
        'agent_config_write_forbidden',
        'This run uses the shared draft, not your build draft: dify-agent saves prompt edits only to your personal build ' +
          'draft, which this run does not read. Edit the shared draft in the studio, or run the debugger on your build ' +
          'draft (draft: build) and push from there.',
      );
    const agent = await agentOf(ctx);
    const saved = await db.$transaction(async (tx) => {
      const own = await findBuildDraft(tx, agent.id, ctx.user_id);
      // A personal build draft starts from the shared draft (or the published config).
      const base =
        own?.config ??
        (await findSharedDraft(tx, agent.id))?.config ??
        (agent.active_config_snapshot_id ? (await findVersion(tx, agent.id, agent.active_config_snapshot_id))?.config_snapshot : null);
      if (!base) throw new HttpError(404, 'agent_config_not_found', 'The agent has no configuration to edit.');
      const config = AgentSoulConfig.parse(base);
      config.prompt.system_prompt = prompt;
      // The save-time mention check (api/console/agent-config-validation.ts): only the prompt changed, so only its
      // mentions can be new problems; the rest of the config passed its own save.
      const issues = mentionIssues(config);
      if (issues.length) throw invalidAgentConfig(issues);
      await saveBuildDraft(
        tx,
        { tenantId: agent.tenant_id, agentId: agent.id, accountId: ctx.user_id, baseVersionId: agent.active_config_snapshot_id },
        config,
      );
      return prompt;
    });
    res.json({ prompt: saved });
  });

  return r;
}
