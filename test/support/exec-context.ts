/**
 * A turn in progress and its signed execution context, for tests that call the inner routes directly (the inner LLM
 * route honours a call only with the context of a turn still in progress: docs/PROTOCOL.md §3.1). Creates the tenant
 * (unless given), an app, a conversation and a `running` message; no backend run is recorded, so any run id passes.
 */
import crypto from 'node:crypto';
import type { Db } from '../../core/platform/db.js';
import { signExecutionContext } from '../../core/protocol/exec-context.js';
import type { ExecutionContextLayerConfig } from '../../core/protocol/run.js';

export interface TurnScope {
  tenantId: string;
  appId: string;
  conversationId: string;
  messageId: string;
  context: ExecutionContextLayerConfig;
}

export async function startedTurn(
  db: Db,
  signingKey: string,
  opts: { tenantId?: string; appId?: string; userFrom?: 'end-user' | 'account'; ttlMs?: number; now?: number } = {},
): Promise<TurnScope> {
  const tenantId = opts.tenantId ?? (await db.tenant.create({ data: { name: `turn-${crypto.randomUUID()}` } })).id;
  const appId = opts.appId ?? (await db.app.create({ data: { tenant_id: tenantId, name: 'test app' } })).id;
  const conversation = await db.conversation.create({ data: { tenant_id: tenantId, app_id: appId } });
  const message = await db.message.create({
    data: {
      tenant_id: tenantId,
      app_id: appId,
      conversation_id: conversation.id,
      query: 'test turn',
      status: 'running',
      workflow_id: `test-turn-${conversation.id}`,
    },
  });
  const context = signExecutionContext(
    {
      tenant_id: tenantId,
      user_id: 'user-1',
      user_from: opts.userFrom ?? 'end-user',
      app_id: appId,
      conversation_id: conversation.id,
      message_id: message.id,
      agent_id: crypto.randomUUID(),
      agent_config_version_id: null,
      invoke_from: 'service-api',
    },
    signingKey,
    { ttlMs: opts.ttlMs, now: opts.now },
  );
  return { tenantId, appId, conversationId: conversation.id, messageId: message.id, context };
}

/** The `caller` fields an invoke body carries for this context (they must agree with it). */
export function callerOf(ctx: ExecutionContextLayerConfig) {
  return {
    tenant_id: ctx.tenant_id,
    user_id: ctx.user_id,
    user_from: ctx.user_from,
    app_id: ctx.app_id,
    agent_id: ctx.agent_id,
    invoke_from: ctx.invoke_from,
  };
}
