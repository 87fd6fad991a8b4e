/**
 * Fork a conversation at any of its messages (issue 35 item 2): a new conversation of the same end user whose history is
 * a copy of the thread up to that message (messages, thoughts, files, event logs, per-message snapshots; ids new,
 * times kept), with a binding of its own holding the session after that message, and a copy of the workspace as it is
 * now (workspaces are not versioned per message). Copied, not referenced: the fork outlives its source's deletion and
 * reads like any conversation — except that the copied messages carry no usage (billed once, to their source). (docs/ARCHITECTURE.md "Threads, regenerate and fork")
 *
 * The copy (issues 45 and 47) walks the source by descriptor (core/domain/workspace-tree.ts; docs/security.md "Root never
 * walks a tenant tree"): safe against a process still running in the source, FIFOs, sockets, devices and whatever
 * changes under the walk skipped and reported in the response (`workspace_copy`), never a 5xx. It is written under a
 * temporary name beside the destination and renamed into place at the end; any failure, the database transaction's
 * included, removes it (a crash leaves it to the worker's sweeper). It counts against the tenant's quota on workspace
 * copies (core/domain/workspace-copy-quota.ts): 413 `workspace_quota_exceeded` when over.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../../core/platform/config.js';
import { Prisma, type Db } from '../../core/platform/db.js';
import type { Logger } from '../../core/platform/logger.js';
import { threadNodes, threadTo, effectiveParents, UUID_NIL } from '../../core/domain/message-thread.js';
import { copyTree, removeTree, TreeBudgetExceeded, TreeWriter, type CopyReport } from '../../core/domain/workspace-tree.js';
import { checkCopyUnderLock, copyBudget, WorkspaceCopyRefused } from '../../core/domain/workspace-copy-quota.js';
import { bucketOf, BucketCopyOverBudget, type BucketConfig, type WorkspaceBucket } from '../../core/domain/workspace-bucket.js';
import { workspaceUid } from '../../core/protocol/workspace-uid.js';
import { LEGACY_MARKER_FILE, removeMarker, writeMarker } from '../../core/domain/workspace-marker.js';
import { HOME_SNAPSHOT_ID, sessionScopeKey, workspaceIdFor } from '../../core/domain/turn/bindings.js';
import { HttpError } from '../errors.js';
import { sessionOrRefuse } from '../../core/domain/turn/threads.js';

type Conversation = Prisma.ConversationModel;
export type ForkConfig = Pick<
  Config,
  'workspacesDir' | 'SHELL_ISOLATION' | 'SHELL_UID_BASE' | 'SHELL_UID_RANGE' | 'WORKSPACE_QUOTA_BYTES' | 'TENANT_MAX_WORKSPACE_COPY_BYTES'
> &
  BucketConfig;
type Deps = { db: Db; config: ForkConfig; logger: Logger };

const ENDED = new Set(['succeeded', 'failed', 'stopped', 'paused']);

/** What a fork answers about its workspace copy (PROTOCOL §1, `workspace_copy`); null when the source had no workspace. */
export interface WorkspaceCopy {
  bytes: number;
  entries: number;
  skipped: { path: string; reason: string }[];
  skipped_total: number;
}

export interface Fork {
  conversation: Conversation;
  workspaceCopy: WorkspaceCopy | null;
}

/**
 * The fork in its steps: the point checked (ended, not mid-turn, not waiting for a human), the workspace copied first
 * (a failed copy leaves no conversation behind), then one transaction that copies the thread and binds the fork to
 * its copy (a failed transaction removes the copy).
 */
export async function forkConversation(deps: Deps, src: Conversation, messageId: string): Promise<Fork> {
  const { db, config, logger } = deps;
  const { binding, session } = await checkForkPoint(db, src, messageId);
  const conversationId = crypto.randomUUID();
  const scopeKey = binding
    ? sessionScopeKey({
        tenantId: src.tenant_id,
        appId: src.app_id,
        conversationId,
        agentId: binding.agent_id,
        scopeId: binding.session_scope_config_version_id,
      })
    : null;
  const workspaceId = scopeKey ? workspaceIdFor(scopeKey) : null;
  const copied: CopiedWorkspace = { copy: null, dst: null, bucketCopy: null };
  try {
    if (binding && workspaceId) Object.assign(copied, await copyForkWorkspace(deps, src, binding, workspaceId));
    const { copy } = copied;
    const fork = await db.$transaction(async (tx) => {
      if (copy) await checkCopyUnderLock(tx, config, src.tenant_id, copy.bytes);
      const conv = await copyThread(tx, src, conversationId, messageId);
      if (binding && scopeKey && workspaceId) {
        return bindForkWorkspace(tx, { src, conversationId, binding, scopeKey, workspaceId, copy, session, thread: conv.thread });
      }
      return conv.conversation;
    });
    logger.info(
      {
        tenant_id: src.tenant_id,
        app_id: src.app_id,
        conversation_id: fork.id,
        forked_from_conversation_id: src.id,
        message_id: messageId,
        ...(copy ? { copied_bytes: copy.bytes, copied_entries: copy.entries, skipped_entries: copy.skippedTotal } : {}),
      },
      'conversation forked',
    );
    return {
      conversation: fork,
      workspaceCopy: copy && { bytes: copy.bytes, entries: copy.entries, skipped: copy.skipped, skipped_total: copy.skippedTotal },
    };
  } catch (err) {
    await undoCopy(deps, copied);
    if (err instanceof WorkspaceCopyRefused) throw new HttpError(err.status, err.code, err.message);
    throw err;
  }
}

