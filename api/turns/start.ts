/**
 * Starting a turn (docs/seeds/000 AgentAppGenerator.generate + _init_generate_records): the Conversation (first
 * turn) and the Message rows, the one-in-flight-turn lock, and the `agentTurn` workflow with a
 * deterministic id, search attributes and a readable summary.
 */
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import crypto from 'node:crypto';
import type { Config } from '../../core/platform/config.js';
import type { Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import { AGENT_TURN_WORKFLOW, workflowIdForMessage, type AgentTurnInput, type InvokeFrom } from '../../workflows/definitions.js';
import { turnStartSearchAttributes } from '../../core/protocol/workflow-contract.js';
import type { AppContext } from '../auth.js';
import { admitTurn } from './admission.js';
import { HttpError } from '../errors.js';
import { findEndUser, upsertEndUser } from '../ownership.js';
import { prepareMessageFiles, type FileCaller } from './message-files.js';
import { createMessageFiles } from '../../core/domain/uploads.js';
import type { ChatRequest } from '../schemas.js';
import { unixSeconds } from '../../core/platform/time.js';
import { recordTurnStarted } from '../../core/platform/metrics/index.js';
import { heldByFirstTurn, releaseTurnLock, takeTurnLock } from '../../core/domain/turn/turn-lock.js';
import type { MultitaskStrategy } from '../../core/protocol/workflow-contract.js';
import { afterQueued } from './multitask.js';
import { queueBehindTurn, type QueuedTurn } from '../../core/domain/turn/queue.js';
import type { OutboxDispatcher } from '../../core/domain/outbox.js';
import type { AgentBackendClient } from '../../core/protocol/backend-client.js';
import { placeInThread } from '../../core/domain/turn/threads.js';
import { conversationName, conversationTitle, markdownText } from '../../core/domain/turn-text.js';
import { insertFollowUpTurn, insertNewConversationTurn } from '../../core/platform/hot-sql.js';
import { UUID_NIL } from '../../core/domain/message-thread.js';

/** How long a workflow start may take before the turn counts as not started (well inside TURN_SWEEP_MIN_AGE_MS, at least 15 s). */
const START_DEADLINE_MS = 10_000;

export interface StartedTurn {
  messageId: string;
  conversationId: string;
  workflowId: string;
  createdAt: number;
  /** Queued behind the turn in flight (multitask strategies): its strategy and place. */
  queued?: { strategy: QueuedTurn['strategy']; position: number };
}

export interface TurnServiceDeps {
  db: Db;
  temporal: Client;
  config: Config;
  logger: Logger;
  /** The client shares its NativeConnection with a worker of this process: ask the server to hand the
   * first workflow task straight to it (eager workflow start, no matching round trip). */
  eagerStart?: boolean;
  /** interrupt / rollback stop the turn in flight at once with these (else the outbox dispatchers deliver the stop). */
  outbox?: OutboxDispatcher;
  backend?: Pick<AgentBackendClient, 'cancelRun'>;
}

/** Who a turn belongs to: a service-API end user, or a console account debugging a draft. */
export type TurnCaller = { kind: 'end-user' } | { kind: 'account'; accountId: string; draftType: 'DRAFT' | 'BUILD_DRAFT' };

export interface TurnRecords {
  messageId: string;
  conversationId: string;
  workflowId: string;
  createdAt: number;
  input: AgentTurnInput;
  /** Set when the message was queued behind the turn in flight (multitask strategies): no workflow to start. */
  queued?: QueuedTurn;
}

/**
 * The rows of a turn, without its workflow: admission, the end user, the conversation (new, or its lock taken) and the
 * Message with its files, in one transaction. startTurn then starts `agentTurn`; a scheduled turn
 * (api/turns/scheduled.ts, for activities/scheduled-turn.ts) passes its own deterministic `messageId` and starts it as
 * a child workflow.
 */
export async function createTurnRecords(
  deps: Pick<TurnServiceDeps, 'db' | 'config'>,
  app: AppContext,
  body: ChatRequest,
  invokeFrom: InvokeFrom,
  caller: TurnCaller,
  opts: {
    messageId?: string;
    metadata?: Record<string, string>;
    /** What to do when the conversation is busy (core/domain/turn/queue.ts); absent: reject, as Dify does. */
    multitask?: MultitaskStrategy | 'app_default';
  } = {},
): Promise<TurnRecords> {
  const { db, config } = deps;
  if (!app.agentId) throw new HttpError(400, 'app_unavailable', 'This app has no agent configured.');
  // Before the end user's row or anything else is written: a refused turn leaves nothing behind. A returning end
  // user is read alongside (one round trip for both); a new one is inserted only once the turn is admitted.
  const [, known] = await Promise.all([admitTurn(db, config), caller.kind === 'end-user' ? findEndUser(db, app, body.user) : null]);
  const endUser = caller.kind === 'end-user' ? (known ?? (await upsertEndUser(db, app, body.user))) : null;
  const accountId = caller.kind === 'account' ? caller.accountId : null;
  const owner = endUser ? { end_user_id: endUser.id } : { account_id: accountId };
  // The key that started it: a revoke ends its streams, and can stop it (api/credential-watch.ts, api/console/admin.ts).
  const apiTokenId = caller.kind === 'end-user' ? (app.apiTokenId ?? null) : null;
  const messageId = opts.messageId ?? crypto.randomUUID();
  const workflowId = workflowIdForMessage(messageId);
  // A debugger turn's files are the console account's own uploads, accepted by its draft's config (issue 43).
  const fileCaller: FileCaller =
    caller.kind === 'account'
      ? { kind: 'account', accountId: caller.accountId, draftType: caller.draftType }
      : { kind: 'end-user', endUserId: endUser!.id };
  const files = await prepareMessageFiles(deps, app, fileCaller, body.files, body.conversation_id || null);
  const messageMetadata = { ...opts.metadata, ...(caller.kind === 'account' ? { draft_type: caller.draftType } : {}) };
  const t: TurnFacts = {
    app,
    agentId: app.agentId,
    body,
    invokeFrom,
    endUserId: endUser?.id ?? null,
    accountId,
    owner,
    apiTokenId,
    messageId,
    workflowId,
    files,
    messageMetadata,
    queueMetadata: { ...opts.metadata },
  };
  // A new conversation's first turn (the service API's usual turn) is one statement on pg (core/platform/hot-sql.ts):
  // nothing to lock, queue or place, so none of the locked transaction is needed.
  if (!body.conversation_id) return firstTurn(db, t);
  // A follow-up in a free conversation, on the thread's newest message: one statement too. Busy, or a branch from an
  // earlier message (regenerate), goes the locked transaction's way.
  if (!body.parent_message_id) {
    const followUp = await freeFollowUp(db, t, body.conversation_id);
    if (followUp) return followUp;
  }
  return lockedTurn(deps, t, opts.multitask);
}

/** What every way of writing a turn needs: who asks, the ids, the prepared files and the message's metadata. */
interface TurnFacts {
  app: AppContext;
  agentId: string;
  body: ChatRequest;
  invokeFrom: InvokeFrom;
  endUserId: string | null;
  accountId: string | null;
  owner: { end_user_id: string } | { account_id: string | null };
  apiTokenId: string | null;
  messageId: string;
  workflowId: string;
  files: Awaited<ReturnType<typeof prepareMessageFiles>>;
  messageMetadata: Record<string, string>;
  /** A queued message's metadata: the caller's own (a queued turn is a service-API end user's, never a draft's). */
  queueMetadata: Record<string, string>;
}

/** The workflow's input: ids only, so nothing big goes into its history. */
const turnInput = (t: TurnFacts, conversationId: string): AgentTurnInput => ({
  tenantId: t.app.tenantId,
  appId: t.app.appId,
  agentId: t.agentId,
  conversationId,
  messageId: t.messageId,
  invokeFrom: t.invokeFrom,
});

/** A new conversation born holding its first turn's lock, its message and files: one statement. */
async function firstTurn(db: Db, t: TurnFacts): Promise<TurnRecords> {
  const conversationId = crypto.randomUUID();
  // A thread's root (and the refusal of a parent in a conversation that does not exist yet): no statement.
  const parentMessageId = await placeInThread(db, { conversationId, isNew: true, requested: t.body.parent_message_id });
  const created = await insertNewConversationTurn(db, {
    conversation: {
      id: conversationId,
      tenant_id: t.app.tenantId,
      app_id: t.app.appId,
      end_user_id: t.endUserId,
      account_id: t.endUserId ? null : t.accountId,
      name: t.body.auto_generate_name ? conversationTitle(t.body.query) : 'New conversation',
      inputs: t.body.inputs,
      invoke_from: t.invokeFrom,
      ...heldByFirstTurn(t.messageId),
    },
    message: {
      id: t.messageId,
      parent_message_id: parentMessageId,
      api_token_id: t.apiTokenId,
      query: t.body.query,
      workflow_id: t.workflowId,
      metadata: t.messageMetadata,
    },
    files: t.files.map((f) => ({ id: crypto.randomUUID(), ...f })),
  });
  const input = turnInput(t, conversationId);
  return { messageId: t.messageId, conversationId, workflowId: t.workflowId, createdAt: unixSeconds(created), input };
}

/** A follow-up on the newest message of a free conversation: one statement; null when busy (the locked way decides). */
async function freeFollowUp(db: Db, t: TurnFacts, conversationId: string): Promise<TurnRecords | null> {
  const r = await insertFollowUpTurn(db, {
    conversationId,
    tenantId: t.app.tenantId,
    appId: t.app.appId,
    endUserId: t.endUserId,
    accountId: t.endUserId ? null : t.accountId,
    invokeFrom: t.invokeFrom,
    rootParentId: UUID_NIL,
    message: {
      id: t.messageId,
      parent_message_id: UUID_NIL,
      api_token_id: t.apiTokenId,
      query: t.body.query,
      inputs: t.body.inputs,
      workflow_id: t.workflowId,
      metadata: t.messageMetadata,
    },
    files: t.files.map((f) => ({ id: crypto.randomUUID(), ...f })),
  });
  if (!r.found) throw new HttpError(404, 'conversation_not_exists', 'Conversation Not Exists.');
  if (r.createdAt) {
    const input = turnInput(t, conversationId);
    return { messageId: t.messageId, conversationId, workflowId: t.workflowId, createdAt: unixSeconds(r.createdAt), input };
  }
  return null;
}

/**
 * The locked way: the conversation found (or created) and its turn lock taken, else queued behind the turn in flight
 * (multitask strategies) or refused busy; then the message placed in its thread, with its files, in one transaction.
 */
async function lockedTurn(
  deps: Pick<TurnServiceDeps, 'db' | 'config'>,
  t: TurnFacts,
  multitask: MultitaskStrategy | 'app_default' | undefined,
): Promise<TurnRecords> {
  const { conversationId, createdAt, queued } = await deps.db.$transaction(
    async (
      tx,
    ): Promise<{
      conversationId: string;
      createdAt: number;
      queued?: QueuedTurn;
    }> => {
      let conversationId = t.body.conversation_id || null;
      let locked = false;
      if (conversationId) {
        const conv = await tx.conversation.findFirst({
          where: { id: conversationId, app_id: t.app.appId, ...t.owner, invoke_from: t.invokeFrom, deleted_at: null },
        });
        if (!conv) throw new HttpError(404, 'conversation_not_exists', 'Conversation Not Exists.');
        // The turn lock first: inserting a message first would key-share-lock the conversation row and
        // deadlock with a racing request's lock update (active_message_id is a unique, i.e. key, column).
        locked = await takeTurnLock(tx, conversationId, t.messageId);
      } else {
        const conv = await tx.conversation.create({
          data: {
            tenant_id: t.app.tenantId,
            app_id: t.app.appId,
            ...t.owner,
            inputs: t.body.inputs as object,
            invoke_from: t.invokeFrom,
            name: t.body.auto_generate_name ? conversationTitle(t.body.query) : 'New conversation',
            // A new conversation is born holding its first turn's lock: nobody else can know its id yet.
            ...heldByFirstTurn(t.messageId),
          },
        });
        conversationId = conv.id;
        locked = true;
      }
      // Busy, with a multitask strategy (a branch — regenerate — only ever starts on a free conversation).
      if (!locked && multitask && multitask !== 'reject' && !t.body.parent_message_id) {
        const decision = await queueBehindTurn(tx, {
          appId: t.app.appId,
          tenantId: t.app.tenantId,
          conversationId,
          messageId: t.messageId,
          workflowId: t.workflowId,
          owner: t.owner,
          invokeFrom: t.invokeFrom,
          apiTokenId: t.apiTokenId,
          query: t.body.query,
          inputs: t.body.inputs as object,
          files: t.files,
          metadata: { ...t.queueMetadata },
          strategy: multitask,
          limit: deps.config.CONVERSATION_QUEUE_LIMIT,
        });
        if (decision.kind === 'lock_taken') locked = true;
        else if (decision.kind === 'queued') return { conversationId, createdAt: unixSeconds(decision.createdAt), queued: decision };
      }
      if (!locked) {
        const conv = await tx.conversation.findUniqueOrThrow({ where: { id: conversationId } });
        const form = conv.active_message_id
          ? await tx.humanInputForm.findFirst({ where: { message_id: conv.active_message_id, status: 'waiting' } })
          : null;
        if (form) {
          throw new HttpError(409, 'conversation_waiting_for_human', 'This conversation is waiting for a form to be submitted.', {
            form_token: form.token,
          });
        }
        throw new HttpError(409, 'conversation_busy', 'A turn is already running in this conversation; wait for it to finish or stop it.', {
          task_id: conv.active_message_id,
        });
      }
      // Its place in the thread; a branch (regenerate) moves the binding's session to its parent's (core/domain/turn/threads.ts).
      const parentMessageId = await placeInThread(tx, {
        conversationId,
        isNew: !t.body.conversation_id,
        requested: t.body.parent_message_id,
      });
      const msg = await tx.message.create({
        data: {
          id: t.messageId,
          parent_message_id: parentMessageId,
          tenant_id: t.app.tenantId,
          app_id: t.app.appId,
          conversation_id: conversationId,
          ...t.owner,
          invoke_from: t.invokeFrom,
          api_token_id: t.apiTokenId,
          query: t.body.query,
          inputs: t.body.inputs as object,
          workflow_id: t.workflowId,
          metadata: t.messageMetadata,
        },
      });
      await createMessageFiles(tx, t.messageId, t.files);
      // The one-in-flight-turn lock: atomic, so of two racing messages exactly one wins.
      return { conversationId, createdAt: unixSeconds(msg.created_at) };
    },
  );

  const input = turnInput(t, conversationId);
  return { messageId: t.messageId, conversationId, workflowId: t.workflowId, createdAt, input, ...(queued ? { queued } : {}) };
}

export async function startTurn(
  deps: TurnServiceDeps,
  app: AppContext,
  body: ChatRequest,
  invokeFrom: InvokeFrom = 'service-api',
  caller: TurnCaller = { kind: 'end-user' },
): Promise<StartedTurn> {
  const { db, temporal, config, logger } = deps;
  // Multitask strategies are the service API's (a console debugger turn is refused as before when busy).
  const multitask = invokeFrom === 'service-api' && caller.kind === 'end-user' ? (body.multitask_strategy ?? 'app_default') : undefined;
  const { messageId, conversationId, workflowId, createdAt, input, queued } = await createTurnRecords(deps, app, body, invokeFrom, caller, {
    multitask,
  });
  if (queued) {
    await afterQueued(deps, { conversationId, tenantId: app.tenantId, appId: app.appId, messageId }, queued);
    return { messageId, conversationId, workflowId, createdAt, queued: { strategy: queued.strategy, position: queued.position } };
  }
  try {
    // Bounded: a start that hangs (a blackholed Temporal) must end well inside the turn sweeper's grace (worker/sweeper.ts).
    const handle = await temporal.withDeadline(Date.now() + START_DEADLINE_MS, () =>
      temporal.workflow.start(AGENT_TURN_WORKFLOW, {
        taskQueue: config.TEMPORAL_TASK_QUEUE,
        workflowId,
        args: [input],
        requestEagerStart: deps.eagerStart ?? false,
        typedSearchAttributes: turnStartSearchAttributes(input),
        // The Temporal UI renders both as Markdown: what users and app builders wrote goes in as plain text (issue 17 L4).
        staticSummary: `Agent turn · ${markdownText(app.appName)} · "${markdownText(conversationName(body.query))}"`,
        staticDetails: `conversation \`${conversationId}\`\n\nmessage \`${messageId}\`\n\nuser ${markdownText(body.user)}`,
      }),
    );
    logger.debug({ message_id: messageId, workflow_id: workflowId, eagerly_started: handle.eagerlyStarted }, 'turn workflow started');
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) {
      logger.error({ err: (err as Error).message, message_id: messageId }, 'could not start the turn workflow');
      // If PostgreSQL is down too, this throws (the client still gets a 503) and the turn sweeper ends the message
      // and frees the conversation once it is back (worker/sweeper.ts).
      await db.$transaction(async (tx) => {
        await tx.message.update({
          where: { id: messageId },
          data: { status: 'failed', error: 'The turn could not be started.', error_code: 'temporal_unavailable' },
        });
        await releaseTurnLock(tx, conversationId, messageId);
      });
      throw new HttpError(503, 'service_unavailable', 'The turn could not be started; try again shortly.');
    }
  }
  recordTurnStarted(invokeFrom);
  logger.info(
    { tenant_id: app.tenantId, app_id: app.appId, conversation_id: conversationId, message_id: messageId, workflow_id: workflowId },
    'turn started',
  );
  return { messageId, conversationId, workflowId, createdAt };
}
