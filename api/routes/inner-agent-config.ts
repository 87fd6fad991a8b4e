/**
 * GET|PUT /inner/api/agent-config/{agent_id}/prompt (PROTOCOL §3, seed 004): the Agent Soul system prompt,
 * raw (mention markers unexpanded). Scope comes only from the signed execution context the agent stub
 * forwards: reads follow snapshot / shared-draft / personal build-draft rules; writes go only to the
 * calling account's own BUILD_DRAFT and replace only `prompt.system_prompt`.
 */
import express, { type Request, type Router } from 'express';
import { z } from 'zod';
import { findBuildDraft, findSharedDraft, findVersion, saveBuildDraft } from '../../core/agent-configs.js';
import type { Db } from '../../core/db.js';
import { verifyExecutionContext } from '../../core/exec-context.js';
import { ExecutionContextLayerConfig, type ExecutionContextLayerConfig as Ctx } from '../../core/protocol/run.js';
import { AgentSoulConfig } from '../../core/soul.js';
import { HttpError, parseOr400 } from '../errors.js';
import { requireInnerApiKey } from '../inner/auth.js';

const PromptBody = z.object({ prompt: z.string().max(100_000) }).strict();

export function innerAgentConfigRoutes(deps: { db: Db; innerApiKey: string }): Router {
  const r = express.Router();
  const { db } = deps;
  r.use(requireInnerApiKey(deps.innerApiKey));
  r.use(express.json({ limit: '1mb' }));

  function context(req: Request): Ctx {
    const raw = req.header('x-agent-execution-context');
    if (!raw) throw new HttpError(401, 'execution_context_required', 'X-Agent-Execution-Context is required.');
    let ctx: Ctx;
    try {
      ctx = ExecutionContextLayerConfig.parse(JSON.parse(Buffer.from(raw, 'base64').toString('utf8')));
    } catch {
      throw new HttpError(400, 'invalid_execution_context', 'X-Agent-Execution-Context is not a valid execution context.');
    }
    if (!verifyExecutionContext(ctx, deps.innerApiKey)) throw new HttpError(403, 'invalid_execution_context', 'The execution context signature is invalid.');
    if (ctx.agent_id !== req.params.agent_id) throw new HttpError(403, 'agent_scope_mismatch', 'The execution context belongs to another agent.');
    return ctx;
  }

  async function agentOf(ctx: Ctx) {
    const agent = await db.agent.findUnique({ where: { id: ctx.agent_id } });
    if (!agent || agent.tenant_id !== ctx.tenant_id) throw new HttpError(404, 'agent_not_found', 'Agent not found.');
    return agent;
  }

  /** The config the caller may read: its build draft (debugger, account), the shared draft, or its snapshot. */
  async function readable(ctx: Ctx) {
    const agent = await agentOf(ctx);
    if (ctx.invoke_from === 'debugger') {
      if (ctx.user_from === 'account') {
        const own = await findBuildDraft(db, agent.id, ctx.user_id);
        if (own) return own.config;
      }
      const shared = await findSharedDraft(db, agent.id);
      if (!shared) throw new HttpError(404, 'agent_draft_not_found', 'The agent has no draft.');
      return shared.config;
    }
    const versionId = ctx.agent_config_version_id ?? agent.active_config_snapshot_id;
    const version = versionId ? await findVersion(db, agent.id, versionId) : null;
    if (!version) throw new HttpError(404, 'agent_config_not_found', 'No configuration for this run.');
    return version.config_snapshot;
  }

  r.get('/:agent_id/prompt', async (req, res) => {
    const config = AgentSoulConfig.parse(await readable(context(req)));
    res.json({ prompt: config.prompt.system_prompt });
  });

  r.put('/:agent_id/prompt', async (req, res) => {
    const ctx = context(req);
    const { prompt } = parseOr400(PromptBody, req.body);
    if (ctx.user_from !== 'account') throw new HttpError(403, 'agent_config_write_forbidden', 'Only an account may edit its own build draft.');
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
      await saveBuildDraft(tx, { tenantId: agent.tenant_id, agentId: agent.id, accountId: ctx.user_id, baseVersionId: agent.active_config_snapshot_id }, config);
      return prompt;
    });
    res.json({ prompt: saved });
  });

  return r;
}