type Binding = Prisma.AgentWorkspaceBindingModel;
type ForkSession = Awaited<ReturnType<typeof sessionOrRefuse>>;
/** What the fork copied before its transaction, so a failure can remove it. */
interface CopiedWorkspace {
  copy: CopyReport | null;
  /** The directory copy (posix). */
  dst: string | null;
  /** The bucket copy's workspace id (s3). */
  bucketCopy: string | null;
}

/** The message to fork at, the source's live binding and the session after that message; refused while it cannot be. */
async function checkForkPoint(db: Db, src: Conversation, messageId: string): Promise<{ binding: Binding | null; session: ForkSession }> {
  const point = await db.message.findFirst({ where: { id: messageId, conversation_id: src.id }, select: { id: true, status: true } });
  if (!point) throw new HttpError(404, 'message_not_exists', 'Message Not Exists.');
  if (!ENDED.has(point.status)) throw new HttpError(409, 'message_not_finished', 'That message has not finished yet; fork once it ended.');
  // The workspace is copied as it is: not in the middle of a turn.
  if (src.active_message_id)
    throw new HttpError(409, 'conversation_busy', 'A turn is running in this conversation; fork once it ended.', {
      task_id: src.active_message_id,
    });
  const srcBinding = src.agent_workspace_binding_id
    ? await db.agentWorkspaceBinding.findUnique({ where: { id: src.agent_workspace_binding_id } })
    : null;
  const binding = srcBinding && !srcBinding.retired_at ? srcBinding : null;
  const session = await sessionOrRefuse(db, src.id, binding?.id ?? null, messageId);
  if (session.pendingToolCallId)
    throw new HttpError(409, 'fork_point_waiting_for_human', 'That message asked a form; fork at the message that answered it, or later.');
  return { binding, session };
}

/** The source's workspace copied for the fork: in the bucket (s3), or as a directory beside it (posix). */
async function copyForkWorkspace(deps: Deps, src: Conversation, binding: Binding, workspaceId: string): Promise<CopiedWorkspace> {
  const { config } = deps;
  const bucket = bucketOf(config);
  if (bucket) {
    // s3: the api never reads the workspace's disk; the fork is a new manifest over the source's latest version, its
    // blobs copied inside the bucket.
    const copied: CopiedWorkspace = { copy: null, dst: null, bucketCopy: workspaceId };
    try {
      copied.copy = await copyInBucket(
        deps,
        bucket,
        src.tenant_id,
        { workspaceId: binding.workspace_id, generation: binding.generation },
        workspaceId,
      );
    } catch (err) {
      await undoCopy(deps, copied);
      throw err;
    }
    return copied;
  }
  const to = path.join(config.workspacesDir, workspaceId);
  const copy = await copyWorkspace(
    deps,
    src.tenant_id,
    path.join(config.workspacesDir, binding.workspace_id.toLowerCase()),
    to,
    workspaceId,
  );
  return { copy, dst: copy ? to : null, bucketCopy: null };
}

/** Removes what a failed fork copied (its bucket prefix, its directory); failures are logged, the sweeper has the rest. */
async function undoCopy({ config, logger }: Deps, { dst, bucketCopy }: CopiedWorkspace): Promise<void> {
  const bucket = bucketOf(config);
  if (bucketCopy && bucket)
    await bucket
      .remove(bucketCopy)
      .catch((e: unknown) => logger.warn({ err: e, workspace_id: bucketCopy }, 'fork: its bucket copy could not be removed'));
  if (dst) {
    await removeTree(dst).catch((e: unknown) =>
      logger.warn({ err: e, dir: dst }, 'fork: its copy could not be removed (the sweeper will)'),
    );
    removeMarker(dst);
  }
}

/** The new conversation with a copy of the thread up to the fork point: messages, thoughts, files and event logs. */
async function copyThread(
  tx: Prisma.TransactionClient,
  src: Conversation,
  conversationId: string,
  messageId: string,
): Promise<{ conversation: Conversation; thread: { oldIds: string[]; newIds: string[] } }> {
  const nodes = await threadNodes(tx, src.id);
  const thread = threadTo(nodes, messageId);
  const parents = effectiveParents(nodes);
  const ids = new Map(thread.map((id) => [id, crypto.randomUUID()]));
  const conversation = await tx.conversation.create({
    data: {
      id: conversationId,
      tenant_id: src.tenant_id,
      app_id: src.app_id,
      end_user_id: src.end_user_id,
      account_id: src.account_id,
      name: src.name,
      inputs: src.inputs as Prisma.InputJsonValue,
      invoke_from: src.invoke_from,
      dialogue_count: thread.length,
    },
  });
  const oldIds = thread;
  // A copy carries no usage of its own (tokens, price, usage 0/null): it was billed once, to the source message
  // (metadata.forked_from_message_id), so the app's totals over its messages do not grow by forking. The copied
  // event log keeps the source's message_end as it was streamed.
  const newIds = thread.map((id) => ids.get(id)!);
  const newParents = thread.map((id) => {
    const p = parents.get(id);
    return p ? (ids.get(p) ?? UUID_NIL) : UUID_NIL;
  });
  await tx.$executeRaw`
    insert into messages (id, conversation_id, parent_message_id, tenant_id, app_id, end_user_id, account_id, invoke_from, query,
      inputs, answer, status, error, error_code, message_tokens, answer_tokens, total_tokens, message_unit_price,
      message_price_unit, answer_unit_price, answer_price_unit, total_price, currency, provider_response_latency,
      time_to_first_token, usage, metadata, workflow_id, agent_config_version_id, resumed_from_message_id, event_seq,
      created_at, updated_at)
    select map.new_id, ${conversationId}::uuid, map.parent_id, m.tenant_id, m.app_id, m.end_user_id, m.account_id, m.invoke_from,
      m.query, m.inputs, m.answer, m.status, m.error, m.error_code, 0, 0, 0,
      m.message_unit_price, m.message_price_unit, m.answer_unit_price, m.answer_price_unit, 0, m.currency,
      m.provider_response_latency, m.time_to_first_token, null,
      m.metadata || jsonb_build_object('forked_from_message_id', m.id::text), m.workflow_id, m.agent_config_version_id,
      resumed.new_id, m.event_seq, m.created_at, m.created_at
      from unnest(${oldIds}::uuid[], ${newIds}::uuid[], ${newParents}::uuid[]) as map(old_id, new_id, parent_id)
      join messages m on m.id = map.old_id
      left join unnest(${oldIds}::uuid[], ${newIds}::uuid[]) as resumed(old_id, new_id) on resumed.old_id = m.resumed_from_message_id`;
  await tx.$executeRaw`
    insert into message_agent_thoughts (id, message_id, position, kind, thought, tool, tool_labels, tool_input, observation,
      tool_call_id, part_index, message_files, call_index, tool_meta, created_at, updated_at)
    select gen_random_uuid(), map.new_id, t.position, t.kind, t.thought, t.tool, t.tool_labels, t.tool_input, t.observation,
      t.tool_call_id, t.part_index, t.message_files, t.call_index, t.tool_meta, t.created_at, t.updated_at
      from unnest(${oldIds}::uuid[], ${newIds}::uuid[]) as map(old_id, new_id) join message_agent_thoughts t on t.message_id = map.old_id`;
  await tx.$executeRaw`
    insert into message_files (id, message_id, type, transfer_method, url, upload_file_id, belongs_to, created_at)
    select gen_random_uuid(), map.new_id, f.type, f.transfer_method, f.url, f.upload_file_id, f.belongs_to, f.created_at
      from unnest(${oldIds}::uuid[], ${newIds}::uuid[]) as map(old_id, new_id) join message_files f on f.message_id = map.old_id`;
  // The event log, so a re-attach to a copied message replays it; the ids inside its payloads are the copy's.
  await tx.$executeRaw`
    insert into message_events (message_id, seq, event, data, source_key, created_at)
    select map.new_id, e.seq, e.event,
           replace(replace(e.data::text, map.old_id::text, map.new_id::text), ${src.id}, ${conversationId})::jsonb,
           e.source_key, e.created_at
      from unnest(${oldIds}::uuid[], ${newIds}::uuid[]) as map(old_id, new_id) join message_events e on e.message_id = map.old_id`;
  return { conversation, thread: { oldIds, newIds } };
}

/** The fork's own workspace row and binding (holding the session after the fork point), and the thread's snapshots. */
async function bindForkWorkspace(
  tx: Prisma.TransactionClient,
  f: {
    src: Conversation;
    conversationId: string;
    binding: Binding;
    scopeKey: string;
    workspaceId: string;
    copy: CopyReport | null;
    session: ForkSession;
    thread: { oldIds: string[]; newIds: string[] };
  },
): Promise<Conversation> {
  const { src, conversationId, binding, scopeKey, workspaceId, copy, session } = f;
  const { oldIds, newIds } = f.thread;
  const newBinding = crypto.randomUUID();
  await tx.agentWorkspace.create({
    data: {
      id: workspaceId,
      tenant_id: src.tenant_id,
      agent_id: binding.agent_id,
      home_snapshot_id: HOME_SNAPSHOT_ID,
      backend_workspace_ref: workspaceId,
      copied_bytes: copy ? BigInt(copy.bytes) : null,
    },
  });
  await tx.agentWorkspaceBinding.create({
    data: {
      id: newBinding,
      tenant_id: binding.tenant_id,
      app_id: binding.app_id,
      agent_id: binding.agent_id,
      workspace_id: workspaceId,
      owner_type: 'CONVERSATION',
      owner_id: conversationId,
      scope_key: scopeKey,
      agent_config_version_id: binding.agent_config_version_id,
      session_scope_config_version_id: binding.session_scope_config_version_id,
      config_kind: binding.config_kind,
      home_snapshot_id: HOME_SNAPSHOT_ID,
      backend_binding_ref: `participant-${crypto.randomUUID()}`,
      session_snapshot: session.snapshot === null ? Prisma.DbNull : (session.snapshot as unknown as Prisma.InputJsonValue),
    },
  });
  // The thread's snapshots go with it (regenerates inside the fork), now on the fork's binding.
  await tx.$executeRaw`
    insert into message_session_snapshots (message_id, conversation_id, binding_id, snapshot, size_bytes, pending_tool_call_id,
      pruned_at, created_at, updated_at)
    select map.new_id, ${conversationId}::uuid, ${newBinding}::uuid, s.snapshot, s.size_bytes, s.pending_tool_call_id, s.pruned_at,
           s.created_at, now()
      from unnest(${oldIds}::uuid[], ${newIds}::uuid[]) as map(old_id, new_id)
      join message_session_snapshots s on s.message_id = map.old_id and s.binding_id = ${binding.id}::uuid`;
  return tx.conversation.update({ where: { id: conversationId }, data: { agent_workspace_binding_id: newBinding } });
}

/** The fork's workspace in the bucket (WORKSPACE_STORE=s3), within the copy budget; null when the source has no saved version. */
async function copyInBucket(
  deps: Deps,
  bucket: WorkspaceBucket,
  tenantId: string,
  from: { workspaceId: string; generation: number },
  workspaceId: string,
): Promise<CopyReport | null> {
  const budget = await copyBudget(deps.db, deps.config, tenantId);
  try {
    const r = await bucket.copy(from, { workspaceId, generation: 1 }, budget.bytes);
    return r && { bytes: r.bytes, entries: r.entries, skipped: [], skippedTotal: 0 };
  } catch (err) {
    throw err instanceof BucketCopyOverBudget ? budget.overBudget() : err;
  }
}

/**
 * The source workspace's files into the fork's (links copied as links, never followed; an in-tree marker of an earlier
 * release left out), under the fork's own identity marker (beside the workspaces, for the copy's directory) and, with
 * isolated shells, its own uid; within the copy budget. Written under a
 * temporary name and renamed to `to` only when complete. A source that never had a directory gives none (null).
 */
async function copyWorkspace(deps: Deps, tenantId: string, from: string, to: string, workspaceId: string): Promise<CopyReport | null> {
  const { config } = deps;
  const st = await fs.promises.lstat(from).catch(() => null);
  if (!st?.isDirectory()) return null;
  const budget = await copyBudget(deps.db, config, tenantId);
  const owner =
    config.SHELL_ISOLATION === 'on' ? workspaceUid(workspaceId, { base: config.SHELL_UID_BASE, range: config.SHELL_UID_RANGE }) : undefined;
  const writer = await TreeWriter.create(to, { owner });
  try {
    const report = await copyTree(from, writer, { budgetBytes: budget.bytes, exclude: (rel) => rel === LEGACY_MARKER_FILE }).catch(
      (err: unknown) => {
        throw err instanceof TreeBudgetExceeded ? budget.overBudget() : err;
      },
    );
    // The copy's own directory (a rename keeps its inode) is what the marker names.
    writeMarker(to, { workspaceId, generation: 1 }, writer.root.fd);
    await writer.commit(st.mode);
    return report;
  } catch (err) {
    await writer.abort();
    removeMarker(to);
    throw err;
  }
}
